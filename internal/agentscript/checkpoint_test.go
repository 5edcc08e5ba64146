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

package agentscript

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// checkpointServer is a Session API that only knows the checkpoint routes:
// it records the saves and answers loads with latest, or with refusal.
type checkpointServer struct {
	mu      sync.Mutex
	saves   []sessionapi.Checkpoint
	latest  *sessionapi.Checkpoint
	refusal *sessionapi.Error
}

func (f *checkpointServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	if f.refusal != nil {
		reply(f.refusal.Status, f.refusal)
		return
	}
	switch {
	case r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/checkpoints"):
		var cp sessionapi.Checkpoint
		if err := json.NewDecoder(r.Body).Decode(&cp); err != nil {
			reply(http.StatusBadRequest, sessionapi.Error{Code: sessionapi.CodeInvalidRequest, Message: err.Error()})
			return
		}
		f.saves = append(f.saves, cp)
		reply(http.StatusOK, sessionapi.CheckpointSaved{Checkpoint: cp, Location: "configmap/x#" + cp.RunID})
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/checkpoints/latest"):
		if f.latest == nil {
			reply(http.StatusNotFound, sessionapi.Error{Code: sessionapi.CodeCheckpointNotFound, Message: "no checkpoint for session ns/s"})
			return
		}
		reply(http.StatusOK, f.latest)
	default:
		reply(http.StatusNotFound, sessionapi.Error{Code: sessionapi.CodeNotFound, Message: r.URL.Path})
	}
}

// states decodes the runtime state of the saves.
func (f *checkpointServer) states(t *testing.T) []checkpointState {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []checkpointState
	for _, cp := range f.saves {
		var st checkpointState
		if err := json.Unmarshal(cp.State, &st); err != nil {
			t.Fatalf("state %s: %v", cp.State, err)
		}
		if cp.RunID != st.RunID || cp.Round != st.NextStep || cp.Turn != st.Turn {
			t.Errorf("checkpoint %+v does not match its state %+v", cp, st)
		}
		out = append(out, st)
	}
	return out
}

func newCheckpointRuntime(t *testing.T, f *checkpointServer) *Runtime {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := sessionapi.NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return &Runtime{Session: c.Session("ns", "s")}
}

func succeeded(n int) []CommandReport {
	crs := make([]CommandReport, n)
	for i := range crs {
		crs[i].State = sessionapi.StateSucceeded
	}
	return crs
}

// A checkpoint follows each step whose commands all ended, and a turn the
// session aborted is saved as done; a step cut short saves nothing.
func TestCheckpointRounds(t *testing.T) {
	live := context.Background()
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	cases := map[string]struct {
		at   *position
		play func(c *checkpointer, rep *TurnReport)
		want []checkpointState
	}{
		"a checkpoint after each completed step, the last one done": {
			at: &position{turn: 2},
			play: func(c *checkpointer, rep *TurnReport) {
				c.round(live, 1, succeeded(2))
				c.round(live, 2, []CommandReport{{State: sessionapi.StateFailed}})
				c.round(live, 3, succeeded(1))
				c.end(live)
			},
			want: []checkpointState{
				{Turn: 2, NextStep: 1, RunID: "run-1"},
				{Turn: 2, NextStep: 2, RunID: "run-1"},
				{Turn: 2, NextStep: 3, RunID: "run-1", Done: true},
			},
		},
		"no checkpoint while a command of the step is in flight": {
			at: &position{},
			play: func(c *checkpointer, rep *TurnReport) {
				c.round(live, 1, append(succeeded(1), CommandReport{State: sessionapi.StateRunning}))
				rep.Error = "stopped: context canceled"
				c.end(stopped)
			},
		},
		"no checkpoint once the turn is stopped, so that it resumes from the last": {
			at: &position{},
			play: func(c *checkpointer, rep *TurnReport) {
				c.round(live, 1, succeeded(1))
				c.round(stopped, 2, succeeded(1))
				rep.Error = "stopped: context canceled"
				c.end(stopped)
			},
			want: []checkpointState{{NextStep: 1, RunID: "run-1"}},
		},
		"an aborted turn is done": {
			at: &position{turn: 1},
			play: func(c *checkpointer, rep *TurnReport) {
				c.round(live, 1, succeeded(1))
				rep.Aborted = true
				c.end(stopped)
			},
			want: []checkpointState{{Turn: 1, NextStep: 1, RunID: "run-1"}, {Turn: 1, NextStep: 1, RunID: "run-1", Done: true}},
		},
		"a resumed turn counts steps from where it resumed": {
			at: &position{turn: 0, from: 2, resumed: &Resumption{RunID: "run-0", Step: 3}},
			play: func(c *checkpointer, rep *TurnReport) {
				c.round(live, 3, succeeded(1))
				c.end(live)
			},
			want: []checkpointState{{NextStep: 3, RunID: "run-1", Done: true}},
		},
		"a passivation saves the boundary it stops at, with the commands of the step it leaves, and the turn is not done": {
			at: &position{turn: 1},
			play: func(c *checkpointer, rep *TurnReport) {
				c.round(live, 1, succeeded(1))
				c.passivate(live, 1, true, []heldCommand{
					{Index: 0, ID: "slow", State: sessionapi.StateSucceeded},
					{Index: 1, ID: "queued", State: sessionapi.StateQueued},
				})
				c.end(live)
			},
			want: []checkpointState{
				{Turn: 1, NextStep: 1, RunID: "run-1"},
				{Turn: 1, NextStep: 1, RunID: "run-1", Held: []heldCommand{
					{Index: 0, ID: "slow", State: sessionapi.StateSucceeded},
					{Index: 1, ID: "queued", State: sessionapi.StateQueued},
				}},
			},
		},
		"a passivation after the model call and before the first step says the call was made": {
			at: &position{},
			play: func(c *checkpointer, rep *TurnReport) {
				c.passivate(live, 0, true, nil)
				c.end(live)
			},
			want: []checkpointState{{RunID: "run-1", ModelCalled: true}},
		},
		"a passivation with the model call queued keeps it": {
			at: &position{},
			play: func(c *checkpointer, rep *TurnReport) {
				c.passivate(live, 0, false, []heldCommand{{ID: "llm", State: sessionapi.StateQueued}})
				c.end(live)
			},
			want: []checkpointState{{RunID: "run-1", Held: []heldCommand{{ID: "llm", State: sessionapi.StateQueued}}}},
		},
		"a turn without a position saves nothing": {
			play: func(c *checkpointer, rep *TurnReport) {
				c.round(live, 1, succeeded(1))
				c.end(live)
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &checkpointServer{}
			r := newCheckpointRuntime(t, f)
			rep := &TurnReport{RunID: "run-1"}
			tc.play(r.checkpointer(tc.at, rep, 3), rep)
			if diff := cmp.Diff(tc.want, f.states(t)); diff != "" {
				t.Errorf("checkpoints (-want,+got):\n%s", diff)
			}
			if rep.Checkpoints != len(tc.want) || rep.CheckpointError != "" {
				t.Errorf("report counts %d checkpoints, error %q; want %d and none", rep.Checkpoints, rep.CheckpointError, len(tc.want))
			}
		})
	}
}

// A manager without a session store is reported once per turn, and the
// runtime stops asking.
func TestCheckpointNoStore(t *testing.T) {
	f := &checkpointServer{refusal: &sessionapi.Error{Status: http.StatusServiceUnavailable, Code: sessionapi.CodeNoStore, Message: "no session store"}}
	r := newCheckpointRuntime(t, f)
	r.Resume = true
	r.Script = Script{Turns: []Turn{{Steps: []Step{{Type: "read"}}}}}
	var rep Report
	if first, at := r.scriptStart(context.Background(), &rep); first != 0 || at.from != 0 || at.resumed != nil {
		t.Errorf("scriptStart = %d, %+v; want a fresh start", first, at)
	}
	if !strings.Contains(rep.ResumeError, "NoStore") {
		t.Errorf("ResumeError = %q, want it to name NoStore", rep.ResumeError)
	}
	f.mu.Lock()
	f.refusal = nil // the runtime must not ask again
	f.mu.Unlock()
	for range 2 {
		tr := &TurnReport{RunID: "run-1"}
		c := r.checkpointer(&position{}, tr, 1)
		c.round(context.Background(), 1, succeeded(1))
		if !strings.Contains(tr.CheckpointError, "NoStore") || tr.Checkpoints != 0 {
			t.Errorf("turn report: %d checkpoints, error %q; want none and NoStore", tr.Checkpoints, tr.CheckpointError)
		}
	}
	if len(f.saves) != 0 {
		t.Errorf("%d saves reached a server without a store after it said so", len(f.saves))
	}
}

// RunScript with Resume continues the turn of the latest checkpoint from
// its next step, or starts the turn after a done one; a checkpoint of
// another script, or none, means a fresh start.
func TestCheckpointScriptStart(t *testing.T) {
	script := Script{Turns: []Turn{{Steps: []Step{{Type: "read"}, {Type: "read"}}}, {Steps: []Step{{Type: "read"}}}}}
	state := func(st checkpointState) *sessionapi.Checkpoint {
		b, _ := json.Marshal(st)
		return &sessionapi.Checkpoint{RunID: st.RunID, Turn: st.Turn, Round: st.NextStep, State: b,
			Identity: sessionapi.Identity{TenantID: "acme", CorrelationID: "req-1"}}
	}
	queued := []heldCommand{{Index: 0, ID: "a", State: sessionapi.StateSucceeded}, {Index: 1, ID: "b", State: sessionapi.StateQueued}}
	cases := map[string]struct {
		latest      *sessionapi.Checkpoint
		wantFirst   int
		wantAt      position
		wantResumed *Resumption
		wantErr     string
	}{
		"nothing saved": {},
		"an interrupted turn": {
			latest:      state(checkpointState{Turn: 0, NextStep: 1, RunID: "old"}),
			wantAt:      position{from: 1, modelCalled: true},
			wantResumed: &Resumption{RunID: "old", Step: 2},
		},
		"a turn passivated in the middle of a step": {
			latest:      state(checkpointState{Turn: 0, NextStep: 1, RunID: "old", Held: queued}),
			wantAt:      position{from: 1, modelCalled: true, held: queued},
			wantResumed: &Resumption{RunID: "old", Step: 2},
		},
		"a turn passivated with its model call queued": {
			latest:      state(checkpointState{Turn: 1, RunID: "old", Held: queued[1:]}),
			wantFirst:   1,
			wantAt:      position{turn: 1, held: queued[1:]},
			wantResumed: &Resumption{RunID: "old", Step: 0},
		},
		"a turn passivated after its model call": {
			latest:      state(checkpointState{Turn: 1, RunID: "old", ModelCalled: true}),
			wantFirst:   1,
			wantAt:      position{turn: 1, modelCalled: true},
			wantResumed: &Resumption{RunID: "old", Step: 1},
		},
		"a runtime passivated between turns": {
			latest:    state(checkpointState{Turn: 1, RunID: "idle", Idle: true}),
			wantFirst: 1,
			wantAt:    position{turn: 1},
		},
		"a runtime passivated after the last turn": {
			latest:    state(checkpointState{Turn: 2, RunID: "idle", Idle: true}),
			wantFirst: 2,
			wantAt:    position{turn: 2},
		},
		"a done turn": {
			latest:    state(checkpointState{Turn: 0, NextStep: 2, RunID: "old", Done: true}),
			wantFirst: 1,
			wantAt:    position{turn: 1},
		},
		"a checkpoint of another script": {
			latest:  state(checkpointState{Turn: 5, NextStep: 1, RunID: "old"}),
			wantErr: "is not one of this script's",
		},
		"a checkpoint of another runtime": {
			latest:  &sessionapi.Checkpoint{RunID: "old", State: json.RawMessage(`"opaque"`)},
			wantErr: "is not one of this script's",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := newCheckpointRuntime(t, &checkpointServer{latest: tc.latest})
			r.Resume, r.Script = true, script
			r.Identity = sessionapi.Identity{CorrelationID: "req-2"}
			var rep Report
			first, at := r.scriptStart(context.Background(), &rep)
			if first != tc.wantFirst || at.turn != tc.wantAt.turn || at.from != tc.wantAt.from || at.modelCalled != tc.wantAt.modelCalled {
				t.Errorf("scriptStart = %d, %+v; want %d, %+v", first, *at, tc.wantFirst, tc.wantAt)
			}
			if diff := cmp.Diff(tc.wantAt.held, at.held); diff != "" {
				t.Errorf("held (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantResumed, at.resumed); diff != "" {
				t.Errorf("resumed (-want,+got):\n%s", diff)
			}
			if !strings.Contains(rep.ResumeError, tc.wantErr) || (tc.wantErr == "") != (rep.ResumeError == "") {
				t.Errorf("ResumeError = %q, want %q", rep.ResumeError, tc.wantErr)
			}
			// The identity is restored from a checkpoint resumed from; the
			// runtime's own values win.
			want := sessionapi.Identity{CorrelationID: "req-2"}
			if tc.wantErr == "" && tc.latest != nil {
				want.TenantID = "acme"
			}
			if diff := cmp.Diff(want, r.checkpointIdentity()); diff != "" {
				t.Errorf("checkpoint identity (-want,+got):\n%s", diff)
			}
		})
	}
}
