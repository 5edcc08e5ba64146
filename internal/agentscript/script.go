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
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Script is what a scripted agent does, turn by turn.
type Script struct {
	// Turns run in order; Serve cycles through them.
	Turns []Turn `json:"turns"`
}

// Turn is one run of the agent: an optional model call, then its tool calls.
type Turn struct {
	// Prompt is informational; Serve replaces it with the turn's messages.
	Prompt string `json:"prompt,omitempty"`
	// LLM, when set, is a model call made before the steps.
	LLM *LLMCall `json:"llm,omitempty"`
	// Steps run in order, each after the previous one ended.
	Steps []Step `json:"steps,omitempty"`
}

// LLMCall stands in for a model call: a command of type "llm" that, once
// granted, takes Duration and reports the token usage given here.
type LLMCall struct {
	InputTokens  int             `json:"inputTokens,omitempty"`
	OutputTokens int             `json:"outputTokens,omitempty"`
	Duration     metav1.Duration `json:"duration,omitempty"`
	// Text is the reply reported as the call's output; empty means one that
	// quotes the prompt.
	Text string `json:"text,omitempty"`
}

// Step is either one command (Type set) or a group of commands submitted
// together (Parallel set).
type Step struct {
	// Type is the command type, such as read or bash; it picks the lane
	// unless Lane is set.
	Type string `json:"type,omitempty"`
	// Lane names the lane directly.
	Lane string `json:"lane,omitempty"`
	// Payload is the command's input, any JSON value.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Timeout bounds each attempt; 0 leaves it to the lane.
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// Parallel lists commands submitted at the same time; the step ends when
	// all of them have. They cannot be groups themselves.
	Parallel []Step `json:"parallel,omitempty"`
}

// llmType is the command type of a turn's model call.
const llmType = "llm"

// Load reads and parses a script file.
func Load(path string) (Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Script{}, err
	}
	s, err := Parse(data)
	if err != nil {
		return Script{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Parse reads a script from YAML or JSON and validates it. Unknown and
// duplicate fields are errors; every error names the turn and step it is
// about as a field path, such as turns[1].steps[0].parallel[2].
func Parse(data []byte) (Script, error) {
	doc, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return Script{}, fmt.Errorf("invalid YAML: %w", err)
	}
	// Each level is decoded on its own so that a decoding error can say
	// where it is; encoding/json does not.
	var raw struct {
		Turns []json.RawMessage `json:"turns"`
	}
	if err := strict(doc, &raw); err != nil {
		return Script{}, err
	}
	if len(raw.Turns) == 0 {
		return Script{}, Script{}.Validate()
	}
	var s Script
	var errs []error
	for i, rt := range raw.Turns {
		path := fmt.Sprintf("turns[%d]", i)
		t, err := parseTurn(rt, path)
		if err == nil {
			err = t.validate(path)
		}
		errs = append(errs, err)
		s.Turns = append(s.Turns, t)
	}
	if err := errors.Join(errs...); err != nil {
		return Script{}, err
	}
	return s, nil
}

func parseTurn(data []byte, path string) (Turn, error) {
	var raw struct {
		Prompt string            `json:"prompt"`
		LLM    json.RawMessage   `json:"llm"`
		Steps  []json.RawMessage `json:"steps"`
	}
	if err := strict(data, &raw); err != nil {
		return Turn{}, fmt.Errorf("%s: %w", path, err)
	}
	t := Turn{Prompt: raw.Prompt}
	var errs []error
	if len(raw.LLM) > 0 && !bytes.Equal(raw.LLM, []byte("null")) {
		t.LLM = &LLMCall{}
		if err := strict(raw.LLM, t.LLM); err != nil {
			errs = append(errs, fmt.Errorf("%s.llm: %w", path, err))
		}
	}
	for j, rs := range raw.Steps {
		st, err := parseStep(rs, fmt.Sprintf("%s.steps[%d]", path, j), true)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		t.Steps = append(t.Steps, st)
	}
	return t, errors.Join(errs...)
}

func parseStep(data []byte, path string, group bool) (Step, error) {
	var raw struct {
		Type     string            `json:"type"`
		Lane     string            `json:"lane"`
		Payload  json.RawMessage   `json:"payload"`
		Timeout  *metav1.Duration  `json:"timeout"`
		Parallel []json.RawMessage `json:"parallel"`
	}
	if err := strict(data, &raw); err != nil {
		return Step{}, fmt.Errorf("%s: %w", path, err)
	}
	st := Step{Type: raw.Type, Lane: raw.Lane, Payload: raw.Payload, Timeout: raw.Timeout}
	if raw.Parallel != nil && !group {
		return Step{}, fmt.Errorf("%s: parallel groups do not nest", path)
	}
	var errs []error
	for k, rc := range raw.Parallel {
		c, err := parseStep(rc, fmt.Sprintf("%s.parallel[%d]", path, k), false)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		st.Parallel = append(st.Parallel, c)
	}
	if raw.Parallel != nil && st.Parallel == nil && len(errs) == 0 {
		st.Parallel = []Step{} // keep "parallel: []" visible to Validate
	}
	return st, errors.Join(errs...)
}

// strict decodes one JSON value into v, rejecting unknown fields.
func strict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the first JSON value")
	}
	return nil
}

// Validate checks a script built in Go the way Parse checks a file. All
// problems are reported, each prefixed with its field path.
func (s Script) Validate() error {
	if len(s.Turns) == 0 {
		return errors.New("turns: the script has no turns")
	}
	var errs []error
	for i, t := range s.Turns {
		errs = append(errs, t.validate(fmt.Sprintf("turns[%d]", i)))
	}
	return errors.Join(errs...)
}

func (t Turn) validate(path string) error {
	var errs []error
	if t.LLM == nil && len(t.Steps) == 0 {
		errs = append(errs, fmt.Errorf("%s: the turn is empty: give it an llm call, steps or both", path))
	}
	if c := t.LLM; c != nil {
		if c.InputTokens < 0 {
			errs = append(errs, fmt.Errorf("%s.llm.inputTokens: must not be negative, got %d", path, c.InputTokens))
		}
		if c.OutputTokens < 0 {
			errs = append(errs, fmt.Errorf("%s.llm.outputTokens: must not be negative, got %d", path, c.OutputTokens))
		}
		if c.Duration.Duration < 0 {
			errs = append(errs, fmt.Errorf("%s.llm.duration: must not be negative, got %s", path, c.Duration.Duration))
		}
	}
	for j, st := range t.Steps {
		errs = append(errs, st.validate(fmt.Sprintf("%s.steps[%d]", path, j), true)...)
	}
	return errors.Join(errs...)
}

func (st Step) validate(path string, group bool) []error {
	var errs []error
	switch {
	case st.Parallel != nil && !group:
		return []error{fmt.Errorf("%s: parallel groups do not nest", path)}
	case st.Parallel != nil && (st.Type != "" || st.Lane != "" || len(st.Payload) > 0 || st.Timeout != nil):
		return []error{fmt.Errorf("%s: a step is either a command (type) or a parallel group, not both; set type, lane, payload and timeout on the group's commands", path)}
	case st.Parallel != nil && len(st.Parallel) == 0:
		return []error{fmt.Errorf("%s.parallel: the group is empty", path)}
	case st.Parallel != nil:
		for k, c := range st.Parallel {
			errs = append(errs, c.validate(fmt.Sprintf("%s.parallel[%d]", path, k), false)...)
		}
		return errs
	case st.Type == "" && group:
		return []error{fmt.Errorf("%s: a step needs either type (one command) or parallel (a group of commands)", path)}
	case st.Type == "":
		return []error{fmt.Errorf("%s.type: required", path)}
	}
	if st.Timeout != nil && st.Timeout.Duration < 0 {
		errs = append(errs, fmt.Errorf("%s.timeout: must not be negative, got %s", path, st.Timeout.Duration))
	}
	if len(st.Payload) > 0 && !json.Valid(st.Payload) {
		errs = append(errs, fmt.Errorf("%s.payload: not valid JSON", path))
	}
	return errs
}
