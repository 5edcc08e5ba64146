/*
Copyright 2026 The agentlane Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Command chartgen writes the templates of charts/agentlane that hold
// config/'s objects as they are: the admission policies and their
// ConfigMaps, the service accounts, roles and bindings, the Services and the
// cert-manager component's certificates. `make manifests` runs it:
//
//	go run ./hack/chartgen -kustomize bin/kustomize-<version>
//
// It renders config/default, with the cert-manager component, as
// kustomize builds it, and writes each object into the template its kind
// belongs to, changed only where the chart parameterizes it:
//   - config/default's namespace becomes {{ .Release.Namespace }}, wherever
//     it stands as a whole name: metadata, binding subjects, paramRefs, the
//     service-account user names inside the policies' CEL and messages;
//   - metadata.labels gets the chart's labels (agentlane.labels);
//   - a template for optional objects is wrapped in the value that enables
//     them (policies.enabled, sessionAPI.tls.mode certManager);
//   - the session-api Service takes sessionAPI.service.clusterIP.
//
// Object names stay config/default's (the chart's are fixed). The objects
// the chart builds from values (the manager's and the workers' Deployments,
// the workers' RoleBindings, one per pool) are templated by hand and
// test/deploy compares their default render with config/default; the CRDs
// are copied into crds/ by `make manifests`. An object of config/default
// that is neither generated nor listed here fails the run, so a new object
// in config/ cannot be left out of the chart unnoticed.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// object is one document of the kustomize output.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`

	// text is the document as kustomize wrote it.
	text string
}

func (o object) group() string {
	if i := strings.LastIndex(o.APIVersion, "/"); i >= 0 {
		return o.APIVersion[:i]
	}
	return ""
}

func (o object) key() string { return o.Kind + "/" + o.Metadata.Name }

// chartTemplate is one generated file of templates/.
type chartTemplate struct {
	file string
	// about opens the file's comment: what it holds and where it comes from.
	about string
	// enabled, when set, is the condition of the {{ if }} around the file.
	enabled string
	holds   func(object) bool
}

var templates = []chartTemplate{{
	file:    "policies.yaml",
	about:   "The admission policies of config/policy, their bindings and ConfigMaps.",
	enabled: ".Values.policies.enabled",
	holds: func(o object) bool {
		return o.group() == "admissionregistration.k8s.io" || o.Kind == "ConfigMap"
	},
}, {
	file:  "rbac.yaml",
	about: "The service accounts, roles and bindings of config/rbac, the generated roles included.",
	holds: func(o object) bool {
		return o.Kind == "ServiceAccount" || o.group() == "rbac.authorization.k8s.io"
	},
}, {
	file:  "services.yaml",
	about: "The Session API and the metrics Services of config/manager and config/worker.",
	holds: func(o object) bool { return o.Kind == "Service" },
}, {
	file:    "cert-manager.yaml",
	about:   "The Issuers and Certificates of config/components/cert-manager.",
	enabled: `eq .Values.sessionAPI.tls.mode "certManager"`,
	holds:   func(o object) bool { return o.group() == "cert-manager.io" },
}}

// byHand are the objects of config/default the chart renders otherwise, and
// where.
var byHand = map[string]string{
	"Deployment/agentlane-controller-manager":  "templates/manager.yaml",
	"Deployment/agentlane-worker":              "templates/workers.yaml, one per pool",
	"RoleBinding/agentlane-worker-rolebinding": "templates/workers.yaml, one per pool",
}

// edits parameterize single objects, by kind and name.
var edits = map[string]func(string) (string, error){
	"Service/agentlane-session-api": func(doc string) (string, error) {
		return insertAfter(doc, "", "spec:", "  {{- with .Values.sessionAPI.service.clusterIP }}\n  clusterIP: {{ . }}\n  {{- end }}")
	},
}

func main() {
	kustomize := flag.String("kustomize", "kustomize", "the kustomize binary")
	root := flag.String("root", ".", "the repository's root")
	chart := flag.String("chart", "charts/agentlane", "the chart, relative to the root")
	check := flag.Bool("check", false, "write nothing; fail when a template differs from what config/ generates")
	flag.Parse()
	if err := run(*kustomize, *root, *chart, *check); err != nil {
		fmt.Fprintln(os.Stderr, "chartgen:", err)
		os.Exit(1)
	}
}

func run(kustomize, root, chart string, check bool) error {
	out, err := render(kustomize, root)
	if err != nil {
		return err
	}
	objs, err := split(out)
	if err != nil {
		return err
	}
	namespace := ""
	files := make([][]object, len(templates))
	seen := map[string]bool{}
	for _, o := range objs {
		seen[o.key()] = true
		switch {
		case o.Kind == "Namespace":
			// helm install --create-namespace makes it.
			namespace = o.Metadata.Name
			continue
		case o.Kind == "CustomResourceDefinition":
			// crds/, copied from config/crd/bases.
			continue
		case byHand[o.key()] != "":
			continue
		}
		placed := false
		for i, t := range templates {
			if t.holds(o) {
				files[i] = append(files[i], o)
				placed = true
				break
			}
		}
		if !placed {
			return fmt.Errorf("config/default renders %s, which no template of the chart holds: add it to hack/chartgen", o.key())
		}
	}
	if namespace == "" {
		return errors.New("config/default renders no Namespace")
	}
	// A name here that config/default no longer renders is a stale rule.
	for key := range byHand {
		if !seen[key] {
			return fmt.Errorf("config/default renders no %s, which hack/chartgen leaves to the chart's hand-written templates", key)
		}
	}
	for key := range edits {
		if !seen[key] {
			return fmt.Errorf("config/default renders no %s, which hack/chartgen parameterizes", key)
		}
	}
	var stale []string
	for i, t := range templates {
		if len(files[i]) == 0 {
			return fmt.Errorf("no object of config/default belongs in %s", t.file)
		}
		text, err := chartFile(t, files[i], namespace)
		if err != nil {
			return err
		}
		path := filepath.Join(root, chart, "templates", t.file)
		if old, err := os.ReadFile(path); err == nil && string(old) == text {
			continue
		}
		if check {
			stale = append(stale, filepath.Join(chart, "templates", t.file))
			continue
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return err
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("not what config/ generates (edit config/ and run `make manifests`): %s", strings.Join(stale, ", "))
	}
	return nil
}

// render builds config/default with the cert-manager component, in an
// overlay under bin/ that also gives the component's objects the part-of
// label config/default gives its own.
func render(kustomize, root string) ([]byte, error) {
	bin := filepath.Join(root, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return nil, err
	}
	overlay, err := os.MkdirTemp(bin, "chartgen.")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(overlay) }()
	kustomization := `resources:
- ../../config/default
components:
- ../../config/components/cert-manager
labels:
- includeSelectors: false
  pairs:
    app.kubernetes.io/part-of: agentlane
`
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(kustomize, "build", overlay)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s build: %w: %s", kustomize, err, stderr.String())
	}
	return out, nil
}

func split(out []byte) ([]object, error) {
	var objs []object
	for _, doc := range strings.Split("\n"+string(out), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			return nil, fmt.Errorf("kustomize output: %w", err)
		}
		if o.Kind == "" || o.Metadata.Name == "" {
			return nil, fmt.Errorf("kustomize output: a document without kind or name:\n%s", doc)
		}
		o.text = strings.TrimPrefix(doc, "\n")
		objs = append(objs, o)
	}
	return objs, nil
}

func chartFile(t chartTemplate, objs []object, namespace string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", t.about)
	b.WriteString("# Generated by `make manifests` (hack/chartgen) from config/, as config/default\n" +
		"# renders it: edit config/ and run `make manifests`, not this file.\n")
	if t.enabled != "" {
		fmt.Fprintf(&b, "{{- if %s }}\n", t.enabled)
	}
	for _, o := range objs {
		doc, err := templatize(o, namespace)
		if err != nil {
			return "", fmt.Errorf("%s: %w", o.key(), err)
		}
		b.WriteString("---\n")
		b.WriteString(doc)
		if !strings.HasSuffix(doc, "\n") {
			b.WriteString("\n")
		}
	}
	if t.enabled != "" {
		b.WriteString("{{- end }}\n")
	}
	return b.String(), nil
}

// templatize turns one object of config/default into the chart's template
// of it.
func templatize(o object, namespace string) (string, error) {
	// Braces of config/ are text to Helm.
	doc := strings.ReplaceAll(o.text, "{{", `{{ "{{" }}`)
	doc, err := releaseNamespace(doc, namespace)
	if err != nil {
		return "", err
	}
	doc, err = insertAfter(doc, "metadata", "  labels:", `    {{- include "agentlane.labels" . | nindent 4 }}`)
	if err != nil {
		return "", err
	}
	if edit := edits[o.key()]; edit != nil {
		if doc, err = edit(doc); err != nil {
			return "", err
		}
	}
	return doc, nil
}

// nameChar is a character a Kubernetes name may hold next to the namespace's.
const nameChar = `[a-z0-9-]`

// releaseNamespace replaces every occurrence of namespace in doc by the
// release's namespace. An occurrence inside a longer name
// (agentlane-system-x) is an error: it is neither clearly the namespace nor
// clearly not.
func releaseNamespace(doc, namespace string) (string, error) {
	q := regexp.QuoteMeta(namespace)
	if m := regexp.MustCompile(nameChar + q + `|` + q + nameChar).FindString(doc); m != "" {
		return "", fmt.Errorf("%q holds the namespace %s inside a longer name", m, namespace)
	}
	return strings.ReplaceAll(doc, namespace, "{{ .Release.Namespace }}"), nil
}

// insertAfter inserts text after the line of doc that is line: a line of
// the top-level mapping parent (such as "  labels:" in "metadata"), or with
// no parent a top-level line (such as "spec:").
func insertAfter(doc, parent, line, text string) (string, error) {
	lines := strings.Split(doc, "\n")
	in := parent == ""
	for i, l := range lines {
		if parent != "" && l != "" && l[0] != ' ' && l[0] != '#' {
			in = l == parent+":"
			continue
		}
		if in && l == line {
			lines = append(lines[:i+1], append([]string{text}, lines[i+1:]...)...)
			return strings.Join(lines, "\n"), nil
		}
	}
	if parent != "" {
		return "", fmt.Errorf("no line %q in %s", line, parent)
	}
	return "", fmt.Errorf("no line %q", line)
}
