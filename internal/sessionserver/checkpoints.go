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
	"errors"
	"io"
	"math"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/identity"
	"github.com/agentlane/agentlane/internal/sessionstore"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// The ConfigMap session store reads checkpoint ConfigMaps around the cache,
// lists a session's slots by label (metadata only) and writes them; it
// never watches or deletes them.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;create;update

// statusBackoff spaces the retries of status.lastCheckpoint when the
// session changed since it was read: the controller updates its status
// too, and the cache may need a moment to show the new version.
var statusBackoff = wait.Backoff{Steps: 8, Duration: 20 * time.Millisecond, Factor: 2, Jitter: 0.2, Cap: 2 * time.Second}

func (s *Server) saveCheckpoint(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	if s.Store == nil {
		return errNoStore()
	}
	if err := s.allowCheckpoint(sc.key); err != nil {
		return err
	}
	limit := s.checkpointBound(s.sessionBounds(r.Context(), sc))
	if limit.limit > 0 {
		if err := limitBody(w, r, limit.limit+checkpointEnvelope, "checkpoint", "a checkpoint", limit); err != nil {
			return err
		}
	}
	var req sessionapi.Checkpoint
	if err := readCheckpoint(r, &req); err != nil {
		return err
	}
	// The time is the store's, never the caller's: it orders the
	// checkpoint against a passivation request.
	cp := sessionstore.Checkpoint{
		SchemaVersion: req.SchemaVersion,
		RunID:         req.RunID,
		Turn:          req.Turn,
		Round:         req.Round,
		Identity:      checkpointIdentity(req.Identity, sc.session.Spec.Identity),
		State:         req.State,
	}
	// The store measures a checkpoint against its own bound when it saves;
	// the queue's lower one is measured here, as the store would.
	if limit.queue {
		if size, err := json.Marshal(cp); err == nil && int64(len(size)) > limit.limit {
			return apiErrorf(http.StatusRequestEntityTooLarge, sessionapi.CodeTooLarge,
				"the checkpoint of run %s takes %d bytes, over the bound of %d (%s)", cp.RunID, len(size), limit.limit, limit.source)
		}
	}
	// The status write that shows the checkpoint rewrites the whole
	// AgentSession in etcd: it is charged to the namespace's write budget
	// with the checkpoint, before either is written.
	if c, ok := s.Store.(charger); ok {
		size, _ := json.Marshal(sc.session)
		if err := c.Charge(sc.key.Namespace, len(size)); err != nil {
			return storeError(err, http.StatusBadRequest)
		}
	}
	saved, err := s.Store.Save(r.Context(), sc.key, cp)
	if err != nil {
		return storeError(err, http.StatusBadRequest)
	}
	// The controller orders the checkpoint against a passivation request
	// at full precision; the status keeps whole seconds.
	if s.Checkpoints != nil {
		s.Checkpoints.CheckpointSaved(sc.key, saved.Checkpoint.Time)
	}
	// The checkpoint is stored: it is what a resume reads. The status only
	// shows it, so a failure to update it is logged, not returned, lest the
	// runtime take a saved checkpoint for a lost one.
	if err := s.recordCheckpoint(r.Context(), sc, saved); err != nil {
		s.log.Error(err, "Checkpoint saved, but status.lastCheckpoint not updated", "session", sc.key, "runId", cp.RunID)
	}
	writeJSON(w, http.StatusOK, sessionapi.CheckpointSaved{
		Checkpoint: apiCheckpoint(saved.Checkpoint),
		Location:   saved.Location,
		Evicted:    saved.Evicted,
	})
	return nil
}

// checkpointEnvelope is what a checkpoint's body may hold besides its
// state: run, turn, round, identity.
const checkpointEnvelope = 64 << 10

// checkpointLimiter is a store that bounds one checkpoint
// (sessionstore.ConfigMaps).
type checkpointLimiter interface {
	MaxCheckpoint() int
}

// checkpointBound is the largest checkpoint, as encoded, the session may
// save: the store's bound, or the session's LaneQueue's when lower.
func (s *Server) checkpointBound(qb queueBounds) bound {
	store := 0
	if l, ok := s.Store.(checkpointLimiter); ok {
		store = l.MaxCheckpoint()
	}
	return qb.checkpointBytes(store)
}

// charger is a store that keeps a write budget per namespace
// (sessionstore.ConfigMaps).
type charger interface {
	Charge(namespace string, n int) error
}

func (s *Server) loadCheckpoint(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	if s.Store == nil {
		return errNoStore()
	}
	// The route /checkpoints/latest has no run: "" reads the latest.
	cp, err := s.Store.Load(r.Context(), sc.key, r.PathValue("run"))
	if err != nil {
		return storeError(err, http.StatusConflict)
	}
	writeJSON(w, http.StatusOK, apiCheckpoint(cp))
	return nil
}

// readCheckpoint decodes a checkpoint body. A schema newer than the
// server's is refused as such before the body is decoded strictly, since a
// newer runtime's checkpoint may well have fields this server does not
// know.
func readCheckpoint(r *http.Request, cp *sessionapi.Checkpoint) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return apiErrorf(http.StatusRequestEntityTooLarge, sessionapi.CodeTooLarge, "the body is larger than %d bytes", tooLarge.Limit)
		}
		return err
	}
	var head struct {
		SchemaVersion int    `json:"schemaVersion"`
		RunID         string `json:"runId"`
	}
	if json.Unmarshal(body, &head) == nil && head.SchemaVersion > sessionstore.CurrentSchemaVersion {
		return apiErrorf(http.StatusBadRequest, sessionapi.CodeSchemaTooNew,
			"the checkpoint of run %s has schema version %d, this server stores up to %d",
			head.RunID, head.SchemaVersion, sessionstore.CurrentSchemaVersion)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return readJSON(r, cp)
}

// recordCheckpoint sets the session's status.lastCheckpoint to saved with a
// merge patch of that field alone, at the resourceVersion it was computed
// from; when the session changed meanwhile (the controller updates its
// status), it reads the session again and retries.
func (s *Server) recordCheckpoint(ctx context.Context, sc *sessionCall, saved sessionstore.Saved) error {
	cp := saved.Checkpoint
	last := &agentlanev1alpha1.Checkpoint{
		RunID:    cp.RunID,
		Turn:     int32(min(cp.Turn, math.MaxInt32)),
		Time:     metav1.NewTime(cp.Time),
		Location: saved.Location,
	}
	sess := sc.session
	first := true
	return retry.RetryOnConflict(statusBackoff, func() error {
		if !first {
			sess = &agentlanev1alpha1.AgentSession{}
			if err := s.Client.Get(ctx, sc.key, sess); err != nil {
				return err
			}
		}
		first = false
		patched := sess.DeepCopy()
		patched.Status.LastCheckpoint = last
		return s.Client.Status().Patch(ctx, patched, client.MergeFromWithOptions(sess, client.MergeFromWithOptimisticLock{}))
	})
}

// checkpointIdentity is the identity a checkpoint is saved with: the
// caller's values, and the session's for the fields the caller left empty.
func checkpointIdentity(given sessionapi.Identity, spec *agentlanev1alpha1.Identity) agentlanev1alpha1.Identity {
	id := agentlanev1alpha1.Identity{TenantID: given.TenantID, Principal: given.Principal,
		AgentTemplateID: given.AgentTemplateID, CorrelationID: given.CorrelationID}
	if spec != nil {
		id.TenantID = cmp.Or(id.TenantID, spec.TenantID)
		id.Principal = cmp.Or(id.Principal, spec.Principal)
		id.AgentTemplateID = cmp.Or(id.AgentTemplateID, spec.AgentTemplateID)
		id.CorrelationID = cmp.Or(id.CorrelationID, spec.CorrelationID)
	}
	return id
}

func apiCheckpoint(cp sessionstore.Checkpoint) sessionapi.Checkpoint {
	return sessionapi.Checkpoint{
		SchemaVersion: cp.SchemaVersion,
		RunID:         cp.RunID,
		Turn:          cp.Turn,
		Round:         cp.Round,
		Time:          cp.Time,
		Identity:      identity.Wire(&cp.Identity),
		State:         cp.State,
	}
}

func errNoStore() error {
	return apiError(http.StatusServiceUnavailable, sessionapi.CodeNoStore, sessionstore.ErrNoStore.Error())
}

// storeError translates an error of the session store; a checkpoint whose
// schema is too new is answered with tooNewStatus (400 for a save, which
// the caller can fix, 409 for a load, where the stored checkpoint is in the
// way).
func storeError(err error, tooNewStatus int) error {
	switch {
	case errors.Is(err, sessionstore.ErrNoStore):
		return apiError(http.StatusServiceUnavailable, sessionapi.CodeNoStore, err.Error())
	case errors.Is(err, sessionstore.ErrNoCheckpoint):
		return apiError(http.StatusNotFound, sessionapi.CodeCheckpointNotFound, err.Error())
	case errors.Is(err, sessionstore.ErrSchemaTooNew):
		return apiError(tooNewStatus, sessionapi.CodeSchemaTooNew, err.Error())
	case errors.Is(err, sessionstore.ErrTooLarge):
		return apiError(http.StatusRequestEntityTooLarge, sessionapi.CodeTooLarge, err.Error())
	case errors.Is(err, sessionstore.ErrRateLimited):
		var limited *sessionstore.RateLimitedError
		after := time.Second
		if errors.As(err, &limited) {
			after = min(max(limited.RetryAfter, time.Second), time.Hour)
		}
		return rateLimited(after, "%s (--session-store-namespace-write-rate)", err.Error())
	case errors.Is(err, sessionstore.ErrInvalid):
		return apiError(http.StatusBadRequest, sessionapi.CodeInvalidRequest, err.Error())
	}
	return err
}
