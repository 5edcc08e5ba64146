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
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// RetryOfAnnotation, on an ExternalTask that `kubectl agentlane
// dead-letters retry` created, names the dead letter it runs again.
const RetryOfAnnotation = "agentlane.io/retry-of"

// retrySuffix ends the name of a retried dead letter: <name>-retry, then
// <name>-retry-2 when that one is retried in turn, and so on.
const retrySuffix = "-retry"

// deadLettersCommand is `dead-letters` and `dead-letters retry`.
func (r *root) deadLettersCommand() *cobra.Command {
	var lf listFlags
	var f taskFilter
	var out *output
	cmd := &cobra.Command{
		Use:     "dead-letters",
		Aliases: []string{"deadletters", "dl"},
		Short:   "List the dead letters the cluster keeps: DeadLettered ExternalTasks",
		Long: `List the dead letters the cluster keeps: the ExternalTasks whose retries
ran out (phase DeadLettered), of External lanes and recorded Direct
commands, oldest first. A LaneQueue keeps at most deadLetter.maxSize of
them. The dead letters of Internal and Hybrid lanes have no object: the
queue's DEAD column counts them, and a session reads its own with the
Session API (GET /deadletters).`,
		Example: `  kubectl agentlane dead-letters
  kubectl agentlane dead-letters --session reviewer-42 -o wide
  kubectl agentlane dead-letters retry build-7`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns, err := r.scope(lf.all)
			if err != nil {
				return err
			}
			f.phases = []string{string(agentlanev1alpha1.ExternalTaskDeadLettered)}
			all, err := r.listTasks(cmd.Context(), &lf, &f, ns)
			if err != nil {
				return err
			}
			if !out.table() {
				return out.print(all, r.streams.Out)
			}
			headers := []string{"NAME", "SESSION", "QUEUE", "LANE", "COMMAND", "ATTEMPTS", "FAILED", "ERROR"}
			if out.wide() {
				headers = append(headers, "RETRY-OF")
			}
			t := newTable(lf.all, headers...)
			for i := range all.Items {
				et := &all.Items[i]
				failed := ""
				if et.Status.FinishedAt != nil {
					failed = r.age(et.Status.FinishedAt.Time) + " ago"
				}
				cells := []string{et.Name, sessionOf(et), queueOf(et), laneOf(et), string(et.Spec.CommandType),
					attemptOf(et), failed, errorOf(et)}
				if out.wide() {
					cells = append(cells, et.Annotations[RetryOfAnnotation])
				}
				t.add(et.Namespace, cells...)
			}
			return t.write(r.streams.Out, r.streams.ErrOut, "dead letters", ns)
		},
	}
	lf.add(cmd)
	f.add(cmd, false)
	out = addOutput(cmd, "")
	cmd.AddCommand(r.retryCommand())
	return cmd
}

// retryCommand is `dead-letters retry NAME...`.
func (r *root) retryCommand() *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "retry NAME...",
		Short: "Run dead letters again, each as a new ExternalTask",
		Long: `Run dead letters again. Each named DeadLettered ExternalTask is copied
into a new ExternalTask of the same session, queue, lane, command type,
payload, timeout, priority, identity and run, named <name>-retry
(<name>-retry-2 for the retry of a retry), annotated agentlane.io/retry-of
with the dead letter's name. The queue schedules it like any task, with a
fresh retry budget; a deadline that has passed is left out. The dead letter
stays as the record of the failure until its queue drops it. A dead letter
is retried once: a second retry finds its copy and is refused. Delegated
work (label agentlane.io/delegated) is not retried here: its producer
submits it again through the Session API.

Needs get on externaltasks (queue-viewer) and create (editor).`,
		Example: `  kubectl agentlane dead-letters retry build-7
  kubectl agentlane dead-letters retry -n team-a build-7 build-8 -o name`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := r.namespace()
			if err != nil {
				return err
			}
			c, err := r.newClient()
			if err != nil {
				return err
			}
			var errs []error
			for _, name := range args {
				task, err := retry(cmd.Context(), c, ns, name, r.clock.Now())
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if err := out.print(task, r.streams.Out); err != nil {
					return err
				}
			}
			return errors.Join(errs...)
		},
	}
	out = addOutput(cmd, "created")
	return cmd
}

// retry creates the task that runs the dead letter namespace/name again.
func retry(ctx context.Context, c client.Client, namespace, name string, now time.Time) (*agentlanev1alpha1.ExternalTask, error) {
	dead := &agentlanev1alpha1.ExternalTask{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, dead); err != nil {
		return nil, err
	}
	if dead.Status.Phase != agentlanev1alpha1.ExternalTaskDeadLettered {
		phase := string(dead.Status.Phase)
		if phase == "" {
			phase = "not dispatched yet"
		}
		return nil, fmt.Errorf("externaltask %s/%s is not a dead letter (phase %s)", namespace, name, phase)
	}
	if dead.Labels[agentlanev1alpha1.DelegatedLabel] == "true" {
		// A delegation is checked against its producer's depth and budget
		// when the Session API creates it; a copy would skip those checks.
		return nil, fmt.Errorf("externaltask %s/%s is delegated work: its producer submits it again through the Session API", namespace, name)
	}
	next, err := retryName(name)
	if err != nil {
		return nil, err
	}
	s := dead.Spec
	spec := agentlanev1alpha1.ExternalTaskSpec{
		SessionRef: s.SessionRef, QueueRef: s.QueueRef, Lane: s.Lane, CommandType: s.CommandType,
		Payload: s.Payload, Timeout: s.Timeout, Priority: s.Priority, Identity: s.Identity, RunID: s.RunID,
	}
	if s.Deadline != nil && s.Deadline.After(now) {
		spec.Deadline = s.Deadline
	}
	task := &agentlanev1alpha1.ExternalTask{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: next,
			Annotations: map[string]string{RetryOfAnnotation: name}},
		Spec: spec,
	}
	if err := c.Create(ctx, task); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("dead letter %s/%s was retried already: externaltask %s exists", namespace, name, next)
		}
		return nil, err
	}
	return task, nil
}

// retryName is the name of the task that retries the task name:
// name-retry, or name-retry-(n+1) when name is name-retry-n.
func retryName(name string) (string, error) {
	base, n := name, 1
	if i := strings.LastIndex(name, retrySuffix); i > 0 {
		rest := name[i+len(retrySuffix):]
		switch {
		case rest == "":
			base, n = name[:i], 2
		case rest[0] == '-':
			if k, err := strconv.Atoi(rest[1:]); err == nil && k >= 2 && rest[1] != '0' {
				base, n = name[:i], k+1
			}
		}
	}
	next := base + retrySuffix
	if n > 1 {
		next += "-" + strconv.Itoa(n)
	}
	if errs := validation.IsDNS1123Subdomain(next); len(errs) > 0 {
		return "", fmt.Errorf("cannot name the retry of %s: %s", name, strings.Join(errs, "; "))
	}
	return next, nil
}
