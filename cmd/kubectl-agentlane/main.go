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

// Command kubectl-agentlane is the kubectl plugin `kubectl agentlane`:
// queues, sessions, tasks and dead letters as kubectl tables, lane and
// session control, and the lanetop dashboard. Installed on the PATH as
// kubectl-agentlane, kubectl runs it as `kubectl agentlane`. The verbs are
// in internal/kubectlplugin; see docs/kubectl.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/agentlane/agentlane/internal/kubectlplugin"
)

func main() {
	if err := execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// execute runs the command line until it is done or interrupted.
func execute() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := kubectlplugin.NewCommand("kubectl agentlane", genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	return cmd.ExecuteContext(ctx)
}
