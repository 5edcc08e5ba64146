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
