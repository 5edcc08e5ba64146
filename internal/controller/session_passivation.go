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

package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

const (
	// defaultPassivationDeadline is how long a session has to checkpoint
	// when spec.runtime.passivationDeadline is not set.
	defaultPassivationDeadline = 2 * time.Minute
	// idleWakeInterval is how often a session passivated for being idle
	// looks for new work.
	idleWakeInterval = time.Second
)

// activity remembers when each session last did something (a command or
// inbox event), for the idle reaper.
type activity struct {
	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
}

func (a *activity) touch(key types.NamespacedName, t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last == nil {
		a.last = make(map[types.NamespacedName]time.Time)
	}
	if t.After(a.last[key]) {
		a.last[key] = t
	}
}

// since returns when the session last did something, remembering now for a
// session never seen.
func (a *activity) since(key types.NamespacedName, now time.Time) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last == nil {
		a.last = make(map[types.NamespacedName]time.Time)
	}
	t, ok := a.last[key]
	if !ok {
		a.last[key] = now
		return now
	}
	return t
}

func (a *activity) forget(key types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.last, key)
}

// PassivationClock remembers at full precision when each session's
// passivation was requested and when it last saved a checkpoint through the
// Session API. Status keeps whole seconds, which cannot tell a checkpoint
// saved just before a request from one saved just after it in the same
// second. After a manager restart it knows nothing, and the status times
// serve.
type PassivationClock struct {
	mu        sync.Mutex
	requested map[types.NamespacedName]time.Time
	saved     map[types.NamespacedName]time.Time
}

func (c *PassivationClock) request(key types.NamespacedName, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.requested == nil {
		c.requested = make(map[types.NamespacedName]time.Time)
	}
	c.requested[key] = t
}

// CheckpointSaved tells the AgentSession controller that the session saved
// a checkpoint at t; the Session API calls it once the checkpoint is stored
// and before status.lastCheckpoint shows it, so that a passivation waiting
// for a checkpoint orders the two at full precision.
func (c *PassivationClock) CheckpointSaved(key types.NamespacedName, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.saved == nil {
		c.saved = make(map[types.NamespacedName]time.Time)
	}
	if t.After(c.saved[key]) {
		c.saved[key] = t
	}
}

// checkpointed tells whether the session saved a checkpoint at or after the
// passivation p was requested. cp is status.lastCheckpoint.
func (c *PassivationClock) checkpointed(key types.NamespacedName, p *agentlanev1alpha1.PassivationStatus, cp *agentlanev1alpha1.Checkpoint) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	requested := p.RequestedAt.Time
	// The request remembered is this one when status shows its second.
	if t, ok := c.requested[key]; ok && t.Truncate(time.Second).Equal(requested.Truncate(time.Second)) {
		requested = t
	}
	saved := c.saved[key]
	if cp != nil && cp.Time.After(saved) {
		saved = cp.Time.Time // written by another way than the Session API
	}
	return !saved.IsZero() && !saved.Before(requested)
}

func (c *PassivationClock) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.requested, key)
	delete(c.saved, key)
}

// passivationTrigger says why an active session must be passivated now, if
// it must.
func (r *AgentSessionReconciler) passivationTrigger(ctx context.Context, s *agentlanev1alpha1.AgentSession, lc *lifecycle, pod *corev1.Pod) (agentlanev1alpha1.PassivationReason, string) {
	if s.Spec.DesiredState == agentlanev1alpha1.DesiredStatePassivated {
		return agentlanev1alpha1.PassivationManual, "desiredState is Passivated"
	}
	if why, ok := migrationRequested(s); ok {
		return agentlanev1alpha1.PassivationMigration, why
	}
	if pod != nil && pod.Spec.NodeName != "" {
		node := &corev1.Node{}
		if err := r.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, node); err == nil && node.Spec.Unschedulable {
			return agentlanev1alpha1.PassivationNodeDrain, fmt.Sprintf("node %s is cordoned", node.Name)
		}
	}
	if rt := s.Spec.Runtime; rt != nil && rt.IdleTimeout != nil && !lc.busy() {
		if idle := lc.now.Sub(r.activity.since(lc.key, lc.now)); idle >= rt.IdleTimeout.Duration {
			return agentlanev1alpha1.PassivationIdleReaper, fmt.Sprintf("no run for %s", idle.Round(time.Second))
		}
	}
	return "", ""
}

// idleCheck returns when an idle-timed session should be looked at again.
func (r *AgentSessionReconciler) idleCheck(s *agentlanev1alpha1.AgentSession, lc *lifecycle) time.Duration {
	rt := s.Spec.Runtime
	if rt == nil || rt.IdleTimeout == nil {
		return 0
	}
	if lc.busy() {
		r.activity.touch(lc.key, lc.now)
		return rt.IdleTimeout.Duration
	}
	return max(r.activity.since(lc.key, lc.now).Add(rt.IdleTimeout.Duration).Sub(lc.now), 10*time.Millisecond)
}

// requestPassivation starts passivating the session: no new commands start,
// and the runtime is told on its event stream to checkpoint before the
// deadline.
func (r *AgentSessionReconciler) requestPassivation(ctx context.Context, s *agentlanev1alpha1.AgentSession, lc *lifecycle, reason agentlanev1alpha1.PassivationReason, pod *corev1.Pod) (time.Duration, error) {
	deadline := defaultPassivationDeadline
	if rt := s.Spec.Runtime; rt != nil && rt.PassivationDeadline != nil {
		deadline = rt.PassivationDeadline.Duration
	}
	now := metav1.NewTime(lc.now)
	at := metav1.NewTime(lc.now.Add(deadline))
	s.Status.Phase = agentlanev1alpha1.SessionPassivating
	s.Status.Passivation = &agentlanev1alpha1.PassivationStatus{Reason: reason, RequestedAt: now, Deadline: &at}
	// Paused before the runtime hears of it: a command the runtime then
	// sees queued stays queued until the session resumes.
	lc.queue.PauseSession(s.Name)
	r.Passivations.request(lc.key, lc.now)
	lc.notReadyBecause(agentlanev1alpha1.AgentSessionPassivatingReason,
		fmt.Sprintf("passivation requested (%s); waiting for a checkpoint until %s", reason, at.UTC().Format(time.RFC3339)))
	r.event(s, corev1.EventTypeNormal, sessionapi.EventPassivationRequested, "Passivate",
		"reason %s; checkpoint before %s%s", reason, at.UTC().Format(time.RFC3339), podNote(pod))
	req := &sessionapi.PassivationRequest{Reason: string(reason), Deadline: at.Time}
	if pod != nil {
		req.Pod = pod.Name
	}
	r.Schedulers.Publish(lc.key, sessionapi.Event{Type: sessionapi.EventPassivationRequested, Time: lc.now, Passivation: req})
	return r.continuePassivation(ctx, s, lc, pod)
}

// continuePassivation evicts the session's pod once its commands in flight
// have finished and it has checkpointed since the request, or once the
// deadline has passed.
func (r *AgentSessionReconciler) continuePassivation(ctx context.Context, s *agentlanev1alpha1.AgentSession, lc *lifecycle, pod *corev1.Pod) (time.Duration, error) {
	lc.queue.PauseSession(s.Name)
	p := s.Status.Passivation
	if p == nil || p.Deadline == nil {
		// Status from an older manager: start over.
		return r.requestPassivation(ctx, s, lc, agentlanev1alpha1.PassivationManual, pod)
	}
	checkpointed := r.Passivations.checkpointed(lc.key, p, s.Status.LastCheckpoint)
	safe := checkpointed && lc.stats.Active == 0
	left := p.Deadline.Sub(lc.now)
	if !safe && left > 0 {
		return min(left, time.Second), nil
	}
	if !safe {
		r.event(s, corev1.EventTypeWarning, agentlanev1alpha1.AgentSessionPassivationDeadlineExceededReason, "Passivate",
			"passivating at the deadline with %d commands running; the last checkpoint%s is older than the request", lc.stats.Active, checkpointNote(s))
	}
	if pod != nil && s.Spec.Runtime != nil {
		if err := r.evict(ctx, s, pod); err != nil {
			return 0, err
		}
		r.event(s, corev1.EventTypeNormal, agentlanev1alpha1.AgentSessionEvictedReason, "Passivate", "runtime pod %s evicted%s", pod.Name, podNote(pod))
	}
	s.Status.Phase = agentlanev1alpha1.SessionPassivated
	s.Status.PodName = ""
	msg := fmt.Sprintf("passivated (%s)%s", p.Reason, checkpointNote(s))
	if !safe {
		msg += "; the deadline passed before a newer checkpoint"
	}
	lc.notReadyBecause(agentlanev1alpha1.AgentSessionPassivatedReason, msg)
	r.event(s, corev1.EventTypeNormal, agentlanev1alpha1.AgentSessionPassivatedReason, "Passivate", "%s", msg)
	return r.reconcileLifecycleAgain(s, lc)
}

func checkpointNote(s *agentlanev1alpha1.AgentSession) string {
	cp := s.Status.LastCheckpoint
	if cp == nil {
		return " (no checkpoint yet)"
	}
	return fmt.Sprintf(" (checkpoint of run %s, turn %d, %s)", cp.RunID, cp.Turn, cp.Time.UTC().Format(time.RFC3339))
}
