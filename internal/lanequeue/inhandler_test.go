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
	"sync/atomic"
	"testing"
	"time"
)

// A command with InHandler runs in its handler on an External lane, with
// the lane's retries: it never becomes an external task.
func TestInHandlerOnExternalLane(t *testing.T) {
	q, err := New(Config{
		Lanes: []LaneConfig{{Name: "execute", Mode: External, MaxConcurrencyPerSession: 1}},
		Retry: RetryPolicy{MaxRetries: 1, InitialDelay: time.Millisecond, MaxDelay: time.Millisecond},
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var runs atomic.Int32
	h := HandlerFunc(func(_ context.Context, a Attempt) (Result, error) {
		if runs.Add(1) == 1 {
			return Result{}, errors.New("worker lost")
		}
		return Result{Success: true, Output: []byte(`{}`)}, nil
	})
	tk, err := q.Submit(Command{SessionKey: "s", Type: "read", Handler: h, InHandler: true})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-tk.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not end")
	}
	o, _ := tk.Outcome()
	if o.State != StateSucceeded || o.Attempts != 2 || runs.Load() != 2 {
		t.Fatalf("outcome %+v after %d runs; want succeeded at attempt 2", o, runs.Load())
	}
	if n := len(q.PendingExternal()); n != 0 {
		t.Fatalf("%d external tasks pending; want none", n)
	}
	if _, err := q.Submit(Command{SessionKey: "s", Type: "read", InHandler: true}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("InHandler without a handler: %v; want ErrInvalidCommand", err)
	}
}
