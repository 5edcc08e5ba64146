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

package sessionapi

import (
	"context"
	"net/http"
	"net/url"
)

// LatestCheckpoint is the path segment that reads the session's latest
// checkpoint; no run may be named so.
const LatestCheckpoint = "latest"

// SaveCheckpoint saves cp as the latest checkpoint of its run and of the
// session. Save only after a tool round completed, never while a tool runs.
// It fails with NoStore when the manager runs without a session store,
// SchemaTooNew when cp's schema is newer than the server's and TooLarge when
// the checkpoint cannot fit.
func (s *SessionClient) SaveCheckpoint(ctx context.Context, cp Checkpoint) (*CheckpointSaved, error) {
	var saved CheckpointSaved
	if err := s.do(ctx, http.MethodPut, "/checkpoints", nil, cp, &saved); err != nil {
		return nil, err
	}
	return &saved, nil
}

// LoadCheckpoint returns the checkpoint of runID, or the session's latest
// when runID is "". It fails with CheckpointNotFound when nothing is saved
// (for the session, or for the run), NoStore when the manager runs without
// a session store and SchemaTooNew when the checkpoint was written by a
// newer server.
func (s *SessionClient) LoadCheckpoint(ctx context.Context, runID string) (*Checkpoint, error) {
	if runID == "" {
		runID = LatestCheckpoint
	}
	var cp Checkpoint
	if err := s.do(ctx, http.MethodGet, "/checkpoints/"+url.PathEscape(runID), nil, nil, &cp); err != nil {
		return nil, err
	}
	return &cp, nil
}
