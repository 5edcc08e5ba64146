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

// Package delegation holds the rules that the Session API and the
// delegation controller share about delegated work: which task is a
// delegation, how deep a worker session is, and how a worker's budget is
// carved from its producer's.
//
// The rules read only what users cannot change after the manager wrote it,
// or refuse what they cannot read: a task is delegated by its immutable
// spec.commandType (the label only selects), and a delegation depth that is
// not a whole number of at least 1 on a worker session makes it unable to
// delegate.
package delegation

import (
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// CommandType is the command type of the ExternalTasks that carry delegated
// work. spec.commandType is immutable, so a task that was not created as a
// delegation can never become one.
const CommandType = "delegate"

// ProducerLabel on a worker session is the UID of the session that
// delegated to it (its producer), so that a producer's workers are found
// without reading every session.
const ProducerLabel = "agentlane.io/delegation-producer-uid"

// Defaults of the bounds on delegation.
const (
	// DefaultMaxDepth bounds chains of delegation: a session that many
	// delegations deep cannot delegate.
	DefaultMaxDepth = agentlanev1alpha1.MaxDelegationDepth
	// DefaultMaxChildren bounds the worker sessions one producer has
	// running at once, across all lanes.
	DefaultMaxChildren = 8
	// DefaultTimeout is how long a worker session may take when neither the
	// task, its lane nor its queue sets a timeout.
	DefaultTimeout = time.Hour
)

// Bounds are the limits the delegation controller applies to every
// delegation. Zero fields take the defaults.
type Bounds struct {
	// MaxDepth: a session MaxDepth delegations deep cannot delegate.
	MaxDepth int
	// MaxChildren: a producer with MaxChildren running worker sessions
	// waits for one of them to end before it gets another.
	MaxChildren int
	// Timeout is the deadline of a delegation whose task, lane and queue
	// set none.
	Timeout time.Duration
}

// WithDefaults returns b with its zero fields set to the defaults.
func (b Bounds) WithDefaults() Bounds {
	if b.MaxDepth <= 0 {
		b.MaxDepth = DefaultMaxDepth
	}
	if b.MaxChildren <= 0 {
		b.MaxChildren = DefaultMaxChildren
	}
	if b.Timeout <= 0 {
		b.Timeout = DefaultTimeout
	}
	return b
}

// IsDelegated reports whether the task is delegated work, carried by the
// delegation controller rather than by the ExternalTask controller: its
// immutable spec.commandType is CommandType, and it is labelled
// agentlane.io/delegated=true. Labelling a task of any other command type
// changes nothing.
func IsDelegated(t *agentlanev1alpha1.ExternalTask) bool {
	return string(t.Spec.CommandType) == CommandType && t.Labels[agentlanev1alpha1.DelegatedLabel] == "true"
}

// Depth is how many delegations led to the session: 0 for a session nobody
// delegated to. A session that carries a depth annotation, a worker label
// or an AgentSession as its controller is a worker, and its depth must be a
// whole number of at least 1; anything else (a negative or missing depth on
// a worker) is an error, and such a session cannot delegate.
func Depth(s *agentlanev1alpha1.AgentSession) (int, error) {
	raw, annotated := s.Annotations[agentlanev1alpha1.DelegationDepthAnnotation]
	worker := s.Labels[agentlanev1alpha1.DelegationTaskLabel] != ""
	if ref := metav1.GetControllerOf(s); ref != nil && ref.Kind == "AgentSession" &&
		ref.APIVersion == agentlanev1alpha1.GroupVersion.String() {
		worker = true
	}
	if !annotated && !worker {
		return 0, nil
	}
	d, err := strconv.Atoi(raw)
	if err != nil || d < 1 {
		return 0, fmt.Errorf("session %s has an invalid delegation depth %q (annotation %s): a worker session's depth is a whole number of at least 1",
			s.Name, raw, agentlanev1alpha1.DelegationDepthAnnotation)
	}
	return d, nil
}

// ErrBudgetExhausted: the producer has nothing left to give a worker.
type ErrBudgetExhausted struct{ Message string }

func (e *ErrBudgetExhausted) Error() string { return e.Message }

// CarveBudget returns the budget of a new worker session: the lane's
// template, with each hard limit the producer has (tokens, cost) lowered to
// what the producer has left of it, given what it consumed. The worker's
// soft limits stay below its hard ones. The caller charges the worker's
// hard limits to the producer when the worker is created (the producer pays
// for its worker's whole budget up front), so that what a tree of
// delegations can spend never exceeds its root's budget. A producer with
// nothing left in a limit gets ErrBudgetExhausted. A producer without hard
// limits gives the template as it is; fan-out and depth bound it then.
func CarveBudget(template *agentlanev1alpha1.Budget, producer *agentlanev1alpha1.AgentSession, used agentlanev1alpha1.BudgetUsage) (*agentlanev1alpha1.Budget, error) {
	out := template.DeepCopy()
	pb := producer.Spec.Budget
	if pb == nil {
		return out, nil
	}
	if t := pb.Tokens; t != nil && t.Hard != nil {
		left := *t.Hard - used.TokensConsumed
		if left <= 0 {
			return nil, &ErrBudgetExhausted{Message: fmt.Sprintf(
				"producer session %s has no tokens left to give a worker: %d of its hard limit %d are consumed (its workers' budgets included)",
				producer.Name, used.TokensConsumed, *t.Hard)}
		}
		if out == nil {
			out = &agentlanev1alpha1.Budget{}
		}
		if out.Tokens == nil {
			out.Tokens = &agentlanev1alpha1.TokenBudget{}
		}
		if out.Tokens.Hard == nil || *out.Tokens.Hard > left {
			out.Tokens.Hard = &left
		}
		if s := out.Tokens.Soft; s != nil && *s >= *out.Tokens.Hard {
			out.Tokens.Soft = nil
		}
	}
	if c := pb.Cost; c != nil && c.Hard != nil {
		left := c.Hard.DeepCopy()
		if used.CostConsumed != nil {
			left.Sub(*used.CostConsumed)
		}
		if left.Sign() <= 0 {
			return nil, &ErrBudgetExhausted{Message: fmt.Sprintf(
				"producer session %s has no cost left to give a worker: its hard limit %s is consumed (its workers' budgets included)",
				producer.Name, c.Hard.String())}
		}
		if out == nil {
			out = &agentlanev1alpha1.Budget{}
		}
		if out.Cost == nil || out.Cost.Hard == nil || out.Cost.Hard.Cmp(left) > 0 {
			out.Cost = &agentlanev1alpha1.CostBudget{Currency: c.Currency, Hard: &left}
		}
	}
	return out, nil
}

// Hold is what a producer pays for a worker whose budget is b (as
// CarveBudget made it): the worker's hard limit of each resource the
// producer itself limits.
func Hold(b *agentlanev1alpha1.Budget, producer *agentlanev1alpha1.AgentSession) (tokens int64, cost resource.Quantity) {
	cost = *resource.NewQuantity(0, resource.DecimalSI)
	pb := producer.Spec.Budget
	if pb == nil || b == nil {
		return 0, cost
	}
	if pb.Tokens != nil && pb.Tokens.Hard != nil && b.Tokens != nil && b.Tokens.Hard != nil {
		tokens = *b.Tokens.Hard
	}
	if pb.Cost != nil && pb.Cost.Hard != nil && b.Cost != nil && b.Cost.Hard != nil {
		cost = b.Cost.Hard.DeepCopy()
	}
	return tokens, cost
}
