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
	"fmt"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// Outcome is how the turn ended, as the runtime reports it when it finishes
// the run (sessionapi.RunOutcome): the model call's reply is the answer; a
// turn that stopped early, or whose command did not succeed, failed, and
// the error says which. For the worker session of a Delegate lane it is the
// delegated task's result.
func (t TurnReport) Outcome() sessionapi.RunOutcome {
	switch {
	case t.Error != "":
		return sessionapi.RunOutcome{Error: t.Error}
	case t.Aborted:
		return sessionapi.RunOutcome{Error: "the run was aborted"}
	}
	var out sessionapi.RunOutcome
	for _, c := range t.Commands {
		if c.State != sessionapi.StateSucceeded {
			msg := fmt.Sprintf("%s command %s ended %s", c.Type, c.ID, c.State)
			if c.Error != "" {
				msg += ": " + c.Error
			}
			return sessionapi.RunOutcome{Error: msg}
		}
		if c.Step == 0 {
			var reply LLMOutput
			if json.Unmarshal(c.Output, &reply) == nil {
				out.Answer = reply.Text
			}
		}
	}
	if out.Answer == "" && len(t.Commands) > 0 {
		out.Answer = string(t.Commands[len(t.Commands)-1].Output)
	}
	return out
}
