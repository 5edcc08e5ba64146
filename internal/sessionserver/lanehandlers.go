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
	"errors"
	"net/http"
	"time"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// A session's runtime may switch, for its own commands, who handles a lane
// (PUT .../lanes/{lane}/handler), as A3S's SDK sets a lane's handler:
//
//   - External: the session's own runtime completes the lane's commands.
//     A command waits as an external task of the scheduler, listed by
//     GET .../external, until a caller that may submit to the session
//     completes it (POST .../external/{id}/complete), or its attempt times
//     out; the lane's caps, timeout, retries and dead letters hold. No
//     ExternalTask is made, no worker or Job runs it, and no identity but
//     the session's is needed. Like a Direct task that was never recorded,
//     such a command does not outlive the manager: on failover its
//     submitter's call fails and the command must be submitted again.
//   - Internal: the runtime runs the lane's commands on a grant, even on a
//     lane whose own mode is External.
//
// Either way the session's runtime runs the commands itself, so a switch
// is allowed only on a lane whose LaneQueue lets a session switch it to
// Internal (spec.lanes[].sessionOverrides: by default every lane does),
// never on a Delegate lane: a lane the admin keeps on its workers' sandbox
// (sessionOverrides.allowedModes without Internal) stays there. The check
// is made again at each submit, so a LaneQueue that later forbids it ends
// the switch's effect. A switch is kept with the session's inbox record in
// the session store (one write per switch, under the namespace's write
// budget), so a new leader applies it; without a store it lasts as long as
// the manager. mode Default removes it.

// Lane handler switches a session may set.
const (
	laneHandlerExternal = "External"
	laneHandlerInternal = "Internal"
	laneHandlerDefault  = "Default"
)

// maxLaneHandlers bounds the switches a restored record may set, and
// maxLaneNameLength their lane names (a lane is a DNS label).
const (
	maxLaneHandlers   = 64
	maxLaneNameLength = 63
)

// A submit reads the session's kept record, for its switches, when this
// server has not read it yet: at most once per restoreRetry per session
// while the reads fail, each bounded by restoreOnSubmitTimeout, so that a
// session store the API server cannot serve (an outage) delays few submits
// and by at most a few seconds. Meanwhile the lanes run as if no switch
// were set.
const (
	restoreRetry           = 10 * time.Second
	restoreOnSubmitTimeout = 5 * time.Second
)

func validLaneHandler(mode string) bool {
	return mode == laneHandlerExternal || mode == laneHandlerInternal
}

// specLane returns the LaneQueue's lane of that name.
func (s *Server) specLane(ctx context.Context, sc *sessionCall, lane string) (*agentlanev1alpha1.Lane, error) {
	if _, err := s.laneTarget(ctx, sc, lane); err != nil {
		return nil, err
	}
	for i := range sc.lq.Spec.Lanes {
		if l := &sc.lq.Spec.Lanes[i]; string(l.Name) == lane {
			return l, nil
		}
	}
	return nil, apiErrorf(http.StatusBadRequest, sessionapi.CodeUnknownLane, "LaneQueue %q has no lane %q", sc.queueKey.Name, lane)
}

// mayHandleLane tells whether the session may handle l's commands itself.
func mayHandleLane(l *agentlanev1alpha1.Lane) error {
	if t := l.ExternalTarget; t != nil && t.Type == agentlanev1alpha1.ExternalTargetDelegate {
		return apiErrorf(http.StatusForbidden, sessionapi.CodeLaneSwitchRefused,
			"lane %q delegates each command to a worker session; its handler cannot be switched", l.Name)
	}
	if !l.SessionModeAllowed(agentlanev1alpha1.HandlerModeInternal) {
		return apiErrorf(http.StatusForbidden, sessionapi.CodeLaneSwitchRefused,
			"the LaneQueue's lane %q does not let a session run its commands itself (its sessionOverrides.allowedModes leave out Internal)", l.Name)
	}
	return nil
}

// setLaneHandler answers PUT /lanes/{lane}/handler.
func (s *Server) setLaneHandler(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	var req sessionapi.LaneHandler
	if err := readJSON(r, &req); err != nil {
		return err
	}
	lane := r.PathValue("lane")
	l, err := s.specLane(r.Context(), sc, lane)
	if err != nil {
		return err
	}
	mode := req.Mode
	switch mode {
	case laneHandlerExternal, laneHandlerInternal:
		if err := mayHandleLane(l); err != nil {
			return err
		}
	case laneHandlerDefault, "":
		mode = ""
	default:
		return apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest,
			"mode must be External (the session completes the lane's commands), Internal or Default, not %q", req.Mode)
	}
	s.inboxes.restore(r.Context(), sc.key, sc.inbox)
	s.inboxes.session(sc.key).setLaneHandler(lane, mode)
	s.inboxes.save(r.Context(), sc.key, sc.inbox)
	if mode == "" {
		mode = laneHandlerDefault
	}
	writeJSON(w, http.StatusOK, sessionapi.LaneHandler{Lane: lane, Mode: mode})
	return nil
}

// laneSwitch returns the session's switch for lane that applies now: "",
// External or Internal.
func (s *Server) laneSwitch(ctx context.Context, sc *sessionCall, lane string) string {
	k := s.inboxes.session(sc.key)
	if !k.restoredOnce() && s.inboxes.store != nil && k.mayTryRestore(s.Clock.Now(), restoreRetry) {
		rctx, cancel := context.WithTimeout(ctx, restoreOnSubmitTimeout)
		s.inboxes.restore(rctx, sc.key, sc.inbox)
		cancel()
	}
	mode := k.laneHandler(lane)
	if mode == "" {
		return ""
	}
	if l, err := s.specLane(ctx, sc, lane); err != nil || mayHandleLane(l) != nil {
		return ""
	}
	return mode
}

// completeSelf completes an attempt of a command of a lane the session
// handles itself: req.Attempt, or the pending one when it is 0.
func (s *Server) completeSelf(w http.ResponseWriter, r *http.Request, sc *sessionCall, c *call, req sessionapi.Completion) error {
	id := c.ticket.ID()
	attempt, err := selfAttempt(sc, c, req.Attempt)
	if err != nil {
		return err
	}
	res := lanequeue.Result{Success: req.Success, Output: req.Result, Error: req.Error}
	if req.ExitCode != nil {
		res.ExitCode = int(*req.ExitCode)
	}
	if req.Success {
		err = sc.queue.CompleteAttempt(id, attempt, res)
	} else {
		msg := req.Error
		if msg == "" {
			msg = "the session's handler reported a failure"
		}
		err = sc.queue.FailAttempt(id, attempt, errors.New(msg))
	}
	switch {
	case err == nil:
	case errors.Is(err, lanequeue.ErrStaleAttempt):
		if o, final := c.ticket.Outcome(); final {
			return apiErrorf(http.StatusConflict, sessionapi.CodeAlreadyCompleted, "task %q has finished: %s", id, o.State)
		}
		return apiErrorf(http.StatusConflict, sessionapi.CodeStaleAttempt,
			"attempt %d of task %q no longer waits for a completion; a completion counts only for the current attempt", attempt, id)
	case errors.Is(err, lanequeue.ErrNotFound):
		return apiErrorf(http.StatusConflict, sessionapi.CodeAlreadyCompleted, "task %q has finished", id)
	default:
		return schedulerError(err)
	}
	o, _ := c.ticket.Outcome()
	writeJSON(w, http.StatusOK, sessionapi.CompletionResult{ID: id, Attempt: attempt, Phase: string(o.State)})
	return nil
}

// selfAttempt is the attempt a completion or heartbeat of c, a command
// the session handles itself, is for: requested, or when that is 0 the one
// waiting for a completion.
func selfAttempt(sc *sessionCall, c *call, requested int) (int, error) {
	id := c.ticket.ID()
	if requested != 0 {
		return requested, nil
	}
	for _, t := range sc.queue.PendingExternal() {
		if t.ID == id {
			return t.Attempt, nil
		}
	}
	if o, final := c.ticket.Outcome(); final {
		return 0, apiErrorf(http.StatusConflict, sessionapi.CodeAlreadyCompleted, "task %q has finished: %s", id, o.State)
	}
	return 0, apiErrorf(http.StatusConflict, sessionapi.CodeNotRunning, "no attempt of task %q waits for a completion (it waits for a retry or a slot)", id)
}

// heartbeatSelf answers a heartbeat for c, a command the session handles
// itself: the scheduler takes it; there is no task to record it on.
func (s *Server) heartbeatSelf(w http.ResponseWriter, sc *sessionCall, c *call, req sessionapi.Heartbeat) error {
	id := c.ticket.ID()
	attempt, err := selfAttempt(sc, c, req.Attempt)
	if err != nil {
		return err
	}
	if err := sc.queue.Heartbeat(id, attempt); err != nil {
		return heartbeatSchedulerError(id, int32(attempt), err)
	}
	out := sessionapi.HeartbeatResult{ID: id, Attempt: attempt}
	for _, l := range sc.queue.Config().Lanes {
		if l.Name == c.ticket.Lane() {
			out.HeartbeatTimeoutSeconds = l.HeartbeatTimeout.Seconds()
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// verbOfCompletion marks the completion and heartbeat routes, whose access
// depends on the task (completionVerb).
const verbOfCompletion = "(completion)"

// completionVerb is the access a completion or heartbeat needs: VerbWrite,
// the access that submits, for a command of a lane the session handles
// itself; VerbComplete for any other task (a Handler lane's).
func (s *Server) completionVerb(r *http.Request) string {
	c := s.calls.get(r.PathValue("namespace"), r.PathValue("id"))
	if c != nil && c.self && c.session.Name == r.PathValue("session") {
		return VerbWrite
	}
	return VerbComplete
}

// selfCall returns the session's call id if the session handles it itself.
func (s *Server) selfCall(sc *sessionCall, id string) *call {
	c := s.calls.get(sc.key.Namespace, id)
	if c == nil || !c.self || c.session != sc.key {
		return nil
	}
	return c
}
