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

package lanequeue

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestDeadLetterListDropsOldest(t *testing.T) {
	cfg := Config{
		Lanes:       []LaneConfig{{Name: "work"}},
		DefaultLane: "work",
		Retry:       RetryPolicy{Strategy: RetryNone},
		DeadLetter:  DeadLetterConfig{MaxSize: 2},
	}
	h := newHarness(t, cfg)
	labels := Identity{TenantID: "acme", Principal: "user:42", AgentTemplateID: "reviewer", CorrelationID: "req-1"}
	for _, id := range []string{"c1", "c2", "c3"} {
		h.submit(Command{ID: id, SessionKey: "s", Type: "bash", Labels: labels, RunID: "r", Payload: []byte(`{}`)})
		h.step(time.Second)
		h.fail(id, errBoom)
	}
	want := []DeadLetter{
		{ID: "c2", CommandType: "bash", Lane: "work", SessionKey: "s", RunID: "r", Payload: []byte(`{}`), Error: "boom", Attempts: 1, FailedAt: t0.Add(2 * time.Second), Labels: labels},
		{ID: "c3", CommandType: "bash", Lane: "work", SessionKey: "s", RunID: "r", Payload: []byte(`{}`), Error: "boom", Attempts: 1, FailedAt: t0.Add(3 * time.Second), Labels: labels},
	}
	if diff := cmp.Diff(want, h.q.DeadLetters()); diff != "" {
		t.Errorf("dead letters (-want,+got):\n%s", diff)
	}
	if st := h.q.Stats(); st.DeadLetters != 2 || st.DeadLettersDropped != 1 || st.Lanes[0].DeadLettered != 3 {
		t.Errorf("stats = %+v", st)
	}

	// Shrinking the bound drops the oldest; disabling empties the list.
	cfg.DeadLetter.MaxSize = 1
	if err := h.q.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"c3"}, dlIDs(h.q.DeadLetters())); diff != "" {
		t.Errorf("after shrink (-want,+got):\n%s", diff)
	}
	cfg.DeadLetter.Disabled = true
	if err := h.q.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	tk := h.submit(Command{ID: "c4", SessionKey: "s"})
	h.fail("c4", errBoom)
	if o := h.outcome(tk); o.State != StateFailed {
		t.Errorf("with dead letters disabled: state %s, want Failed", o.State)
	}
	if got := h.q.DeadLetters(); len(got) != 0 {
		t.Errorf("disabled list holds %v", got)
	}
}

func dlIDs(dls []DeadLetter) []string {
	var ids []string
	for _, d := range dls {
		ids = append(ids, d.ID)
	}
	return ids
}

func TestDeadLetterRing(t *testing.T) {
	var d deadLetters
	d.resize(3)
	for i := range 7 {
		d.add(DeadLetter{Attempts: i})
	}
	got := d.list()
	if diff := cmp.Diff([]int{4, 5, 6}, attemptsOf(got), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	if d.dropped != 4 {
		t.Errorf("dropped = %d, want 4", d.dropped)
	}
	d.resize(5)
	d.add(DeadLetter{Attempts: 7})
	if diff := cmp.Diff([]int{4, 5, 6, 7}, attemptsOf(d.list())); diff != "" {
		t.Errorf("after growing (-want,+got):\n%s", diff)
	}
	d.resize(0)
	d.add(DeadLetter{Attempts: 8})
	if len(d.list()) != 0 {
		t.Errorf("size 0 keeps %v", d.list())
	}
}

func attemptsOf(dls []DeadLetter) []int {
	var out []int
	for _, d := range dls {
		out = append(out, d.Attempts)
	}
	return out
}
