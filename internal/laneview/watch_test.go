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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// fakeSource signals changes when the test says so and counts the
// snapshots taken.
type fakeSource struct {
	changed   chan struct{}
	snapshots atomic.Int32

	mu   sync.Mutex
	snap *Snapshot
	err  error
}

func (f *fakeSource) Changed() <-chan struct{} { return f.changed }

func (f *fakeSource) Snapshot(context.Context) (*Snapshot, error) {
	f.snapshots.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snap, f.err
}

func (f *fakeSource) set(snap *Snapshot, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snap, f.err = snap, err
}

// change signals a change the way Watcher does: at most one pending.
func (f *fakeSource) change() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func TestWatchCoalescesChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeSource{changed: make(chan struct{}, 1), snap: New("", nil, nil, nil)}
		ctx, cancel := context.WithCancel(t.Context())
		var called atomic.Int32
		calls := func() int32 { return called.Load() }
		go Watch(ctx, src, 100*time.Millisecond, func(*Snapshot, error) { called.Add(1) })

		synctest.Wait()
		if calls() != 0 {
			t.Fatalf("%d snapshots before any change", calls())
		}
		// Three changes 30ms apart, within one settle: one snapshot.
		for range 3 {
			src.change()
			time.Sleep(30 * time.Millisecond)
			synctest.Wait()
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if calls() != 1 || src.snapshots.Load() != 1 {
			t.Fatalf("after three changes close together: %d calls, %d snapshots; want 1", calls(), src.snapshots.Load())
		}
		// Nothing changes: nothing is read, however long.
		time.Sleep(time.Hour)
		synctest.Wait()
		if src.snapshots.Load() != 1 {
			t.Fatalf("%d snapshots while nothing changed; want 1", src.snapshots.Load())
		}
		// A later change: a second snapshot after the settle, not before.
		src.change()
		time.Sleep(99 * time.Millisecond)
		synctest.Wait()
		if calls() != 1 {
			t.Fatalf("a snapshot before the change settled")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if calls() != 2 {
			t.Fatalf("%d calls after the second change settled; want 2", calls())
		}
		cancel()
	})
}

func TestFollowWritesChangesAndErrorsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ext := agentlanev1alpha1.HandlerModeExternal
		src := &fakeSource{changed: make(chan struct{}, 1), err: ErrNotSynced}
		var out strings.Builder
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- Follow(ctx, src, &out, StripOptions{}) }()
		step := func(snap *Snapshot, err error) {
			src.set(snap, err)
			src.change()
			time.Sleep(DefaultSettle)
			synctest.Wait()
		}
		step(nil, ErrNotSynced) // not listed yet: nothing to say
		broken := errors.New("watch broken")
		step(nil, broken)
		step(nil, broken) // the same error again: not repeated
		queues := []agentlanev1alpha1.LaneQueue{queue("a3s").lane("execute", 0, ext, 2, 0, 0, 1, 3).obj()}
		step(New("default", queues, nil, nil), nil)
		step(New("default", queues, nil, nil), nil) // the same strip: not repeated
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		want := "laneview: watch broken\na3s ●1/2 ○0 ✓3 ✗0\n"
		if out.String() != want {
			t.Errorf("Follow wrote %q, want %q", out.String(), want)
		}
	})
}
