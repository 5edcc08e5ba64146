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
	"fmt"
)

// NoopCommandType is the command type of NoopExecutor, which a worker
// registers with --noop-executor.
const NoopCommandType = "noop"

// NoopExecutor runs nothing and succeeds with the output {}, whatever its
// payload. A lane that sends it measures the scheduling path alone: the
// lane, the hand-over to a worker and the result, without a process.
type NoopExecutor struct{}

var _ Executor = NoopExecutor{}

// runsNothing marks the executors of this package that run no process and
// touch no file, for which a sandboxed Registry makes no attempt directory:
// a noop task costs no file system work.
type runsNothing interface{ runsNothing() }

func (NoopExecutor) runsNothing() {}

// noopOutput is the output every noop task reports.
var noopOutput = json.RawMessage(`{}`)

// Execute succeeds at once, unless ctx has already ended: then nothing ran
// and the error wraps ErrNotStarted, as for a process that was stopped
// before it started.
func (NoopExecutor) Execute(ctx context.Context, _ json.RawMessage) (Output, error) {
	if ctx.Err() != nil {
		return Output{}, fmt.Errorf("%w: stopped before it started: %w", ErrNotStarted, context.Cause(ctx))
	}
	return Output{Success: true, Result: noopOutput}, nil
}
