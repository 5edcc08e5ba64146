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

package laneview

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/testenv"
)

// TestAgainstAPIServer loads snapshots from a real API server, and follows
// the strip while the queues change.
func TestAgainstAPIServer(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, or set it to $(hack/envtest-assets.sh)")
	}
	g := NewWithT(t)
	env, cfg, c, err := testenv.Start(testenv.Scheme())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	ctx := t.Context()
	ext := agentlanev1alpha1.HandlerModeExternal
	for _, ns := range []string{"team-a", "team-b"} {
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	put(t, c, ptr(queue("a3s").namespace("team-a").lane("execute", 0, ext, 2, 0, 0, 1, 3).ready(1).obj()))
	put(t, c, ptr(queue("a3s").namespace("team-b").lane("execute", 0, ext, 1, 0, 2, 0, 0, 1).obj()))
	sess := session("s1", "a3s", agentlanev1alpha1.SessionActive, "node-a")
	sess.Namespace = "team-a"
	put(t, c, &sess)
	running := task("t1", "s1", "execute", "bash").namespace("team-a").created(-time.Minute).running("w1", "node-a", -time.Second).obj()
	put(t, c, &running)
	put(t, c, ptr(task("t2", "", "execute", "bash").namespace("team-b").queue("a3s").created(-time.Minute).obj()))

	t.Run("Load lists one namespace or all of them", func(t *testing.T) {
		g := NewWithT(t)
		snap, err := Load(ctx, c, "team-a")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(Strip(snap, StripOptions{})).To(Equal("a3s ●1/2 ○0 ✓3 ✗0 last: t1 (bash)"))
		g.Expect(snap.Latest().Queue).To(Equal("a3s"), "the queue of a task with only a sessionRef comes from its session")
		g.Expect(snap.Sessions).To(HaveLen(1))
		g.Expect(snap.Sessions[0].Node).To(Equal("node-a"))

		snap, err = Load(ctx, c, "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(Strip(snap, StripOptions{})).To(Equal("team-a/a3s ●1/2 ○0 · team-b/a3s ●0/1 ○2 last: t1 (bash)"))
		g.Expect(keys(snap.Queued)).To(Equal([]string{"team-b/t2"}))

		snap, err = Load(ctx, c, "team-c")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(Strip(snap, StripOptions{})).To(Equal("no LaneQueues in namespace team-c"))
	})

	t.Run("Follow writes the strip when it changes, and only then, from one list and a watch of each kind", func(t *testing.T) {
		g := NewWithT(t)
		var out testenv.LockedBuffer
		fctx, stop := context.WithCancel(ctx)
		defer stop()
		requests := &requestCounter{}
		counted := rest.CopyConfig(cfg)
		counted.Wrap(requests.wrap)
		w, err := NewWatcher(counted, "team-a")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(w.Start(fctx)).To(Succeed())
		done := make(chan error, 1)
		go func() { done <- Follow(fctx, w, &out, StripOptions{}) }()

		first := "a3s ●1/2 ○0 ✓3 ✗0 last: t1 (bash)\n"
		g.Eventually(out.String, 10*time.Second).Should(Equal(first))
		g.Consistently(out.String, 300*time.Millisecond).Should(Equal(first), "nothing changed, nothing written")

		// The task finishes and the operator counts it.
		task := &agentlanev1alpha1.ExternalTask{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "t1"}, task)).To(Succeed())
		task.Status.Phase = agentlanev1alpha1.ExternalTaskSucceeded
		task.Status.FinishedAt = &metav1.Time{Time: time.Now()}
		g.Expect(c.Status().Update(ctx, task)).To(Succeed())
		q := &agentlanev1alpha1.LaneQueue{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "a3s"}, q)).To(Succeed())
		q.Status.Active, q.Status.Lanes[0].Active, q.Status.Lanes[0].Completed = 0, 0, 4
		g.Expect(c.Status().Update(ctx, q)).To(Succeed())

		g.Eventually(out.String, 10*time.Second).Should(HaveSuffix("\na3s ●0/2 ○0 ✓4 ✗0\n"))
		g.Expect(out.String()).To(HavePrefix(first))

		// Three more changes, each seen; still one list of each kind.
		for i := int64(5); i <= 7; i++ {
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "a3s"}, q)).To(Succeed())
			q.Status.Lanes[0].Completed = i
			g.Expect(c.Status().Update(ctx, q)).To(Succeed())
			g.Eventually(out.String, 10*time.Second).Should(HaveSuffix(fmt.Sprintf("\na3s ●0/2 ○0 ✓%d ✗0\n", i)))
		}
		lists, watches := requests.counts()
		t.Logf("LISTs %v, WATCHes %v", lists, watches)
		for _, resource := range []string{"lanequeues", "externaltasks", "agentsessions"} {
			g.Expect(lists[resource]).To(BeNumerically("<=", 1), "LISTs of %s: the cache lists once, then watches", resource)
			g.Expect(watches[resource]).To(BeNumerically(">=", 1), "WATCHes of %s", resource)
		}
		stop()
		g.Eventually(done).Should(Receive(BeNil()))
	})

	t.Run("Follow writes a load error once", func(t *testing.T) {
		g := NewWithT(t)
		// A user without any role may not list the queues.
		user, err := env.ControlPlane.AddUser(envtest.User{Name: "nobody"}, nil)
		g.Expect(err).NotTo(HaveOccurred())
		fctx, stop := context.WithCancel(ctx)
		defer stop()
		nobody, err := NewWatcher(user.Config(), "team-a")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nobody.Start(fctx)).To(Succeed())
		var out testenv.LockedBuffer
		go func() { _ = Follow(fctx, nobody, &out, StripOptions{}) }()
		g.Eventually(out.String, 10*time.Second).Should(And(
			HavePrefix("laneview: "), ContainSubstring("forbidden")))
		g.Consistently(func() int { return bytes.Count([]byte(out.String()), []byte("\n")) }, 300*time.Millisecond).
			Should(Equal(1))
	})
}

func ptr[T any](v T) *T { return &v }

// put creates obj, then writes its status through the status subresource,
// as the operator and workers would.
func put(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	withStatus := obj.DeepCopyObject().(client.Object)
	if err := c.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %s: %v", obj.GetName(), err)
	}
	withStatus.SetResourceVersion(obj.GetResourceVersion())
	if err := c.Status().Update(t.Context(), withStatus); err != nil {
		t.Fatalf("write the status of %s: %v", obj.GetName(), err)
	}
}

// requestCounter counts the LIST and WATCH requests a client sends, by
// resource.
type requestCounter struct {
	mu             sync.Mutex
	lists, watches map[string]int
}

func (r *requestCounter) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resource := path.Base(req.URL.Path)
		if req.Method == http.MethodGet && strings.HasSuffix(resource, "s") && strings.Contains(req.URL.Path, "/agentlane.io/") {
			r.mu.Lock()
			if r.lists == nil {
				r.lists, r.watches = map[string]int{}, map[string]int{}
			}
			if w := req.URL.Query().Get("watch"); w == "true" || w == "1" {
				r.watches[resource]++
			} else {
				r.lists[resource]++
			}
			r.mu.Unlock()
		}
		return next.RoundTrip(req)
	})
}

func (r *requestCounter) counts() (lists, watches map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.lists), maps.Clone(r.watches)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
