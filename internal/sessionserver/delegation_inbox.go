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

package sessionserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/taskstate"
	"github.com/agentlane/agentlane/internal/truncate"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// Bounds of what a worker's outcome may put into its task's status.
const (
	maxDelegationAnswer = 32 << 10
	maxDelegationError  = 4096
)

// internalCall resolves a session for the manager's own use (the delegation
// controller), without a caller: no authentication applies. It reads around
// the cache, because the controller asks for sessions it just created.
func (s *Server) internalCall(ctx context.Context, key types.NamespacedName) (*sessionCall, error) {
	sess := &agentlanev1alpha1.AgentSession{}
	if err := s.Reader.Get(ctx, key, sess); err != nil {
		return nil, err
	}
	sc := &sessionCall{key: key, session: sess,
		queueKey: types.NamespacedName{Namespace: key.Namespace, Name: sess.Spec.QueueRef.Name}}
	var ok bool
	if sc.queue, sc.inbox, ok = s.Schedulers.Session(sc.queueKey); !ok {
		return nil, fmt.Errorf("LaneQueue %q of session %q has no running scheduler", sc.queueKey.Name, key.Name)
	}
	return sc, nil
}

// Deliver posts text to the session's inbox as an inbound message, as
// POST /messages does: the session's queue mode decides when it becomes a
// turn. The delegation controller delivers a worker's first turn and, to
// the producer, the result.
func (s *Server) Deliver(ctx context.Context, key types.NamespacedName, id, text string) error {
	sc, err := s.internalCall(ctx, key)
	if err != nil {
		return err
	}
	s.configureInbox(ctx, sc)
	if _, err := sc.inbox.Post(key.Name, lanequeue.Message{ID: id, Text: text}); err != nil {
		return err
	}
	s.inboxes.save(ctx, key, sc.inbox)
	return nil
}

// Busy reports whether the session has a run in progress or messages
// waiting in its inbox, as far as this manager knows (what a restarted
// manager kept in the session store counts).
func (s *Server) Busy(ctx context.Context, key types.NamespacedName) (bool, error) {
	sc, err := s.internalCall(ctx, key)
	if err != nil {
		return false, err
	}
	s.inboxes.restore(ctx, key, sc.inbox)
	_, active := sc.inbox.ActiveRun(key.Name)
	return active || sc.inbox.Queued(key.Name) > 0, nil
}

// readRunOutcome reads the optional body of POST /runs/{run}/finish.
func readRunOutcome(r *http.Request) (*sessionapi.RunOutcome, error) {
	if r.ContentLength == 0 {
		return nil, nil
	}
	var out sessionapi.RunOutcome
	if err := readJSON(r, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// completeDelegation makes the outcome of a worker session's finished run
// the result of the delegated task the session works on. Only a task that
// is Running with this session as its worker takes it: the first run to
// finish completes the task, later runs change nothing.
func (s *Server) completeDelegation(ctx context.Context, sc *sessionCall, runID string, out *sessionapi.RunOutcome) error {
	name := sc.session.Labels[agentlanev1alpha1.DelegationTaskLabel]
	if name == "" {
		return nil
	}
	if out == nil {
		out = &sessionapi.RunOutcome{}
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		task := &agentlanev1alpha1.ExternalTask{}
		if err := s.Reader.Get(ctx, types.NamespacedName{Namespace: sc.key.Namespace, Name: name}, task); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		scope := taskstate.NewScope(task)
		err := finishDelegated(task, sc.key.Name, *out, metav1.NewTime(s.Clock.Now()))
		switch {
		case errors.Is(err, taskstate.ErrIllegal):
			return nil // the task does not run in this session (any more)
		case err != nil:
			return err
		}
		if err := scope.Write(ctx, s.Client, nil, false); err != nil {
			return err
		}
		s.log.V(1).Info("Delegated task completed by its worker session", "task", name, "worker", sc.key.Name, "run", runID, "error", out.Error)
		return nil
	})
}

// finishDelegated records the outcome of worker session's run as the
// task's final status (taskstate.SessionFinish); an error when the task does
// not run in that session.
func finishDelegated(task *agentlanev1alpha1.ExternalTask, session string, out sessionapi.RunOutcome, now metav1.Time) error {
	res := agentlanev1alpha1.TaskResult{Success: out.Error == ""}
	if res.Success {
		raw, _ := json.Marshal(map[string]string{"answer": truncate.Runes(out.Answer, maxDelegationAnswer, "…")})
		res.Result = &runtime.RawExtension{Raw: raw}
	} else {
		res.Error = truncate.Runes(out.Error, maxDelegationError, "…")
	}
	return taskstate.SessionFinish(&task.Status, task.Generation, now, session, res)
}
