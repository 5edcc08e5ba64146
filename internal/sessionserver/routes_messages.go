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
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// The message routes: POST /messages posts an inbound message to the
// session's inbox, POST /runs/{run}/finish ends the runtime's run.

// postMessage answers POST /messages.
func (s *Server) postMessage(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	var m sessionapi.Message
	qb := s.sessionBounds(r.Context(), sc)
	if err := s.limitMessageBody(w, r, qb); err != nil {
		return err
	}
	if err := readJSON(r, &m); err != nil {
		return err
	}
	if err := s.validateMessage(&m, qb); err != nil {
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
		Dropped: res.Dropped, Aborted: res.Aborted, Duplicate: res.Duplicate}
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
	opts := messageOptions(sc.session.Spec.QueueMode, s.sessionDefaults(ctx, sc))
	if err := sc.inbox.ConfigureSession(sc.key.Name, opts, s.hub.log(sc.key).hasRuntime()); err != nil {
		// The CRD validates the options; should it ever let a bad value
		// through, the defaults serve.
		s.log.Error(err, "AgentSession queueMode refused; using the defaults", "session", sc.key)
		_ = sc.inbox.ConfigureSession(sc.key.Name, lanequeue.DefaultMessageOptions(), s.hub.log(sc.key).hasRuntime())
	}
}

// finishRun answers POST /runs/{run}/finish.
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

// queueOptionsOf shows an inbox's message options as the API's.
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
// the queue's sessionDefaults (d, may be nil) for the mode and byChannel it
// leaves out, and the defaults for the rest. A session's byChannel replaces
// the queue's as a whole.
func messageOptions(q *agentlanev1alpha1.QueueModeOptions, d *agentlanev1alpha1.SessionDefaults) lanequeue.MessageOptions {
	o := lanequeue.DefaultMessageOptions()
	if d != nil {
		if d.QueueMode != "" {
			o.Mode = lanequeue.MessageMode(d.QueueMode)
		}
		if len(d.ByChannel) > 0 && (q == nil || len(q.ByChannel) == 0) {
			o.ByChannel = make(map[string]lanequeue.MessageMode, len(d.ByChannel))
			for ch, m := range d.ByChannel {
				o.ByChannel[ch] = lanequeue.MessageMode(m)
			}
		}
	}
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

// sessionDefaults are the session's LaneQueue's spec.sessionDefaults, nil
// when it sets none or cannot be read (the built-in defaults serve then).
func (s *Server) sessionDefaults(ctx context.Context, sc *sessionCall) *agentlanev1alpha1.SessionDefaults {
	lq, err := s.laneQueue(ctx, sc)
	if err != nil {
		s.log.V(1).Info("LaneQueue unreadable, the built-in session defaults serve", "queue", sc.queueKey, "error", err.Error())
		return nil
	}
	return lq.Spec.SessionDefaults
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
