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

// Package sessionapi holds the wire types and the Go client of agentlane's
// Session API: the HTTP API through which an agent runtime, a gateway or a
// tool drives one AgentSession (submit commands and report their results,
// post messages, end runs, cancel, follow the session's events, read its
// counters). The routes are described by the embedded OpenAPI document.
//
// A runtime that runs a tool call through the session's lanes:
//
//	c, err := sessionapi.NewClient("http://127.0.0.1:8443",
//		sessionapi.WithTokenFile("/var/run/secrets/tokens/agentlane"))
//	if err != nil {
//		return err
//	}
//	s := c.Session("team-a", "chat-42")
//	cmd, err := s.Run(ctx, sessionapi.SubmitRequest{Type: "bash", RunID: runID, Payload: args},
//		func(ctx context.Context, cmd *sessionapi.Command) sessionapi.Result {
//			return runBash(ctx, cmd) // ctx ends at the grant's deadline
//		})
//
// Every non-2xx reply is returned as an *Error; IsCode tells the codes apart.
package sessionapi
