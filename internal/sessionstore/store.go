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

// Package sessionstore keeps the checkpoints of agent sessions where every
// node of the cluster can read them.
//
// A runtime saves a checkpoint after each completed tool round, never while
// a tool runs. A runtime that resumes the session, on the same node or on
// another, loads the latest checkpoint (or a given run's) and continues under
// a new run ID. A store keeps the latest checkpoint of each of the session's
// last runs: saving a run again replaces its checkpoint, and the runs saved
// least recently are evicted first when a bound is reached. Which checkpoint
// is the latest, and when it was saved, is the store's to say: a caller's
// time is not kept.
//
// The errors are distinct so that callers can tell them apart: ErrNoStore
// (the manager runs without a store), ErrNoCheckpoint (nothing saved for the
// session or for the run), ErrSchemaTooNew (a checkpoint written by a newer
// build), ErrTooLarge (a checkpoint that cannot fit), ErrInvalid (a
// checkpoint that cannot be stored as given), ErrRateLimited (the
// namespace's write budget is spent for now) and ErrForged (a stored record
// the manager did not write).
package sessionstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// CurrentSchemaVersion is the newest checkpoint schema this build reads and
// writes. A checkpoint with a higher version was written by a newer build
// and is refused, on save and on load, rather than misread.
const CurrentSchemaVersion = 1

// LatestRun is the run ID reserved for "the latest checkpoint" in the
// Session API's routes; no run may be named so.
const LatestRun = "latest"

// maxRunIDLength bounds run IDs, as AgentSession status.runId does.
const maxRunIDLength = 128

// runIDPattern is what a run ID may look like: it becomes part of a
// ConfigMap key, which allows letters, digits, '-', '_' and '.'.
var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9]([-_.A-Za-z0-9]*[A-Za-z0-9])?$`)

// Checkpoint is a state a session's runtime saved after a completed tool
// round.
type Checkpoint struct {
	// SchemaVersion is the version of the checkpoint's format; 0 on Save
	// means CurrentSchemaVersion.
	SchemaVersion int `json:"schemaVersion"`
	// RunID is the run the checkpoint belongs to.
	RunID string `json:"runId"`
	// Turn is the runtime's turn the checkpoint was saved in.
	Turn int `json:"turn"`
	// Round counts the tool rounds of the turn completed when it was saved.
	Round int `json:"round"`
	// Time is when it was saved: the store's clock, whatever the caller
	// gave.
	Time time.Time `json:"time"`
	// Identity is the session's identity labels, restored on resume.
	Identity agentlanev1alpha1.Identity `json:"identity,omitzero"`
	// State is the runtime's own state, opaque to the store: any JSON value.
	State json.RawMessage `json:"state,omitempty"`
}

// Saved says what was stored and where.
type Saved struct {
	// Checkpoint is the checkpoint as stored, its schema version and time
	// filled in.
	Checkpoint Checkpoint
	// Location names the stored checkpoint for people and status, such as
	// configmap/agentlane-checkpoint-s1#01jabc.
	Location string
	// Evicted are the runs whose checkpoints were dropped to make room,
	// least recently saved first.
	Evicted []string
}

// Store keeps sessions' checkpoints.
type Store interface {
	// Save stores cp as the latest checkpoint of its run and of the
	// session, replacing the run's previous one.
	Save(ctx context.Context, session types.NamespacedName, cp Checkpoint) (Saved, error)
	// Load returns the checkpoint of runID, or the session's latest
	// checkpoint when runID is "".
	Load(ctx context.Context, session types.NamespacedName, runID string) (Checkpoint, error)
}

var (
	// ErrNoStore: the manager runs without a session store, so checkpoints
	// are neither saved nor loaded.
	ErrNoStore = errors.New("no session store: the manager runs without one (--session-store=none)")
	// ErrNoCheckpoint: nothing is saved for the session, or for the run
	// asked for. The message names which.
	ErrNoCheckpoint = errors.New("no checkpoint")
	// ErrSchemaTooNew: the checkpoint's schema version is newer than
	// CurrentSchemaVersion.
	ErrSchemaTooNew = errors.New("checkpoint schema too new")
	// ErrTooLarge: the checkpoint does not fit in the store on its own.
	ErrTooLarge = errors.New("checkpoint too large")
	// ErrInvalid: the checkpoint, or the run ID asked for, cannot be stored
	// or looked up as given.
	ErrInvalid = errors.New("invalid checkpoint")
)

// noCheckpoint is ErrNoCheckpoint naming the run, or the session when runID
// is "".
func noCheckpoint(session types.NamespacedName, runID string) error {
	if runID == "" {
		return fmt.Errorf("%w for session %s", ErrNoCheckpoint, session)
	}
	return fmt.Errorf("%w for run %s", ErrNoCheckpoint, runID)
}

// schemaTooNew is ErrSchemaTooNew for a checkpoint of runID at version.
func schemaTooNew(runID string, version int) error {
	return fmt.Errorf("%w: the checkpoint of run %s has schema version %d, this build reads up to %d",
		ErrSchemaTooNew, runID, version, CurrentSchemaVersion)
}

// ValidateRunID returns an ErrInvalid error when runID cannot name a run
// in a store.
func ValidateRunID(runID string) error {
	switch {
	case runID == "":
		return fmt.Errorf("%w: runId is required", ErrInvalid)
	case len(runID) > maxRunIDLength:
		return fmt.Errorf("%w: runId is %d characters long, at most %d are allowed", ErrInvalid, len(runID), maxRunIDLength)
	case runID == LatestRun:
		return fmt.Errorf("%w: runId %q is reserved for the latest checkpoint", ErrInvalid, runID)
	case !runIDPattern.MatchString(runID):
		return fmt.Errorf("%w: runId %q must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit", ErrInvalid, runID)
	}
	return nil
}

// prepare checks cp and fills what Save fills: the current schema version
// when it is 0, and Time, always now: the time orders the session's
// checkpoints against a passivation request, so it is never the caller's.
func prepare(cp Checkpoint, now time.Time) (Checkpoint, error) {
	if err := ValidateRunID(cp.RunID); err != nil {
		return cp, err
	}
	switch {
	case cp.SchemaVersion < 0:
		return cp, fmt.Errorf("%w: schemaVersion must not be negative, got %d", ErrInvalid, cp.SchemaVersion)
	case cp.SchemaVersion > CurrentSchemaVersion:
		return cp, schemaTooNew(cp.RunID, cp.SchemaVersion)
	case cp.Turn < 0 || cp.Round < 0:
		return cp, fmt.Errorf("%w: turn and round must not be negative, got %d and %d", ErrInvalid, cp.Turn, cp.Round)
	case len(cp.State) > 0 && !json.Valid(cp.State):
		return cp, fmt.Errorf("%w: state is not valid JSON", ErrInvalid)
	}
	if cp.SchemaVersion == 0 {
		cp.SchemaVersion = CurrentSchemaVersion
	}
	cp.Time = now.UTC()
	return cp, nil
}
