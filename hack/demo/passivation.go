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

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/agentscript"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// passivateAndResume moves chat-9 through passivation and back, as an
// operator would with `kubectl patch asn chat-9 -p '{"spec":{"desiredState":
// "Passivated"}}'`. Its runtime hears PassivationRequested on the event
// stream, checkpoints and exits; the session is Passivated. Set Active
// again, it resumes, and a new runtime answers the next message from the
// checkpoint under a new run id, none of earlier's runs.
func (d *demo) passivateAndResume(ctx context.Context, c *checks, earlier agentscript.Report) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	const session = "chat-9"
	key := types.NamespacedName{Namespace: namespace, Name: session}

	step("passivating %s: desiredState Passivated while a runtime serves it, then Active again", session)
	runtime, err := d.startAgent(session+"-serve", session, "chat.yaml", "--mode=serve")
	if err != nil {
		return err
	}
	started := time.Now()
	if err := d.setDesiredState(ctx, key, agentlanev1alpha1.DesiredStatePassivated); err != nil {
		return err
	}
	phases, err := d.waitPhase(ctx, key, started, agentlanev1alpha1.SessionPassivated)
	if err != nil {
		return err
	}
	fmt.Printf("    phases: %s\n", phases)
	select {
	case <-runtime.done:
	case <-ctx.Done():
		return fmt.Errorf("the runtime of %s did not stop after the passivation request; see %s", session, runtime.log)
	}
	rep, err := d.report(session + "-serve")
	if err != nil {
		return err
	}
	fmt.Printf("    runtime: %s\n", lastLine(runtime.log))
	p := rep.Passivated
	c.expect(runtime.err == nil && p != nil && p.Reason == "manual" && p.CheckpointError == "",
		"%s: its runtime checkpointed on PassivationRequested (%s) and exited (%s)", session, reasonOf(p), exitText(runtime.err))

	asn := &agentlanev1alpha1.AgentSession{}
	if err := d.client.Get(ctx, key, asn); err != nil {
		return err
	}
	checkpoint := "none"
	if cp := asn.Status.LastCheckpoint; cp != nil {
		checkpoint = fmt.Sprintf("run %s", cp.RunID)
	}
	c.expect(asn.Status.Phase == agentlanev1alpha1.SessionPassivated && asn.Status.LastCheckpoint != nil,
		"%s: %s with its last checkpoint in status (%s)", session, asn.Status.Phase, checkpoint)

	started = time.Now()
	if err := d.setDesiredState(ctx, key, agentlanev1alpha1.DesiredStateActive); err != nil {
		return err
	}
	if phases, err = d.waitPhase(ctx, key, started, agentlanev1alpha1.SessionActive); err != nil {
		return err
	}
	fmt.Printf("    phases: %s\n", phases)
	resumed, err := d.startAgent(session+"-resumed", session, "chat.yaml", "--mode=serve", "--turns=1")
	if err != nil {
		return err
	}
	if _, err := d.api.Session(namespace, session).Post(ctx, sessionapi.Message{Text: "are you still there?", Channel: "web"}); err != nil {
		return fmt.Errorf("post to %s: %w", session, err)
	}
	select {
	case <-resumed.done:
	case <-ctx.Done():
		return fmt.Errorf("the resumed runtime of %s did not answer; see %s", session, resumed.log)
	}
	after, err := d.report(session + "-resumed")
	if err != nil {
		return err
	}
	before := map[string]bool{}
	for _, t := range earlier.Turns {
		before[t.RunID] = true
	}
	ok := resumed.err == nil && len(after.Turns) == 1 && after.Turns[0].Messages == 1 && !before[after.Turns[0].RunID]
	run := ""
	if len(after.Turns) > 0 {
		run = after.Turns[0].RunID
	}
	c.expect(ok, "%s: resumed; a new runtime answered the next message under a new run id (%s)", session, run)

	out, err := d.kubectlOutput(ctx, "get", "events", "--field-selector", "involvedObject.name="+session,
		"--sort-by=.lastTimestamp", "-o", "custom-columns=REASON:.reason,MESSAGE:.message")
	fmt.Print(indent(out))
	return err
}

// setDesiredState patches the session's spec.desiredState.
func (d *demo) setDesiredState(ctx context.Context, key types.NamespacedName, state agentlanev1alpha1.DesiredState) error {
	patch := fmt.Appendf(nil, `{"spec":{"desiredState":%q}}`, state)
	asn := &agentlanev1alpha1.AgentSession{}
	asn.Namespace, asn.Name = key.Namespace, key.Name
	return d.client.Patch(ctx, asn, client.RawPatch(types.MergePatchType, patch))
}

// waitPhase polls the session until it reaches phase and returns the
// phases it went through, each with the time since start.
func (d *demo) waitPhase(ctx context.Context, key types.NamespacedName, start time.Time, phase agentlanev1alpha1.SessionPhase) (string, error) {
	var seen []string
	last := agentlanev1alpha1.SessionPhase("")
	for {
		asn := &agentlanev1alpha1.AgentSession{}
		if err := d.client.Get(ctx, key, asn); err != nil {
			return "", err
		}
		if p := asn.Status.Phase; p != last {
			seen = append(seen, fmt.Sprintf("%s (%.1fs)", p, time.Since(start).Seconds()))
			last = p
		}
		if last == phase {
			return strings.Join(seen, " → "), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("session %s did not become %s (went %s): %w", key.Name, phase, strings.Join(seen, " → "), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// reasonOf says why the runtime passivated, or that it did not.
func reasonOf(p *agentscript.Passivation) string {
	if p == nil {
		return "it did not passivate"
	}
	return "reason " + p.Reason
}

// lastLine returns the last line of a log file that is not a structured
// log record.
func lastLine(path string) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if !strings.HasPrefix(lines[i], "{") {
			return lines[i]
		}
	}
	return ""
}

// indent indents every line of text for the demo's output.
func indent(text string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		if line != "" {
			b.WriteString("    " + line)
		}
	}
	return b.String()
}
