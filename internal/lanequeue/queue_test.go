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
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestQueryStartsBeforeQueuedExecute(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxConcurrent = 1
	h := newHarness(t, cfg)
	for _, id := range []string{"e1", "e2", "e3"} {
		h.submit(Command{ID: id, SessionKey: "s", Type: "bash"})
	}
	h.submit(Command{ID: "q1", SessionKey: "s", Type: "read"})

	var order []string
	for len(h.grants) > 0 {
		id := h.grants[0].t.id
		order = append(order, id)
		h.succeed(id)
	}
	if diff := cmp.Diff([]string{"e1", "q1", "e2", "e3"}, order); diff != "" {
		t.Errorf("start order (-want,+got):\n%s", diff)
	}
}

func TestSessionWritesSerialReadsParallel(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Lanes[2].MaxConcurrencyPerSession = 1 // execute: one write at a time per session
	h := newHarness(t, cfg)
	for _, id := range []string{"w1", "w2", "w3"} {
		h.submit(Command{ID: id, SessionKey: "s", Type: "write"})
	}
	for _, id := range []string{"r1", "r2", "r3", "r4", "r5", "r6"} {
		h.submit(Command{ID: id, SessionKey: "s", Type: "read"})
	}
	h.submit(Command{ID: "other", SessionKey: "s2", Type: "write"})

	if diff := cmp.Diff([]string{"w1", "r1", "r2", "r3", "r4", "other"}, h.granted()); diff != "" {
		t.Fatalf("first grants (-want,+got):\n%s", diff)
	}
	h.succeed("r2")
	h.succeed("r1")
	h.succeed("w1")
	if diff := cmp.Diff([]string{"r3", "r4", "other", "r5", "r6", "w2"}, h.running()); diff != "" {
		t.Errorf("running after finishes (-want,+got):\n%s", diff)
	}
	h.succeed("w2")
	if got := h.running()[len(h.running())-1]; got != "w3" {
		t.Errorf("last started = %s, want w3", got)
	}
}

func TestCaps(t *testing.T) {
	cmds := func(specs ...string) []Command { // "lane/session"
		var out []Command
		for i, s := range specs {
			var ln, sess string
			for j := range s {
				if s[j] == '/' {
					ln, sess = s[:j], s[j+1:]
				}
			}
			out = append(out, Command{ID: string(rune('a' + i)), SessionKey: sess, Lane: ln})
		}
		return out
	}
	tests := map[string]struct {
		cfg  Config
		cmds []Command
		want []string
	}{
		"shared lane cap": {
			cfg:  oneLane(LaneConfig{MaxConcurrency: 2}),
			cmds: cmds("work/x", "work/y", "work/z"),
			want: []string{"a", "b"},
		},
		"per-session cap": {
			cfg:  oneLane(LaneConfig{MaxConcurrencyPerSession: 1}),
			cmds: cmds("work/x", "work/x", "work/y", "work/y"),
			want: []string{"a", "c"},
		},
		"queue-wide cap across lanes": {
			cfg: Config{
				Lanes:         []LaneConfig{{Name: "p"}, {Name: "q"}},
				DefaultLane:   "p",
				MaxConcurrent: 3,
			},
			cmds: cmds("p/x", "q/x", "p/y", "q/y"),
			want: []string{"a", "b", "c"},
		},
		"all three together": {
			cfg: Config{
				Lanes:         []LaneConfig{{Name: "p", MaxConcurrency: 2, MaxConcurrencyPerSession: 1}, {Name: "q"}},
				DefaultLane:   "p",
				MaxConcurrent: 3,
			},
			cmds: cmds("p/x", "p/x", "p/y", "p/z", "q/x", "q/x"),
			want: []string{"a", "c", "e"},
		},
		"isolated lane sits outside the queue cap": {
			cfg: Config{
				Lanes:         []LaneConfig{{Name: "p"}, {Name: "cron", Isolated: true}},
				DefaultLane:   "p",
				MaxConcurrent: 1,
			},
			cmds: cmds("p/x", "cron/x", "p/y", "cron/y"),
			want: []string{"a", "b", "d"},
		},
		"zero means unlimited": {
			cfg:  oneLane(LaneConfig{}),
			cmds: cmds("work/x", "work/x", "work/x", "work/x", "work/x"),
			want: []string{"a", "b", "c", "d", "e"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tc.cfg)
			for _, c := range tc.cmds {
				h.submit(c)
			}
			if diff := cmp.Diff(tc.want, h.running()); diff != "" {
				t.Errorf("running (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSubmitRejects(t *testing.T) {
	tests := map[string]struct {
		cmd     Command
		opts    []harnessOption
		wantErr error
	}{
		"negative priority": {cmd: Command{Priority: intp(-1)}, wantErr: ErrInvalidCommand},
		"negative timeout":  {cmd: Command{Timeout: -time.Second}, wantErr: ErrInvalidCommand},
		"negative attempts": {cmd: Command{PriorAttempts: -1}, wantErr: ErrInvalidCommand},
		"duplicate live ID": {cmd: Command{ID: "dup"}, wantErr: ErrDuplicateID},
		"no handler at all": {
			cmd:     Command{ID: "x"},
			opts:    []harnessOption{func(o *Options) { o.Handler = nil }},
			wantErr: ErrNoHandler,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, oneLane(LaneConfig{MaxConcurrency: 1}), tc.opts...)
			if tc.wantErr == ErrDuplicateID {
				h.submit(Command{ID: "dup"})
			}
			_, err := h.q.Submit(tc.cmd)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Submit error = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestPauseSession(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{MaxConcurrencyPerSession: 1}))
	h.q.PauseSession("early") // before the session exists
	h.submit(Command{ID: "e1", SessionKey: "early"})
	h.submit(Command{ID: "a1", SessionKey: "a"})
	h.submit(Command{ID: "a2", SessionKey: "a"})
	h.q.PauseSession("a")
	h.submit(Command{ID: "b1", SessionKey: "b"})
	if diff := cmp.Diff([]string{"a1", "b1"}, h.running()); diff != "" {
		t.Fatalf("running (-want,+got):\n%s", diff)
	}
	h.succeed("a1") // in-flight work of a paused session finishes
	if diff := cmp.Diff([]string{"b1"}, h.running()); diff != "" {
		t.Fatalf("a2 started while paused (-want,+got):\n%s", diff)
	}
	if got := h.q.SessionStats("a"); got.Pending != 1 || !got.Paused || got.Completed != 1 {
		t.Errorf("SessionStats(a) = %+v, want 1 pending, paused, 1 completed", got)
	}
	h.q.ResumeSession("a")
	h.q.ResumeSession("early")
	if diff := cmp.Diff([]string{"b1", "a2", "e1"}, h.running()); diff != "" {
		t.Errorf("running after resume (-want,+got):\n%s", diff)
	}
}

func TestCloseCancelsEverything(t *testing.T) {
	h := newHarness(t, oneLane(LaneConfig{MaxConcurrency: 1}))
	run := h.submit(Command{ID: "run"})
	queued := h.submit(Command{ID: "queued"})
	ctx := h.grants[0]
	h.q.Close()
	for _, tk := range []*Ticket{run, queued} {
		o := h.outcome(tk)
		if o.State != StateCancelled || !errors.Is(o.Err, ErrClosed) {
			t.Errorf("%s: outcome %+v, want Cancelled with ErrClosed", tk.ID(), o)
		}
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("running attempt context err = %v, want Canceled", ctx.Err())
	}
	if _, err := h.q.Submit(Command{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Submit after Close = %v, want ErrClosed", err)
	}
	if _, ok := <-h.sub.Events(); ok {
		for range h.sub.Events() {
		}
	}
	h.q.Close() // idempotent
}
