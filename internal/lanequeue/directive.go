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
	"strconv"
	"strings"
	"time"
)

// QueueDirective is a parsed "/queue" command: the fields it sets.
type QueueDirective struct {
	Mode     MessageMode
	Debounce *time.Duration
	Cap      *int
	Drop     DropPolicy
}

func (d *QueueDirective) apply(o MessageOptions) MessageOptions {
	if d.Mode != "" {
		// The session asked for one mode: it holds on every channel.
		o.Mode, o.ByChannel = d.Mode, nil
	}
	if d.Debounce != nil {
		o.Debounce = *d.Debounce
	}
	if d.Cap != nil {
		o.Cap = *d.Cap
	}
	if d.Drop != "" {
		o.Drop = d.Drop
	}
	return o
}

// ParseQueueDirective reads a standalone "/queue" command:
// "/queue <mode> [debounce:2s] [cap:25] [drop:old|new|summarize]" sets the
// session's options (a legacy mode name, queue or steer+backlog, is read as
// the mode it stands for: Canonical), "/queue default" and "/queue reset" clear them (d is
// nil). ok is false for any other text, which is an ordinary message.
func ParseQueueDirective(text string) (d *QueueDirective, ok bool, err error) {
	fields := strings.Fields(text)
	if len(fields) == 0 || fields[0] != "/queue" {
		return nil, false, nil
	}
	if len(fields) == 1 {
		return nil, true, fmt.Errorf("%w: /queue needs a mode (followup, collect, steer, steer-backlog, interrupt), default or reset", ErrInvalidDirective)
	}
	d = &QueueDirective{}
	for _, f := range fields[1:] {
		name, value, hasValue := strings.Cut(f, ":")
		switch {
		case !hasValue && (f == "default" || f == "reset"):
			if len(fields) > 2 {
				return nil, true, fmt.Errorf("%w: /queue %s takes no options", ErrInvalidDirective, f)
			}
			return nil, true, nil
		case !hasValue:
			mode := MessageMode(f).Canonical()
			if !mode.valid() {
				return nil, true, fmt.Errorf("%w: unknown mode %q (followup, collect, steer, steer-backlog or interrupt)", ErrInvalidDirective, f)
			}
			d.Mode = mode
		case name == "debounce":
			v, err := time.ParseDuration(value)
			if err != nil || v < 0 {
				return nil, true, fmt.Errorf("%w: debounce %q is not a duration such as 2s", ErrInvalidDirective, value)
			}
			d.Debounce = &v
		case name == "cap":
			v, err := strconv.Atoi(value)
			if err != nil || v < 1 {
				return nil, true, fmt.Errorf("%w: cap %q is not a whole number of at least 1", ErrInvalidDirective, value)
			}
			d.Cap = &v
		case name == "drop":
			p := DropPolicy(value)
			if !p.valid() {
				return nil, true, fmt.Errorf("%w: drop %q is not old, new or summarize", ErrInvalidDirective, value)
			}
			d.Drop = p
		default:
			return nil, true, fmt.Errorf("%w: unknown option %q (debounce, cap, drop)", ErrInvalidDirective, name)
		}
	}
	return d, true, nil
}

// ErrInvalidDirective: a /queue command the inbox cannot apply.
var ErrInvalidDirective = errors.New("lanequeue: invalid /queue command")
