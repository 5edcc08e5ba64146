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

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// drainingRetry is the Retry-After of a submission refused by a draining
// queue: long enough not to hammer a manager about to restart.
const drainingRetry = 10 * time.Second

// draining translates a submission refused because the session's LaneQueue
// drains (spec.drain).
func draining(err error) error {
	e := apiErrorf(http.StatusServiceUnavailable, sessionapi.CodeDraining,
		"%s: the session's LaneQueue takes no new command until spec.drain is removed", err.Error())
	e.RetryAfter = drainingRetry
	return e
}

// clearLane cancels the session's queued and retrying commands of one lane:
// POST .../lanes/{lane}/clear. Running commands keep running; other
// sessions' commands are not touched.
func (s *Server) clearLane(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	n, err := sc.queue.ClearLane(r.PathValue("lane"), sc.key.Name)
	if err != nil {
		return schedulerError(err)
	}
	writeJSON(w, http.StatusOK, sessionapi.CancelResult{Cancelled: n})
	return nil
}
