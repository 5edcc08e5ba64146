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
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// leading tells whether this replica leads and serves session calls.
func (s *Server) leading() bool {
	return s.Leading == nil || isClosed(s.serving)
}

// lead opens the API to session calls: at once when this replica leads
// already (or leader election is off), else once it does. A replica that
// waited as a standby begins its run then: StartedAt (unless set by the
// caller) and the event id base become the time it took over, so that
// event ids stay above those of the leader before it and the Internal
// commands that leader issued are answered Interrupted.
func (s *Server) lead(ctx context.Context) {
	if s.Leading == nil || isClosed(s.Leading) {
		s.direct.Lead(s.runID())
		close(s.serving)
		return
	}
	go func() {
		select {
		case <-s.Leading:
		case <-ctx.Done():
			return
		}
		if !s.startedAtSet {
			s.StartedAt = s.Clock.Now()
			s.hub.setBase(eventIDBase(s.StartedAt))
		}
		s.log.Info("Leading: serving session calls", "startedAt", s.StartedAt)
		s.direct.Lead(s.runID())
		close(s.serving)
	}()
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// notLeaderRetry is the Retry-After of a NotLeader reply: about one retry
// period of the leader election, after which the caller may reach the
// leader through the Service again.
const notLeaderRetry = time.Second

// errNotLeader answers a session call that reached a standby.
var errNotLeader = &sessionapi.Error{Status: http.StatusServiceUnavailable, Code: sessionapi.CodeNotLeader,
	RetryAfter: notLeaderRetry, Message: "this manager replica is a standby; the leader serves the Session API, retry through the Service"}

// ReadyCheck fails until the API listens and this replica leads, for the
// manager's readiness probe.
func (s *Server) ReadyCheck(_ *http.Request) error {
	select {
	case <-s.ready:
	default:
		return errors.New("the Session API does not listen yet")
	}
	if !s.leading() {
		return errors.New("a standby: the Session API serves on the leader only")
	}
	return nil
}

// runID names this replica's run as leader to the Direct workers: the time
// it began (StartedAt), so that the commands' own id generator is not
// drawn from.
func (s *Server) runID() string {
	return strconv.FormatInt(s.StartedAt.UnixNano(), 36)
}
