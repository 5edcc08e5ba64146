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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/identity"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// reportSettle bounds how long a report waits for the scheduler to take it.
const reportSettle = 2 * time.Second

func (s *Server) submit(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	var req sessionapi.SubmitRequest
	if err := readJSON(r, &req); err != nil {
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
	target, err := s.delegateLane(r.Context(), sc, lane)
	if err != nil {
		return err
	}
	if target != nil {
		return s.delegateCommand(w, r, sc, id, lane, req.Payload)
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
		cmd.Timeout = t.Duration
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
		c.task = id
	} else {
		cmd.Handler = c
		c.admit = s.admitBudget(sc, req.Type)
	}
	// The command is accounted before the scheduler can end it, so that
	// its terminal event always finds it.
	held, err := s.pending.reserve(sc.key, id, int64(len(req.Payload)), s.sessionBounds(r.Context(), sc))
	if err != nil {
		return err
	}
	if mode == lanequeue.External {
		c.ticket, err = s.Schedulers.SubmitTask(sc.queueKey, cmd, func(lane string) error {
			return s.Client.Create(r.Context(), newTask(sc, cmd, lane))
		})
	} else {
		c.ticket, err = sc.queue.Submit(cmd)
	}
	if err != nil {
		s.pending.release(held)
		return submitError(id, err)
	}
	s.calls.put(sc.key.Namespace, id, c)

	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	v, ok := c.wait(ctx, c.answered())
	if e := revoked(r.Context()); e != nil {
		return e // the command stays submitted; the caller may no longer wait for it
	}
	status := http.StatusOK
	if !ok {
		status = http.StatusAccepted
	}
	writeJSON(w, status, v)
	return nil
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
	gvk := agentlanev1alpha1.GroupVersion.WithKind("AgentSession")
	task := &agentlanev1alpha1.ExternalTask{
		ObjectMeta: metav1.ObjectMeta{
			Name:      cmd.ID,
			Namespace: sc.key.Namespace,
			Labels: map[string]string{
				agentlanev1alpha1.QueueLabel:   sc.queueKey.Name,
				agentlanev1alpha1.LaneLabel:    lane,
				agentlanev1alpha1.SessionLabel: sc.key.Name,
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sc.session, gvk)},
		},
		Spec: agentlanev1alpha1.ExternalTaskSpec{
			SessionRef:  &agentlanev1alpha1.AgentSessionReference{Name: sc.key.Name},
			Lane:        agentlanev1alpha1.LaneName(lane),
			CommandType: agentlanev1alpha1.CommandType(cmd.Type),
			Identity:    sc.session.Spec.Identity,
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
		writeJSON(w, http.StatusOK, v)
		return nil
	}
	// An External command this server does not hold (it was submitted
	// before a restart, or ended a while ago) is read from its task.
	task, err := s.sessionTask(r.Context(), sc, id)
	if sessionapi.IsCode(err, sessionapi.CodeCommandNotFound) {
		err = cmp.Or(s.interrupted(sc, id), err)
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
	if c.task != "" {
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
		if _, err := s.record(sc, *used); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), reportSettle)
	defer cancel()
	v, _ := c.wait(ctx, settled(req.Attempt))
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) postMessage(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	var m sessionapi.Message
	if err := readJSON(r, &m); err != nil {
		return err
	}
	if err := s.validateMessage(&m, s.sessionBounds(r.Context(), sc)); err != nil {
		return err
	}
	if m.ID == "" {
		m.ID = s.ids.NewID()
	}
	if m.From != nil {
		if err := s.announcePeer(r.Context(), sc, m.From); err != nil {
			return err
		}
	}
	s.configureInbox(r.Context(), sc)
	res, err := sc.inbox.Post(sc.key.Name, lanequeue.Message{ID: m.ID, Text: m.Text, Channel: m.Channel, Thread: m.Thread})
	if err != nil {
		return schedulerError(err)
	}
	s.inboxes.save(r.Context(), sc.key, sc.inbox)
	out := sessionapi.PostResult{Directive: res.Directive, Queued: res.Queued, Steered: res.Steered,
		Dropped: res.Dropped, Aborted: res.Aborted}
	if res.Directive {
		o := queueOptionsOf(res.Options)
		out.Options = &o
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// configureInbox gives the inbox the session's options from its spec and
// whether a runtime that takes steers is connected, after what a restarted
// manager kept of it is put back.
func (s *Server) configureInbox(ctx context.Context, sc *sessionCall) {
	s.inboxes.restore(ctx, sc.key, sc.inbox)
	opts := messageOptions(sc.session.Spec.QueueMode)
	if err := sc.inbox.ConfigureSession(sc.key.Name, opts, s.hub.log(sc.key).hasRuntime()); err != nil {
		// The CRD validates the options; should it ever let a bad value
		// through, the defaults serve.
		s.log.Error(err, "AgentSession queueMode refused; using the defaults", "session", sc.key)
		_ = sc.inbox.ConfigureSession(sc.key.Name, lanequeue.DefaultMessageOptions(), s.hub.log(sc.key).hasRuntime())
	}
}

func (s *Server) finishRun(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	out, err := readRunOutcome(r)
	if err != nil {
		return err
	}
	if err := s.completeDelegation(r.Context(), sc, r.PathValue("run"), out); err != nil {
		return err
	}
	sc.inbox.RunFinished(sc.key.Name, r.PathValue("run"))
	s.hub.runFinished(sc.key, r.PathValue("run"))
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

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

func (s *Server) events(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	req, err := parseStreamRequest(r)
	if err != nil {
		return err
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		return apiError(http.StatusInternalServerError, sessionapi.CodeInternal, "the connection cannot stream")
	}
	log := s.hub.log(sc.key)
	cursor, first, err := log.start(req, s.Clock.Now())
	if err != nil {
		return err
	}
	if r.URL.Query().Get("runtime") == "true" {
		log.attachRuntime(1)
		s.configureInbox(r.Context(), sc)
		defer func() {
			log.attachRuntime(-1)
			s.configureInbox(r.Context(), sc)
		}()
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s.holdFor(w, 0)
	if _, err := w.Write(first); err != nil {
		return nil
	}
	flusher.Flush()

	keepAlive := s.Clock.NewTicker(keepAliveInterval)
	defer keepAlive.Stop()
	var buf bytes.Buffer
	for {
		items, next, wake := log.after(cursor)
		cursor = next
		buf.Reset()
		for _, it := range items {
			if it.Lost > 0 {
				writeEvent(&buf, sessionapi.Event{Type: sessionapi.EventEventsLost, Time: s.Clock.Now().UTC(), Lost: it.Lost})
			}
			if e := it.Entry; e != nil {
				fmt.Fprintf(&buf, "id: %d\nevent: %s\ndata: %s\n\n", e.id, e.typ, e.data)
			}
		}
		if buf.Len() > 0 {
			s.holdFor(w, 0)
			if _, err := w.Write(buf.Bytes()); err != nil {
				return nil
			}
			flusher.Flush()
		}
		if wake == nil {
			return nil // the session was deleted
		}
		select {
		case <-wake:
		case <-keepAlive.C():
			s.holdFor(w, 0)
			if _, err := w.Write([]byte(": keepalive\n\n")); err != nil {
				return nil
			}
			flusher.Flush()
		case <-r.Context().Done():
			if e := revoked(r.Context()); e != nil {
				// The caller may no longer follow the session: the stream
				// ends with an error event saying why.
				buf.Reset()
				writeEvent(&buf, sessionapi.Event{Type: eventStreamError, Time: s.Clock.Now().UTC(), Error: e.Code + ": " + e.Message})
				s.holdFor(w, 0)
				_, _ = w.Write(buf.Bytes())
				flusher.Flush()
			}
			return nil
		}
	}
}

// writeEvent writes one Server-Sent Event that is not in the session's log,
// so has no id.
func writeEvent(buf *bytes.Buffer, ev sessionapi.Event) {
	data, _ := json.Marshal(ev)
	fmt.Fprintf(buf, "event: %s\ndata: %s\n\n", ev.Type, data)
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	s.configureInbox(r.Context(), sc)
	st := sc.queue.Stats()
	ss := sc.queue.SessionStats(sc.key.Name)
	out := sessionapi.Stats{
		Queue: sc.queueKey.Name,
		Session: sessionapi.SessionCounts{
			Pending: ss.Pending, Active: ss.Active, Completed: ss.Completed, Failed: ss.Failed,
			DeadLettered: ss.DeadLettered, Cancelled: ss.Cancelled,
			QueuedMessages: sc.inbox.Queued(sc.key.Name),
		},
		Lanes:   make([]sessionapi.LaneStats, 0, len(st.Lanes)),
		Options: queueOptionsOf(sc.inbox.Options(sc.key.Name)),
	}
	out.Session.ActiveRun, _ = sc.inbox.ActiveRun(sc.key.Name)
	if len(ss.LaneModes) > 0 {
		out.Session.LaneModes = make(map[string]string, len(ss.LaneModes))
		for l, m := range ss.LaneModes {
			out.Session.LaneModes[l] = string(m)
		}
	}
	for _, l := range st.Lanes {
		out.Lanes = append(out.Lanes, sessionapi.LaneStats{
			Name: l.Name, Priority: l.Priority, Mode: string(l.Mode), Pending: l.Pending, Active: l.Active,
			Completed: l.Completed, Failed: l.Failed, DeadLettered: l.DeadLettered, Cancelled: l.Cancelled,
			Wait: percentilesOf(l.Wait), Run: percentilesOf(l.Run),
		})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deadLetters(w http.ResponseWriter, _ *http.Request, sc *sessionCall) error {
	out := sessionapi.DeadLetterList{Items: []sessionapi.DeadLetter{}}
	for _, d := range sc.queue.DeadLetters() {
		if d.SessionKey == sc.key.Name {
			out.Items = append(out.Items, sessionapi.DeadLetter{ID: d.ID, CommandType: d.CommandType, Lane: d.Lane,
				RunID: d.RunID, Error: d.Error, Attempts: d.Attempts, FailedAt: d.FailedAt, Labels: identityOf(d.Labels)})
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func percentilesOf(p lanequeue.Percentiles) sessionapi.Percentiles {
	return sessionapi.Percentiles{Count: p.Count, P50: p.P50.Seconds(), P90: p.P90.Seconds(),
		P95: p.P95.Seconds(), P99: p.P99.Seconds()}
}

func queueOptionsOf(o lanequeue.MessageOptions) sessionapi.QueueOptions {
	out := sessionapi.QueueOptions{Mode: string(o.Mode), Debounce: metav1.Duration{Duration: o.Debounce},
		Cap: o.Cap, Drop: string(o.Drop)}
	for ch, m := range o.ByChannel {
		if out.ByChannel == nil {
			out.ByChannel = make(map[string]string, len(o.ByChannel))
		}
		out.ByChannel[ch] = string(m)
	}
	return out
}

// messageOptions are the inbox options of a session's spec.queueMode, with
// the defaults for what it leaves out.
func messageOptions(q *agentlanev1alpha1.QueueModeOptions) lanequeue.MessageOptions {
	o := lanequeue.DefaultMessageOptions()
	if q == nil {
		return o
	}
	if q.Mode != "" {
		o.Mode = lanequeue.MessageMode(q.Mode)
	}
	if q.Debounce != nil {
		o.Debounce = q.Debounce.Duration
	}
	if q.Cap != nil {
		o.Cap = int(*q.Cap)
	}
	if q.Drop != "" {
		o.Drop = lanequeue.DropPolicy(q.Drop)
	}
	for ch, m := range q.ByChannel {
		if o.ByChannel == nil {
			o.ByChannel = make(map[string]lanequeue.MessageMode, len(q.ByChannel))
		}
		o.ByChannel[ch] = lanequeue.MessageMode(m)
	}
	return o
}

// announcePeer checks that the caller may act for the sending session and
// tells the receiving session who invokes it.
func (s *Server) announcePeer(ctx context.Context, sc *sessionCall, from *sessionapi.SessionRef) error {
	if from.Namespace == "" || from.Name == "" {
		return apiError(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "from needs the namespace and name of the sending session")
	}
	if err := s.Auth.Authorize(ctx, sc.caller, from.Namespace, from.Name, VerbWrite); err != nil {
		return err
	}
	sender := &agentlanev1alpha1.AgentSession{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: from.Namespace, Name: from.Name}, sender); err != nil {
		if apierrors.IsNotFound(err) {
			return apiErrorf(http.StatusNotFound, sessionapi.CodeSessionNotFound, "sending AgentSession %q does not exist in namespace %q", from.Name, from.Namespace)
		}
		return err
	}
	peer := &sessionapi.PeerInvocation{FromNamespace: from.Namespace, FromSession: from.Name}
	if id := sender.Spec.Identity; id != nil {
		peer.FromTenant, peer.CorrelationID = id.TenantID, id.CorrelationID
	}
	s.hub.ClusterEvent(sc.key, sessionapi.Event{Type: sessionapi.EventPeerInvocation, Time: s.Clock.Now().UTC(), Peer: peer})
	if s.Recorder != nil {
		s.Recorder.Eventf(sc.session, sender, corev1.EventTypeNormal, sessionapi.EventPeerInvocation, "Invoke",
			"session %s/%s (tenant %q, correlation %q) sent a message", from.Namespace, from.Name, peer.FromTenant, peer.CorrelationID)
	}
	return nil
}
