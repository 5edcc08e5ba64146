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
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/delegation"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// DelegateCommandType is the command type of the ExternalTasks that carry
// delegated work.
const DelegateCommandType = delegation.CommandType

// maxDelegationText bounds a delegation's text (the worker's first turn).
const maxDelegationText = 64 << 10

// Defaults of DelegationBounds.
const (
	DefaultDelegationsPendingPerSession   = 16
	DefaultDelegationsPerSession          = 64
	DefaultDelegationsPendingPerNamespace = 64
	DefaultDelegationsPerNamespace        = 256
)

const (
	// maxDelegationPage bounds one page of GET /delegations.
	maxDelegationPage = 100
	// delegationCacheGrace is how long a delegation this server created
	// counts against the bounds while the manager's cache does not show
	// it yet.
	delegationCacheGrace = time.Minute
	// delegationsFullRetry is the Retry-After of a delegation refused at a
	// bound: delegations take their worker's time to finish.
	delegationsFullRetry = 5 * time.Second
)

// DelegationBounds bound the delegations the cluster keeps for one session
// and for one namespace: those that have not finished (pending), and all of
// them, finished ones included until retention removes them. Zero fields
// take the defaults; a delegation past a bound gets 429 QueueFull with
// Retry-After. MaxDepth: a session that many delegations deep cannot
// delegate (delegation.DefaultMaxDepth when zero).
type DelegationBounds struct {
	PendingPerSession   int
	PerSession          int
	PendingPerNamespace int
	PerNamespace        int
	MaxDepth            int
}

func (b DelegationBounds) withDefaults() DelegationBounds {
	b.PendingPerSession = cmp.Or(max(b.PendingPerSession, 0), DefaultDelegationsPendingPerSession)
	b.PerSession = cmp.Or(max(b.PerSession, 0), DefaultDelegationsPerSession)
	b.PendingPerNamespace = cmp.Or(max(b.PendingPerNamespace, 0), DefaultDelegationsPendingPerNamespace)
	b.PerNamespace = cmp.Or(max(b.PerNamespace, 0), DefaultDelegationsPerNamespace)
	b.MaxDepth = cmp.Or(max(b.MaxDepth, 0), delegation.DefaultMaxDepth)
	return b
}

// delegationAdmission serializes the delegations of each namespace, so that
// each is counted against the bounds before it is created, and remembers
// the ones created that the manager's cache may not show yet.
type delegationAdmission struct {
	mu         sync.Mutex
	namespaces map[string]*namespaceDelegations
}

// namespaceDelegations is one namespace's admission: mu is held from the
// count to the create.
type namespaceDelegations struct {
	mu sync.Mutex
	// created holds the delegations created within delegationCacheGrace,
	// by name, with their producer and creation time.
	created map[string]createdDelegation
}

type createdDelegation struct {
	producer string
	at       time.Time
}

func (a *delegationAdmission) namespace(ns string) *namespaceDelegations {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.namespaces == nil {
		a.namespaces = map[string]*namespaceDelegations{}
	}
	nd := a.namespaces[ns]
	if nd == nil {
		nd = &namespaceDelegations{created: map[string]createdDelegation{}}
		a.namespaces[ns] = nd
	}
	return nd
}

// delegationCounts are the delegations a session and its namespace hold.
type delegationCounts struct {
	sessionPending, session, namespacePending, namespace int
}

// countDelegations counts the namespace's delegations from the manager's
// cache (tasks without their payloads), adding those created too recently
// for the cache to show. nd.mu is held.
func (s *Server) countDelegations(ctx context.Context, nd *namespaceDelegations, key types.NamespacedName) (delegationCounts, error) {
	list := &agentlanev1alpha1.ExternalTaskList{}
	if err := s.Client.List(ctx, list, client.InNamespace(key.Namespace),
		client.MatchingLabels{agentlanev1alpha1.DelegatedLabel: "true"}, client.UnsafeDisableDeepCopy); err != nil {
		return delegationCounts{}, err
	}
	var c delegationCounts
	add := func(producer string, pending bool) {
		c.namespace++
		if pending {
			c.namespacePending++
		}
		if producer == key.Name {
			c.session++
			if pending {
				c.sessionPending++
			}
		}
	}
	seen := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		t := &list.Items[i]
		if !delegation.IsDelegated(t) || !t.DeletionTimestamp.IsZero() {
			continue
		}
		seen[t.Name] = true
		add(producerName(t), !t.Status.Phase.IsTerminal())
	}
	now := s.Clock.Now()
	for name, d := range nd.created {
		if seen[name] || now.Sub(d.at) > delegationCacheGrace {
			delete(nd.created, name)
			continue
		}
		add(d.producer, true)
	}
	return c, nil
}

// admitDelegation refuses a delegation of the session past a bound; the
// session's LaneQueue may lower the per-session ones (qb).
func (s *Server) admitDelegation(ctx context.Context, nd *namespaceDelegations, key types.NamespacedName, qb queueBounds) error {
	c, err := s.countDelegations(ctx, nd, key)
	if err != nil {
		return err
	}
	b := s.Delegations.withDefaults()
	pending, kept := qb.pendingDelegations(b.PendingPerSession), qb.delegations(b.PerSession)
	switch {
	case int64(c.sessionPending) >= pending.limit:
		return delegationsFull("session %q has %d delegations that have not finished, the most one session may have (%s)",
			key.Name, c.sessionPending, pending.source)
	case int64(c.session) >= kept.limit:
		return delegationsFull("session %q has %d delegations kept, the most one session may have (%s); finished ones are removed per the queue's taskRetention",
			key.Name, c.session, kept.source)
	case c.namespacePending >= b.PendingPerNamespace:
		return delegationsFull("namespace %q has %d delegations that have not finished, the most one namespace may have (--session-api-max-delegations-pending-per-namespace)",
			key.Namespace, c.namespacePending)
	case c.namespace >= b.PerNamespace:
		return delegationsFull("namespace %q has %d delegations kept, the most one namespace may have (--session-api-max-delegations-per-namespace); finished ones are removed per the queue's taskRetention",
			key.Namespace, c.namespace)
	}
	return nil
}

func delegationsFull(format string, args ...any) error {
	e := apiErrorf(http.StatusTooManyRequests, sessionapi.CodeQueueFull, format+"; retry once delegations finish", args...)
	e.RetryAfter = delegationsFullRetry
	return e
}

// checkFirstTurn refuses a delegation's text that no worker session can
// take as its first turn: a /queue directive is applied to an inbox, never
// run, and would hold a worker slot until the delegation's deadline.
func checkFirstTurn(text string) error {
	if strings.TrimSpace(text) == "" {
		return apiError(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "text is required: it is the worker's first turn")
	}
	if _, ok, err := lanequeue.ParseQueueDirective(text); ok {
		msg := "a delegation's text is the worker's first turn; a /queue directive cannot be one: delegate the work itself"
		if err != nil {
			msg += " (" + err.Error() + ")"
		}
		return apiError(http.StatusBadRequest, sessionapi.CodeInvalidDirective, msg)
	}
	return nil
}

// delegate handles POST /delegations: it records the work as a delegated
// ExternalTask, which the delegation controller starts when the lane has a
// free worker slot, and answers at once.
func (s *Server) delegate(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	var req sessionapi.DelegationRequest
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if err := checkFirstTurn(req.Text); err != nil {
		return err
	}
	if t := req.Timeout; t != nil && (t.Duration < agentlanev1alpha1.MinTimeout || t.Duration > agentlanev1alpha1.MaxTimeout) {
		return apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "timeout must be a duration between %s and %s, such as 10m",
			agentlanev1alpha1.MinTimeout, agentlanev1alpha1.MaxTimeout)
	}
	payload, err := json.Marshal(map[string]string{"text": req.Text})
	if err != nil {
		return err
	}
	task, err := s.createDelegation(r.Context(), sc, req.ID, req.Lane, payload, req.Callback == nil || *req.Callback, req.Timeout)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, delegationOf(task))
	return nil
}

// delegateCommand answers a command submitted to a Delegate lane through
// POST /commands: it is delegated as POST /delegations does, with the
// command's payload as the worker's first turn, and the reply is the queued
// command (202); GET /delegations/{id} follows it.
func (s *Server) delegateCommand(w http.ResponseWriter, r *http.Request, sc *sessionCall, id, lane string, payload json.RawMessage) error {
	text := firstTurnText(payload)
	if err := checkFirstTurn(text); err != nil {
		return err
	}
	raw, err := json.Marshal(map[string]string{"text": text})
	if err != nil {
		return err
	}
	task, err := s.createDelegation(r.Context(), sc, id, lane, raw, true, nil)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, sessionapi.Command{ID: task.Name, Session: sc.key.Name, Type: DelegateCommandType,
		Lane: lane, Mode: sessionapi.ModeExternal, State: sessionapi.StateQueued, Task: task.Name})
	return nil
}

// firstTurnText is the text of a delegated command's payload: a JSON string
// as it is, an object's "text" (or "prompt") field, or else the JSON itself.
func firstTurnText(payload json.RawMessage) string {
	var str string
	if json.Unmarshal(payload, &str) == nil {
		return str
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(payload, &obj) == nil {
		for _, k := range []string{"text", "prompt"} {
			if json.Unmarshal(obj[k], &str) == nil && str != "" {
				return str
			}
		}
	}
	return string(payload)
}

// delegateLane returns the Delegate target of lane in the session's queue,
// or nil when the lane does not delegate.
func (s *Server) delegateLane(ctx context.Context, sc *sessionCall, lane string) (*agentlanev1alpha1.ExternalTarget, error) {
	t, err := s.laneTarget(ctx, sc, lane)
	if err != nil || t == nil || t.Type != agentlanev1alpha1.ExternalTargetDelegate {
		return nil, err
	}
	return t, nil
}

// laneTarget returns the externalTarget of lane in the session's queue (nil
// when the lane sets none: the worker pool).
func (s *Server) laneTarget(ctx context.Context, sc *sessionCall, lane string) (*agentlanev1alpha1.ExternalTarget, error) {
	lq, err := s.laneQueue(ctx, sc)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, apiErrorf(http.StatusServiceUnavailable, sessionapi.CodeSessionNotReady, "LaneQueue %q does not exist", sc.queueKey.Name)
		}
		return nil, err
	}
	for i := range lq.Spec.Lanes {
		if l := &lq.Spec.Lanes[i]; string(l.Name) == lane {
			return l.ExternalTarget, nil
		}
	}
	return nil, apiErrorf(http.StatusBadRequest, sessionapi.CodeUnknownLane, "LaneQueue %q has no lane %q", sc.queueKey.Name, lane)
}

// createDelegation checks that lane delegates and that the session may
// delegate (its depth, its budget, the bounds of its session and
// namespace), then creates the delegated task, owned by the session and
// carrying its identity. timeout, when set, bounds each of its attempts
// (spec.timeout), within the lane's timeout (else its queue's
// defaultTimeout) when it has one.
func (s *Server) createDelegation(ctx context.Context, sc *sessionCall, id, lane string, payload []byte, callback bool,
	timeout *metav1.Duration) (*agentlanev1alpha1.ExternalTask, error) {
	if len(payload) > maxDelegationText+64 {
		return nil, apiErrorf(http.StatusRequestEntityTooLarge, sessionapi.CodeTooLarge, "the worker's first turn is over %d bytes", maxDelegationText)
	}
	target, err := s.delegateLane(ctx, sc, lane)
	if err != nil {
		return nil, err
	}
	if target == nil {
		return nil, apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "lane %q of LaneQueue %q does not delegate (its externalTarget is not Delegate)", lane, sc.queueKey.Name)
	}
	d, err := delegation.Depth(sc.session)
	if err != nil {
		return nil, apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "session %q cannot delegate: %v", sc.key.Name, err)
	}
	if maxDepth := s.Delegations.withDefaults().MaxDepth; d >= maxDepth {
		return nil, apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest,
			"session %q is a worker %d delegations deep; at most %d are allowed", sc.key.Name, d, maxDepth)
	}
	if s.Budgets != nil {
		if b := s.Budgets.State(sc.session); b.Denied() {
			return nil, apiErrorf(http.StatusConflict, sessionapi.CodeBudgetExhausted,
				"session %q cannot delegate: its budget is exhausted (%s); a delegation's worker is paid from it", sc.key.Name, b.Message)
		}
	}
	if id == "" {
		id = s.ids.NewID()
	} else if errs := validation.IsDNS1123Subdomain(id); len(errs) > 0 || len(id) > 63 {
		return nil, apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "id %q cannot name a delegated task: it must be a DNS label of at most 63 characters", id)
	}
	gvk := agentlanev1alpha1.GroupVersion.WithKind("AgentSession")
	task := &agentlanev1alpha1.ExternalTask{
		ObjectMeta: metav1.ObjectMeta{
			Name:      id,
			Namespace: sc.key.Namespace,
			Labels: map[string]string{
				agentlanev1alpha1.DelegatedLabel: "true",
				agentlanev1alpha1.QueueLabel:     sc.queueKey.Name,
				agentlanev1alpha1.LaneLabel:      lane,
				agentlanev1alpha1.SessionLabel:   sc.key.Name,
			},
			Annotations:     map[string]string{agentlanev1alpha1.DelegationCallbackAnnotation: strconv.FormatBool(callback)},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sc.session, gvk)},
		},
		Spec: agentlanev1alpha1.ExternalTaskSpec{
			SessionRef:  &agentlanev1alpha1.AgentSessionReference{Name: sc.key.Name},
			QueueRef:    &agentlanev1alpha1.LaneQueueReference{Name: sc.queueKey.Name},
			Lane:        agentlanev1alpha1.LaneName(lane),
			CommandType: DelegateCommandType,
			Payload:     &runtime.RawExtension{Raw: payload},
			Identity:    sc.session.Spec.Identity,
		},
	}
	if timeout != nil {
		task.Spec.Timeout = s.delegationTimeout(ctx, sc, lane, timeout.Duration)
	}
	nd := s.delegations.namespace(sc.key.Namespace)
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if err := s.admitDelegation(ctx, nd, sc.key, s.sessionBounds(ctx, sc)); err != nil {
		return nil, err
	}
	if err := s.Client.Create(ctx, task); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, apiErrorf(http.StatusConflict, sessionapi.CodeDuplicateCommand, "a task named %q exists", id)
		}
		return nil, err
	}
	nd.created[task.Name] = createdDelegation{producer: sc.key.Name, at: s.Clock.Now()}
	return task, nil
}

// delegationTimeout is a delegation's own timeout d bounded by its lane's
// timeout, else by its queue's defaultTimeout, when either is set.
func (s *Server) delegationTimeout(ctx context.Context, sc *sessionCall, lane string, d time.Duration) *metav1.Duration {
	lq, err := s.laneQueue(ctx, sc)
	if err != nil {
		// delegateLane read it a moment ago; the controller bounds it too.
		return &metav1.Duration{Duration: d}
	}
	bound := time.Duration(0)
	if t := lq.Spec.DefaultTimeout; t != nil {
		bound = t.Duration
	}
	for i := range lq.Spec.Lanes {
		if l := &lq.Spec.Lanes[i]; string(l.Name) == lane && l.Timeout != nil && l.Timeout.Duration > 0 {
			bound = l.Timeout.Duration
		}
	}
	if bound > 0 && d > bound {
		d = bound
	}
	return &metav1.Duration{Duration: d}
}

// getDelegation handles GET /delegations/{id}, from the manager's cache; a
// delegation this server created a moment ago, which the cache may not
// show yet, is read from the API server.
func (s *Server) getDelegation(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	id := r.PathValue("id")
	task := &agentlanev1alpha1.ExternalTask{}
	key := types.NamespacedName{Namespace: sc.key.Namespace, Name: id}
	err := s.Client.Get(r.Context(), key, task)
	if apierrors.IsNotFound(err) && s.createdRecently(key) {
		err = s.Reader.Get(r.Context(), key, task)
	}
	if apierrors.IsNotFound(err) || (err == nil && !delegatedBy(task, sc.key.Name)) {
		return apiErrorf(http.StatusNotFound, sessionapi.CodeCommandNotFound, "session %q has no delegated task %q", sc.key.Name, id)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, delegationOf(task))
	return nil
}

// createdRecently reports whether this server created the delegation key
// within delegationCacheGrace.
func (s *Server) createdRecently(key types.NamespacedName) bool {
	nd := s.delegations.namespace(key.Namespace)
	nd.mu.Lock()
	defer nd.mu.Unlock()
	d, ok := nd.created[key.Name]
	return ok && s.Clock.Now().Sub(d.at) <= delegationCacheGrace
}

// listDelegations handles GET /delegations?limit=&continue=: one page of
// the session's delegations, oldest first, read from the manager's cache
// (which keeps tasks without their payloads). limit is at most
// maxDelegationPage (its default); continue is the previous page's
// "continue".
func (s *Server) listDelegations(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	limit := maxDelegationPage
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxDelegationPage {
			return apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "limit %q is not a whole number from 1 to %d", v, maxDelegationPage)
		}
		limit = n
	}
	after, err := parseDelegationCursor(r.URL.Query().Get("continue"))
	if err != nil {
		return err
	}
	list := &agentlanev1alpha1.ExternalTaskList{}
	if err := s.Client.List(r.Context(), list, client.InNamespace(sc.key.Namespace), client.MatchingLabels{
		agentlanev1alpha1.DelegatedLabel: "true", agentlanev1alpha1.SessionLabel: sc.key.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	page := make([]*agentlanev1alpha1.ExternalTask, 0, len(list.Items))
	for i := range list.Items {
		t := &list.Items[i]
		if delegatedBy(t, sc.key.Name) && (after == nil || after.before(t)) {
			page = append(page, t)
		}
	}
	slices.SortFunc(page, func(a, b *agentlanev1alpha1.ExternalTask) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	out := sessionapi.DelegationList{Items: make([]sessionapi.Delegation, 0, min(len(page), limit))}
	for _, t := range page[:min(len(page), limit)] {
		out.Items = append(out.Items, delegationOf(t))
	}
	if len(page) > limit {
		last := page[limit-1]
		out.Continue = fmt.Sprintf("%d.%s", last.CreationTimestamp.Unix(), last.Name)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// delegationCursor is where a page of delegations ends: the creation time
// (whole seconds, as the API server keeps it) and name of its last item.
type delegationCursor struct {
	created int64
	name    string
}

func parseDelegationCursor(v string) (*delegationCursor, error) {
	if v == "" {
		return nil, nil
	}
	sec, name, ok := strings.Cut(v, ".")
	n, err := strconv.ParseInt(sec, 10, 64)
	if !ok || err != nil || name == "" {
		return nil, apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "continue %q is not a value a previous page returned", v)
	}
	return &delegationCursor{created: n, name: name}, nil
}

// before reports whether t comes after the cursor in the list's order.
func (c *delegationCursor) before(t *agentlanev1alpha1.ExternalTask) bool {
	at := t.CreationTimestamp.Unix()
	return at > c.created || (at == c.created && t.Name > c.name)
}

// delegatedBy reports whether task is a delegated task of session.
func delegatedBy(task *agentlanev1alpha1.ExternalTask, session string) bool {
	return delegation.IsDelegated(task) && producerName(task) == session
}

// producerName is the session that delegated the task.
func producerName(task *agentlanev1alpha1.ExternalTask) string {
	if task.Spec.SessionRef == nil {
		return ""
	}
	return task.Spec.SessionRef.Name
}

// delegationOf shows a delegated task.
func delegationOf(task *agentlanev1alpha1.ExternalTask) sessionapi.Delegation {
	st := &task.Status
	d := sessionapi.Delegation{
		ID:            task.Name,
		Lane:          string(task.Spec.Lane),
		Phase:         string(cmp.Or(st.Phase, agentlanev1alpha1.ExternalTaskQueued)),
		WorkerSession: st.Worker,
		Callback:      task.Annotations[agentlanev1alpha1.DelegationCallbackAnnotation] != "false",
		Delivered:     metaConditionTrue(st.Conditions, agentlanev1alpha1.ExternalTaskDeliveredCondition),
		CreatedAt:     task.CreationTimestamp.Time,
	}
	if task.Spec.SessionRef != nil {
		d.Producer = task.Spec.SessionRef.Name
	}
	d.Timeout, d.Attempt = task.Spec.Timeout, st.Attempt
	if st.StartedAt != nil {
		d.StartedAt = st.StartedAt.Time
	}
	if st.FinishedAt != nil {
		d.FinishedAt = st.FinishedAt.Time
	}
	if res := st.Result; res != nil {
		d.Answer, d.Error = delegationAnswer(res), res.Error
	}
	return d
}

// delegationAnswer returns the worker's answer kept in a delegated task's
// result ({"answer": "..."}).
func delegationAnswer(res *agentlanev1alpha1.TaskResult) string {
	if res == nil || res.Result == nil {
		return ""
	}
	var v struct {
		Answer string `json:"answer"`
	}
	if err := json.Unmarshal(res.Result.Raw, &v); err != nil {
		return string(res.Result.Raw)
	}
	return v.Answer
}

func metaConditionTrue(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
