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
	"errors"
	"fmt"
)

// session is the queue's state for one session key. Guarded by q.mu. It
// lives until ForgetSession, so its counts survive idle periods.
type session struct {
	key    string
	paused bool
	// modes overrides lane handler modes for this session, by lane name.
	modes map[string]HandlerMode
	// pending and active count the session's commands across lanes.
	pending, active int
	counts          sessionCounts
}

type sessionCounts struct {
	completed, failed, deadLettered, cancelled uint64
}

func (q *Queue) sessionLocked(key string) *session {
	s := q.sessions[key]
	if s == nil {
		s = &session{key: key}
		q.sessions[key] = s
	}
	return s
}

// modeFor returns the mode a command of this session starts with in ln.
func (s *session) modeFor(ln *lane) HandlerMode {
	if s.modes != nil {
		if m, ok := s.modes[ln.name]; ok && ln.cfg.allowsSessionMode(m) {
			return m
		}
	}
	return ln.cfg.Mode
}

// PauseSession stops starting the session's commands. Queued commands stay
// queued (they are neither dropped nor counted as started), retry delays
// keep running, and commands already running finish normally. Pausing an
// unknown session creates it paused, so its first commands wait too.
func (q *Queue) PauseSession(key string) {
	q.mu.Lock()
	s := q.sessionLocked(key)
	if !s.paused {
		s.paused = true
		for _, ln := range q.lanes {
			if ls := ln.sessions[key]; ls != nil {
				ln.runnable.Delete(ls)
			}
		}
	}
	q.mu.Unlock()
}

// ResumeSession lets a paused session's commands start again, in their
// original order.
func (q *Queue) ResumeSession(key string) {
	q.mu.Lock()
	now := q.now()
	if s := q.sessions[key]; s != nil && s.paused {
		s.paused = false
		for _, ln := range q.lanes {
			if ls := ln.sessions[key]; ls != nil {
				q.refreshLocked(ls, now, false)
			}
		}
		q.dispatchLocked(now)
	}
	q.unlock(now)
}

// ErrModeOverrideRefused: the lane's SessionModes do not let a session
// switch it to the mode asked for.
var ErrModeOverrideRefused = errors.New("lanequeue: the lane does not let a session switch it to this mode")

// SetSessionLaneMode makes the session's commands in lane start in mode,
// whatever the lane's own mode, where the lane's SessionModes allow it (else
// ErrModeOverrideRefused). Commands already running keep the mode they
// started with.
func (q *Queue) SetSessionLaneMode(key, lane string, mode HandlerMode) error {
	if mode == "" || !mode.valid() {
		return fmt.Errorf("%w: unknown handler mode %q", ErrInvalidCommand, mode)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	ln := q.byName[lane]
	if ln == nil {
		return &laneError{name: lane}
	}
	if !ln.cfg.allowsSessionMode(mode) {
		return fmt.Errorf("%w: lane %q, mode %s", ErrModeOverrideRefused, lane, mode)
	}
	s := q.sessionLocked(key)
	if s.modes == nil {
		s.modes = make(map[string]HandlerMode)
	}
	s.modes[lane] = mode
	return nil
}

// ClearSessionLaneMode removes the session's override for lane.
func (q *Queue) ClearSessionLaneMode(key, lane string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if s := q.sessions[key]; s != nil {
		delete(s.modes, lane)
	}
}

// ForgetSession drops an idle session's state: its pause flag, mode
// overrides and counts. It fails with ErrSessionBusy while the session has
// queued, retrying or running commands.
func (q *Queue) ForgetSession(key string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.sessions[key]
	if s == nil {
		return nil
	}
	if s.pending > 0 || s.active > 0 {
		return fmt.Errorf("%w: %s", ErrSessionBusy, key)
	}
	delete(q.sessions, key)
	return nil
}
