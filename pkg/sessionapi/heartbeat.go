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
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CodeExtendRefused (409): a deadline extension would pass its bounds (8
// extensions per attempt, 10 times the attempt's timeout in all) or the
// command's attempt has not started.
const CodeExtendRefused = "ExtendRefused"

// MaxProgressBytes bounds a heartbeat's progress note in a request; the
// note kept is at most 256 characters of it.
const MaxProgressBytes = 1024

// Heartbeat tells the manager that a handler still runs an attempt of an
// ExternalTask of a Handler lane: POST .../external/{id}/heartbeat. A lane
// with a heartbeatTimeout times out an attempt that goes that long without
// one. It is fenced as a completion is.
type Heartbeat struct {
	// Attempt is the attempt the handler runs, as GET .../external listed
	// it; 0 is the current one, still fenced.
	Attempt int `json:"attempt,omitempty"`
	// Progress is a short note on how far the attempt got, such as
	// "42/100 files": at most MaxProgressBytes, kept to 256 characters.
	Progress string `json:"progress,omitempty"`
}

// HeartbeatResult is the reply to a heartbeat that was taken.
type HeartbeatResult struct {
	// ID is the task.
	ID string `json:"id"`
	// Attempt is the attempt the heartbeat was taken for.
	Attempt int `json:"attempt"`
	// Recorded tells whether the heartbeat was written to the task's
	// status: heartbeats are coalesced to one per quarter of the lane's
	// heartbeatTimeout (at most two a second), and the ones between are
	// taken by the scheduler without a write.
	Recorded bool `json:"recorded"`
	// HeartbeatTimeout is the lane's heartbeatTimeout in seconds, 0 when
	// it has none.
	HeartbeatTimeoutSeconds float64 `json:"heartbeatTimeoutSeconds"`
}

// Extend asks to move the deadline of a running command's attempt later:
// POST .../commands/{id}/extend, for the session's owner (the access that
// submits). An attempt may be extended at most 8 times, and never past 10
// times its timeout in all (ExtendRefused); a retry starts again from the
// lane's timeout.
type Extend struct {
	// Attempt is the attempt to extend; 0 is the one running.
	Attempt int `json:"attempt,omitempty"`
	// By is how much later the deadline moves, such as "5m": between 1s
	// and 24h.
	By metav1.Duration `json:"by"`
}

// Extension is the reply to an extension.
type Extension struct {
	// ID is the command.
	ID string `json:"id"`
	// Attempt is the attempt extended.
	Attempt int `json:"attempt"`
	// Deadline is the attempt's deadline now.
	Deadline time.Time `json:"deadline"`
	// Extensions counts the extensions of the attempt so far.
	Extensions int `json:"extensions"`
}

// Heartbeat reports that the handler still runs attempt h.Attempt of the
// session's external task id. It needs the access a completion needs.
func (s *SessionClient) Heartbeat(ctx context.Context, id string, h Heartbeat) (*HeartbeatResult, error) {
	var out HeartbeatResult
	if err := s.do(ctx, http.MethodPost, "/external/"+url.PathEscape(id)+"/heartbeat", nil, h, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Extend moves the deadline of the running attempt of the session's
// command id by by (attempt 0: whichever attempt runs).
func (s *SessionClient) Extend(ctx context.Context, id string, attempt int, by time.Duration) (*Extension, error) {
	var out Extension
	req := Extend{Attempt: attempt, By: metav1.Duration{Duration: by}}
	if err := s.do(ctx, http.MethodPost, "/commands/"+url.PathEscape(id)+"/extend", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
