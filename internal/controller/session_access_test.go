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

package controller

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/testenv"
)

// twoContainerSession is a session whose template has two containers.
func twoContainerSession(automount *bool) *agentlanev1alpha1.AgentSession {
	return &agentlanev1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "s1"},
		Spec: agentlanev1alpha1.AgentSessionSpec{Runtime: &agentlanev1alpha1.SessionRuntime{
			PodTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				AutomountServiceAccountToken: automount,
				Containers:                   []corev1.Container{{Name: "agent"}, {Name: "sidecar"}},
			}},
		}},
	}
}

func TestRuntimePodSessionAPIAccess(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\n...\n")
	wantVolume := corev1.Volume{Name: SessionAPIVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "agentlane", ExpirationSeconds: ptr.To[int64](3600), Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: SessionAPICAConfigMap},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		}}}}
	wantMount := corev1.VolumeMount{Name: SessionAPIVolume, MountPath: "/var/run/secrets/agentlane.io/session-api", ReadOnly: true}
	cases := map[string]struct {
		automount     *bool
		wantAutomount *bool
	}{
		"the template says nothing: no API-server token": {automount: nil, wantAutomount: ptr.To(false)},
		"the template asks for the API-server token":     {automount: ptr.To(true), wantAutomount: ptr.To(true)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &AgentSessionReconciler{SessionAPIURL: "https://api:8443", SessionAPIAudience: "agentlane"}
			pod := r.newRuntimePod(twoContainerSession(tc.automount), ca)
			if diff := cmp.Diff([]corev1.Volume{wantVolume}, pod.Spec.Volumes); diff != "" {
				t.Errorf("volumes (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAutomount, pod.Spec.AutomountServiceAccountToken); diff != "" {
				t.Errorf("automountServiceAccountToken (-want,+got):\n%s", diff)
			}
			for _, c := range pod.Spec.Containers {
				if diff := cmp.Diff([]corev1.VolumeMount{wantMount}, c.VolumeMounts); diff != "" {
					t.Errorf("container %s mounts (-want,+got):\n%s", c.Name, diff)
				}
				env := map[string]string{}
				for _, e := range c.Env {
					env[e.Name] = e.Value
				}
				for k, v := range map[string]string{EnvSessionAPIURL: "https://api:8443",
					EnvSessionAPITokenFile: "/var/run/secrets/agentlane.io/session-api/token",
					EnvSessionAPICAFile:    "/var/run/secrets/agentlane.io/session-api/ca.crt"} {
					if env[k] != v {
						t.Errorf("container %s: %s = %q, want %q", c.Name, k, env[k], v)
					}
				}
			}
		})
	}
}

func TestRuntimePodWithoutCA(t *testing.T) {
	r := &AgentSessionReconciler{SessionAPIAudience: "agentlane"}
	pod := r.newRuntimePod(twoContainerSession(nil), nil)
	if n := len(pod.Spec.Volumes[0].Projected.Sources); n != 1 {
		t.Fatalf("projected sources = %d, want only the token", n)
	}
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == EnvSessionAPICAFile {
			t.Errorf("%s set without a CA", EnvSessionAPICAFile)
		}
	}
}

func TestEnsureCAConfigMap(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).Build()
	r := &AgentSessionReconciler{Client: c}
	key := client.ObjectKey{Namespace: "tenant", Name: SessionAPICAConfigMap}
	for _, ca := range []string{"first CA", "first CA", "rotated CA"} {
		if err := r.ensureCAConfigMap(ctx, "tenant", []byte(ca)); err != nil {
			t.Fatal(err)
		}
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, key, cm); err != nil {
			t.Fatal(err)
		}
		if got := cm.Data[SessionAPICAKey]; got != ca {
			t.Errorf("ca.crt = %q, want %q", got, ca)
		}
	}
}

func TestCAPublisherKeepsTheBundleInTheManagersNamespace(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).Build()
	clk := clocktesting.NewFakeClock(time.Now())
	var mu sync.Mutex
	ca := ""
	setCA := func(s string) { mu.Lock(); ca = s; mu.Unlock() }
	p := &caPublisher{Reader: c, Client: c, Namespace: "agentlane-system", Clock: clk,
		CA: func() []byte { mu.Lock(); defer mu.Unlock(); return []byte(ca) }}
	if !p.NeedLeaderElection() {
		t.Fatal("every replica would write the ConfigMap")
	}
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx) }()
	key := client.ObjectKey{Namespace: "agentlane-system", Name: SessionAPICAConfigMap}
	published := func() string {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, key, cm); err != nil {
			return "<" + err.Error() + ">"
		}
		return cm.Data[SessionAPICAKey]
	}
	waitFor := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); published() != want; {
			if time.Now().After(deadline) {
				t.Fatalf("ca.crt = %q, want %q", published(), want)
			}
			// Let the publisher reach its timer, then move past it.
			if clk.HasWaiters() {
				clk.Step(caPublishInterval)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// No bundle yet (a certificate that chains to public roots): nothing
	// is written, and the publisher waits for the next check.
	for !clk.HasWaiters() {
		time.Sleep(10 * time.Millisecond)
	}
	if got := published(); !strings.Contains(got, "not found") {
		t.Fatalf("published %q without a CA bundle", got)
	}
	setCA("first CA")
	waitFor("first CA")
	setCA("rotated CA")
	waitFor("rotated CA")

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start returned %v", err)
	}
}
