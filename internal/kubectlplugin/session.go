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

package kubectlplugin

import (
	"encoding/json"
	"errors"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// maxMigrateReason bounds the text of a migration request, which the
// PassivationRequested note repeats.
const maxMigrateReason = 256

// sessionCommand is `session passivate|resume|migrate`.
func (r *root) sessionCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Passivate, resume or move AgentSessions",
		Long: `Passivate, resume or move AgentSessions as docs/sessions.md describes:
passivate and resume set spec.desiredState, migrate sets the
agentlane.io/migrate annotation. Each needs patch on agentsessions
(editor).`,
	}
	cmd.AddCommand(r.desiredStateCommand(agentlanev1alpha1.DesiredStatePassivated),
		r.desiredStateCommand(agentlanev1alpha1.DesiredStateActive), r.migrateCommand())
	return cmd
}

// desiredStateCommand is `session passivate NAME...` or `session resume
// NAME...`: it sets spec.desiredState.
func (r *root) desiredStateCommand(state agentlanev1alpha1.DesiredState) *cobra.Command {
	verb, doc, op := "resume", "Resume passivated sessions (spec.desiredState: Active): a new runtime pod loads the last checkpoint", "resumed"
	if state == agentlanev1alpha1.DesiredStatePassivated {
		verb, doc, op = "passivate", "Passivate sessions (spec.desiredState: Passivated): the runtime checkpoints and its pod is released", "passivated"
	}
	var out *output
	cmd := &cobra.Command{
		Use:     verb + " NAME...",
		Short:   doc,
		Example: "  kubectl agentlane session " + verb + " reviewer-42\n  kubectl agentlane session " + verb + " -n team-a reviewer-42 reviewer-43",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			patch := map[string]any{"spec": map[string]any{"desiredState": string(state)}}
			return r.patchSessions(cmd, out, args, patch)
		},
	}
	out = addOutput(cmd, op)
	return cmd
}

// migrateCommand is `session migrate NAME... [--reason TEXT]`.
func (r *root) migrateCommand() *cobra.Command {
	var reason string
	var out *output
	cmd := &cobra.Command{
		Use:   "migrate NAME...",
		Short: "Move Active sessions to another node (annotation agentlane.io/migrate)",
		Long: `Move Active sessions off their node: the session checkpoints, its pod is
evicted and a new one starts on another node. The operator takes the
request (it removes the annotation), so one request moves a session once;
set on a passivated session, it takes effect once the session runs again.
--reason is repeated in the PassivationRequested note.`,
		Example: `  kubectl agentlane session migrate reviewer-42 --reason rebalance`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := validReason(reason); err != nil {
				return usageError(cmd, "--reason: %v", err)
			}
			patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{agentlanev1alpha1.MigrateAnnotation: reason}}}
			return r.patchSessions(cmd, out, args, patch)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "kubectl-agentlane", "Why the session moves; repeated in the PassivationRequested note.")
	out = addOutput(cmd, "migrating")
	return cmd
}

// validReason refuses a migration reason that is empty, too long or holds
// control characters.
func validReason(s string) error {
	switch {
	case s == "":
		return errors.New("must not be empty")
	case !utf8.ValidString(s):
		return errors.New("must be UTF-8")
	case len(s) > maxMigrateReason:
		return errors.New("must be at most 256 bytes")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return errors.New("must not hold control characters")
		}
	}
	return nil
}

// patchSessions merge-patches each named AgentSession of the current
// namespace, printing each; it goes on past a failure and returns every
// error.
func (r *root) patchSessions(cmd *cobra.Command, out *output, names []string, patch map[string]any) error {
	ns, err := r.namespace()
	if err != nil {
		return err
	}
	c, err := r.newClient()
	if err != nil {
		return err
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		s := &agentlanev1alpha1.AgentSession{}
		s.Namespace, s.Name = ns, name
		if err := c.Patch(cmd.Context(), s, client.RawPatch(types.MergePatchType, data)); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := out.print(s, r.streams.Out); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}
