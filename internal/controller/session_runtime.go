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
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
)

// lifecycle is what the session's life cycle needs from one reconcile: its
// scheduler and inbox and its counts there.
type lifecycle struct {
	key   types.NamespacedName
	queue *lanequeue.Queue
	inbox *lanequeue.Inbox
	stats lanequeue.SessionStats
	now   time.Time
	// notReady is the first reason the life cycle found for the session not
	// to be ready; nil when it found none.
	notReady *metav1.Condition
}

// notReadyBecause records why the session is not ready, unless an earlier
// step of the pass already did: the first cause is the one to show.
func (lc *lifecycle) notReadyBecause(reason, msg string) {
	if lc.notReady == nil {
		lc.notReady = notReady(reason, msg)
	}
}

// notReady is a Ready=False condition.
func notReady(reason, msg string) *metav1.Condition {
	return &metav1.Condition{Status: metav1.ConditionFalse, Reason: reason, Message: msg}
}

// busy tells whether the session has commands or messages in flight.
func (lc *lifecycle) busy() bool {
	_, running := lc.inbox.ActiveRun(lc.key.Name)
	return lc.stats.Pending+lc.stats.Active > 0 || running || lc.inbox.Queued(lc.key.Name) > 0
}

// reconcileLifecycle runs the session's pod and its passivation: it
// requests passivation when the pod's node is cordoned, when the session is
// set to Passivated or when it has been idle too long; it evicts the pod
// once the session has checkpointed (or its deadline passed); it resumes the
// session in a new pod when it should run again. It returns when to look
// again.
func (r *AgentSessionReconciler) reconcileLifecycle(ctx context.Context, s *agentlanev1alpha1.AgentSession, lc *lifecycle) (time.Duration, error) {
	pod, err := r.runtimePod(ctx, s)
	if err != nil {
		return 0, err
	}
	switch s.Status.Phase {
	case agentlanev1alpha1.SessionPassivating:
		return r.continuePassivation(ctx, s, lc, pod)
	case agentlanev1alpha1.SessionPassivated:
		// The pause is in memory: apply it again after a restart.
		lc.queue.PauseSession(s.Name)
		if !r.shouldResume(s, lc) {
			if s.Status.Passivation != nil && s.Status.Passivation.Reason == agentlanev1alpha1.PassivationIdleReaper {
				return idleWakeInterval, nil
			}
			return 0, nil
		}
		s.Status.Phase = agentlanev1alpha1.SessionResuming
		r.event(s, corev1.EventTypeNormal, agentlanev1alpha1.AgentSessionResumingReason, "Resume", "resuming the session from its last checkpoint%s", checkpointNote(s))
		fallthrough
	case agentlanev1alpha1.SessionResuming:
		if s.Spec.DesiredState == agentlanev1alpha1.DesiredStatePassivated {
			return r.requestPassivation(ctx, s, lc, agentlanev1alpha1.PassivationManual, pod)
		}
		if s.Spec.Runtime != nil {
			if pod, err = r.ensureRuntime(ctx, s, lc, pod); err != nil {
				return 0, err
			}
			r.showPod(s, pod)
			if pod == nil || pod.Status.Phase != corev1.PodRunning {
				lc.notReadyBecause(agentlanev1alpha1.AgentSessionResumingReason,
					"waiting for the new runtime pod to run")
				return 0, nil // the pod's watch event brings the session back
			}
		}
		lc.queue.ResumeSession(s.Name)
		r.activity.touch(lc.key, lc.now)
		s.Status.Phase = agentlanev1alpha1.SessionActive
		s.Status.Passivation = nil
		r.Passivations.forget(lc.key)
		r.event(s, corev1.EventTypeNormal, agentlanev1alpha1.AgentSessionResumedReason, "Resume", "the session runs again%s", podNote(pod))
		return 0, nil
	}

	// Active.
	if reason, why := r.passivationTrigger(ctx, s, lc, pod); reason != "" {
		logf.FromContext(ctx).Info("Passivating the session", "reason", reason, "why", why)
		if reason == agentlanev1alpha1.PassivationMigration {
			if err := r.takeMigrationRequest(ctx, s); err != nil {
				return 0, err
			}
		}
		return r.requestPassivation(ctx, s, lc, reason, pod)
	}
	if s.Spec.Runtime == nil {
		return r.idleCheck(s, lc), nil
	}
	if pod, err = r.ensureRuntime(ctx, s, lc, pod); err != nil {
		return 0, err
	}
	r.showPod(s, pod)
	if pod == nil || pod.Status.Phase != corev1.PodRunning {
		lc.notReadyBecause(agentlanev1alpha1.AgentSessionPodPendingReason,
			fmt.Sprintf("runtime pod %s is %s", podName(pod), podPhase(pod)))
	}
	return r.idleCheck(s, lc), nil
}

// reconcileLifecycleAgain decides at once whether a session that just
// passivated resumes elsewhere.
func (r *AgentSessionReconciler) reconcileLifecycleAgain(s *agentlanev1alpha1.AgentSession, lc *lifecycle) (time.Duration, error) {
	if r.shouldResume(s, lc) {
		return 10 * time.Millisecond, nil
	}
	if s.Status.Passivation != nil && s.Status.Passivation.Reason == agentlanev1alpha1.PassivationIdleReaper {
		return idleWakeInterval, nil
	}
	return 0, nil
}

// shouldResume tells whether a passivated session should run again: after
// a drain or migration at once, after a manual passivation once desiredState
// is Active again, after the idle reaper once work arrives.
func (r *AgentSessionReconciler) shouldResume(s *agentlanev1alpha1.AgentSession, lc *lifecycle) bool {
	if s.Spec.DesiredState == agentlanev1alpha1.DesiredStatePassivated {
		return false
	}
	if s.Status.Passivation == nil {
		return true
	}
	switch s.Status.Passivation.Reason {
	case agentlanev1alpha1.PassivationIdleReaper:
		return lc.busy()
	default:
		return true
	}
}

func (r *AgentSessionReconciler) event(s *agentlanev1alpha1.AgentSession, typ, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(s, nil, typ, reason, action, format, args...)
	}
}
