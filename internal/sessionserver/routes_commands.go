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
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/identity"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/tracing"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// The command routes: POST /commands submits a command, GET
// /commands/{id} reads (and waits for) one, POST /commands/{id}/result
// reports an Internal command's outcome, POST /cancel cancels commands.

// reportSettle bounds how long a report waits for the scheduler to take it.
const reportSettle = 2 * time.Second

// submit answers POST /commands.
func (s *Server) submit(w http.ResponseWriter, r *http.Request, sc *sessionCall) (err error) {
	var span trace.Span
	state := ""
	if tracing.Enabled() {
		r, span = startSubmitSpan(r, sc)
		defer func() { endSubmitSpan(span, state, err) }()
	}
	req, err := readSubmit(r)
	if err != nil {
		return err
	}
	if req.Type == "" {
		return apiError(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "type is required: the command type, such as read, bash or llm")
	}
	if len(req.Payload) > s.MaxPayloadBytes {
		return apiErrorf(http.StatusRequestEntityTooLarge, sessionapi.CodeTooLarge,
			"the payload is %d bytes, over this server's limit of %d bytes (--session-api-max-payload-bytes)", len(req.Payload), s.MaxPayloadBytes)
	}
	id := req.ID
	if id == "" {
		id = s.ids.NewID()
	} else if errs := validation.IsDNS1123Subdomain(id); len(errs) > 0 {
		return apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "id %q cannot name a command: %s", id, strings.Join(errs, "; "))
	}
	lane, mode, err := sc.queue.Route(sc.key.Name, req.Lane, req.Type)
	if err != nil {
		return schedulerError(err)
	}
	if err := s.checkParent(r.Context(), sc, req.ParentID, lane); err != nil {
		return err
	}
	target, err := s.laneTarget(r.Context(), sc, lane)
	if err != nil {
		return err
	}
	// The session's own switch of the lane's handler (lanehandlers.go).
	self, inHandler := false, false
	switch s.laneSwitch(r.Context(), sc, lane) {
	case laneHandlerExternal:
		mode, self, target = lanequeue.External, true, nil
	case laneHandlerInternal:
		if mode == lanequeue.External {
			mode, inHandler, target = lanequeue.Internal, true, nil
		}
	}
	if target != nil && target.Type == agentlanev1alpha1.ExternalTargetDelegate {
		return s.delegateCommand(w, r, sc, id, lane, req.Payload)
	}
	isDirect := mode == lanequeue.External && target != nil && target.Type == agentlanev1alpha1.ExternalTargetDirect
	traceparent := ""
	if span != nil {
		routedSpan(span, id, req.Type, lane, isDirect)
		traceparent = tracing.FromContext(r.Context())
	}
	if req.Type == DelegateCommandType {
		// The type names delegated work: a task of it outside a Delegate
		// lane would be one label away from being taken as delegated,
		// past the depth and bounds a delegation is checked against.
		return apiErrorf(http.StatusBadRequest, sessionapi.CodeCommandTypeRefused,
			"command type %q is reserved for delegations, and lane %q does not delegate: submit it to a lane whose externalTarget.type is Delegate, or use POST /delegations",
			DelegateCommandType, lane)
	}
	cmd := lanequeue.Command{
		ID:         id,
		SessionKey: sc.key.Name,
		Type:       req.Type,
		Lane:       lane,
		Payload:    req.Payload,
		Priority:   req.Priority,
		RunID:      req.RunID,
		Labels:     identity.Scheduler(sc.session.Spec.Identity),
	}
	if req.Timeout != nil {
		if req.Timeout.Duration < agentlanev1alpha1.MinTimeout || req.Timeout.Duration > agentlanev1alpha1.MaxTimeout {
			return apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "timeout must be a duration between %s and %s, such as 30s",
				agentlanev1alpha1.MinTimeout, agentlanev1alpha1.MaxTimeout)
		}
		cmd.Timeout = req.Timeout.Duration
	} else if t := sc.session.Spec.LaneTimeout(lane); t != nil {
		cmd.Timeout, cmd.TimeoutSource = t.Duration, "AgentSession laneOverrides["+lane+"]"
	}
	if req.Deadline != nil {
		cmd.Deadline = *req.Deadline
	}
	wait := s.MaxWait
	if req.Wait != nil && req.Wait.Duration > 0 {
		wait = min(wait, req.Wait.Duration)
	}

	c := &call{session: sc.key, typ: req.Type, runID: req.RunID, mode: string(mode),
		labels: identityOf(cmd.Labels)}
	if mode == lanequeue.External {
		if p := bytes.TrimSpace(req.Payload); len(p) > 0 && p[0] != '{' {
			return apiError(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "the payload of an External command must be a JSON object")
		}
		if err := s.checkExternalBudget(r.Context(), sc, lane, req.Type); err != nil {
			return err
		}
		if isDirect {
			d, err := s.newDirectCall(sc, cmd, lane, target)
			if err != nil {
				return err
			}
			d.traceparent, d.queuedAt = traceparent, s.Clock.Now()
			c.direct, c.stop = d, s.stopping
			cmd.Handler, cmd.InHandler = d, true
		} else if self {
			c.self, cmd.External = true, true
		} else {
			c.task = id
		}
	} else {
		cmd.Handler, cmd.InHandler = c, inHandler
		c.admit = s.admitBudget(sc, req.Type)
	}
	// The command is accounted before the scheduler can end it, so that
	// its terminal event always finds it.
	held, err := s.pending.reserve(sc.key, id, int64(len(req.Payload)), s.sessionBounds(r.Context(), sc))
	if err != nil {
		return err
	}
	if mode == lanequeue.External && !isDirect && !self {
		c.ticket, err = s.Schedulers.SubmitTask(sc.queueKey, cmd, func(lane string) error {
			return s.Client.Create(r.Context(), withTraceparent(newTask(sc, cmd, lane), traceparent))
		})
	} else {
		c.ticket, err = sc.queue.Submit(cmd)
	}
	if err != nil {
		s.pending.release(held)
		return submitError(id, err)
	}
	if c.direct != nil {
		c.direct.submitted(c.ticket)
	}
	s.calls.put(sc.key.Namespace, id, c)

	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	v, ok := c.wait(ctx, c.answered())
	if e := revoked(r.Context()); e != nil {
		return e // the command stays submitted; the caller may no longer wait for it
	}
	if err := c.interrupted(); err != nil {
		return err
	}
	if !ok && r.Context().Err() != nil {
		// The client went away while its command waited: one that no
		// attempt was granted yet is cancelled, which releases its pending
		// place; one granted goes on under its lane's rules.
		s.cancelAbandoned(sc, id)
		v = c.view()
	}
	status := http.StatusOK
	if !ok {
		status = http.StatusAccepted
	}
	state = v.State
	writeJSON(w, status, v)
	return nil
}

// errSubmitterGone ends a command whose submitter disconnected before an
// attempt of it was granted.
var errSubmitterGone = fmt.Errorf("%w: the client that submitted it disconnected before an attempt was granted", lanequeue.ErrCancelled)

// cancelAbandoned cancels the command id of a POST /commands whose client
// disconnected while it waited, if no attempt of it was granted yet
// (lanequeue.Queue.CancelUnstarted). A granted or running command is left
// to its lane: an Internal attempt whose grant nobody reports times out
// and is retried as the lane's policy says; the runtime may still read it,
// report it or cancel it.
func (s *Server) cancelAbandoned(sc *sessionCall, id string) {
	sc.queue.CancelUnstarted(id, errSubmitterGone)
}

// submitError translates a refused submission.
func submitError(id string, err error) error {
	switch {
	case apierrors.IsAlreadyExists(err):
		return apiErrorf(http.StatusConflict, sessionapi.CodeDuplicateCommand, "an ExternalTask named %q already exists", id)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "the command's ExternalTask was refused: %v", err)
	}
	return schedulerError(err)
}

// newTask is the ExternalTask of an External command, labelled and owned by
// its session from the start, so the controller has nothing to add.
func newTask(sc *sessionCall, cmd lanequeue.Command, lane string) *agentlanev1alpha1.ExternalTask {
	owner := *metav1.NewControllerRef(sc.session, agentlanev1alpha1.GroupVersion.WithKind("AgentSession"))
	return newTaskOf(sc.key.Namespace, sc.queueKey.Name, sc.key.Name, owner, sc.session.Spec.Identity, cmd, lane)
}

// newTaskOf is the ExternalTask of command cmd of session (owned by owner,
// with its identity) on lane of queue, in namespace.
func newTaskOf(namespace, queue, session string, owner metav1.OwnerReference, id *agentlanev1alpha1.Identity,
	cmd lanequeue.Command, lane string) *agentlanev1alpha1.ExternalTask {
	task := &agentlanev1alpha1.ExternalTask{
		ObjectMeta: metav1.ObjectMeta{
			Name:      cmd.ID,
			Namespace: namespace,
			Labels: map[string]string{
				agentlanev1alpha1.QueueLabel:   queue,
				agentlanev1alpha1.LaneLabel:    lane,
				agentlanev1alpha1.SessionLabel: session,
			},
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: agentlanev1alpha1.ExternalTaskSpec{
			SessionRef:  &agentlanev1alpha1.AgentSessionReference{Name: session},
			Lane:        agentlanev1alpha1.LaneName(lane),
			CommandType: agentlanev1alpha1.CommandType(cmd.Type),
			Identity:    id,
			RunID:       cmd.RunID,
		},
	}
	if len(cmd.Payload) > 0 {
		task.Spec.Payload = &runtime.RawExtension{Raw: cmd.Payload}
	}
	if cmd.Timeout > 0 {
		task.Spec.Timeout = &metav1.Duration{Duration: cmd.Timeout}
	}
	if cmd.Priority != nil {
		p := int32(*cmd.Priority)
		task.Spec.Priority = &p
	}
	if !cmd.Deadline.IsZero() {
		task.Spec.Deadline = &metav1.Time{Time: cmd.Deadline}
	}
	return task
}

// getCommand answers GET /commands/{id}.
func (s *Server) getCommand(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	id := r.PathValue("id")
	wait, err := waitParam(r, "wait", s.MaxWait)
	if err != nil {
		return err
	}
	if c := s.calls.get(sc.key.Namespace, id); c != nil && c.session == sc.key {
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		defer cancel()
		v, _ := c.wait(ctx, c.answered())
		if e := revoked(r.Context()); e != nil {
			return e
		}
		if err := c.interrupted(); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, v)
		return nil
	}
	// An External command this server does not hold (it was submitted
	// before a restart, or ended a while ago) is read from its task.
	task, err := s.sessionTask(r.Context(), sc, id)
	if sessionapi.IsCode(err, sessionapi.CodeCommandNotFound) {
		err = cmp.Or(s.interrupted(sc, id), err)
	}
	if err == nil {
		err = s.interruptedRecord(task)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, commandOfTask(task))
	return nil
}

// sessionTask returns the session's ExternalTask id.
func (s *Server) sessionTask(ctx context.Context, sc *sessionCall, id string) (*agentlanev1alpha1.ExternalTask, error) {
	task := &agentlanev1alpha1.ExternalTask{}
	err := s.Client.Get(ctx, types.NamespacedName{Namespace: sc.key.Namespace, Name: id}, task)
	if apierrors.IsNotFound(err) || (err == nil && (task.Spec.SessionRef == nil || task.Spec.SessionRef.Name != sc.key.Name)) {
		return nil, apiErrorf(http.StatusNotFound, sessionapi.CodeCommandNotFound, "session %q has no command %q", sc.key.Name, id)
	}
	return task, err
}

// commandOfTask shows an ExternalTask as a command.
func commandOfTask(task *agentlanev1alpha1.ExternalTask) sessionapi.Command {
	st := &task.Status
	cmd := sessionapi.Command{
		ID:      task.Name,
		Session: task.Spec.SessionRef.Name,
		Type:    string(task.Spec.CommandType),
		Lane:    string(st.Lane),
		RunID:   task.Spec.RunID,
		Mode:    sessionapi.ModeExternal,
		State:   sessionapi.StateQueued,
		Attempt: int(st.Attempt),
		Task:    task.Name,
	}
	if cmd.Lane == "" {
		cmd.Lane = string(task.Spec.Lane)
	}
	cmd.Labels = identity.Wire(task.Spec.Identity)
	switch st.Phase {
	case agentlanev1alpha1.ExternalTaskDispatched, agentlanev1alpha1.ExternalTaskRunning:
		cmd.State = sessionapi.StateRunning
	case "", agentlanev1alpha1.ExternalTaskQueued:
	default:
		cmd.State = string(st.Phase)
	}
	if st.Phase.IsTerminal() {
		if res := st.Result; res != nil {
			cmd.Result = &sessionapi.Result{Success: res.Success, Error: res.Error}
			if res.Result != nil {
				cmd.Result.Output = json.RawMessage(res.Result.Raw)
			}
			if res.ExitCode != nil {
				cmd.Result.ExitCode = int(*res.ExitCode)
			}
		}
		if c := meta.FindStatusCondition(st.Conditions, agentlanev1alpha1.ExternalTaskFinishedCondition); c != nil && st.Phase != agentlanev1alpha1.ExternalTaskSucceeded {
			cmd.Error = c.Message
		}
	}
	return cmd
}

// reportResult answers POST /commands/{id}/result.
func (s *Server) reportResult(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	id := r.PathValue("id")
	var req sessionapi.ReportRequest
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if req.Attempt < 1 {
		return apiError(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "attempt is required: the attempt of the grant being reported")
	}
	c := s.calls.get(sc.key.Namespace, id)
	if c == nil || c.session != sc.key {
		if err := s.interrupted(sc, id); err != nil {
			return err
		}
		return apiErrorf(http.StatusNotFound, sessionapi.CodeCommandNotFound, "session %q has no command %q", sc.key.Name, id)
	}
	if c.task != "" || c.direct != nil {
		return apiErrorf(http.StatusConflict, sessionapi.CodeNotRunning, "command %s is External: its worker reports the result", id)
	}
	var used *usage
	if req.Usage != nil {
		u, err := parseUsage(req.Usage)
		if err != nil {
			return err
		}
		used = &u
	}
	if err := c.report(req.Attempt, lanequeue.Result{Success: req.Success, Output: req.Output, Error: req.Error, ExitCode: req.ExitCode}); err != nil {
		return err
	}
	if used != nil {
		if _, err := s.record(r.Context(), sc, *used); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), reportSettle)
	defer cancel()
	v, _ := c.wait(ctx, settled(req.Attempt))
	writeJSON(w, http.StatusOK, v)
	return nil
}

// cancel answers POST /cancel.
func (s *Server) cancel(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	var req sessionapi.CancelRequest
	if err := readJSON(r, &req); err != nil {
		return err
	}
	set := 0
	for _, b := range []bool{req.CommandID != "", req.RunID != "", req.Session} {
		if b {
			set++
		}
	}
	if set != 1 {
		return apiError(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "set exactly one of commandId, runId and session")
	}
	n := 0
	switch {
	case req.CommandID != "":
		if c := s.calls.get(sc.key.Namespace, req.CommandID); c == nil || c.session != sc.key {
			if _, err := s.sessionTask(r.Context(), sc, req.CommandID); err != nil {
				if sessionapi.IsCode(err, sessionapi.CodeCommandNotFound) {
					err = cmp.Or(s.interrupted(sc, req.CommandID), err)
				}
				return err
			}
		}
		if err := sc.queue.Cancel(req.CommandID); err == nil {
			n = 1
		}
	case req.RunID != "":
		n = sc.queue.CancelRun(sc.key.Name, req.RunID)
	default:
		n = sc.queue.CancelSession(sc.key.Name)
	}
	writeJSON(w, http.StatusOK, sessionapi.CancelResult{Cancelled: n})
	return nil
}
