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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// DelegateCommandType is the command type of the ExternalTasks that carry
// delegated work.
const DelegateCommandType = "delegate"

// maxDelegationText bounds a delegation's text (the worker's first turn).
const maxDelegationText = 64 << 10

// delegate handles POST /delegations: it records the work as a delegated
// ExternalTask, which the delegation controller starts when the lane has a
// free worker slot, and answers at once.
func (s *Server) delegate(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	var req sessionapi.DelegationRequest
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Text) == "" {
		return apiError(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "text is required: it is the worker's first turn")
	}
	payload, err := json.Marshal(map[string]string{"text": req.Text})
	if err != nil {
		return err
	}
	task, err := s.createDelegation(r.Context(), sc, req.ID, req.Lane, payload, req.Callback == nil || *req.Callback)
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
	raw, err := json.Marshal(map[string]string{"text": firstTurnText(payload)})
	if err != nil {
		return err
	}
	task, err := s.createDelegation(r.Context(), sc, id, lane, raw, true)
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
	lq := &agentlanev1alpha1.LaneQueue{}
	if err := s.Client.Get(ctx, sc.queueKey, lq); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, apiErrorf(http.StatusServiceUnavailable, sessionapi.CodeSessionNotReady, "LaneQueue %q does not exist", sc.queueKey.Name)
		}
		return nil, err
	}
	for i := range lq.Spec.Lanes {
		l := &lq.Spec.Lanes[i]
		if string(l.Name) == lane {
			if t := l.ExternalTarget; t != nil && t.Type == agentlanev1alpha1.ExternalTargetDelegate {
				return t, nil
			}
			return nil, nil
		}
	}
	return nil, apiErrorf(http.StatusBadRequest, sessionapi.CodeUnknownLane, "LaneQueue %q has no lane %q", sc.queueKey.Name, lane)
}

// createDelegation checks that lane delegates and that the session may
// delegate, then creates the delegated task, owned by the session and
// carrying its identity.
func (s *Server) createDelegation(ctx context.Context, sc *sessionCall, id, lane string, payload []byte, callback bool) (*agentlanev1alpha1.ExternalTask, error) {
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
	if d := delegationDepth(sc.session); d >= agentlanev1alpha1.MaxDelegationDepth {
		return nil, apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest,
			"session %q is a worker %d delegations deep; at most %d are allowed", sc.key.Name, d, agentlanev1alpha1.MaxDelegationDepth)
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
	if err := s.Client.Create(ctx, task); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, apiErrorf(http.StatusConflict, sessionapi.CodeDuplicateCommand, "a task named %q exists", id)
		}
		return nil, err
	}
	return task, nil
}

// delegationDepth is how many delegations led to the session: 0 for a
// session nobody delegated to.
func delegationDepth(sess *agentlanev1alpha1.AgentSession) int {
	d, err := strconv.Atoi(sess.Annotations[agentlanev1alpha1.DelegationDepthAnnotation])
	if err != nil || sess.Labels[agentlanev1alpha1.DelegationTaskLabel] == "" {
		return 0
	}
	return d
}

// getDelegation handles GET /delegations/{id}.
func (s *Server) getDelegation(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	id := r.PathValue("id")
	task := &agentlanev1alpha1.ExternalTask{}
	err := s.Reader.Get(r.Context(), types.NamespacedName{Namespace: sc.key.Namespace, Name: id}, task)
	if apierrors.IsNotFound(err) || (err == nil && !delegatedBy(task, sc.key.Name)) {
		return apiErrorf(http.StatusNotFound, sessionapi.CodeCommandNotFound, "session %q has no delegated task %q", sc.key.Name, id)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, delegationOf(task))
	return nil
}

// listDelegations handles GET /delegations.
func (s *Server) listDelegations(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	list := &agentlanev1alpha1.ExternalTaskList{}
	if err := s.Reader.List(r.Context(), list, client.InNamespace(sc.key.Namespace), client.MatchingLabels{
		agentlanev1alpha1.DelegatedLabel: "true", agentlanev1alpha1.SessionLabel: sc.key.Name}); err != nil {
		return err
	}
	out := sessionapi.DelegationList{Items: []sessionapi.Delegation{}}
	for i := range list.Items {
		if delegatedBy(&list.Items[i], sc.key.Name) {
			out.Items = append(out.Items, delegationOf(&list.Items[i]))
		}
	}
	slices.SortFunc(out.Items, func(a, b sessionapi.Delegation) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	writeJSON(w, http.StatusOK, out)
	return nil
}

// delegatedBy reports whether task is a delegated task of session.
func delegatedBy(task *agentlanev1alpha1.ExternalTask, session string) bool {
	return task.Labels[agentlanev1alpha1.DelegatedLabel] == "true" &&
		task.Spec.SessionRef != nil && task.Spec.SessionRef.Name == session
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
		return fmt.Sprintf("%s", res.Result.Raw)
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
