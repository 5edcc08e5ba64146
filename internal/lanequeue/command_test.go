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
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTicketWaitAndDone(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{}))
	tk := h.submit(Command{ID: "a"})
	done := tk.Done()
	select {
	case <-done:
		t.Fatal("Done closed before the command finished")
	default:
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tk.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait on cancelled ctx = %v, want context.Canceled", err)
	}
	h.finish("a", Result{Success: true, Output: []byte(`{"ok":true}`)}, nil)
	<-done
	o, err := tk.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := Outcome{State: StateSucceeded, Result: Result{Success: true, Output: []byte(`{"ok":true}`)}, Attempts: 1}
	if diff := cmp.Diff(want, o); diff != "" {
		t.Errorf("outcome (-want,+got):\n%s", diff)
	}
	if tk.State() != StateSucceeded {
		t.Errorf("State = %s", tk.State())
	}
}
