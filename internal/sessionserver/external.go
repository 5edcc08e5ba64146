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
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/taskstate"
	"github.com/agentlane/agentlane/internal/truncate"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// The external-task contract for handlers in any language: a lane whose
// external target is Handler offers each granted attempt to handlers, which
// list them with GET .../external (payload, attempt, remaining time) and
// complete them with POST .../external/{id}/complete. A completion is
// fenced like a worker's: it is written only while the attempt it names is
// the task's current one, dispatched to handlers and without a result, and
// the write carries the resourceVersion it checked, so of two completions of
// one attempt exactly one counts.

// VerbComplete is the access a completion needs on the session's
// agentsessions/api subresource: update, which neither a reader (get) nor
// a runtime that submits commands (create) holds unless granted it.
const VerbComplete = "update"

// maxCompletionError is the longest error a completion keeps, as
// status.result.error allows.
const maxCompletionError = 32768

// completeTries bounds the re-reads when the task changed between the read
// and the write of a completion.
const completeTries = 4

// pendingExternal lists the session's pending external attempts with what
// a handler needs to run them: the payload and the time left.
func (s *Server) pendingExternal(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	out := sessionapi.ExternalTaskList{Items: []sessionapi.ExternalTask{}}
	now := s.Clock.Now()
	var mayComplete, maySubmit *bool
	for _, t := range sc.queue.PendingExternal() {
		if t.SessionKey != sc.key.Name {
			continue
		}
		payload := t.Payload
		self := s.selfCall(sc, t.ID) != nil // no ExternalTask to read
		if payload == nil && !self {
			var err error
			if payload, err = s.storedPayload(r.Context(), sc.key.Namespace, t.ID); err != nil {
				return err
			}
		}
		var can bool
		if self {
			// A lane the session handles itself: the access that submits.
			if maySubmit == nil {
				ok, err := s.mayVerb(r.Context(), sc, VerbWrite)
				if err != nil {
					return err
				}
				maySubmit = &ok
			}
			can = *maySubmit
		} else {
			if mayComplete == nil {
				ok, err := s.mayComplete(r.Context(), sc)
				if err != nil {
					return err
				}
				mayComplete = &ok
			}
			can = *mayComplete && s.completable(r.Context(), sc.key.Namespace, t.ID, t.Attempt, now)
		}
		out.Items = append(out.Items, sessionapi.ExternalTask{ID: t.ID, Attempt: t.Attempt, Lane: t.Lane,
			CommandType: t.CommandType, RunID: t.RunID, CreatedAt: t.CreatedAt, Deadline: t.Deadline,
			Payload: payload, RemainingSeconds: t.Remaining(now).Seconds(),
			TimedOut:    !t.Deadline.IsZero() && !now.Before(t.Deadline),
			CanComplete: can})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// mayComplete reports whether the caller holds the access a completion
// needs (VerbComplete on the session), asked as the complete call asks it.
// A refusal is false; a review that fails is the listing's error.
func (s *Server) mayComplete(ctx context.Context, sc *sessionCall) (bool, error) {
	return s.mayVerb(ctx, sc, VerbComplete)
}

// mayVerb reports whether the caller holds verb on the session; a refusal
// is false, a review that fails an error.
func (s *Server) mayVerb(ctx context.Context, sc *sessionCall, verb string) (bool, error) {
	err := s.Auth.Authorize(ctx, sc.caller, sc.key.Namespace, sc.key.Name, verb)
	switch {
	case err == nil:
		return true, nil
	case sessionapi.IsCode(err, sessionapi.CodeForbidden):
		return false, nil
	}
	return false, err
}

// completable reports whether a completion of the task's attempt would be
// taken now, by the fence the complete call applies (recordCompletion),
// on the task as the manager's cache has it: a task of a Handler lane,
// dispatched to handlers, at that attempt and without a result. The
// complete call reads the task again, so a task that changed since is
// still refused there.
func (s *Server) completable(ctx context.Context, namespace, id string, attempt int, now time.Time) bool {
	task := &agentlanev1alpha1.ExternalTask{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: id}, task); err != nil {
		return false
	}
	return recordCompletion(task, sessionapi.Completion{Attempt: attempt, Success: true}, metav1.NewTime(now)) == nil
}

// storedPayload reads the payload of a task the scheduler holds without one
// (one created with kubectl, or queued again by a new leader: the manager's
// cache keeps no payloads) from the API server. A task deleted meanwhile
// has none.
func (s *Server) storedPayload(ctx context.Context, namespace, name string) (json.RawMessage, error) {
	task := &agentlanev1alpha1.ExternalTask{}
	if err := s.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, task); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	if task.Spec.Payload == nil {
		return nil, nil
	}
	return task.Spec.Payload.Raw, nil
}

func (s *Server) completeExternal(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	id := r.PathValue("id")
	var req sessionapi.Completion
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if err := s.checkCompletion(&req); err != nil {
		return err
	}
	if c := s.selfCall(sc, id); c != nil {
		return s.completeSelf(w, r, sc, c, req)
	}
	for range completeTries {
		task, err := s.readSessionTask(r.Context(), sc, id)
		if err != nil {
			return err
		}
		scope := taskstate.NewScope(task)
		req := req
		if req.Attempt == 0 {
			req.Attempt = int(task.Status.Attempt) // the current one, fenced as any
		}
		if err := recordCompletion(task, req, metav1.NewTime(s.Clock.Now())); err != nil {
			return err
		}
		err = scope.Write(r.Context(), s.Client, nil, false)
		if apierrors.IsConflict(err) {
			continue // changed since the read: look again
		}
		if err != nil {
			return apiErrorf(http.StatusInternalServerError, sessionapi.CodeInternal, "record the completion: %v", err)
		}
		writeJSON(w, http.StatusOK, sessionapi.CompletionResult{ID: id, Attempt: req.Attempt, Phase: string(task.Status.Phase)})
		return nil
	}
	return apiErrorf(http.StatusConflict, sessionapi.CodeStaleAttempt,
		"task %q kept changing while the completion was written; list the session's external tasks again", id)
}

// checkCompletion refuses a completion that is malformed or too large.
func (s *Server) checkCompletion(req *sessionapi.Completion) error {
	if req.Attempt < 0 {
		return apiError(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "attempt must be the attempt number (1 or more) GET .../external lists, or 0 for the current one")
	}
	if len(req.Result) > s.MaxPayloadBytes {
		return apiErrorf(http.StatusRequestEntityTooLarge, sessionapi.CodeTooLarge,
			"the result is %d bytes, over this server's limit of %d bytes (--session-api-max-payload-bytes)", len(req.Result), s.MaxPayloadBytes)
	}
	if len(req.Result) > 0 && !json.Valid(req.Result) {
		return apiError(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "result is not valid JSON")
	}
	req.Error = truncate.Runes(req.Error, maxCompletionError, "")
	return nil
}

// readSessionTask reads the session's ExternalTask id from the API server,
// not the cache: the fence must see the latest attempt.
func (s *Server) readSessionTask(ctx context.Context, sc *sessionCall, id string) (*agentlanev1alpha1.ExternalTask, error) {
	var reader client.Reader = s.Client
	if s.Reader != nil {
		reader = s.Reader
	}
	task := &agentlanev1alpha1.ExternalTask{}
	err := reader.Get(ctx, types.NamespacedName{Namespace: sc.key.Namespace, Name: id}, task)
	if apierrors.IsNotFound(err) || (err == nil && (task.Spec.SessionRef == nil || task.Spec.SessionRef.Name != sc.key.Name)) {
		return nil, apiErrorf(http.StatusNotFound, sessionapi.CodeCommandNotFound, "session %q has no external task %q", sc.key.Name, id)
	}
	if err != nil {
		return nil, apiErrorf(http.StatusInternalServerError, sessionapi.CodeInternal, "read task %q: %v", id, err)
	}
	return task, nil
}

// recordCompletion writes req into the task's status as a worker's
// completion would (taskstate.HandlerComplete): the result, when the
// attempt started and finished, and Succeeded for a success; a failure
// stays Running so that the manager applies the lane's retry policy. It
// returns why the completion cannot be taken unless req's attempt is the
// current one, offered to handlers and still without a result.
func recordCompletion(task *agentlanev1alpha1.ExternalTask, req sessionapi.Completion, now metav1.Time) error {
	res := agentlanev1alpha1.TaskResult{Success: req.Success, Error: req.Error, ExitCode: req.ExitCode}
	if len(req.Result) > 0 {
		res.Result = &runtime.RawExtension{Raw: req.Result}
	}
	st := &task.Status
	attempt := req.Attempt
	err := taskstate.HandlerComplete(st, now, int32(attempt), res)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, taskstate.ErrFinished):
		return apiErrorf(http.StatusConflict, sessionapi.CodeAlreadyCompleted, "task %q has finished: %s", task.Name, st.Phase)
	case errors.Is(err, taskstate.ErrStaleAttempt):
		return apiErrorf(http.StatusConflict, sessionapi.CodeStaleAttempt,
			"task %q is at attempt %d, not %d; a completion counts only for the current attempt", task.Name, st.Attempt, attempt)
	case errors.Is(err, taskstate.ErrHasResult):
		return apiErrorf(http.StatusConflict, sessionapi.CodeAlreadyCompleted, "attempt %d of task %q already has a completion", attempt, task.Name)
	case errors.Is(err, taskstate.ErrNotHolder):
		return apiErrorf(http.StatusConflict, sessionapi.CodeNotHandlerTask,
			"attempt %d of task %q is held by a worker or a Job; only tasks of lanes whose externalTarget.type is Handler are completed through the API", attempt, task.Name)
	case errors.Is(err, taskstate.ErrPhase):
		return apiErrorf(http.StatusConflict, sessionapi.CodeNotRunning,
			"attempt %d of task %q is %s, not dispatched to handlers", attempt, task.Name, st.Phase)
	}
	return apiErrorf(http.StatusInternalServerError, sessionapi.CodeInternal, "record the completion: %v", err)
}
