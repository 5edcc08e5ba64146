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

package lanequeue

import (
	"fmt"
	"strings"
)

// DefaultRoutes returns the built-in command-type routes: read-only tools go
// to "query", model calls to "generate", and tools with side effects to
// "execute". Types not listed go to Config.DefaultLane ("execute").
func DefaultRoutes() map[string]string {
	m := make(map[string]string, len(builtinRoutes))
	for k, v := range builtinRoutes {
		m[k] = v
	}
	return m
}

var builtinRoutes = map[string]string{
	"read":       laneQuery,
	"glob":       laneQuery,
	"ls":         laneQuery,
	"grep":       laneQuery,
	"list_files": laneQuery,
	"search":     laneQuery,
	"web_fetch":  laneQuery,
	"web_search": laneQuery,
	"bash":       laneExecute,
	"write":      laneExecute,
	"edit":       laneExecute,
	"delete":     laneExecute,
	"move":       laneExecute,
	"copy":       laneExecute,
	"execute":    laneExecute,
	"llm":        laneGenerate,
}

// buildRoutes resolves the route table for the configured lanes.
func buildRoutes(c Config, byName map[string]*lane) (map[string]*lane, *lane) {
	routes := make(map[string]*lane, len(builtinRoutes)+len(c.Routing))
	for typ, name := range builtinRoutes {
		if ln := byName[name]; ln != nil {
			routes[typ] = ln
		}
	}
	for typ, name := range c.Routing {
		routes[typ] = byName[name]
	}
	return routes, byName[c.defaultLane()]
}

// resolveLaneLocked picks the lane of a command: the named lane, else the
// route of its type, else the default lane.
func (q *Queue) resolveLaneLocked(name, typ string) (*lane, error) {
	if name != "" {
		if ln := q.byName[name]; ln != nil {
			return ln, nil
		}
		return nil, &laneError{name: name}
	}
	if ln := q.routes[typ]; ln != nil {
		return ln, nil
	}
	return q.defLane, nil
}

// acceptLocked refuses a command of type typ that lane ln does not accept.
func acceptLocked(ln *lane, typ string) error {
	if ln.cfg.accepts(typ) {
		return nil
	}
	return &commandTypeError{lane: ln.name, typ: typ, accepted: ln.cfg.CommandTypes}
}

type commandTypeError struct {
	lane, typ string
	accepted  []string
}

func (e *commandTypeError) Error() string {
	return fmt.Sprintf("lane %s does not accept command type %s; it accepts %s",
		quote(e.lane), quote(e.typ), strings.Join(e.accepted, ", "))
}
func (e *commandTypeError) Unwrap() error { return ErrCommandTypeRefused }

type laneError struct{ name string }

func (e *laneError) Error() string { return ErrUnknownLane.Error() + " " + quote(e.name) }
func (e *laneError) Unwrap() error { return ErrUnknownLane }

func quote(s string) string { return "\"" + s + "\"" }

// Route returns the lane a command of the session goes to (the lane named,
// else the route of its type) and the handler mode it would start in if it
// started now: the session's override for the lane, else the lane's mode. A
// submitter that has to prepare differently for External work (create a
// durable task first) asks here, then submits with Command.External set.
func (q *Queue) Route(sessionKey, laneName, typ string) (string, HandlerMode, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ln, err := q.resolveLaneLocked(laneName, typ)
	if err != nil {
		return "", "", err
	}
	if err := acceptLocked(ln, typ); err != nil {
		return "", "", err
	}
	mode := ln.cfg.Mode
	if s := q.sessions[sessionKey]; s != nil {
		mode = s.modeFor(ln)
	}
	return ln.name, mode.orDefault(), nil
}
