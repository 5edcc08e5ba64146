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
	"errors"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/taskstate"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// Long-running commands. A handler that runs an attempt of a Handler
// lane's ExternalTask shows it is alive with POST .../external/{id}/heartbeat
// (fenced and authorized as a completion is): the scheduler takes each
// heartbeat at once, and the task's status records at most one per
// quarter of the lane's heartbeatTimeout, so a handler that posts
// heartbeats in a loop costs the API server a bounded number of writes
// (the caller's request rate bounds the rest). The session's owner moves a
// running command's deadline later with POST .../commands/{id}/extend,
// within the scheduler's bounds; an External command's extension is
// recorded in its task's status, so that a new manager restores it.

// Bounds of an extension request.
const (
	minExtend = time.Second
	maxExtend = 24 * time.Hour
)

// heartbeatExternal answers POST .../external/{id}/heartbeat.
func (s *Server) heartbeatExternal(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	id := r.PathValue("id")
	var req sessionapi.Heartbeat
	if err := readJSON(r, &req); err != nil {
		return err
	}
	switch {
	case req.Attempt < 0:
		return apiError(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "attempt must be the attempt number GET .../external lists, or 0 for the current one")
	case len(req.Progress) > sessionapi.MaxProgressBytes:
		return apiErrorf(http.StatusRequestEntityTooLarge, sessionapi.CodeTooLarge,
			"the progress note is %d bytes, over the limit of %d", len(req.Progress), sessionapi.MaxProgressBytes)
	}
	if c := s.selfCall(sc, id); c != nil {
		return s.heartbeatSelf(w, sc, c, req)
	}
	progress := taskstate.ProgressNote(req.Progress)
	// The manager's cache first: the fence (a Handler task of the session,
	// its current attempt, without a result) and the coalescing need no
	// read of the API server; a write on a stale copy conflicts and reads
	// it again.
	task, err := s.sessionTask(r.Context(), sc, id)
	if err != nil {
		return externalNotFound(err, sc, id)
	}
	attempt := int32(req.Attempt)
	if attempt == 0 {
		attempt = task.Status.Attempt
	}
	if _, err := taskstate.HandlerHeartbeat(task.Status.DeepCopy(), metav1.NewTime(s.Clock.Now()), attempt, progress); err != nil {
		return heartbeatRefused(task, attempt, err)
	}
	if err := sc.queue.Heartbeat(id, int(attempt)); err != nil {
		return heartbeatSchedulerError(id, attempt, err)
	}
	out := sessionapi.HeartbeatResult{ID: id, Attempt: int(attempt)}
	for range completeTries {
		scope := taskstate.NewScope(task)
		changed, err := taskstate.HandlerHeartbeat(&task.Status, metav1.NewTime(s.Clock.Now()), attempt, progress)
		if err != nil {
			return heartbeatRefused(task, attempt, err)
		}
		if !changed {
			break
		}
		err = scope.Write(r.Context(), s.Client, nil, false)
		if apierrors.IsConflict(err) {
			if task, err = s.readSessionTask(r.Context(), sc, id); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return apiErrorf(http.StatusInternalServerError, sessionapi.CodeInternal, "record the heartbeat: %v", err)
		}
		out.Recorded = true
		break
	}
	if hb := task.Status.HeartbeatTimeout; hb != nil {
		out.HeartbeatTimeoutSeconds = hb.Duration.Seconds()
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// externalNotFound words a missing task of the session as the external
// routes do.
func externalNotFound(err error, sc *sessionCall, id string) error {
	if sessionapi.IsCode(err, sessionapi.CodeCommandNotFound) {
		return apiErrorf(http.StatusNotFound, sessionapi.CodeCommandNotFound, "session %q has no external task %q", sc.key.Name, id)
	}
	return err
}

// heartbeatRefused words a refusal of taskstate.HandlerHeartbeat.
func heartbeatRefused(task *agentlanev1alpha1.ExternalTask, attempt int32, err error) error {
	st := &task.Status
	switch {
	case errors.Is(err, taskstate.ErrFinished), errors.Is(err, taskstate.ErrHasResult):
		return apiErrorf(http.StatusConflict, sessionapi.CodeAlreadyCompleted, "attempt %d of task %q has finished or has a completion", attempt, task.Name)
	case errors.Is(err, taskstate.ErrStaleAttempt):
		return apiErrorf(http.StatusConflict, sessionapi.CodeStaleAttempt,
			"task %q is at attempt %d, not %d; a heartbeat counts only for the current attempt", task.Name, st.Attempt, attempt)
	case errors.Is(err, taskstate.ErrNotHolder):
		return apiErrorf(http.StatusConflict, sessionapi.CodeNotHandlerTask,
			"attempt %d of task %q is held by a worker or a Job, which send its heartbeats", attempt, task.Name)
	case errors.Is(err, taskstate.ErrPhase):
		return apiErrorf(http.StatusConflict, sessionapi.CodeNotRunning, "attempt %d of task %q is %s, not dispatched to handlers", attempt, task.Name, st.Phase)
	}
	return apiErrorf(http.StatusInternalServerError, sessionapi.CodeInternal, "record the heartbeat: %v", err)
}

// heartbeatSchedulerError words the scheduler's refusal of a heartbeat.
func heartbeatSchedulerError(id string, attempt int32, err error) error {
	switch {
	case errors.Is(err, lanequeue.ErrStaleAttempt), errors.Is(err, lanequeue.ErrNotPending):
		return apiErrorf(http.StatusConflict, sessionapi.CodeStaleAttempt, "attempt %d of task %q is not running: %v", attempt, id, err)
	case errors.Is(err, lanequeue.ErrNotFound):
		return apiErrorf(http.StatusConflict, sessionapi.CodeAlreadyCompleted, "task %q has finished", id)
	}
	return schedulerError(err)
}

// extendCommand answers POST .../commands/{id}/extend.
func (s *Server) extendCommand(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	id := r.PathValue("id")
	var req sessionapi.Extend
	if err := readJSON(r, &req); err != nil {
		return err
	}
	switch {
	case req.Attempt < 0:
		return apiError(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "attempt must be an attempt number, or 0 for the one running")
	case req.By.Duration < minExtend || req.By.Duration > maxExtend:
		return apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "by must be a duration between %s and %s, such as 5m", minExtend, maxExtend)
	}
	// The command must be the session's: one this server holds, or the
	// session's ExternalTask.
	c := s.calls.get(sc.key.Namespace, id)
	var task *agentlanev1alpha1.ExternalTask
	switch {
	case c != nil && c.session == sc.key:
	case c != nil:
		return apiErrorf(http.StatusNotFound, sessionapi.CodeCommandNotFound, "session %q has no command %q", sc.key.Name, id)
	default:
		var err error
		if task, err = s.sessionTask(r.Context(), sc, id); err != nil {
			return err
		}
	}
	x, err := sc.queue.ExtendDeadline(id, req.Attempt, req.By.Duration)
	switch {
	case err == nil:
	case errors.Is(err, lanequeue.ErrExtendRefused):
		return apiError(http.StatusConflict, sessionapi.CodeExtendRefused, err.Error())
	case errors.Is(err, lanequeue.ErrNotPending):
		return apiErrorf(http.StatusConflict, sessionapi.CodeNotRunning, "command %q has no running attempt", id)
	default:
		return schedulerError(err)
	}
	if c != nil {
		c.extended(x.Attempt, x.Deadline)
		if c.task != "" && task == nil {
			task, err = s.sessionTask(r.Context(), sc, c.task)
			if err != nil {
				return err
			}
		}
	}
	if task != nil {
		if err := s.recordExtension(r, sc, task, x); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, sessionapi.Extension{ID: id, Attempt: x.Attempt, Deadline: x.Deadline, Extensions: x.Extensions})
	return nil
}

// recordExtension writes the extension x into the task's status, re-read
// on a conflict. A task whose attempt has moved on meanwhile keeps nothing:
// its new attempt has the lane's timeout.
func (s *Server) recordExtension(r *http.Request, sc *sessionCall, task *agentlanev1alpha1.ExternalTask, x lanequeue.Extension) error {
	for range completeTries {
		scope := taskstate.NewScope(task)
		if !recordable(&task.Status, x) {
			return nil
		}
		err := scope.Write(r.Context(), s.Client, nil, false)
		if !apierrors.IsConflict(err) {
			if err != nil {
				return apiErrorf(http.StatusInternalServerError, sessionapi.CodeInternal, "record the extension: %v", err)
			}
			return nil
		}
		if task, err = s.readSessionTask(r.Context(), sc, task.Name); err != nil {
			return err
		}
	}
	return apiErrorf(http.StatusConflict, sessionapi.CodeStaleAttempt, "task %q kept changing while the extension was recorded; the scheduler has it", task.Name)
}

// recordable records x in st, and tells whether st's attempt is still the
// extended one, which taskstate.Extend checks.
func recordable(st *agentlanev1alpha1.ExternalTaskStatus, x lanequeue.Extension) bool {
	return taskstate.Extend(st, int32(x.Attempt), x.Deadline, x.Extensions) == nil
}

// extended shows the new deadline of attempt on the call's grant, when the
// runtime holds that attempt's grant.
func (c *call) extended(attempt int, deadline time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.grant != nil && c.grant.attempt == attempt {
		c.grant.deadline = deadline
		c.notifyLocked()
	}
}
