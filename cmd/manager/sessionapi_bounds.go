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

package main

import (
	"flag"

	"github.com/agentlane/agentlane/internal/direct"
	"github.com/agentlane/agentlane/internal/sessionserver"
)

// bindSessionAPIBounds binds the flags of the Session API's bounds on
// connections, long-lived calls and access reviews (docs/security.md,
// "Session API bounds") to s.
func bindSessionAPIBounds(fs *flag.FlagSet, s *sessionserver.Config) {
	fs.IntVar(&s.MaxConnections, "session-api-max-connections", sessionserver.DefaultMaxConnections, "The most connections the Session API keeps open at once; past it a new connection is closed at once. Negative disables the bound.")
	fs.IntVar(&s.MaxConnectionsPerAddress, "session-api-max-connections-per-address", sessionserver.DefaultMaxConnectionsPerAddress, "The most connections one client address may hold open to the Session API; past it the address's new connections are closed at once. Negative disables the bound.")
	fs.DurationVar(&s.ReadTimeout, "session-api-read-timeout", sessionserver.DefaultReadTimeout, "How long the Session API waits for a whole request, body included.")
	fs.DurationVar(&s.WriteTimeout, "session-api-write-timeout", sessionserver.DefaultWriteTimeout, "How long the Session API may take to write a response: a waiting call has it from the end of its wait, an event stream from each write.")
	fs.DurationVar(&s.IdleTimeout, "session-api-idle-timeout", sessionserver.DefaultIdleTimeout, "How long a keep-alive connection to the Session API may wait for its next request before it is closed.")
	fs.IntVar(&s.MaxHeaderBytes, "session-api-max-header-bytes", sessionserver.DefaultMaxHeaderBytes, "The largest request header the Session API reads, in bytes; larger gets 431.")
	fs.IntVar(&s.HTTP2MaxConcurrentStreams, "session-api-http2-max-concurrent-streams", sessionserver.DefaultHTTP2MaxConcurrentStreams, "The most requests one HTTP/2 connection to the Session API may have in flight.")
	fs.IntVar(&s.MaxStreamsPerCaller, "session-api-max-streams-per-caller", sessionserver.DefaultMaxStreamsPerCaller, "The most event streams one caller (a token's user) may hold open; past it 429 RateLimited. Negative disables the bound.")
	fs.IntVar(&s.MaxStreamsPerSession, "session-api-max-streams-per-session", sessionserver.DefaultMaxStreamsPerSession, "The most event streams open on one session, whoever opened them; past it 429 RateLimited. Negative disables the bound.")
	fs.IntVar(&s.MaxWaitsPerCaller, "session-api-max-waits-per-caller", sessionserver.DefaultMaxWaitsPerCaller, "The most calls one caller may have waiting for a command (POST /commands, GET /commands/{id} with wait); past it 429 RateLimited. Negative disables the bound.")
	fs.IntVar(&s.MaxWaitsPerSession, "session-api-max-waits-per-session", sessionserver.DefaultMaxWaitsPerSession, "The most calls waiting for a command of one session; past it 429 RateLimited. Negative disables the bound.")
	fs.IntVar(&s.Assignments.MaxWaits, "session-api-max-assignment-waits", sessionserver.DefaultMaxAssignmentWaits, "The most calls of warm runtime pods waiting for their assignment at once; past it 429 RateLimited. Negative disables the bound.")
	fs.IntVar(&s.Assignments.MaxWaitsPerNamespace, "session-api-max-assignment-waits-per-namespace", sessionserver.DefaultMaxAssignmentWaitsPerNamespace, "The most calls of one namespace's warm runtime pods waiting for their assignment at once; past it 429 RateLimited. Negative disables the bound.")
	fs.IntVar(&s.MaxReviewsInFlight, "session-api-max-reviews-in-flight", sessionserver.DefaultMaxReviewsInFlight, "The most TokenReviews and SubjectAccessReviews the Session API has in flight at once; a request that needs one more gets 429 RateLimited.")
	fs.IntVar(&s.MaxReviewsInFlightPerAddress, "session-api-max-reviews-in-flight-per-address", sessionserver.DefaultMaxReviewsInFlightPerAddress, "The most reviews in flight that one client address's requests may cause; past it 429 RateLimited.")
	fs.IntVar(&s.MaxDirectWorkers, "direct-max-workers", direct.DefaultMaxWorkers, "The most Direct workers' streams the leading manager holds at once; past it a worker's stream is refused 429.")
	fs.IntVar(&s.MaxDirectWorkersPerNamespace, "direct-max-workers-per-namespace", direct.DefaultMaxWorkersPerNamespace, "The most Direct workers' streams serving one namespace; past it a worker's stream is refused 429.")
	fs.DurationVar(&s.RefusalHold, "session-api-refusal-hold", sessionserver.DefaultRefusalHold, "How long the Session API holds a 429 answer before it sends it, at most its Retry-After, so that a client calling again as soon as it is refused makes one call per hold; while half the connections (or half of one address's) hold one, refusals are sent at once. 0 sends them at once.")
	fs.DurationVar(&s.ReauthorizeInterval, "session-api-reauthorize-interval", 0, "How often an event stream or a waiting call reviews its caller's token and access again, ending once refused; 0 means half the review TTL (5s).")
}
