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

package chaos

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// dispatchWatch records when (by the suite's clock) each task became
// Dispatched, from a watch that resumes where it was after the API server
// comes back, so that the gap in dispatching around a fault can be measured.
type dispatchWatch struct {
	mu         sync.Mutex
	phase      map[string]agentlanev1alpha1.ExternalTaskPhase
	dispatches []dispatch
}

// dispatch is one task becoming Dispatched: when the watch saw it, and the
// resourceVersion of the write.
type dispatch struct {
	at time.Time
	rv uint64
}

// watchFunc adapts a function to client-go's WatcherWithContext.
type watchFunc func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)

func (f watchFunc) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return f(ctx, opts)
}

// watchDispatches starts watching the tasks of ns until the spec ends.
func watchDispatches(ns string) *dispatchWatch {
	GinkgoHelper()
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	dw := &dispatchWatch{phase: map[string]agentlanev1alpha1.ExternalTaskPhase{}}
	ctx, cancel := context.WithCancel(suiteCtx)
	DeferCleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			if err := dw.follow(ctx, wc, ns); err != nil {
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	return dw
}

// follow lists the tasks and watches them from there until the watch
// cannot resume (the API server restarted and no longer has the
// resourceVersion) or ctx ends.
func (dw *dispatchWatch) follow(ctx context.Context, wc client.WithWatch, ns string) error {
	list := &agentlanev1alpha1.ExternalTaskList{}
	if err := wc.List(ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	for i := range list.Items {
		dw.observe(&list.Items[i])
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion,
		watchFunc(func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return wc.Watch(ctx, &agentlanev1alpha1.ExternalTaskList{}, &client.ListOptions{Namespace: ns, Raw: &opts})
		}))
	if err != nil {
		return err
	}
	defer rw.Stop()
	for ev := range rw.ResultChan() {
		switch t, ok := ev.Object.(*agentlanev1alpha1.ExternalTask); {
		case ev.Type == watch.Error:
			return errors.New("the watch ended")
		case ok && (ev.Type == watch.Added || ev.Type == watch.Modified):
			dw.observe(t)
		}
	}
	return nil
}

func (dw *dispatchWatch) observe(t *agentlanev1alpha1.ExternalTask) {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	if dw.phase[t.Name] != t.Status.Phase && t.Status.Phase == agentlanev1alpha1.ExternalTaskDispatched {
		rv, _ := strconv.ParseUint(t.ResourceVersion, 10, 64)
		dw.dispatches = append(dw.dispatches, dispatch{at: time.Now(), rv: rv})
	}
	dw.phase[t.Name] = t.Status.Phase
}

// firstDispatchAfter returns how long after since the first dispatch
// written after the marker came, or -1 when none did. The marker is the
// resourceVersion of a write made once the fault struck, so that writes a
// killed manager sent before it died do not count as dispatches after it
// (the API server's resourceVersions are etcd revisions, which grow).
func (dw *dispatchWatch) firstDispatchAfter(since time.Time, marker uint64) time.Duration {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	for _, d := range dw.dispatches {
		if d.rv > marker {
			return d.at.Sub(since)
		}
	}
	return -1
}

// writeMarker writes a ConfigMap in ns and returns its resourceVersion.
func writeMarker(ns string) uint64 {
	GinkgoHelper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "marker-"}}
	Eventually(func() error { return k8sClient.Create(suiteCtx, cm) }).Should(Succeed())
	rv, err := strconv.ParseUint(cm.ResourceVersion, 10, 64)
	Expect(err).NotTo(HaveOccurred())
	return rv
}
