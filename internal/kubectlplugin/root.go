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

// Package kubectlplugin is `kubectl agentlane`: the daily operations on
// agentlane's LaneQueues, AgentSessions and ExternalTasks from a terminal.
// It lists queues, sessions, tasks and dead letters as kubectl tables (or
// -o json|yaml|name), pauses and resumes lanes, drains a queue, passivates,
// resumes and moves sessions, retries dead letters and draws the lanetop
// dashboard (internal/laneview). Every verb talks to the API server only,
// as the caller: the reading verbs need the queue-viewer ClusterRole, the
// writing ones the editor ClusterRole too (both are aggregated into the
// built-in view and edit roles). The kubeconfig flags are cli-runtime's, so
// -n, -A, --context and --kubeconfig behave as in kubectl.
package kubectlplugin

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// userAgent is how the plugin names itself to the API server.
const userAgent = "kubectl-agentlane"

// listPageSize bounds each list response: lists are read page by page, so a
// namespace with many finished tasks costs several small responses rather
// than one large one.
const listPageSize = 500

// scheme knows agentlane's types, for the client and the printers.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(agentlanev1alpha1.AddToScheme(s))
	return s
}()

// root holds what every verb shares: the kubeconfig flags, the streams and
// the clock AGE columns are measured against.
type root struct {
	config  *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	clock   clock.PassiveClock
	// newClient builds the client from config; tests may replace it.
	newClient func() (client.Client, error)
}

// NewCommand is the `kubectl agentlane` command with its verbs, writing to
// streams. name is the command's name in usage lines, such as "kubectl
// agentlane".
func NewCommand(name string, streams genericiooptions.IOStreams) *cobra.Command {
	r := &root{
		config:  genericclioptions.NewConfigFlags(true),
		streams: streams,
		clock:   clock.RealClock{},
	}
	r.newClient = r.client
	cmd := &cobra.Command{
		Use: "agentlane",
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: name,
		},
		Short: "Operate agentlane's queues, sessions and tasks",
		Long: `Operate agentlane's LaneQueues, AgentSessions and ExternalTasks.

Listing verbs need the queue-viewer ClusterRole (aggregated into view);
verbs that change something need the editor ClusterRole too (aggregated
into edit). See docs/kubectl.md.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	r.config.AddFlags(cmd.PersistentFlags())
	cmd.AddCommand(
		r.queuesCommand(),
		r.sessionsCommand(),
		r.tasksCommand(),
		r.deadLettersCommand(),
		r.laneCommand(),
		r.sessionCommand(),
		r.topCommand(),
	)
	return cmd
}

// client is a client of the cluster the kubeconfig flags name.
func (r *root) client() (client.Client, error) {
	cfg, err := r.config.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = userAgent
	return client.New(cfg, client.Options{Scheme: scheme})
}

// namespace is the namespace of -n, else the kubeconfig context's, else
// default.
func (r *root) namespace() (string, error) {
	ns, _, err := r.config.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// scope is the namespace a listing verb reads: "" for -A.
func (r *root) scope(all bool) (string, error) {
	if all {
		return "", nil
	}
	return r.namespace()
}

// age is a creation time as kubectl's AGE column shows it.
func (r *root) age(t time.Time) string {
	return since(r.clock.Now(), t)
}

// usageError is a wrong command line, reported with the command's usage.
func usageError(cmd *cobra.Command, format string, args ...any) error {
	return fmt.Errorf("%s (see '%s -h')", fmt.Sprintf(format, args...), cmd.CommandPath())
}
