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

package sessionserver

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentlane/agentlane/internal/lanequeue"
)

// The Session API forgets a session's ended commands beyond its
// maxFinishedTasks, those that ended first, and never a command that has
// not ended.
func TestCallsKeepEndedPerSession(t *testing.T) {
	q, err := lanequeue.New(lanequeue.Config{Lanes: []lanequeue.LaneConfig{{Name: "execute"}}}, lanequeue.Options{
		Handler: lanequeue.HandlerFunc(func(context.Context, lanequeue.Attempt) (lanequeue.Result, error) {
			return lanequeue.Result{Success: true}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	s1 := types.NamespacedName{Namespace: "ns", Name: "s1"}
	s2 := types.NamespacedName{Namespace: "ns", Name: "s2"}
	var cs calls
	// put submits command id of session and indexes its call; the command
	// has ended once put returns unless hold is set.
	put := func(session types.NamespacedName, id string, hold bool) *call {
		t.Helper()
		cmd := lanequeue.Command{ID: id, SessionKey: session.Name, Type: "bash"}
		if hold {
			cmd.Handler = lanequeue.HandlerFunc(func(ctx context.Context, _ lanequeue.Attempt) (lanequeue.Result, error) {
				<-ctx.Done()
				return lanequeue.Result{}, ctx.Err()
			})
		}
		tk, err := q.Submit(cmd)
		if err != nil {
			t.Fatal(err)
		}
		if !hold {
			<-tk.Done()
		}
		c := &call{session: session, ticket: tk}
		cs.put(session.Namespace, id, c)
		return c
	}
	held := func() []string {
		var out []string
		for k := range cs.m {
			out = append(out, k.Name)
		}
		slices.Sort(out)
		return out
	}
	check := func(step string, want ...string) {
		t.Helper()
		if diff := cmp.Diff(want, held()); diff != "" {
			t.Errorf("%s: calls held (-want,+got):\n%s", step, diff)
		}
	}

	running := put(s1, "running", true)
	for _, id := range []string{"a1", "a2", "a3"} {
		put(s1, id, false)
		cs.ended(s1, id, 2)
	}
	check("s1 keeps 2 ended commands", "a2", "a3", "running")

	put(s2, "b1", false)
	cs.ended(s2, "b1", 2)
	cs.ended(s2, "a2", 0) // not s2's command
	check("each session keeps its own", "a2", "a3", "b1", "running")

	cs.trim(s1, 1)
	check("a lower cap trims at once", "a3", "b1", "running")

	put(s1, "a3", false) // the same id submitted again after it ended
	cs.trim(s1, 0)
	check("a call replaced under the same id is not the one forgotten", "a3", "b1", "running")
	cs.ended(s1, "a3", 0)
	check("maxFinishedTasks 0 keeps no ended command", "b1", "running")

	if _, final := running.ticket.Outcome(); final {
		t.Fatal("the held command ended")
	}

	// The time-based sweep forgets what ended long ago, and with it the
	// session's record of ended calls.
	now := time.Now()
	cs.sweep(now, time.Minute)
	cs.sweep(now.Add(2*time.Minute), time.Minute)
	check("the sweep forgets what ended long ago", "running")
	if len(cs.done) != 0 {
		t.Errorf("ended calls still recorded after the sweep: %v", cs.done)
	}
}
