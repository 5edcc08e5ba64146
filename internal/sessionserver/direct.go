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
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/direct"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/taskstate"
	"github.com/agentlane/agentlane/internal/tracing"
	"github.com/agentlane/agentlane/internal/workerproto"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// Direct lanes (docs/workers.md, "Direct lanes"). A command routed to an
// External lane whose externalTarget is Direct runs in the scheduler like
// any command (its lane's caps, timeout, retries and dead letters) and each
// granted attempt is handed, in the attempt's handler (directCall.Run), to
// a worker streaming from this manager (package direct). A short task that
// succeeds writes nothing to the API server. The command is recorded as an
// ExternalTask, labelled agentlane.io/target=Direct and held Direct, only
// when it must be:
//
//   - an attempt waits for a free worker, or runs on one, longer than the
//     lane's direct.materializeAfter (2s by default): the record shows it
//     Dispatched or Running, and its end;
//   - the command ends Failed, TimedOut or DeadLettered: the record shows
//     how, with the last attempt's result;
//   - the lane's direct.records is Always: every command, from its grant.
//
// A record is written by this file only while this manager run carries it
// (scheduling.DirectTasks); the ExternalTask controller fails, interrupted,
// a record left unfinished by an earlier run.

// directRecordTimeout bounds the API writes of one record.
const directRecordTimeout = 10 * time.Second

// workerGrantVerb is the grant a Direct worker needs in the namespace it
// serves, as a KubeAuthorizer grant key's verb: the access the ExternalTask
// path gives workers (patch externaltasks/status).
const workerGrantVerb = "direct-worker"

// routeDirectStream is the route label of the Direct workers' streams.
const routeDirectStream = "direct-stream"

// directStream answers POST workerproto.DirectPath: a worker's stream,
// on the leader only.
func (s *Server) directStream(w http.ResponseWriter, r *http.Request) {
	const route = routeDirectStream
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.writeError(w, r, route, apiErrorf(http.StatusMethodNotAllowed, sessionapi.CodeMethodNotAllowed,
			"%s takes POST, not %s", workerproto.DirectPath, r.Method))
		return
	}
	if !s.leading() {
		s.writeError(w, r, route, errNotLeader)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	admitted := &admittedWorker{}
	ctx = context.WithValue(ctx, admittedWorkerKey{}, admitted)
	go s.reauthorizeWorker(ctx, cancel, r, admitted)
	s.direct.ServeHTTP(w, r.WithContext(ctx))
	admitted.mu.Lock()
	defer admitted.mu.Unlock()
	if admitted.caller != nil {
		s.workerNames.release(admitted.name)
	}
}

// workerNames are the names of the Direct workers' streams and the users
// that hold them: a worker's stream replaces an earlier one of its name
// (the same worker reconnecting), so a name is only given to a stream of
// the user whose stream holds it.
type workerNames struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*nameHold
}

type nameHold struct {
	user    string
	streams int
}

// claim gives name to a stream of user, unless streams of another user
// hold it.
func (n *workerNames) claim(name types.NamespacedName, user string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	h := n.m[name]
	if h != nil && h.user != user {
		return apiErrorf(http.StatusConflict, sessionapi.CodeInvalidRequest,
			"worker %q of namespace %q is connected as another user; a worker's stream may only replace one of its own user", name.Name, name.Namespace)
	}
	if h == nil {
		if n.m == nil {
			n.m = make(map[types.NamespacedName]*nameHold)
		}
		h = &nameHold{user: user}
		n.m[name] = h
	}
	h.streams++
	return nil
}

// release gives back a stream's claim on name.
func (n *workerNames) release(name types.NamespacedName) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if h := n.m[name]; h != nil {
		if h.streams--; h.streams <= 0 {
			delete(n.m, name)
		}
	}
}

// Token extra keys that bind a service-account token to a pod.
const (
	extraPodName  = "authentication.kubernetes.io/pod-name"
	extraNodeName = "authentication.kubernetes.io/node-name"
)

// checkWorkerName refuses a Hello whose worker or node is not the one
// the caller's credentials name: the pod a projected token is bound to (and
// its node), or <name> of a user agentlane-worker:<name>, as the admission
// policies of the ExternalTask path name a worker.
func checkWorkerName(c Caller, hello workerproto.DirectHello) error {
	name, node := "", ""
	if pod := c.Extra[extraPodName]; len(pod) == 1 {
		name = pod[0]
		if n := c.Extra[extraNodeName]; len(n) == 1 {
			node = n[0]
		}
	} else if rest, ok := strings.CutPrefix(c.Username, "agentlane-worker:"); ok {
		name = rest
	}
	if name != "" && hello.Worker != name {
		return apiErrorf(http.StatusForbidden, sessionapi.CodeForbidden,
			"the Hello names worker %q, but the credentials are those of %q: a worker's name is its pod's", hello.Worker, name)
	}
	if node != "" && hello.Node != node {
		return apiErrorf(http.StatusForbidden, sessionapi.CodeForbidden,
			"the Hello names node %q, but the token is bound to a pod on node %q", hello.Node, node)
	}
	return nil
}

// admittedWorker is who a worker's stream was admitted as, and for which
// namespace, once admitWorker let it in.
type admittedWorker struct {
	mu        sync.Mutex
	caller    *Caller
	namespace string
	name      types.NamespacedName
	hello     workerproto.DirectHello
	// creds carries the token the stream is checked with: the one it
	// connected with until a Token frame's replaced it
	// (refreshWorkerToken). pending is a rotated token that could not be
	// reviewed yet, reviewed again at the next check.
	creds   *http.Request
	pending string
}

type admittedWorkerKey struct{}

// reauthorizeWorker ends a worker's stream (cancel) once its token or its
// right to serve its namespace no longer holds, checked every
// reauthorizeInterval as for every long-lived call, with the worker's
// latest token (refreshWorkerToken). An answer that is not a refusal (the
// API server unreachable) leaves the stream open.
func (s *Server) reauthorizeWorker(ctx context.Context, cancel func(), r *http.Request, admitted *admittedWorker) {
	t := s.Clock.NewTicker(s.reauthorizeInterval())
	defer t.Stop()
	check := withAdmission(ctx, &reviewAdmission{addr: clientAddr(r)})
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		admitted.mu.Lock()
		caller, ns, pending := admitted.caller, admitted.namespace, admitted.pending
		admitted.mu.Unlock()
		if caller == nil {
			continue
		}
		if pending != "" {
			if err := s.refreshAdmitted(ctx, r, admitted, pending); err != nil {
				s.log.Info("Direct worker's rotated token refused; ending its stream", "user", caller.Username, "namespace", ns, "reason", err.Error())
				cancel()
				return
			}
		}
		admitted.mu.Lock()
		creds := admitted.creds
		admitted.mu.Unlock()
		c, err := s.Auth.Authenticate(check, creds)
		if err == nil {
			err = s.Auth.(workerAuthorizer).AuthorizeWorker(check, c, ns)
		}
		if e := refusalOf(err); e != nil {
			s.log.Info("Direct worker's access revoked; ending its stream", "user", caller.Username, "namespace", ns, "reason", e.Message)
			cancel()
			return
		}
	}
}

// admitWorker checks a worker's stream: its token (paying for reviews as
// a session call does) and its right to serve the tasks of the Hello's
// namespace.
func (s *Server) admitWorker(ctx context.Context, r *http.Request, hello workerproto.DirectHello) error {
	wa, ok := s.Auth.(workerAuthorizer)
	if !ok {
		return apiError(http.StatusInternalServerError, sessionapi.CodeInternal, "this Session API's authorizer cannot authorize Direct workers")
	}
	ctx, caller, err := s.authenticate(ctx, r)
	if err != nil {
		return err
	}
	if err := checkWorkerName(caller, hello); err != nil {
		return err
	}
	if err := wa.AuthorizeWorker(ctx, caller, hello.Namespace); err != nil {
		return err
	}
	admitted, ok := r.Context().Value(admittedWorkerKey{}).(*admittedWorker)
	if !ok {
		return apiError(http.StatusInternalServerError, sessionapi.CodeInternal, "a Direct stream was admitted outside its route")
	}
	name := types.NamespacedName{Namespace: hello.Namespace, Name: hello.Worker}
	if err := s.workerNames.claim(name, caller.Username); err != nil {
		return err
	}
	admitted.mu.Lock()
	admitted.caller, admitted.namespace, admitted.name = &caller, hello.Namespace, name
	admitted.hello, admitted.creds = hello, r
	admitted.mu.Unlock()
	return nil
}

// workerAuthorizer is an Authorizer that can tell whether a caller may
// serve a namespace's tasks as a Direct worker.
type workerAuthorizer interface {
	AuthorizeWorker(ctx context.Context, c Caller, namespace string) error
}

// directCall is the handler of a Direct command's attempts and the keeper
// of its record.
type directCall struct {
	s       *Server
	key     types.NamespacedName // the task's namespace and name (the command id)
	queue   string
	lane    string
	session string
	typ     string
	runID   string
	payload json.RawMessage
	// selector is the lane's workerSelector; after its
	// direct.materializeAfter; always its records: Always.
	selector labels.Selector
	after    time.Duration
	always   bool
	// cmd, owner and identity are what the command's record is built from
	// if it is recorded (newTaskOf): the command as submitted, its
	// session as owner and the session's identity.
	cmd      lanequeue.Command
	owner    metav1.OwnerReference
	identity *agentlanev1alpha1.Identity
	// traceparent is the command's submit span, set when tracing is on,
	// and queuedAt when its next attempt began waiting in its lane (Run
	// only, one attempt at a time).
	traceparent string
	queuedAt    time.Time
	// ticket is set once Submit returned; ready is closed then. settled
	// is closed once the end of a watched command was recorded, if it
	// must be (watch).
	ticket  *lanequeue.Ticket
	ready   chan struct{}
	settled chan struct{}

	mu sync.Mutex
	// attempt is what the record should show of the current attempt,
	// version counts its changes, recorded tells the command is recorded
	// (a record must show its end), watching that a goroutine waits for
	// the command's end.
	attempt  taskstate.DirectAttempt
	version  int
	recorded bool
	watching bool
	// started is when the current attempt started on its worker, as the
	// worker reported it (direct.Task.Started): shown to the submitter,
	// never recorded.
	started time.Time

	// writeMu serializes the record's writes; obj is the record as last
	// written and written the version it shows.
	writeMu sync.Mutex
	obj     *agentlanev1alpha1.ExternalTask
	written int
	// stale tells that the last status write conflicted: obj is read
	// again before the next.
	stale bool
}

// newDirectCall builds the handler of a Direct command of sc on lane.
func (s *Server) newDirectCall(sc *sessionCall, cmd lanequeue.Command, lane string, target *agentlanev1alpha1.ExternalTarget) (*directCall, error) {
	d := &directCall{
		s:       s,
		key:     types.NamespacedName{Namespace: sc.key.Namespace, Name: cmd.ID},
		queue:   sc.queueKey.Name,
		lane:    lane,
		session: sc.key.Name,
		typ:     cmd.Type,
		runID:   cmd.RunID,
		payload: cmd.Payload,
		after:   target.Direct.MaterializeAfterOrDefault(),
		always:  target.Direct.RecordsAlways(),
		ready:   make(chan struct{}),
		settled: make(chan struct{}),
	}
	if ws := target.WorkerSelector; ws != nil {
		sel, err := metav1.LabelSelectorAsSelector(ws.LabelSelector())
		if err != nil {
			return nil, apiErrorf(http.StatusServiceUnavailable, sessionapi.CodeSessionNotReady, "lane %q has an invalid workerSelector: %v", lane, err)
		}
		d.selector = sel
	}
	d.cmd, d.identity = cmd, sc.session.Spec.Identity
	d.cmd.Handler = nil
	d.owner = *metav1.NewControllerRef(sc.session, agentlanev1alpha1.GroupVersion.WithKind("AgentSession"))
	return d, nil
}

// isRecorded tells whether the command has an ExternalTask record.
func (d *directCall) isRecorded() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.recorded
}

// submitted hands d the command's ticket.
func (d *directCall) submitted(tk *lanequeue.Ticket) {
	d.ticket = tk
	close(d.ready)
}

// Run implements lanequeue.Handler: it hands the attempt to a streaming
// worker and waits for its result.
func (d *directCall) Run(ctx context.Context, a lanequeue.Attempt) (lanequeue.Result, error) {
	granted := metav1.NewTime(a.StartedAt)
	d.mu.Lock()
	d.attempt = taskstate.DirectAttempt{Lane: d.lane, Attempt: int32(a.Number), GrantedAt: granted}
	d.started = time.Time{}
	d.version++
	always := d.always
	d.mu.Unlock()
	if always {
		d.recordNow()
	}
	at := &directAttempt{task: direct.Task{
		Namespace: d.key.Namespace, Queue: d.queue, Lane: d.lane, Session: d.session, ID: d.key.Name,
		CommandType: d.typ, RunID: d.runID, Payload: d.payload, Selector: d.selector,
		MaterializeAfter: d.after, OnRecord: d.onRecord,
	}}
	at.task.Sent, at.task.Started = &at.sent, &at.started
	var span trace.Span
	if d.traceparent != "" && tracing.Enabled() {
		span = d.startDispatchSpan(&at.task, a)
	}
	r, err := d.s.direct.Run(ctx, &at.task, a)
	if span != nil {
		d.endDispatchSpan(span, at, a, r, err)
	}
	if at.sent.Worker != "" {
		d.ran(at.sent)
	}
	if !at.started.IsZero() {
		d.mu.Lock()
		if d.attempt.Attempt == int32(a.Number) {
			d.started = at.started
		}
		d.mu.Unlock()
	}
	if errors.Is(err, direct.ErrInterrupted) {
		// The manager stops leading: no other attempt can run here.
		err = lanequeue.Permanent(err)
	}
	if err != nil || !r.Success {
		// It may end for good: its end is recorded then.
		d.watch()
	}
	return r, err
}

// directAttempt is one attempt as handed to the dispatcher, the worker it
// was sent to and when that worker says it started it.
type directAttempt struct {
	task    direct.Task
	sent    direct.Record
	started time.Time
}

// startedAt is when the current attempt started on its worker, as the
// worker reported it; zero until its worker answered.
func (d *directCall) startedAt() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.started
}

// ran notes the worker that ran the current attempt, for its record.
func (d *directCall) ran(rec direct.Record) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if int32(rec.Attempt) != d.attempt.Attempt || d.attempt.Worker != "" {
		return
	}
	since := metav1.NewTime(rec.Since)
	d.attempt.Worker, d.attempt.Node, d.attempt.Incarnation, d.attempt.StartedAt = rec.Worker, rec.Node, rec.Incarnation, &since
}

// onRecord is told by the dispatcher that an attempt waited or ran past
// materializeAfter: the command is recorded.
func (d *directCall) onRecord(rec direct.Record) {
	d.mu.Lock()
	if int32(rec.Attempt) != d.attempt.Attempt {
		d.mu.Unlock()
		return // an earlier attempt's news
	}
	d.version++
	d.mu.Unlock()
	if rec.Phase == direct.RecordRunning {
		d.ran(rec)
	}
	d.recordNow()
}

// recordNow makes the command recorded and writes what its record should
// show now; its end is recorded too, later.
func (d *directCall) recordNow() {
	d.mu.Lock()
	d.recorded = true
	d.mu.Unlock()
	d.watch()
	_ = d.write(nil) // logged; the end is written until it lands (recordEnd)
}

// watch starts, once, the goroutine that records the command's end.
func (d *directCall) watch() {
	d.mu.Lock()
	if d.watching {
		d.mu.Unlock()
		return
	}
	d.watching = true
	d.mu.Unlock()
	go func() {
		defer close(d.settled)
		<-d.ready
		<-d.ticket.Done()
		d.ended()
	}()
}

// endSettled tells whether the command's end needs no record, or its
// record's end was written (or given up: the manager stops leading, or the
// write cannot succeed).
func (d *directCall) endSettled() bool {
	d.mu.Lock()
	watching := d.watching
	d.mu.Unlock()
	return !watching || isClosed(d.settled)
}

// ended records the command's end if it must be: it was recorded, or it
// ended Failed, TimedOut or DeadLettered. Nothing is written once the
// manager stops leading: the next leader fails an unfinished record,
// interrupted.
func (d *directCall) ended() {
	o, _ := d.ticket.Outcome()
	phase := taskstate.FinalPhase(o.State)
	d.mu.Lock()
	must := d.recorded || phase == agentlanev1alpha1.ExternalTaskFailed ||
		phase == agentlanev1alpha1.ExternalTaskTimedOut || phase == agentlanev1alpha1.ExternalTaskDeadLettered
	d.version++
	d.mu.Unlock()
	if !must || d.s.stopped() {
		d.s.Schedulers.DirectTasks().Release(d.key)
		return
	}
	end := &directEnd{phase: phase}
	if o.Err != nil {
		end.msg = o.Err.Error()
	} else {
		end.msg = fmt.Sprintf("attempt %d %s", o.Attempts, phase)
	}
	if o.Attempts > 0 && (o.Result.Success || o.Result.Error != "" || len(o.Result.Output) > 0 || o.Result.ExitCode != 0) {
		end.result = taskResultOf(o.Result)
	}
	d.recordEnd(end)
	d.s.Schedulers.DirectTasks().Release(d.key)
}

// Backoff of recordEnd's writes.
const (
	directEndRetryMin = 100 * time.Millisecond
	directEndRetryMax = 5 * time.Second
)

// recordEnd writes the record's end, again and again while the write fails
// for a reason that passes (the API server unreachable or overloaded, a
// conflicting write) and this manager leads. The record stays held
// meanwhile: released unfinished, the ExternalTask controller would fail it,
// interrupted, whatever the command's end, which its submitter was told.
func (d *directCall) recordEnd(end *directEnd) {
	wait := directEndRetryMin
	for {
		err := d.write(end)
		if err == nil || !retriableWrite(err) {
			return
		}
		select {
		case <-d.s.stopping:
			return
		case <-d.s.Clock.After(wait):
		}
		wait = min(2*wait, directEndRetryMax)
	}
}

// retriableWrite tells whether a write that failed with err may succeed
// later: the API server was unavailable (apiServerUnavailable), or the
// object changed under the write.
func retriableWrite(err error) bool {
	return apierrors.IsConflict(err) || apiServerUnavailable(err)
}

// directEnd is how a recorded command ended.
type directEnd struct {
	phase  agentlanev1alpha1.ExternalTaskPhase
	result *agentlanev1alpha1.TaskResult
	msg    string
}

// write brings the record up to date: it creates it the first time, then
// writes its status, unless a write already shows the latest version. It
// returns why a write failed; a record that cannot change any more (it
// finished) is no failure.
func (d *directCall) write(end *directEnd) error {
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	d.mu.Lock()
	a, version := d.attempt, d.version
	d.mu.Unlock()
	if end == nil && version == d.written {
		return nil
	}
	log := d.s.log.WithValues("externalTask", d.key)
	ctx, cancel := context.WithTimeout(context.Background(), directRecordTimeout)
	defer cancel()
	if d.obj == nil {
		d.s.Schedulers.DirectTasks().Hold(d.key)
		obj := newTaskOf(d.key.Namespace, d.queue, d.session, d.owner, d.identity, d.cmd, d.lane)
		obj.Labels[agentlanev1alpha1.TargetLabel] = string(agentlanev1alpha1.ExternalTargetDirect)
		if err := d.s.Client.Create(ctx, obj); err != nil {
			if !apierrors.IsAlreadyExists(err) {
				log.Error(err, "Could not record a Direct task")
			} else {
				log.Info("Could not record a Direct task: an ExternalTask of its name exists")
			}
			directRecordFailures.Inc()
			return err
		}
		directRecords.Inc()
		d.obj = obj
	} else if d.stale {
		// A write conflicted: write over the record as it is now.
		cur := &agentlanev1alpha1.ExternalTask{}
		if err := d.s.Client.Get(ctx, d.key, cur); err != nil {
			log.Error(err, "Could not read a Direct task's record again")
			return err
		}
		d.obj, d.stale = cur, false
	}
	// A copy: a write that fails leaves obj as last written, so that the
	// next write's patch carries this change again.
	scope := taskstate.NewScope(d.obj.DeepCopy())
	st := &scope.Task.Status
	now := metav1.NewTime(d.s.Clock.Now())
	var err error
	if end != nil {
		err = taskstate.DirectEnd(st, d.obj.Generation, now, a, end.phase, end.result, end.msg)
	} else {
		err = taskstate.DirectRecord(st, d.obj.Generation, now, a)
	}
	if err != nil {
		log.V(1).Info("Direct task record not changed", "reason", err.Error())
		return nil
	}
	if err := scope.Write(ctx, d.s.Client, nil, false); err != nil {
		log.Error(err, "Could not write the status of a Direct task's record")
		directRecordFailures.Inc()
		d.stale = apierrors.IsConflict(err)
		return err
	}
	d.obj = scope.Task
	d.written = version
	return nil
}

// taskResultOf is an attempt's result as a task records it.
func taskResultOf(r lanequeue.Result) *agentlanev1alpha1.TaskResult {
	res := &agentlanev1alpha1.TaskResult{Success: r.Success, Error: r.Error}
	if len(r.Output) > 0 && json.Valid(r.Output) {
		res.Result = &runtime.RawExtension{Raw: r.Output}
	}
	if r.ExitCode != 0 {
		code := int32(r.ExitCode)
		res.ExitCode = &code
	}
	return res
}

// interruptedRecord answers 410 Interrupted for the record of a Direct
// command that an earlier manager run left unfinished: this run does not
// carry it, and it is unfinished (the ExternalTask controller fails it) or
// the controller failed it, interrupted. A submitter whose call ended with
// that run's connection asks for the command here and is told what a
// submitter whose call the stopping leader ended is told: submit it again.
// Any other task is nil.
func (s *Server) interruptedRecord(task *agentlanev1alpha1.ExternalTask) error {
	if task.Labels[agentlanev1alpha1.TargetLabel] != string(agentlanev1alpha1.ExternalTargetDirect) ||
		s.Schedulers.DirectTasks().Holds(types.NamespacedName{Namespace: task.Namespace, Name: task.Name}) {
		return nil
	}
	if st := &task.Status; st.Phase.IsTerminal() {
		c := meta.FindStatusCondition(st.Conditions, agentlanev1alpha1.ExternalTaskFinishedCondition)
		if st.Phase != agentlanev1alpha1.ExternalTaskFailed || c == nil || c.Message != taskstate.DirectInterruptedMessage {
			return nil
		}
	}
	return interruptedDirect(task.Name, true)
}

// interruptedDirect answers the submitter of a Direct command that had not
// ended when this manager stopped leading.
func interruptedDirect(id string, recorded bool) error {
	msg := fmt.Sprintf("command %s was interrupted: the manager that ran it stopped leading before it ended, and its result cannot be taken any more; submit it again to run it", id)
	if recorded {
		msg += fmt.Sprintf(" (its ExternalTask %s ends Failed, interrupted)", id)
	}
	return apiError(http.StatusGone, sessionapi.CodeInterrupted, msg)
}
