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
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// DefaultSettle is how long a Watch waits after a change for more changes
// before it hands over a snapshot: a task that finishes changes the task,
// its queue and its session within a few milliseconds, and one frame is
// enough for all three.
const DefaultSettle = 100 * time.Millisecond

// ErrNotSynced is the error of Snapshot before the watcher has listed every
// kind once.
var ErrNotSynced = errors.New("waiting for the first list of LaneQueues, ExternalTasks and AgentSessions")

// watchedKinds are the kinds a snapshot is built from.
func watchedKinds() []client.Object {
	return []client.Object{&agentlanev1alpha1.LaneQueue{}, &agentlanev1alpha1.ExternalTask{}, &agentlanev1alpha1.AgentSession{}}
}

// Watcher keeps the LaneQueues, ExternalTasks and AgentSessions of one
// namespace (or of all of them) in an informer cache: one list of each
// kind, then a watch, so that a snapshot costs the API server nothing.
// Changed signals every change. The reader needs get, list and watch on the
// three resources (config/rbac/queue_viewer_role.yaml).
type Watcher struct {
	namespace string
	cache     cache.Cache
	changed   chan struct{}

	mu     sync.Mutex
	synced bool
	err    error
}

// NewWatcher returns a watcher of namespace (all namespaces when empty) in
// the cluster of cfg. It does nothing until Start.
func NewWatcher(cfg *rest.Config, namespace string) (*Watcher, error) {
	scheme := runtime.NewScheme()
	if err := agentlanev1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	w := &Watcher{namespace: namespace, changed: make(chan struct{}, 1)}
	opts := cache.Options{
		Scheme:                   scheme,
		DefaultTransform:         cache.TransformStripManagedFields(),
		DefaultWatchErrorHandler: func(_ context.Context, _ *toolscache.Reflector, err error) { w.failed(err) },
	}
	if namespace != "" {
		opts.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("create the cache: %w", err)
	}
	w.cache = c
	return w, nil
}

// Start lists and watches the three kinds until ctx ends. It returns at
// once; Changed signals when the first lists are in, and Snapshot returns
// ErrNotSynced (or the error that keeps them from coming in) until then.
func (w *Watcher) Start(ctx context.Context) error {
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.observed() },
		UpdateFunc: func(any, any) { w.observed() },
		DeleteFunc: func(any) { w.observed() },
	}
	for _, obj := range watchedKinds() {
		informer, err := w.cache.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watch %T: %w", obj, err)
		}
		if _, err := informer.AddEventHandler(handler); err != nil {
			return fmt.Errorf("watch %T: %w", obj, err)
		}
	}
	go func() { _ = w.cache.Start(ctx) }()
	go func() {
		if w.cache.WaitForCacheSync(ctx) {
			w.mu.Lock()
			w.synced, w.err = true, nil
			w.mu.Unlock()
			w.notify()
		}
	}()
	return nil
}

// Changed receives a value after any object changed, or the watch failed,
// since the last receive.
func (w *Watcher) Changed() <-chan struct{} {
	return w.changed
}

// Snapshot builds a snapshot from the cache. Before the first lists are in
// it returns ErrNotSynced, or the error that keeps them from coming in.
// After that it returns the snapshot and, while a watch is broken and
// retried, the error that broke it: the snapshot is then the last state
// seen.
func (w *Watcher) Snapshot(ctx context.Context) (*Snapshot, error) {
	w.mu.Lock()
	synced, err := w.synced, w.err
	w.mu.Unlock()
	if !synced {
		if err == nil {
			err = ErrNotSynced
		}
		return nil, err
	}
	snap, lerr := Load(ctx, w.cache, w.namespace)
	if lerr != nil {
		return nil, lerr
	}
	return snap, err
}

// observed records a change: an event also means the watch works again.
func (w *Watcher) observed() {
	w.mu.Lock()
	w.err = nil
	w.mu.Unlock()
	w.notify()
}

// failed records a broken watch. The three kinds' watches break and retry
// apart, often for one cause: the first error stands until an event shows
// that the watches work again, so that it reads the same from one retry to
// the next.
func (w *Watcher) failed(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
	w.notify()
}

func (w *Watcher) notify() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// Source is what Watch and Follow read: a started Watcher, or anything
// else that signals changes and builds snapshots.
type Source interface {
	// Changed receives a value after a change.
	Changed() <-chan struct{}
	// Snapshot is the current state; see Watcher.Snapshot for the error.
	Snapshot(ctx context.Context) (*Snapshot, error)
}

// Watch hands fn a snapshot of w (see Watcher.Snapshot for the error) when
// it changed, waiting settle after a change so that changes close together
// make one snapshot, until ctx ends.
func Watch(ctx context.Context, w Source, settle time.Duration, fn func(*Snapshot, error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.Changed():
		}
		if !sleep(ctx, settle) {
			return
		}
		select { // the changes while it settled are in this snapshot
		case <-w.Changed():
		default:
		}
		snap, err := w.Snapshot(ctx)
		if ctx.Err() != nil {
			return
		}
		fn(snap, err)
	}
}

// sleep waits d, or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Follow writes the strip of w's queues (see Strip) to out, one line each
// time it changes, until ctx ends. A watch that fails is written as a line
// "laneview: <error>", once until the error changes. It returns nil when ctx
// ends, or the first error writing to out.
//
// It suits a log or a demo's progress: the strip has no clock in it, so
// nothing is written while the queues stand still.
//
//	w, _ := laneview.NewWatcher(restConfig, "default")
//	_ = w.Start(ctx)
//	go laneview.Follow(ctx, w, os.Stdout, laneview.StripOptions{})
func Follow(ctx context.Context, w Source, out io.Writer, opts StripOptions) error {
	var last string
	var werr error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	Watch(ctx, w, DefaultSettle, func(snap *Snapshot, err error) {
		text := "laneview: " + errorText(err)
		if snap != nil {
			text = Strip(snap, opts)
		}
		if text == last || errors.Is(err, ErrNotSynced) {
			return
		}
		last = text
		if _, werr = io.WriteString(out, text+"\n"); werr != nil {
			cancel()
		}
	})
	return werr
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
