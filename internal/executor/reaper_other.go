//go:build !linux

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
	"errors"
	"os/exec"
	"time"
)

// TaskInitArg is the first argument that makes a program run as a task's
// init; task inits need Linux.
const TaskInitArg = "agentlane-task-init"

var errNoInit = errors.New("a task init needs Linux (child subreapers)")

// RunTaskInitIfAsked does nothing: task inits need Linux.
func RunTaskInitIfAsked() {}

// AdoptOrphans fails: it needs Linux.
func AdoptOrphans() error { return errNoInit }

// ForbidTracing fails: it needs Linux.
func ForbidTracing() error { return errNoInit }

func (p *ProcessExecutor) executeUnderInit(context.Context, string, *exec.Cmd, time.Duration, *limitedBuffer, *limitedBuffer) (Output, error) {
	return Output{}, errNoInit
}
