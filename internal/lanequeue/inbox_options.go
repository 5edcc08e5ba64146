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
	"maps"
	"slices"
	"time"
)

// MessageMode is how a session handles an inbound message (a user turn)
// that arrives while it may be running: see the package documentation.
type MessageMode string

const (
	// ModeFollowup runs each message as its own turn, in order, once the
	// current run has ended.
	ModeFollowup MessageMode = "followup"
	// ModeCollect starts a turn at once for a message to an idle session;
	// messages that arrive while a run is active wait for it to end and for
	// Debounce of quiet, then every queued message of one channel and thread
	// is merged into a single turn.
	ModeCollect MessageMode = "collect"
	// ModeSteer injects the message into the current run at its next tool
	// boundary and cancels the run's commands that have not started. A
	// session that cannot take steers, or has no run, gets a followup.
	ModeSteer MessageMode = "steer"
	// ModeSteerBacklog steers now and also keeps the message as a followup.
	ModeSteerBacklog MessageMode = "steer-backlog"
	// ModeInterrupt aborts the current run, then runs the newest message.
	ModeInterrupt MessageMode = "interrupt"
	// ModeQueue is the legacy name of ModeSteer: accepted wherever a mode
	// is named, and in force as ModeSteer (see Canonical).
	ModeQueue MessageMode = "queue"
)

// Canonical returns the mode m stands for: ModeSteer for the legacy alias
// queue, ModeSteerBacklog for steer+backlog, m itself otherwise.
func (m MessageMode) Canonical() MessageMode {
	switch m {
	case ModeQueue:
		return ModeSteer
	case "steer+backlog":
		return ModeSteerBacklog
	}
	return m
}

// DropPolicy is what happens to a message that does not fit in a session's
// queue (Cap).
type DropPolicy string

const (
	// DropOld drops the oldest queued message to make room.
	DropOld DropPolicy = "old"
	// DropNew refuses the new message.
	DropNew DropPolicy = "new"
	// DropSummarize drops the oldest queued message but keeps a short line
	// of it; the lines are delivered as one synthetic followup turn.
	DropSummarize DropPolicy = "summarize"
)

// Defaults of MessageOptions.
const (
	DefaultDebounce = time.Second
	DefaultCap      = 20
	// SummaryLineLength bounds each line of a summary of dropped messages.
	SummaryLineLength = 160
	// SlowWait is the wait after which a delivered turn is flagged as slow,
	// and after which a message waiting while a run is active is reported
	// (InboxWaiting).
	SlowWait = 2 * time.Second
)

// MessageOptions say how a session queues inbound messages.
type MessageOptions struct {
	Mode     MessageMode
	Debounce time.Duration
	Cap      int
	Drop     DropPolicy
	// ByChannel gives the channels whose messages take another mode than
	// Mode, by channel name (Message.Channel, such as discord). A /queue
	// directive that names a mode sets it for every channel of the session.
	ByChannel map[string]MessageMode
}

// MaxChannelModes bounds MessageOptions.ByChannel.
const MaxChannelModes = 64

// ModeFor returns the mode a message of channel takes: its ByChannel entry,
// else Mode.
func (o MessageOptions) ModeFor(channel string) MessageMode {
	if m, ok := o.ByChannel[channel]; ok {
		return m
	}
	return o.Mode
}

// canonical returns o with every mode replaced by the mode it stands for
// (Canonical), ByChannel copied.
func (o MessageOptions) canonical() MessageOptions {
	o.Mode = o.Mode.Canonical()
	if o.ByChannel != nil {
		by := make(map[string]MessageMode, len(o.ByChannel))
		for ch, m := range o.ByChannel {
			by[ch] = m.Canonical()
		}
		o.ByChannel = by
	}
	return o
}

// DefaultMessageOptions are collect, 1s debounce, 20 messages, summarize.
func DefaultMessageOptions() MessageOptions {
	return MessageOptions{Mode: ModeCollect, Debounce: DefaultDebounce, Cap: DefaultCap, Drop: DropSummarize}
}

// Validate reports an option the inbox cannot use.
func (o MessageOptions) Validate() error {
	var errs []error
	if !o.Mode.Canonical().valid() {
		errs = append(errs, fmt.Errorf("unknown mode %q (followup, collect, steer, steer-backlog or interrupt)", o.Mode))
	}
	if !o.Drop.valid() {
		errs = append(errs, fmt.Errorf("unknown drop policy %q (old, new or summarize)", o.Drop))
	}
	if o.Debounce < 0 {
		errs = append(errs, errors.New("debounce must be >= 0"))
	}
	if o.Cap < 1 {
		errs = append(errs, errors.New("cap must be >= 1"))
	}
	if len(o.ByChannel) > MaxChannelModes {
		errs = append(errs, fmt.Errorf("byChannel names %d channels, more than %d", len(o.ByChannel), MaxChannelModes))
	}
	for _, ch := range slices.Sorted(maps.Keys(o.ByChannel)) {
		switch m := o.ByChannel[ch]; {
		case ch == "":
			errs = append(errs, errors.New("byChannel has an empty channel name"))
		case !m.Canonical().valid():
			errs = append(errs, fmt.Errorf("byChannel[%s]: unknown mode %q (followup, collect, steer, steer-backlog or interrupt)", ch, m))
		}
	}
	return errors.Join(errs...)
}

func (m MessageMode) valid() bool {
	switch m {
	case ModeFollowup, ModeCollect, ModeSteer, ModeSteerBacklog, ModeInterrupt:
		return true
	}
	return false
}

func (p DropPolicy) valid() bool {
	switch p {
	case DropOld, DropNew, DropSummarize:
		return true
	}
	return false
}
