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
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// The manager keeps the key that signs the inbox records it stores in a
// Secret of its own namespace (config/default replaces "system"), created
// when missing (sessionstore.SecretKey).
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,resourceNames=agentlane-session-store-key,verbs=get

// Defaults of StoreBounds.
const (
	// DefaultCheckpointRate and DefaultCheckpointBurst bound one session's
	// checkpoint saves: a runtime saves after a tool round, which takes
	// seconds.
	DefaultCheckpointRate  = 1
	DefaultCheckpointBurst = 10
	// DefaultNamespaceCheckpointRate and DefaultNamespaceCheckpointBurst
	// bound the saves of every session of a namespace together.
	DefaultNamespaceCheckpointRate  = 5
	DefaultNamespaceCheckpointBurst = 50
	// DefaultInboxWriteInterval is the least time between two writes of a
	// session's inbox record: none by default, so that a post is kept
	// before it is answered while the namespace's write budget allows.
	DefaultInboxWriteInterval = 0
	// DefaultMaxMessageBytes bounds one message's text.
	DefaultMaxMessageBytes = 64 << 10
	// DefaultPendingNamespaceShare is the part of the server-wide pending
	// bound one namespace may hold.
	DefaultPendingNamespaceShare = 0.25
)

// StoreBounds bound what a tenant's messages and checkpoints make the
// manager hold and write. Zero fields take their Default.
type StoreBounds struct {
	// CheckpointRate and CheckpointBurst are the saves per second one
	// session may sustain and make at once; NamespaceCheckpointRate and
	// NamespaceCheckpointBurst the same for a namespace's sessions
	// together. Past them a save gets 429 RateLimited with Retry-After.
	// A negative rate disables the bound.
	CheckpointRate           float64
	CheckpointBurst          int
	NamespaceCheckpointRate  float64
	NamespaceCheckpointBurst int
	// InboxWriteInterval is the least time between two writes of one
	// session's inbox record; changes made meanwhile are written together
	// when it has passed. With 0 (the default) each change is written
	// before its post is answered, unless the namespace's write budget
	// (sessionstore.WriteBudget) is spent: then the changes wait for it
	// and are written together.
	InboxWriteInterval time.Duration
	// MaxMessageBytes bounds a posted message's text; larger ones get 413
	// TooLarge.
	MaxMessageBytes int
	// PendingNamespaceShare is the fraction of MaxPendingBytes that the
	// pending commands of one namespace's sessions may hold together, in
	// (0, 1]: past it the namespace's submissions get 429 QueueFull while
	// other namespaces still have the rest.
	PendingNamespaceShare float64
}

// storeLimits are the keyed limiters of StoreBounds.
type storeLimits struct {
	sessions, namespaces *keyedLimiter
}

// initStoreBounds fills the defaults of s.StoreBounds and builds what
// enforces them. init calls it.
func (s *Server) initStoreBounds() {
	b := &s.StoreBounds
	if b.CheckpointRate == 0 {
		b.CheckpointRate = DefaultCheckpointRate
	}
	if b.CheckpointBurst <= 0 {
		b.CheckpointBurst = DefaultCheckpointBurst
	}
	if b.NamespaceCheckpointRate == 0 {
		b.NamespaceCheckpointRate = DefaultNamespaceCheckpointRate
	}
	if b.NamespaceCheckpointBurst <= 0 {
		b.NamespaceCheckpointBurst = DefaultNamespaceCheckpointBurst
	}
	if b.InboxWriteInterval < 0 {
		b.InboxWriteInterval = DefaultInboxWriteInterval
	}
	if b.MaxMessageBytes <= 0 {
		b.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if b.PendingNamespaceShare <= 0 || b.PendingNamespaceShare > 1 {
		b.PendingNamespaceShare = DefaultPendingNamespaceShare
	}
	s.storeLimits = storeLimits{
		sessions:   newKeyedLimiter(b.CheckpointRate, b.CheckpointBurst, DefaultMaxCallers, s.Clock),
		namespaces: newKeyedLimiter(b.NamespaceCheckpointRate, b.NamespaceCheckpointBurst, DefaultMaxCallers, s.Clock),
	}
	s.pending.setShare(b.PendingNamespaceShare)
	s.inboxes.interval = b.InboxWriteInterval
	s.inboxes.clock = s.Clock
	s.inboxes.recorder = s.Recorder
	s.inboxes.client = s.Client
}

// allowCheckpoint takes a save from the session's and its namespace's
// buckets, or returns 429 RateLimited saying when to try again.
func (s *Server) allowCheckpoint(session types.NamespacedName) error {
	if ok, after := s.storeLimits.sessions.allow(session.String()); !ok {
		return rateLimited(after, "session %q saves checkpoints faster than %g per second (--session-api-checkpoint-rate)",
			session.Name, s.StoreBounds.CheckpointRate)
	}
	if ok, after := s.storeLimits.namespaces.allow(session.Namespace); !ok {
		return rateLimited(after, "the sessions of namespace %q save checkpoints faster than %g per second together (--session-api-namespace-checkpoint-rate)",
			session.Namespace, s.StoreBounds.NamespaceCheckpointRate)
	}
	return nil
}

func rateLimited(after time.Duration, format string, args ...any) error {
	e := apiErrorf(http.StatusTooManyRequests, sessionapi.CodeRateLimited, format+"; see Retry-After", args...)
	e.RetryAfter = max(after, time.Second)
	return e
}
