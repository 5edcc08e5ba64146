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
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// The bounds of spec.drain.timeout, as the CRD validates them.
const (
	minDrainTimeout = time.Second
	maxDrainTimeout = 24 * time.Hour
)

// laneCommand is `lane pause|resume|drain|undrain`.
func (r *root) laneCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lane",
		Short: "Pause and resume a queue's lanes, drain a queue",
		Long: `Pause and resume a LaneQueue's lanes (spec.lanes[].paused) and drain the
queue (spec.drain) by patching its spec, as docs/sessions.md's lane control
describes. Needs get on lanequeues (queue-viewer) and patch (editor).`,
	}
	cmd.AddCommand(r.pauseCommand(true), r.pauseCommand(false), r.drainCommand(), r.undrainCommand())
	return cmd
}

// pauseCommand is `lane pause QUEUE LANE...` (pause) or `lane resume QUEUE
// LANE...`.
func (r *root) pauseCommand(pause bool) *cobra.Command {
	verb, doc := "resume", "Resume paused lanes: their queued commands start again in their usual order"
	if pause {
		verb, doc = "pause", "Pause lanes: they take commands, which wait; running ones finish; nothing new starts"
	}
	var all bool
	var out *output
	cmd := &cobra.Command{
		Use:   verb + " QUEUE [LANE...]",
		Short: doc,
		Example: fmt.Sprintf(`  kubectl agentlane lane %[1]s agents execute
  kubectl agentlane lane %[1]s agents --all -n team-a`, verb),
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 1) {
				return usageError(cmd, "name the lanes to %s, or give --all", verb)
			}
			ns, err := r.namespace()
			if err != nil {
				return err
			}
			c, err := r.newClient()
			if err != nil {
				return err
			}
			q := &agentlanev1alpha1.LaneQueue{}
			if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: args[0]}, q); err != nil {
				return err
			}
			patch, err := pausePatch(q, args[1:], all, pause)
			if err != nil {
				return err
			}
			if patch == nil {
				out.flags.NamePrintFlags.Operation = "unchanged"
				return out.print(q, r.streams.Out)
			}
			if err := c.Patch(cmd.Context(), q, client.RawPatch(types.JSONPatchType, patch)); err != nil {
				return err
			}
			return out.print(q, r.streams.Out)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "Every lane of the queue.")
	out = addOutput(cmd, verb+"d")
	return cmd
}

// jsonPatchOp is one operation of a JSON patch (RFC 6902).
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// pausePatch is the JSON patch that sets spec.lanes[].paused of the named
// lanes (every lane with all) to pause, or nil when they are already so.
// Each change is preceded by a test of the lane's name at its index, so a
// patch computed before someone else reordered the lanes fails instead of
// pausing another lane.
func pausePatch(q *agentlanev1alpha1.LaneQueue, lanes []string, all, pause bool) ([]byte, error) {
	index := map[string]int{}
	for i, l := range q.Spec.Lanes {
		index[string(l.Name)] = i
	}
	if all {
		lanes = lanes[:0]
		for _, l := range q.Spec.Lanes {
			lanes = append(lanes, string(l.Name))
		}
	}
	var ops []jsonPatchOp
	seen := map[string]bool{}
	for _, name := range lanes {
		i, ok := index[name]
		if !ok {
			return nil, fmt.Errorf("lanequeue %s/%s has no lane %q (its lanes: %s)", q.Namespace, q.Name, name, laneList(q))
		}
		if seen[name] || q.Spec.Lanes[i].Paused == pause {
			continue
		}
		seen[name] = true
		path := fmt.Sprintf("/spec/lanes/%d", i)
		ops = append(ops, jsonPatchOp{Op: "test", Path: path + "/name", Value: name})
		if pause {
			ops = append(ops, jsonPatchOp{Op: "add", Path: path + "/paused", Value: true})
		} else {
			ops = append(ops, jsonPatchOp{Op: "remove", Path: path + "/paused"})
		}
	}
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(ops)
}

// laneList names q's lanes for an error message.
func laneList(q *agentlanev1alpha1.LaneQueue) string {
	s := ""
	for i, l := range q.Spec.Lanes {
		if i > 0 {
			s += ", "
		}
		s += string(l.Name)
	}
	return s
}

// drainCommand is `lane drain QUEUE [--timeout D]`.
func (r *root) drainCommand() *cobra.Command {
	var timeout time.Duration
	var out *output
	cmd := &cobra.Command{
		Use:   "drain QUEUE",
		Short: "Drain a queue: refuse new Session API commands, let the others finish",
		Long: `Drain a LaneQueue before a restart or an upgrade (spec.drain): from then
on the queue refuses new commands of the Session API (503 Draining) and
lets the ones it has finish. With --timeout, the commands still queued when
it has passed end Cancelled; running ones go on. The queue's DRAIN column
shows Draining, then Drained. End the drain with 'lane undrain'.`,
		Example: `  kubectl agentlane lane drain agents --timeout 5m
  kubectl wait lanequeue/agents --for=jsonpath='{.status.conditions[?(@.type=="Draining")].reason}'=Drained --timeout=6m
  kubectl agentlane lane undrain agents`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			drain := map[string]any{}
			if cmd.Flags().Changed("timeout") {
				if timeout < minDrainTimeout || timeout > maxDrainTimeout {
					return usageError(cmd, "--timeout must be between %s and %s, got %s", minDrainTimeout, maxDrainTimeout, timeout)
				}
				drain["timeout"] = timeout.String()
			}
			return r.patchQueue(cmd, out, args[0], map[string]any{"spec": map[string]any{"drain": drain}})
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "Cancel the commands still queued after this long (1s to 24h); without it the queue waits for all its commands.")
	out = addOutput(cmd, "draining")
	return cmd
}

// undrainCommand is `lane undrain QUEUE`.
func (r *root) undrainCommand() *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:     "undrain QUEUE",
		Short:   "End a queue's drain: it takes commands again",
		Example: `  kubectl agentlane lane undrain agents`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.patchQueue(cmd, out, args[0], map[string]any{"spec": map[string]any{"drain": nil}})
		},
	}
	out = addOutput(cmd, "undrained")
	return cmd
}

// patchQueue merge-patches the LaneQueue name of the current namespace.
func (r *root) patchQueue(cmd *cobra.Command, out *output, name string, patch map[string]any) error {
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
	q := &agentlanev1alpha1.LaneQueue{}
	q.Namespace, q.Name = ns, name
	if err := c.Patch(cmd.Context(), q, client.RawPatch(types.MergePatchType, data)); err != nil {
		return err
	}
	return out.print(q, r.streams.Out)
}
