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

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// An isolated lane is isolated both ways. Its commands take no capacity
// other lanes need (the scheduler's caps), and the work that runs on it
// cannot put work into other lanes: a command submitted with parentId, the
// id of a command of the session that runs on an isolated lane, is refused
// (403 IsolatedLane) unless it goes to that same lane. So a cron job that
// runs on the cron lane cannot fill the main lane with work of its own.
//
// The runtime names the parent: the Go client does it for every submit made
// with the context Run hands a command's handler, and the Python client's
// run does the same. A runtime that leaves parentId out is not stopped,
// since the server cannot tell which of a session's commands a submit comes
// from: the one-way rule keeps honest runtimes (and the agents they run)
// from escaping the lane by mistake, not a hostile runtime, which the
// capacity isolation and the session's own bounds still hold.

// checkParent refuses a command whose parent runs on an isolated lane and
// that goes to another lane, and a parentId that names no running command
// of the session.
func (s *Server) checkParent(ctx context.Context, sc *sessionCall, parentID, lane string) error {
	if parentID == "" {
		return nil
	}
	p := s.calls.get(sc.key.Namespace, parentID)
	if p == nil || p.session != sc.key {
		return apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest,
			"parentId %q names no command of session %q", parentID, sc.key.Name)
	}
	if o, final := p.ticket.Outcome(); final {
		return apiErrorf(http.StatusConflict, sessionapi.CodeNotRunning,
			"parent command %q already ended %s: a command is submitted from its parent while the parent runs", parentID, o.State)
	}
	from := p.ticket.Lane()
	if from == lane {
		return nil
	}
	lq, err := s.laneQueue(ctx, sc)
	if err != nil {
		return apiErrorf(http.StatusServiceUnavailable, sessionapi.CodeSessionNotReady, "read the session's LaneQueue: %v", err)
	}
	for _, l := range lq.Spec.Lanes {
		if string(l.Name) == from && l.Isolated {
			return apiErrorf(http.StatusForbidden, sessionapi.CodeIsolatedLane,
				"command %q runs on the isolated lane %q: the work it runs may submit only to lane %q, not to %q", parentID, from, from, lane)
		}
	}
	return nil
}
