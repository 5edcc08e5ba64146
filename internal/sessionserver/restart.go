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

// What a restarted manager tells its clients about what it no longer holds.
//
// The API keeps sessions' events and Internal commands in memory, so a
// manager restart loses them. A manager run is known by when it started
// (Server.StartedAt), and two things carry that time so that a client of
// an earlier run is told, never left waiting:
//
//   - Event ids. Every session's ids of a run are consecutive from the
//     run's base, its start in Unix milliseconds times eventIDsPerMilli,
//     plus 1. A later run therefore starts above every id of an earlier
//     one, provided a session had fewer than eventIDsPerMilli events per
//     millisecond the earlier run lasted, and the clocks of the manager's
//     replicas agree to within the time a restart takes. A stream that
//     resumes after an id below the base gets a gap event first; an id
//     above the newest is refused with FutureEventID. The ids stay below
//     2^53, so JavaScript clients read them exactly.
//   - Command ids. The ids the server names are ULIDs, which hold the
//     millisecond they were made. A command id this server does not know
//     whose ULID time is before StartedAt was issued by an earlier run:
//     it is answered 410 Interrupted rather than 404 CommandNotFound. An
//     id that is no ULID, or one of this run, cannot be told apart from
//     one that never existed and stays CommandNotFound.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// eventIDsPerMilli is how many event ids a manager run holds per
// millisecond since the Unix epoch: a session may have that many events
// per millisecond the run lasts before its ids could reach the next run's.
const eventIDsPerMilli = 1000

// eventIDBase is the id before the first event of each session in the
// manager run that started at startedAt.
func eventIDBase(startedAt time.Time) uint64 {
	ms := startedAt.UnixMilli()
	if ms <= 0 {
		return 0
	}
	return uint64(ms) * eventIDsPerMilli
}

// fromNow is the value of the from parameter, and of Last-Event-ID, that
// starts a stream after the newest event.
const fromNow = "now"

// streamRequest is where a client asks its event stream to start.
type streamRequest struct {
	// last is the Last-Event-ID, 0 when none was sent.
	last uint64
	// now: the stream skips what the session retains (from=now); a
	// Last-Event-ID wins over it, so that a reconnect resumes.
	now bool
}

// parseStreamRequest reads the Last-Event-ID header (or the lastEventId
// parameter) and the from parameter.
func parseStreamRequest(r *http.Request) (streamRequest, error) {
	q := r.URL.Query()
	var req streamRequest
	switch from := q.Get("from"); from {
	case "":
	case fromNow:
		req.now = true
	default:
		return req, apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "from=%q: the only value is %s", from, fromNow)
	}
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = q.Get("lastEventId")
	}
	if last == fromNow {
		req.now = true
		return req, nil
	}
	n, ok := uintParam(last)
	if !ok {
		return req, apiErrorf(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "Last-Event-ID %q is not an event id", last)
	}
	req.last = n
	return req, nil
}

// start returns the cursor a stream asking req begins at, and the frame it
// sends first: a gap event when req resumes after an id of an earlier
// manager run, the id of the newest event for from=now, nothing otherwise.
// An id past the newest is refused.
func (l *sessionLog) start(req streamRequest, now time.Time) (uint64, []byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	base, newest := l.events.base, l.events.lastID
	switch {
	case req.last > newest:
		return 0, nil, apiErrorf(http.StatusBadRequest, sessionapi.CodeFutureEventID,
			"Last-Event-ID %d is past the newest event of the session, %d: no stream of this session sent it; "+
				"reconnect without Last-Event-ID for what is retained, or with from=now for what comes next", req.last, newest)
	case req.last > 0 && req.last < base:
		var buf bytes.Buffer
		gap := sessionapi.Event{ID: base, Type: sessionapi.EventGap, Time: now.UTC(), After: req.last}
		data, _ := json.Marshal(gap)
		fmt.Fprintf(&buf, "id: %d\nevent: %s\ndata: %s\n\n", gap.ID, gap.Type, data)
		return base, buf.Bytes(), nil
	case req.last > 0:
		return req.last, nil, nil
	case req.now:
		// An id-only frame: the client resumes from here on reconnect.
		return newest, fmt.Appendf(nil, "id: %d\n\n", newest), nil
	}
	return base, nil, nil
}

// interrupted returns a 410 Interrupted error when the session's command id,
// which this server does not know, was issued before this manager run
// began, and nil otherwise.
func (s *Server) interrupted(sc *sessionCall, id string) error {
	u, err := ulid.ParseStrict(strings.ToUpper(id))
	if err != nil || u.Time() >= ulid.Timestamp(s.StartedAt) {
		return nil //nolint:nilerr // an id that is not a ULID was not issued by an earlier run
	}
	return apiErrorf(http.StatusGone, sessionapi.CodeInterrupted,
		"command %s of session %q was issued at %s, before the manager restarted at %s, and the restart lost it: "+
			"it failed, interrupted, and any result reported for it is dropped; submit it again to run it",
		id, sc.key.Name, ulid.Time(u.Time()).UTC().Format(time.RFC3339Nano), s.StartedAt.UTC().Format(time.RFC3339Nano))
}
