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
	"io"
	"os"
	"strings"
	"sync"
)

// Escape sequences of a live screen.
const (
	altScreenOn  = "\x1b[?1049h" // the alternate screen: the shell's text comes back on exit
	altScreenOff = "\x1b[?1049l"
	cursorHide   = "\x1b[?25l"
	cursorShow   = "\x1b[?25h"
	cursorHome   = "\x1b[H"
	clearLine    = "\x1b[K" // from the cursor to the end of the line
	clearBelow   = "\x1b[J" // from the cursor to the end of the screen
)

// screen writes frames to stdout: on a terminal (live) over the previous
// frame on the alternate screen, never past its last row, so nothing
// scrolls; otherwise (headless) one after the other.
type screen struct {
	f     *os.File
	w     io.Writer
	width int
	// live redraws in place with ANSI escapes; color writes colours.
	live, color bool
	// frames counts the dashboards written, to separate them when
	// headless; lastStrip is the last strip written.
	frames    int
	lastStrip string

	// stopOnce makes stop safe to call from every exit path.
	stopOnce sync.Once
	// restoreKeys puts the terminal's input settings back; nil when keys
	// are read as lines.
	restoreKeys func() error
}

func newScreen(f *os.File, o options) *screen {
	_, _, tty := terminalSize(f)
	s := &screen{f: f, w: f, width: o.width}
	s.live = tty && !o.headless && !o.once
	s.color = tty && !o.headless && os.Getenv("NO_COLOR") == ""
	return s
}

// write writes str to the screen; a failed write to the terminal has
// nowhere to be reported.
func (s *screen) write(str string) {
	_, _ = io.WriteString(s.w, str)
}

// size is the width to cut lines to and the terminal's rows (0 when
// unknown). --width wins over the terminal's columns.
func (s *screen) size() (width, rows int) {
	cols, rows, _ := terminalSize(s.f)
	if s.width > 0 {
		cols = s.width
	}
	return cols, rows
}

// start switches a live screen to the alternate screen, hidden cursor, and
// reads keys from stdin without Enter when stdin is a terminal.
func (s *screen) start(stdin *os.File) {
	if !s.live {
		return
	}
	s.write(altScreenOn + cursorHide + cursorHome + clearBelow)
	if stdin != nil && isTerminal(stdin) {
		if restore, err := keysMode(stdin); err == nil {
			s.restoreKeys = restore
		}
	}
}

// rawKeys reports whether keys arrive one at a time rather than as lines.
func (s *screen) rawKeys() bool {
	return s.restoreKeys != nil
}

// stop undoes start: the terminal's input settings, the cursor and the
// normal screen. It runs once, whichever exit path calls it first.
func (s *screen) stop() {
	s.stopOnce.Do(func() {
		if s.restoreKeys != nil {
			_ = s.restoreKeys()
		}
		if s.live {
			s.write(cursorShow + altScreenOff)
		}
	})
}

// clear blanks a live screen, when the view or the size changes.
func (s *screen) clear() {
	if s.live {
		s.write(cursorHome + clearBelow)
	}
}

// strip shows a strip line: on the first row of a live screen; else on a
// line of its own, and only when it changed, so that a log of strips reads
// as a history of the queues.
func (s *screen) strip(line string) {
	if s.live {
		s.write(cursorHome + line + clearLine + clearBelow)
		return
	}
	if line == s.lastStrip {
		return
	}
	s.lastStrip = line
	s.write(line + "\n")
}

// dashboard shows a frame of lines, each ending in "\n".
func (s *screen) dashboard(frame string) {
	if s.live {
		s.write(inPlace(frame))
		return
	}
	if s.frames > 0 {
		frame = "\n" + frame
	}
	s.frames++
	s.write(frame)
}

// inPlace is what draws frame over the previous one: home, each line
// followed by a clear to its end, no newline after the last line (on the
// last row it would scroll), then a clear of the rows below.
func inPlace(frame string) string {
	lines := strings.Split(strings.TrimSuffix(frame, "\n"), "\n")
	return cursorHome + strings.Join(lines, clearLine+"\r\n") + clearLine + clearBelow
}
