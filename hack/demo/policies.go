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

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/manifest"
	"github.com/agentlane/agentlane/internal/testenv"
)

// The demo installs agentlane as config/default does: in systemNamespace,
// names prefixed with agentlane-.
const (
	systemNamespace = "agentlane-system"
	namePrefix      = "agentlane-"
	// managerUser is the manager's identity: the name the policies know
	// the manager's service account by, here a client certificate's.
	managerUser = "system:serviceaccount:" + systemNamespace + ":" + namePrefix + "controller-manager"
	// workerUserPrefix names a pool worker that is not a pod: the worker
	// policies take what follows as its name.
	workerUserPrefix = "agentlane-worker:"
)

// installPolicies installs config/policy's admission policies and their
// ConfigMaps with the names, namespace and service accounts config/default
// gives them, so that the demo's manager, workers and kubectl calls meet
// the same checks as on a cluster.
func (d *demo) installPolicies(ctx context.Context) error {
	step("installing the admission policies of config/policy")
	if err := client.IgnoreAlreadyExists(d.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNamespace}})); err != nil {
		return err
	}
	files, _ := filepath.Glob(filepath.Join("config", "policy", "*_*.yaml"))
	if len(files) == 0 {
		return fmt.Errorf("no policies in config/policy: run the demo from the repository's root")
	}
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "kustomiz") {
			continue
		}
		objs, err := manifest.ReadFile(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			asInstalled(o)
			if err := d.client.Create(ctx, o); err != nil {
				return fmt.Errorf("install %s %s: %w", o.GetKind(), o.GetName(), err)
			}
		}
	}
	return nil
}

// asInstalled does to an object of config/policy what config/default's
// namespace and namePrefix do. The policies name the manager's and the
// workers' service accounts as config/default creates them, which the
// demo's users are.
func asInstalled(o *unstructured.Unstructured) {
	o.SetName(namePrefix + o.GetName())
	if o.GetNamespace() != "" {
		o.SetNamespace(systemNamespace)
	}
	if o.GetKind() == "ValidatingAdmissionPolicyBinding" {
		if p, ok, _ := unstructured.NestedString(o.Object, "spec", "policyName"); ok {
			_ = unstructured.SetNestedField(o.Object, namePrefix+p, "spec", "policyName")
		}
		if p, ok, _ := unstructured.NestedString(o.Object, "spec", "paramRef", "name"); ok {
			_ = unstructured.SetNestedField(o.Object, namePrefix+p, "spec", "paramRef", "name")
		}
	}
}

// identities gives the manager and each worker their own user, with the
// roles config/rbac gives their service accounts, instead of the demo's
// administrator: the policies hold them to what they may write.
func (d *demo) identities(ctx context.Context, env *envtest.Environment, workers []string) error {
	step("creating the manager's and the workers' users with their roles")
	manager, err := testenv.User(ctx, env, d.client, d.dir, managerUser, filepath.Join("config", "rbac", "role.yaml"), systemNamespace)
	if err != nil {
		return fmt.Errorf("the manager's user: %w", err)
	}
	// KUBECONFIG is a list separated by colons, which the user's name has.
	path := filepath.Join(d.dir, "manager.kubeconfig")
	if err := os.Rename(manager, path); err != nil {
		return err
	}
	d.procs.kubeconfigs = map[string]string{"manager": path}

	data, err := os.ReadFile(filepath.Join("config", "rbac", "worker", "role.yaml"))
	if err != nil {
		return err
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		return err
	}
	role.Name = namePrefix + role.Name
	if err := d.client.Create(ctx, role); err != nil {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: namePrefix + "demo-workers"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}}
	for _, name := range workers {
		user := workerUserPrefix + name
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user})
		u, err := env.ControlPlane.AddUser(envtest.User{Name: user}, nil)
		if err != nil {
			return err
		}
		kubeconfig, err := u.KubeConfig()
		if err != nil {
			return err
		}
		path := filepath.Join(d.dir, name+".kubeconfig")
		if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
			return err
		}
		d.procs.kubeconfigs[name] = path
	}
	return d.client.Create(ctx, binding)
}

// policiesHold shows that the admission policies hold for the demo's
// administrator too: kubectl cannot rewind a task's attempt (only the
// manager and the task's worker write a task's status), and a session
// cannot run its pod as another service account, as root.
func (d *demo) policiesHold(ctx context.Context, checked *checks) error {
	step("the admission policies hold: an administrator's kubectl patch of a task's status, a session as another service account")
	tasks := &agentlanev1alpha1.ExternalTaskList{}
	if err := d.client.List(ctx, tasks, client.InNamespace(namespace)); err != nil {
		return err
	}
	var task *agentlanev1alpha1.ExternalTask
	for i := range tasks.Items {
		if t := &tasks.Items[i]; t.Status.Phase == agentlanev1alpha1.ExternalTaskDeadLettered {
			task = t
		}
	}
	if task == nil {
		checked.expect(false, "a dead-lettered task to patch")
		return nil
	}
	out, err := d.kubectlOutput(ctx, "patch", "externaltask", task.Name, "-n", namespace, "--subresource=status", "--type=merge",
		"-p", `{"status":{"attempt":1}}`)
	checked.expect(err != nil && strings.Contains(out, "agentlane-task-status"),
		"kubectl patch --subresource=status of %s back to attempt 1: refused (%s)", task.Name, firstLine(out))

	s := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {name: escape, namespace: `+namespace+`}
spec:
  queueRef: {name: a3s}
  runtime:
    podTemplate:
      spec:
        serviceAccountName: admin
        containers: [{name: agent, image: agentlane:dev, securityContext: {runAsUser: 0}}]
`), &s.Object); err != nil {
		return err
	}
	err = d.client.Create(ctx, s, client.DryRunAll)
	checked.expect(err != nil && strings.Contains(err.Error(), "agentlane-template-security"),
		"a session whose runtime pod runs as service account admin, as root: refused (%s)", firstLine(fmt.Sprint(err)))
	return nil
}

// firstLine is s up to its first line break, at most 160 characters.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}
