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
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

func TestTurnOutcome(t *testing.T) {
	reply, _ := json.Marshal(LLMOutput{Text: "PR looks clean."})
	llm := CommandReport{ID: "c0", Type: "llm", State: sessionapi.StateSucceeded, Output: reply, Step: 0}
	bash := CommandReport{ID: "c1", Type: "bash", State: sessionapi.StateSucceeded, Output: json.RawMessage(`{"stdout":"ok"}`), Step: 1}
	failed := CommandReport{ID: "c2", Type: "bash", State: sessionapi.StateFailed, Error: "exit status 3", Step: 2}
	cases := map[string]struct {
		turn TurnReport
		want sessionapi.RunOutcome
	}{
		"the model's reply is the answer": {turn: TurnReport{Commands: []CommandReport{llm, bash}},
			want: sessionapi.RunOutcome{Answer: "PR looks clean."}},
		"without a model call, the last output": {turn: TurnReport{Commands: []CommandReport{bash}},
			want: sessionapi.RunOutcome{Answer: `{"stdout":"ok"}`}},
		"a command that failed fails the turn": {turn: TurnReport{Commands: []CommandReport{llm, failed}},
			want: sessionapi.RunOutcome{Error: "bash command c2 ended Failed: exit status 3"}},
		"a turn that stopped early": {turn: TurnReport{Error: "the session was deleted", Commands: []CommandReport{llm}},
			want: sessionapi.RunOutcome{Error: "the session was deleted"}},
		"an aborted turn": {turn: TurnReport{Aborted: true}, want: sessionapi.RunOutcome{Error: "the run was aborted"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.turn.Outcome()); diff != "" {
				t.Errorf("Outcome() (-want,+got):\n%s", diff)
			}
		})
	}
}
