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

	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// The queue routes: GET /stats reads the session's lanes and inbox,
// GET /deadletters its dead letters.

// stats answers GET /stats.
func (s *Server) stats(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	s.configureInbox(r.Context(), sc)
	st := sc.queue.Stats()
	ss := sc.queue.SessionStats(sc.key.Name)
	out := sessionapi.Stats{
		Queue: sc.queueKey.Name,
		Session: sessionapi.SessionCounts{
			Pending: ss.Pending, Active: ss.Active, Completed: ss.Completed, Failed: ss.Failed,
			DeadLettered: ss.DeadLettered, Cancelled: ss.Cancelled,
			QueuedMessages: sc.inbox.Queued(sc.key.Name),
		},
		Lanes:   make([]sessionapi.LaneStats, 0, len(st.Lanes)),
		Options: queueOptionsOf(sc.inbox.Options(sc.key.Name)),
	}
	out.Session.ActiveRun, _ = sc.inbox.ActiveRun(sc.key.Name)
	if len(ss.LaneModes) > 0 {
		out.Session.LaneModes = make(map[string]string, len(ss.LaneModes))
		for l, m := range ss.LaneModes {
			out.Session.LaneModes[l] = string(m)
		}
	}
	for _, l := range st.Lanes {
		out.Lanes = append(out.Lanes, sessionapi.LaneStats{
			Name: l.Name, Priority: l.Priority, Mode: string(l.Mode), Pending: l.Pending, Active: l.Active,
			Completed: l.Completed, Failed: l.Failed, DeadLettered: l.DeadLettered, Cancelled: l.Cancelled,
			Wait: percentilesOf(l.Wait), Run: percentilesOf(l.Run), Paused: l.Paused,
		})
	}
	out.Draining = st.Drain != nil
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deadLetters answers GET /deadletters.
func (s *Server) deadLetters(w http.ResponseWriter, _ *http.Request, sc *sessionCall) error {
	out := sessionapi.DeadLetterList{Items: []sessionapi.DeadLetter{}}
	for _, d := range sc.queue.DeadLetters() {
		if d.SessionKey == sc.key.Name {
			out.Items = append(out.Items, sessionapi.DeadLetter{ID: d.ID, CommandType: d.CommandType, Lane: d.Lane,
				RunID: d.RunID, Error: d.Error, Attempts: d.Attempts, FailedAt: d.FailedAt, Labels: identityOf(d.Labels)})
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// percentilesOf shows a lane's latency percentiles as the API's.
func percentilesOf(p lanequeue.Percentiles) sessionapi.Percentiles {
	return sessionapi.Percentiles{Count: p.Count, P50: p.P50.Seconds(), P90: p.P90.Seconds(),
		P95: p.P95.Seconds(), P99: p.P99.Seconds()}
}
