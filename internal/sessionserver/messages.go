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
	"strings"

	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// inboxFullRetry is the Retry-After of a message refused because the
// session's inbox is full: room comes back when a turn takes the queued
// messages.
const inboxFullRetry = 2 * lanequeue.DefaultDebounce

// validateMessage refuses a posted message the inbox must not hold: blank
// text (400 InvalidRequest), or text over StoreBounds.MaxMessageBytes or
// the session's LaneQueue's lower bound (413 TooLarge).
func (s *Server) validateMessage(m *sessionapi.Message, qb queueBounds) error {
	if strings.TrimSpace(m.Text) == "" {
		return apiError(http.StatusBadRequest, sessionapi.CodeInvalidRequest, "text is required")
	}
	if n, limit := len(m.Text), qb.messageBytes(s.StoreBounds.MaxMessageBytes); int64(n) > limit.limit {
		return apiErrorf(http.StatusRequestEntityTooLarge, sessionapi.CodeTooLarge,
			"the message's text is %d bytes, over the bound of %d (%s)", n, limit.limit, limit.source)
	}
	return nil
}

// messageEnvelope is what a message's body may hold besides its text: its
// id, channel, thread and sender.
const messageEnvelope = 64 << 10

// limitMessageBody bounds the body of a posted message by what a text
// within the message bound can take as JSON (at most 6 bytes per byte of
// text, \u00XX, and the envelope): a larger body is refused 413 TooLarge
// before it is read, and its connection closed; a body that says nothing
// of its length is cut there.
// A flood of oversized messages then costs no decoding.
func (s *Server) limitMessageBody(w http.ResponseWriter, r *http.Request, qb queueBounds) error {
	limit := qb.messageBytes(s.StoreBounds.MaxMessageBytes)
	return limitBody(w, r, 6*limit.limit+messageEnvelope, "message", "a text", limit)
}

// inboxFull is the 429 QueueFull answer to a message the session's inbox
// has no room for (lanequeue.ErrInboxFull).
func inboxFull(err error) error {
	e := apiErrorf(http.StatusTooManyRequests, sessionapi.CodeQueueFull, "%s; retry once a turn took the queued messages", err.Error())
	e.RetryAfter = inboxFullRetry
	return e
}
