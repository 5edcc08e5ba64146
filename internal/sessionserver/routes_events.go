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
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// The event stream route: GET /events follows the session's events as
// Server-Sent Events.

// events answers GET /events.
func (s *Server) events(w http.ResponseWriter, r *http.Request, sc *sessionCall) error {
	req, err := parseStreamRequest(r)
	if err != nil {
		return err
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		return apiError(http.StatusInternalServerError, sessionapi.CodeInternal, "the connection cannot stream")
	}
	log := s.hub.log(sc.key)
	cursor, first, err := log.start(req, s.Clock.Now())
	if err != nil {
		return err
	}
	if r.URL.Query().Get("runtime") == "true" {
		log.attachRuntime(1)
		s.configureInbox(r.Context(), sc)
		defer func() {
			log.attachRuntime(-1)
			s.configureInbox(r.Context(), sc)
		}()
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s.holdFor(w, 0)
	if _, err := w.Write(first); err != nil {
		return nil
	}
	flusher.Flush()

	keepAlive := s.Clock.NewTicker(keepAliveInterval)
	defer keepAlive.Stop()
	var buf bytes.Buffer
	for {
		items, next, wake := log.after(cursor)
		cursor = next
		buf.Reset()
		for _, it := range items {
			if it.Lost > 0 {
				writeEvent(&buf, sessionapi.Event{Type: sessionapi.EventEventsLost, Time: s.Clock.Now().UTC(), Lost: it.Lost})
			}
			if e := it.Entry; e != nil {
				fmt.Fprintf(&buf, "id: %d\nevent: %s\ndata: %s\n\n", e.id, e.typ, e.data)
			}
		}
		if buf.Len() > 0 {
			s.holdFor(w, 0)
			if _, err := w.Write(buf.Bytes()); err != nil {
				return nil
			}
			flusher.Flush()
		}
		if wake == nil {
			return nil // the session was deleted
		}
		select {
		case <-wake:
		case <-keepAlive.C():
			s.holdFor(w, 0)
			if _, err := w.Write([]byte(": keepalive\n\n")); err != nil {
				return nil
			}
			flusher.Flush()
		case <-r.Context().Done():
			if e := revoked(r.Context()); e != nil {
				// The caller may no longer follow the session: the stream
				// ends with an error event saying why.
				buf.Reset()
				writeEvent(&buf, sessionapi.Event{Type: eventStreamError, Time: s.Clock.Now().UTC(), Error: e.Code + ": " + e.Message})
				s.holdFor(w, 0)
				_, _ = w.Write(buf.Bytes())
				flusher.Flush()
			}
			return nil
		}
	}
}

// writeEvent writes one Server-Sent Event that is not in the session's log,
// so has no id.
func writeEvent(buf *bytes.Buffer, ev sessionapi.Event) {
	data, _ := json.Marshal(ev)
	fmt.Fprintf(buf, "event: %s\ndata: %s\n\n", ev.Type, data)
}
