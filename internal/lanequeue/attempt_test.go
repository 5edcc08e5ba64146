package lanequeue

import (
	"context"
	"testing"
)

func TestHandlerPanicIsAFailure(t *testing.T) {
	cfg := oneLane(LaneConfig{Retry: &RetryPolicy{Strategy: RetryNone}})
	cfg.DeadLetter.Disabled = true
	h := newHarness(t, cfg)
	tk := h.submit(Command{ID: "p", Handler: HandlerFunc(func(context.Context, Attempt) (Result, error) {
		panic("kaboom")
	})})
	h.q.runAttempt(h.grants[0])
	if o := h.outcome(tk); o.State != StateFailed || o.Err == nil {
		t.Errorf("outcome = %+v, want Failed with the panic", o)
	}
}
