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

package deploy

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

const (
	// namespace is where config/default puts agentlane.
	namespace = "agentlane-system"

	managerDeployment = "agentlane-controller-manager"
	workerDeployment  = "agentlane-worker"

	fieldOwner = client.FieldOwner("agentlane-deploy-test")
)

// clusterScoped are the kinds config/default deploys without a namespace.
var clusterScoped = []string{"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}

// installPolicies applies, for real, what config/default renders for its
// admission policies to act: the Namespace, the CRDs, the policies and
// their bindings, the service accounts and RBAC, and the policies'
// ConfigMap named configMap.
func installPolicies(configMap string) {
	for _, o := range rendered {
		switch o.GetKind() {
		case "Namespace", "CustomResourceDefinition", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
			"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		case "ConfigMap":
			if o.GetName() != configMap {
				continue
			}
		default:
			continue
		}
		Expect(k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), fieldOwner, client.ForceOwnership)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
	}
}

// find returns the rendered object of kind and name, or nil.
func find(kind, name string) *unstructured.Unstructured {
	for _, o := range rendered {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// all returns the rendered objects of kind as T.
func all[T any](kind string) []T {
	GinkgoHelper()
	var out []T
	for _, o := range rendered {
		if o.GetKind() == kind {
			out = append(out, as[T](o))
		}
	}
	return out
}

// as converts a rendered object to its typed form.
func as[T any](o *unstructured.Unstructured) T {
	GinkgoHelper()
	var t T
	Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &t)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
	return t
}

// deployment returns the rendered Deployment of name and its only container.
func deployment(name string) (appsv1.Deployment, corev1.Container) {
	GinkgoHelper()
	d := deploymentOf(name)
	Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1), "containers of %s", name)
	return d, d.Spec.Template.Spec.Containers[0]
}

// deploymentOf returns the rendered Deployment name.
func deploymentOf(name string) appsv1.Deployment {
	GinkgoHelper()
	o := find("Deployment", name)
	Expect(o).NotTo(BeNil(), "Deployment %s is not rendered", name)
	return as[appsv1.Deployment](o)
}

// container returns the container of d called name.
func container(d appsv1.Deployment, name string) corev1.Container {
	GinkgoHelper()
	i := slices.IndexFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == name })
	Expect(i).NotTo(Equal(-1), "container %s of %s", name, d.Name)
	return d.Spec.Template.Spec.Containers[i]
}

// mountPaths returns where c mounts each of its volumes.
func mountPaths(c corev1.Container) map[string]string {
	paths := map[string]string{}
	for _, m := range c.VolumeMounts {
		paths[m.MountPath] = m.Name
	}
	return paths
}

// flagArg is one --name[=value] argument.
var flagArg = regexp.MustCompile(`^--?([^=]+)(?:=(.*))?$`)

// unknownFlags returns the arguments of c that are not flags among defined.
func unknownFlags(c corev1.Container, defined map[string]bool) []string {
	var unknown []string
	for _, a := range c.Args {
		m := flagArg.FindStringSubmatch(a)
		if m == nil || !defined[m[1]] { //nolint:gocritic // FindStringSubmatch returns nil or every group
			unknown = append(unknown, a)
		}
	}
	return unknown
}

// argValue returns the value of --name in c's arguments.
func argValue(c corev1.Container, name string) (string, bool) {
	for _, a := range c.Args {
		if m := flagArg.FindStringSubmatch(a); m != nil && m[1] == name { //nolint:gocritic // FindStringSubmatch returns nil or every group
			return m[2], true
		}
	}
	return "", false
}

// arg returns the value of --name in c's arguments, which must be there.
func arg(c corev1.Container, name string) string {
	GinkgoHelper()
	v, ok := argValue(c, name)
	Expect(ok).To(BeTrue(), "%s has no --%s", c.Name, name)
	return v
}

// bindPort returns the port of the address that c's flag binds to.
func bindPort(c corev1.Container, flag string) int32 {
	GinkgoHelper()
	addr := arg(c, flag)
	_, port, err := net.SplitHostPort(addr)
	Expect(err).NotTo(HaveOccurred(), "--%s=%s", flag, addr)
	n, err := strconv.ParseInt(port, 10, 32)
	Expect(err).NotTo(HaveOccurred(), "--%s=%s", flag, addr)
	return int32(n)
}

// containerPort returns c's port named name.
func containerPort(c corev1.Container, name string) int32 {
	GinkgoHelper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	Fail(fmt.Sprintf("container %s has no port named %q", c.Name, name))
	return 0
}

// envReferences are the $(VAR) references Kubernetes expands in arguments.
var envReferences = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// undefinedEnv returns the $(VAR) references in c's arguments to variables c
// does not define; Kubernetes leaves those unexpanded.
func undefinedEnv(c corev1.Container) []string {
	var undefined []string
	for _, a := range c.Args {
		for _, m := range envReferences.FindAllStringSubmatch(a, -1) {
			if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == m[1] }) {
				undefined = append(undefined, m[0])
			}
		}
	}
	return undefined
}

// fieldRef returns the downward API field that c's variable name holds.
func fieldRef(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			return e.ValueFrom.FieldRef.FieldPath
		}
	}
	return ""
}

// kustomizeImage is the image config/default sets for the image named
// agentlane, as newName:newTag.
func kustomizeImage() string {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(repoRoot(), "config", "default", "kustomization.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var k struct {
		Images []struct {
			Name    string `json:"name"`
			NewName string `json:"newName"`
			NewTag  string `json:"newTag"`
		} `json:"images"`
	}
	Expect(yaml.Unmarshal(data, &k)).To(Succeed())
	for _, img := range k.Images {
		if img.Name == "agentlane" {
			Expect(img.NewName).NotTo(BeEmpty(), "config/default sets no newName for agentlane")
			Expect(img.NewTag).NotTo(BeEmpty(), "config/default sets no newTag for agentlane")
			return img.NewName + ":" + img.NewTag
		}
	}
	Fail("config/default/kustomization.yaml sets no image named agentlane")
	return ""
}

var _ = Describe("config/default", func() {
	It("renders what agentlane needs to run, namespaced objects in agentlane-system but the workers' binding", func() {
		want := map[string][]string{
			"Namespace":                {namespace},
			"CustomResourceDefinition": {"lanequeues.agentlane.io", "agentsessions.agentlane.io", "externaltasks.agentlane.io"},
			"ServiceAccount":           {"agentlane-controller-manager", "agentlane-worker"},
			"ClusterRole":              {"agentlane-manager-role", "agentlane-worker-role", "agentlane-session-user", "agentlane-queue-viewer", "agentlane-editor"},
			"ClusterRoleBinding":       {"agentlane-manager-rolebinding"},
			"Role":                     {"agentlane-leader-election-role"},
			"RoleBinding":              {"agentlane-leader-election-rolebinding", "agentlane-worker-rolebinding"},
			"Service":                  {"agentlane-controller-manager-metrics", "agentlane-session-api", "agentlane-worker-metrics"},
			"Deployment":               {managerDeployment, workerDeployment},
		}
		for kind, names := range want {
			for _, name := range names {
				Expect(find(kind, name)).NotTo(BeNil(), "%s %s is not rendered", kind, name)
			}
		}
		worker := container(deploymentOf(workerDeployment), "worker")
		for _, o := range rendered {
			switch {
			case slices.Contains(clusterScoped, o.GetKind()):
				Expect(o.GetNamespace()).To(BeEmpty(), "%s %s", o.GetKind(), o.GetName())
			case o.GetKind() == "RoleBinding" && o.GetName() == "agentlane-worker-rolebinding":
				Expect(o.GetNamespace()).To(Equal(arg(worker, "namespace")), "the workers are bound in the namespace they serve")
			default:
				Expect(o.GetNamespace()).To(Equal(namespace), "%s %s", o.GetKind(), o.GetName())
			}
		}
	})

	It("applies every object to the API server with server-side apply (dry run)", func() {
		By("creating the Namespace and the CRDs, which the namespaced objects need")
		var crds []string
		for _, o := range rendered {
			switch o.GetKind() {
			case "CustomResourceDefinition":
				crds = append(crds, o.GetName())
			case "Namespace":
			default:
				continue
			}
			Expect(k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), fieldOwner)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
		}
		Expect(crds).To(ConsistOf("agentsessions.agentlane.io", "externaltasks.agentlane.io", "lanequeues.agentlane.io", "workerpools.agentlane.io", "runtimepools.agentlane.io"))
		for _, name := range crds {
			Eventually(func(g Gomega) {
				crd := &apiextensionsv1.CustomResourceDefinition{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
				g.Expect(crd.Status.Conditions).To(ContainElement(And(
					HaveField("Type", apiextensionsv1.Established),
					HaveField("Status", apiextensionsv1.ConditionTrue),
				)), name)
			}).WithTimeout(30 * time.Second).Should(Succeed())
		}

		By("applying every rendered object as a dry run")
		var errs []error
		for _, o := range rendered {
			err := k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), fieldOwner, client.ForceOwnership, client.DryRunAll)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err))
			}
		}
		Expect(errors.Join(errs...)).NotTo(HaveOccurred())
		GinkgoWriter.Printf("applied %d objects (dry run)\n", len(rendered))

		By("leaving nothing behind but what was created for real")
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: managerDeployment}, &appsv1.Deployment{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the dry run created the manager Deployment: %v", err)
	})

	It("runs the image config/default sets in every container", func() {
		image := kustomizeImage()
		deployments := all[appsv1.Deployment]("Deployment")
		Expect(deployments).To(HaveLen(2))
		for _, d := range deployments {
			for _, c := range slices.Concat(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers) {
				Expect(c.Image).To(Equal(image), "image of %s in %s", c.Name, d.Name)
			}
		}
	})

	It("passes the manager only flags cmd/manager defines, and matches its ports and Session API address to them", func() {
		d, c := deployment(managerDeployment)
		Expect(c.Command).To(Or(BeEmpty(), Equal([]string{"/manager"})))
		Expect(unknownFlags(c, managerFlags)).To(BeEmpty(), "arguments cmd/manager does not define")
		Expect(undefinedEnv(c)).To(BeEmpty())
		_, leaderElect := argValue(c, "leader-elect")
		Expect(leaderElect).To(BeTrue(), "the manager elects a leader")

		Expect(containerPort(c, "metrics")).To(Equal(bindPort(c, "metrics-bind-address")))
		Expect(containerPort(c, "health")).To(Equal(bindPort(c, "health-probe-bind-address")))
		Expect(containerPort(c, "session-api")).To(Equal(bindPort(c, "session-api-bind-address")))
		for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
			Expect(probe).NotTo(BeNil())
			Expect(probe.HTTPGet).NotTo(BeNil())
			Expect(probe.HTTPGet.Path).To(Equal(path))
			Expect(probe.HTTPGet.Port.String()).To(Equal("health"))
		}

		By("pointing session runtimes at the session-api Service")
		svc := as[corev1.Service](find("Service", "agentlane-session-api"))
		raw := arg(c, "session-api-url")
		u, err := url.Parse(raw)
		Expect(err).NotTo(HaveOccurred())
		Expect(u.Hostname()).To(Equal(svc.Name + "." + svc.Namespace + ".svc"))
		Expect(svc.Spec.Ports).To(ContainElement(And(
			HaveField("Port", BeEquivalentTo(mustAtoi(u.Port()))),
			HaveField("TargetPort.StrVal", "session-api"),
		)), "--session-api-url=%s", raw)
		Expect(d.Spec.Template.Spec.ServiceAccountName).To(Equal("agentlane-controller-manager"))
	})

	It("runs 3 workers named after their pods and nodes, with only flags cmd/worker defines", func() {
		d := deploymentOf(workerDeployment)
		c := container(d, "worker")
		Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
		Expect(c.Command).To(Equal([]string{"/worker"}))
		Expect(unknownFlags(c, workerFlags)).To(BeEmpty(), "arguments cmd/worker does not define")
		Expect(undefinedEnv(c)).To(BeEmpty(), "arguments name variables the container does not set")

		Expect(arg(c, "name")).To(Equal("$(POD_NAME)"))
		Expect(fieldRef(c, "POD_NAME")).To(Equal("metadata.name"))
		Expect(arg(c, "node-name")).To(Equal("$(NODE_NAME)"))
		Expect(fieldRef(c, "NODE_NAME")).To(Equal("spec.nodeName"))
		Expect(arg(c, "namespace")).NotTo(BeEmpty(), "the namespace the worker serves")

		By("giving the worker's shutdown grace period room within the pod's")
		raw := arg(c, "grace-period")
		grace, err := time.ParseDuration(raw)
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Spec.Template.Spec.TerminationGracePeriodSeconds).NotTo(BeNil())
		podGrace := time.Duration(*d.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
		Expect(grace).To(BeNumerically("<", podGrace), "--grace-period=%s leaves no time to hand tasks back before the pod is killed", raw)

		Expect(containerPort(c, "metrics")).To(Equal(bindPort(c, "metrics-bind-address")))
		Expect(d.Spec.Template.Spec.ServiceAccountName).To(Equal("agentlane-worker"))
	})

	It("runs the workers' tasks in a runner container that holds no credential and shares only the runner's socket", func() {
		d := deploymentOf(workerDeployment)
		spec := d.Spec.Template.Spec
		Expect(spec.Containers).To(HaveLen(2))
		w, r := container(d, "worker"), container(d, "runner")
		Expect(r.Command).To(Equal([]string{"/worker", "runner"}))
		Expect(unknownFlags(r, runnerFlags)).To(BeEmpty(), "arguments `worker runner` does not define")

		By("mounting the service-account token in the worker container only")
		Expect(spec.AutomountServiceAccountToken).To(HaveValue(BeFalse()))
		const tokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"
		tokenVolume := mountPaths(w)[tokenDir]
		Expect(tokenVolume).NotTo(BeEmpty(), "the worker's in-cluster configuration reads %s", tokenDir)
		i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == tokenVolume })
		Expect(i).NotTo(Equal(-1))
		projected := spec.Volumes[i].Projected
		Expect(projected).NotTo(BeNil())
		var files []string
		for _, src := range projected.Sources {
			switch {
			case src.ServiceAccountToken != nil:
				files = append(files, src.ServiceAccountToken.Path)
			case src.ConfigMap != nil:
				for _, item := range src.ConfigMap.Items {
					files = append(files, item.Path)
				}
			case src.DownwardAPI != nil:
				for _, item := range src.DownwardAPI.Items {
					files = append(files, item.Path)
				}
			}
		}
		Expect(files).To(ConsistOf("token", "ca.crt", "namespace"))
		for path, volume := range mountPaths(r) {
			Expect(volume).NotTo(Equal(tokenVolume), "the runner mounts the token at %s", path)
		}

		By("sharing only the socket's directory, and no process namespace")
		socket := arg(w, "runner-socket")
		Expect(arg(r, "socket")).To(Equal(socket))
		shared := mountPaths(w)[filepath.Dir(socket)]
		Expect(shared).NotTo(BeEmpty())
		Expect(mountPaths(r)).To(HaveKeyWithValue(filepath.Dir(socket), shared))
		Expect(r.VolumeMounts).To(ContainElement(And(HaveField("MountPath", filepath.Dir(socket)), HaveField("ReadOnly", BeTrue()))), "the runner's tasks could replace the worker's socket")
		for path, volume := range mountPaths(r) {
			if volume != shared {
				Expect(mountPaths(w)).NotTo(ContainElement(volume), "the worker also mounts %s of the runner", path)
			}
		}
		Expect(spec.ShareProcessNamespace).To(Or(BeNil(), HaveValue(BeFalse())))
		Expect(spec.EnableServiceLinks).To(HaveValue(BeFalse()))
		Expect(r.Env).To(BeEmpty(), "the runner gets no variables of the pod")
		Expect(r.EnvFrom).To(BeEmpty())

		By("letting the runner's tasks go on until the worker finishes or hands them back")
		grace, err := time.ParseDuration(arg(w, "grace-period"))
		Expect(err).NotTo(HaveOccurred())
		drain, err := time.ParseDuration(arg(r, "shutdown-timeout"))
		Expect(err).NotTo(HaveOccurred())
		Expect(drain).To(BeNumerically(">", grace))
	})

	It("routes every Service to named ports of one Deployment's pods, metrics included", func() {
		deployments := all[appsv1.Deployment]("Deployment")
		for _, svc := range all[corev1.Service]("Service") {
			selector := labels.SelectorFromSet(svc.Spec.Selector)
			var selected []appsv1.Deployment
			for _, d := range deployments {
				if !selector.Empty() && selector.Matches(labels.Set(d.Spec.Template.Labels)) {
					selected = append(selected, d)
				}
			}
			Expect(selected).To(HaveLen(1), "Deployments Service %s selects", svc.Name)
			c := selected[0].Spec.Template.Spec.Containers[0]
			for _, p := range svc.Spec.Ports {
				Expect(p.TargetPort.StrVal).NotTo(BeEmpty(), "Service %s port %s targets a port by number", svc.Name, p.Name)
				containerPort(c, p.TargetPort.StrVal)
			}
		}
		// The workers' port is http-metrics: scraped over plain HTTP.
		for svc, target := range map[string]struct{ deployment, port string }{
			"agentlane-controller-manager-metrics": {managerDeployment, "metrics"},
			"agentlane-worker-metrics":             {workerDeployment, "http-metrics"},
		} {
			s := as[corev1.Service](find("Service", svc))
			Expect(s.Spec.Ports).To(ContainElement(HaveField("Name", target.port)), svc)
			d := deploymentOf(target.deployment)
			Expect(labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels))).To(BeTrue(), "%s selects %s", svc, target.deployment)
		}
	})

	It("binds every role to service accounts it creates and the Deployments run as", func() {
		accounts := map[string]bool{}
		for _, sa := range all[corev1.ServiceAccount]("ServiceAccount") {
			accounts[sa.Namespace+"/"+sa.Name] = true
		}
		for _, d := range all[appsv1.Deployment]("Deployment") {
			Expect(accounts).To(HaveKey(d.Namespace+"/"+d.Spec.Template.Spec.ServiceAccountName), "service account of %s", d.Name)
		}
		checkBinding := func(kind, name, bindingNamespace string, ref rbacv1.RoleRef, subjects []rbacv1.Subject) {
			GinkgoHelper()
			role := find(ref.Kind, ref.Name)
			Expect(role).NotTo(BeNil(), "%s %s binds %s %s, which is not rendered", kind, name, ref.Kind, ref.Name)
			if ref.Kind == "Role" {
				Expect(role.GetNamespace()).To(Equal(bindingNamespace), "%s %s binds %s %s", kind, name, ref.Kind, ref.Name)
			}
			Expect(subjects).NotTo(BeEmpty())
			for _, s := range subjects {
				Expect(s.Kind).To(Equal(rbacv1.ServiceAccountKind), "%s %s", kind, name)
				Expect(accounts).To(HaveKey(s.Namespace+"/"+s.Name), "%s %s binds a service account that is not rendered", kind, name)
			}
		}
		bound := map[string][]string{} // service account -> roles
		for _, b := range all[rbacv1.ClusterRoleBinding]("ClusterRoleBinding") {
			checkBinding("ClusterRoleBinding", b.Name, "", b.RoleRef, b.Subjects)
			for _, s := range b.Subjects {
				bound[s.Name] = append(bound[s.Name], b.RoleRef.Name)
			}
		}
		for _, b := range all[rbacv1.RoleBinding]("RoleBinding") {
			checkBinding("RoleBinding", b.Name, b.Namespace, b.RoleRef, b.Subjects)
			for _, s := range b.Subjects {
				bound[s.Name] = append(bound[s.Name], b.RoleRef.Name)
			}
		}
		Expect(bound).To(Equal(map[string][]string{
			// The ClusterRole, the leader election Role and the Role of the
			// Session API's certificate Secret.
			"agentlane-controller-manager": {"agentlane-manager-role", "agentlane-leader-election-role", "agentlane-manager-role"},
			// The worker's role only: no cluster-wide reviews.
			"agentlane-worker": {"agentlane-worker-role"},
		}))
	})
})

// templateDocs are the objects that carry a pod template, by kind, each
// with the indentation of its pod spec.
var templateDocs = map[string]struct {
	doc   string
	depth int
}{
	"session": {`
apiVersion: agentlane.io/v1alpha1
kind: AgentSession
metadata: {name: %s, namespace: %s}
spec:
  queueRef: {name: q}
  runtime:
    podTemplate:
      spec:
%s
`, 8},
	"job": {`
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {name: %s, namespace: %s}
spec:
  defaultLane: build
  lanes:
  - name: build
    priority: 0
    handlerMode: External
    externalTarget:
      type: Job
      jobTemplate:
        spec:
          template:
            spec:
%s
`, 14},
	"pool": {`
apiVersion: agentlane.io/v1alpha1
kind: WorkerPool
metadata: {name: %s, namespace: %s}
spec:
  queues: [q]
  maxReplicas: 1
  podTemplate:
    spec:
%s
`, 6},
	"rpool": {`
apiVersion: agentlane.io/v1alpha1
kind: RuntimePool
metadata: {name: %s, namespace: %s}
spec:
  template:
    spec:
%s
`, 6},
	"delegate": {`
apiVersion: agentlane.io/v1alpha1
kind: LaneQueue
metadata: {name: %s, namespace: %s}
spec:
  defaultLane: review
  lanes:
  - name: review
    priority: 0
    maxConcurrency: 1
    externalTarget:
      type: Delegate
      delegate:
        sessionTemplate:
          spec:
            runtime:
              podTemplate:
                spec:
%s
`, 18},
}

// templateObject is an object of kind ("session": an AgentSession, "job": a
// LaneQueue with a Job lane, "delegate": a LaneQueue with a Delegate lane)
// named name in ns whose one pod template has the pod spec spec (YAML, block
// or flow style).
func templateObject(kind, ns, name, spec string) *unstructured.Unstructured {
	GinkgoHelper()
	t, ok := templateDocs[kind]
	Expect(ok).To(BeTrue(), "no template object of kind %q", kind)
	pad := strings.Repeat(" ", t.depth)
	body := pad + strings.ReplaceAll(strings.TrimSpace(spec), "\n", "\n"+pad)
	u := &unstructured.Unstructured{}
	Expect(yaml.Unmarshal([]byte(fmt.Sprintf(t.doc, name, ns, body)), &u.Object)).To(Succeed())
	return u
}

func mustAtoi(s string) int {
	GinkgoHelper()
	n, err := strconv.Atoi(s)
	Expect(err).NotTo(HaveOccurred(), "port %q", s)
	return n
}

var _ = Describe("config/policy, installed", Ordered, func() {
	const tenant = "tenant-templates"

	// session is an AgentSession whose runtime pod spec is spec, queue a
	// LaneQueue whose Job lane's pod spec is spec, delegateQueue a LaneQueue
	// whose Delegate lane's worker sessions have the pod spec spec.
	session := func(name, spec string) *unstructured.Unstructured {
		return templateObject("session", tenant, name, spec)
	}
	queue := func(name, spec string) *unstructured.Unstructured { return templateObject("job", tenant, name, spec) }
	delegateQueue := func(name, spec string) *unstructured.Unstructured {
		return templateObject("delegate", tenant, name, spec)
	}
	const (
		plain       = "containers: [{name: agent, image: agent:v1}]"
		privileged  = "containers: [{name: agent, image: agent:v1, securityContext: {privileged: true}}]"
		privInit    = "containers: [{name: agent, image: agent:v1}]\ninitContainers: [{name: setup, image: agent:v1, securityContext: {privileged: true}}]"
		hostNetwork = "hostNetwork: true\ncontainers: [{name: agent, image: agent:v1}]"
		hostPID     = "hostPID: true\ncontainers: [{name: agent, image: agent:v1}]"
		hostPath    = "containers: [{name: agent, image: agent:v1}]\nvolumes: [{name: root, hostPath: {path: /}}]"
	)

	BeforeAll(func() {
		By("installing the Namespace, the CRDs and config/policy's objects for real")
		for _, o := range rendered {
			switch o.GetKind() {
			case "Namespace", "CustomResourceDefinition", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			case "ConfigMap":
				if o.GetName() != "agentlane-template-policy" {
					continue
				}
			default:
				continue
			}
			Expect(k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), fieldOwner, client.ForceOwnership)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
		}
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}))).To(Succeed())
		By("waiting until the API server enforces the policy")
		Eventually(func(g Gomega) {
			// Refused by the policy, not unknown to the client's REST mapper
			// because the CRDs were only just installed.
			for _, probe := range []*unstructured.Unstructured{session("probe", privileged), queue("probe", privileged)} {
				err := k8sClient.Create(ctx, probe, client.DryRunAll)
				g.Expect(err).To(HaveOccurred())
				g.Expect(meta.IsNoMatchError(err)).To(BeFalse(), "%v", err)
			}
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})

	DescribeTable("refuses templates that reach into the node, naming the template",
		func(obj func(name, spec string) *unstructured.Unstructured, spec, fragment string) {
			err := k8sClient.Create(ctx, obj("bad", spec))
			Expect(err).To(HaveOccurred(), "admitted")
			Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring(fragment))
		},
		Entry("a privileged runtime container", session, privileged, "privileged containers are not allowed in spec.runtime.podTemplate"),
		Entry("a privileged init container", session, privInit, "privileged containers are not allowed in spec.runtime.podTemplate"),
		Entry("a runtime pod on the host network", session, hostNetwork, "hostNetwork, hostPID and hostIPC are not allowed in spec.runtime.podTemplate"),
		Entry("a runtime pod in the host PID namespace", session, hostPID, "hostNetwork, hostPID and hostIPC are not allowed"),
		Entry("a runtime pod mounting the node's /", session, hostPath, "hostPath volumes are not allowed in spec.runtime.podTemplate"),
		Entry("a privileged Job lane", queue, privileged, "privileged containers are not allowed in spec.lanes[build].externalTarget.jobTemplate"),
		Entry("a Job lane mounting the node's /", queue, hostPath, "hostPath volumes are not allowed in spec.lanes[build].externalTarget.jobTemplate"),
		Entry("a privileged Delegate lane's worker", delegateQueue, privileged,
			"privileged containers are not allowed in spec.lanes[review].externalTarget.delegate.sessionTemplate.spec.runtime.podTemplate"),
		Entry("a Delegate lane's worker on the host network", delegateQueue, hostNetwork,
			"hostNetwork, hostPID and hostIPC are not allowed in spec.lanes[review].externalTarget.delegate.sessionTemplate.spec.runtime.podTemplate"),
	)

	It("admits plain templates, and what the cluster's ConfigMap allows", func() {
		Expect(k8sClient.Create(ctx, session("plain", plain))).To(Succeed())
		Expect(k8sClient.Create(ctx, queue("plain", plain))).To(Succeed())

		cm := &corev1.ConfigMap{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "agentlane-template-policy"}, cm)).To(Succeed())
		cm.Data["allowPrivileged"] = "true"
		Expect(k8sClient.Update(ctx, cm)).To(Succeed())
		DeferCleanup(func() {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
			cm.Data["allowPrivileged"] = "false"
			Expect(k8sClient.Update(ctx, cm)).To(Succeed())
		})
		Eventually(func() error {
			return k8sClient.Create(ctx, session("privileged", privileged), client.DryRunAll)
		}).WithTimeout(30 * time.Second).Should(Succeed())
		By("allowing privileged containers does not allow the host's namespaces")
		Expect(k8sClient.Create(ctx, session("host", hostNetwork))).NotTo(Succeed())
	})
})
