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

package scheduling

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
)

// quietHooks are hooks that do nothing, for tests of the schedulers alone.
func quietHooks() Hooks {
	return Hooks{
		Observer:          NoObserver,
		OnSessionActivity: func(types.NamespacedName, time.Time) {},
		Rebuild:           func(types.NamespacedName, *lanequeue.Queue, *TaskSet) {},
	}
}

// bound binds quietHooks to s.
func bound(t *testing.T, s *Schedulers) *Schedulers {
	t.Helper()
	if err := s.Bind(quietHooks()); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestBindNeedsEveryHook: a hook left out is named in Bind's error, and the
// hooks are bound once.
func TestBindNeedsEveryHook(t *testing.T) {
	cases := map[string]struct {
		hooks   func(*Hooks)
		missing string
	}{
		"no observer":         {hooks: func(h *Hooks) { h.Observer = nil }, missing: "Observer"},
		"no activity":         {hooks: func(h *Hooks) { h.OnSessionActivity = nil }, missing: "OnSessionActivity"},
		"no rebuild":          {hooks: func(h *Hooks) { h.Rebuild = nil }, missing: "Rebuild"},
		"nothing":             {hooks: func(h *Hooks) { *h = Hooks{} }, missing: "Observer, OnSessionActivity, Rebuild"},
		"every hook is bound": {hooks: func(*Hooks) {}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := quietHooks()
			tc.hooks(&h)
			err := (&Schedulers{}).Bind(h)
			switch {
			case tc.missing == "" && err != nil:
				t.Fatalf("Bind: %v", err)
			case tc.missing != "" && (err == nil || !strings.HasSuffix(err.Error(), "missing "+tc.missing)):
				t.Fatalf("Bind = %v, want an error naming %s", err, tc.missing)
			}
		})
	}
	s := bound(t, &Schedulers{})
	if err := s.Bind(quietHooks()); err == nil {
		t.Error("a second Bind succeeded; want an error")
	}
}

// TestUnboundSchedulersStartNothing: before Bind, neither the hub nor a
// LaneQueue's scheduler starts, so a manager wired without its hooks fails
// at start instead of running without an observer or a rebuild.
func TestUnboundSchedulersStartNothing(t *testing.T) {
	s := &Schedulers{}
	if err := s.Start(context.Background()); !errors.Is(err, errNotBound) {
		t.Errorf("Start = %v, want %v", err, errNotBound)
	}
	lq := &agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"}}
	cfg := lanequeue.Config{Lanes: []lanequeue.LaneConfig{{Name: "execute"}}}
	if _, err := s.Ensure(lq, cfg); !errors.Is(err, errNotBound) {
		t.Errorf("Ensure = %v, want %v", err, errNotBound)
	}
	if _, ok := s.Get(types.NamespacedName{Namespace: "ns", Name: "q"}); ok {
		t.Error("an unbound Schedulers runs a scheduler")
	}
}

// TestRebuildRunsBeforeTheSchedulerIsReachable: the bound Rebuild hook gets
// each starting scheduler before Get finds it.
func TestRebuildRunsBeforeTheSchedulerIsReachable(t *testing.T) {
	s := &Schedulers{}
	key := types.NamespacedName{Namespace: "ns", Name: "q"}
	var rebuilt []types.NamespacedName
	h := quietHooks()
	h.Rebuild = func(k types.NamespacedName, q *lanequeue.Queue, tasks *TaskSet) {
		if _, ok := s.Get(k); ok {
			t.Error("the scheduler is reachable while Rebuild runs")
		}
		if q == nil || tasks == nil {
			t.Error("Rebuild got no queue or task set")
		}
		rebuilt = append(rebuilt, k)
	}
	if err := s.Bind(h); err != nil {
		t.Fatal(err)
	}
	lq := &agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if _, err := s.Ensure(lq, lanequeue.Config{Lanes: []lanequeue.LaneConfig{{Name: "execute"}}}); err != nil {
		t.Fatal(err)
	}
	defer s.Remove(key)
	if len(rebuilt) != 1 || rebuilt[0] != key {
		t.Errorf("Rebuild got %v, want [%v]", rebuilt, key)
	}
	if _, ok := s.Get(key); !ok {
		t.Error("the scheduler is not reachable after Rebuild")
	}
}
