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

package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Configured executors serve a command type with a command line the
// operator declares (cmd/worker's --task-executor wordcount='wc -w'), so a
// new command type needs no change to the worker. The command line runs
// through the shell like a bash task, in the same place: in a sandboxed
// registry in the attempt's private directory with the sandbox's
// environment, never the worker's. The task's payload, as JSON, is its
// standard input, and AGENTLANE_COMMAND_TYPE names the command type; the
// payload never becomes part of the command line. A run that exits 0
// succeeds; its stdout, stderr and exit code are the result, as for bash.

// CommandTypeEnv is the variable that tells a configured executor's process
// the command type it serves.
const CommandTypeEnv = "AGENTLANE_COMMAND_TYPE"

// ConfiguredExecutor runs one operator-declared command line per task.
type ConfiguredExecutor struct {
	// CommandType is the type it serves, given to the process.
	CommandType string
	// CommandLine is run by the shell.
	CommandLine string
	// MaxOutputBytes bounds each of stdout and stderr; 0 means
	// DefaultMaxOutputBytes.
	MaxOutputBytes int
}

var _ Executor = &ConfiguredExecutor{}

// Execute runs the command line with the payload on its standard input.
func (c *ConfiguredExecutor) Execute(ctx context.Context, payload json.RawMessage) (Output, error) {
	if len(payload) == 0 {
		payload = json.RawMessage("{}")
	}
	pl, err := json.Marshal(ProcessPayload{Command: c.CommandLine, Stdin: string(payload),
		Env: map[string]string{CommandTypeEnv: c.CommandType}})
	if err != nil {
		return Output{}, err
	}
	return (&ProcessExecutor{Shell: true, MaxOutputBytes: c.MaxOutputBytes}).Execute(ctx, pl)
}

// commandTypePattern is the pattern of an ExternalTask's spec.commandType.
var commandTypePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]*$`)

// ExecutorConfig declares the command line that serves one command type.
type ExecutorConfig struct {
	CommandType string
	CommandLine string
}

// ParseExecutors checks executor declarations given as TYPE=COMMAND LINE
// (one per item, as a repeatable flag's values are) and returns them in
// order. A type must be a valid command type, declared once, and not one of
// the built-in types; the command line must not be empty.
func ParseExecutors(items []string) ([]ExecutorConfig, error) {
	var out []ExecutorConfig
	var errs []error
	seen := map[string]bool{}
	for _, item := range items {
		typ, line, ok := strings.Cut(item, "=")
		typ, line = strings.TrimSpace(typ), strings.TrimSpace(line)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%q is not TYPE=COMMAND LINE", item))
		case len(typ) > 128 || !commandTypePattern.MatchString(typ):
			errs = append(errs, fmt.Errorf("%q is not a command type (letters, digits and _.:/-, at most 128)", typ))
		case builtinTypes[typ]:
			errs = append(errs, fmt.Errorf("%s is a built-in command type and cannot be replaced", typ))
		case seen[typ]:
			errs = append(errs, fmt.Errorf("command type %s is declared twice", typ))
		case line == "":
			errs = append(errs, fmt.Errorf("command type %s has an empty command line", typ))
		case strings.ContainsRune(line, 0):
			errs = append(errs, fmt.Errorf("the command line of %s holds a NUL byte", typ))
		default:
			seen[typ] = true
			out = append(out, ExecutorConfig{CommandType: typ, CommandLine: line})
		}
	}
	return out, errors.Join(errs...)
}

// builtinTypes are the command types every registry serves.
var builtinTypes = map[string]bool{"bash": true, "exec": true, "read": true}

// RegisterConfigured adds a ConfiguredExecutor to r for each declaration.
func (r *Registry) RegisterConfigured(configs []ExecutorConfig, maxOutput int) {
	for _, c := range configs {
		r.Register(c.CommandType, &ConfiguredExecutor{CommandType: c.CommandType, CommandLine: c.CommandLine, MaxOutputBytes: maxOutput})
	}
}
