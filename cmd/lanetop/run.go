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
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"time"
	"unicode"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentlane/agentlane/internal/laneview"
)

// viewer holds what changes between frames: the view, the selection, and
// the task name being typed after /.
type viewer struct {
	o        options
	screen   *screen
	view     string
	selected string
	last     *laneview.Snapshot
	// typing is set while a task name is typed (raw keys only); name is
	// what is typed so far.
	typing bool
	name   string
}

// once shows one frame read with one list of each kind, or returns the
// error.
func once(ctx context.Context, o options, r client.Reader, out *screen) error {
	v := &viewer{o: o, screen: out, view: o.view, selected: o.task}
	snap, err := laneview.Load(ctx, r, o.namespace)
	if err != nil {
		return err
	}
	v.show(snap, nil)
	return nil
}

// run shows frames until ctx ends or q is read: after each change of src
// (once it settled), every interval for the elapsed times, when the
// terminal's size changes and after each key.
func run(ctx context.Context, o options, src laneview.Source, keys <-chan string, resize <-chan os.Signal, out *screen) error {
	v := &viewer{o: o, screen: out, view: o.view, selected: o.task}
	ticker := time.NewTicker(o.interval)
	defer ticker.Stop()
	var settled <-chan time.Time
	frame := func() { v.show(src.Snapshot(ctx)) }
	frame()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-src.Changed():
			if settled == nil {
				settled = time.After(laneview.DefaultSettle)
			}
		case <-settled:
			settled = nil
			frame()
		case <-ticker.C:
			frame()
		case <-resize:
			out.clear()
			frame()
		case key, ok := <-keys:
			if !ok {
				keys = nil // stdin closed: no more keys, keep refreshing
				continue
			}
			switch v.key(key) {
			case quit:
				return nil
			case redraw:
				frame()
			}
		}
	}
}

type action int

const (
	ignore action = iota
	redraw
	quit
)

// key applies one key, or one line of input when keys come as lines.
func (v *viewer) key(k string) action {
	if v.typing {
		return v.typed(k)
	}
	switch k {
	case "q", "quit", keyInterrupt:
		return quit
	case "", "r", keyEnter:
		return redraw
	case "n", "j", keyDown:
		v.step(1)
	case "p", "k", keyUp:
		v.step(-1)
	case "v":
		v.view = map[string]string{viewStrip: viewDashboard, viewDashboard: viewStrip}[v.view]
		v.screen.clear()
	case "/":
		v.typing, v.name = v.screen.rawKeys(), ""
	default:
		// A line that is not a key selects the task of that name, if
		// there is one.
		return v.selectTask(k)
	}
	return redraw
}

// typed applies a key while a task name is typed after /.
func (v *viewer) typed(k string) action {
	switch k {
	case keyEnter:
		v.typing = false
		v.selectTask(v.name)
	case keyEscape, keyInterrupt:
		v.typing = false
	case keyBackspace:
		if n := len([]rune(v.name)); n > 0 {
			v.name = string([]rune(v.name)[:n-1])
		}
	default:
		if len([]rune(k)) == 1 {
			v.name += k
		}
	}
	return redraw
}

func (v *viewer) selectTask(name string) action {
	if v.last == nil || v.last.Find(name) == nil {
		return ignore
	}
	v.selected = name
	return redraw
}

// step moves the selection along the listed tasks.
func (v *viewer) step(delta int) {
	if v.last == nil {
		return
	}
	key := ""
	if t := v.last.Selected(v.selected); t != nil {
		key = t.Key()
	}
	v.selected = v.last.Step(key, delta)
}

// show draws a snapshot, or the error when there is none. A snapshot with
// an error is the last state seen while the watch is retried: the error is
// shown under it.
func (v *viewer) show(snap *laneview.Snapshot, err error) {
	if snap == nil {
		if !v.screen.live && errors.Is(err, laneview.ErrNotSynced) {
			return // headless: no frame until there is something to show
		}
		v.showError(err)
		return
	}
	v.last = snap
	width, rows := v.screen.size()
	if v.view == viewStrip {
		v.screen.strip(laneview.Strip(snap, laneview.StripOptions{Width: width, Color: v.screen.color}))
		return
	}
	var b bytes.Buffer
	opts := laneview.DashboardOptions{Now: time.Now(), Width: width, Color: v.screen.color, Selected: v.selected}
	if v.screen.live && rows > 1 {
		opts.Height = rows - 1 // a row for the status line
	}
	_ = laneview.RenderDashboard(&b, snap, opts)
	if v.screen.live {
		b.WriteString(cut(v.status(err), width) + "\n")
	}
	v.screen.dashboard(b.String())
}

// status is the last row of a live dashboard: the keys, the name being
// typed, or the error of a broken watch.
func (v *viewer) status(err error) string {
	switch {
	case v.typing:
		return "task: " + v.name + "▏ (Enter select · Esc cancel)"
	case err != nil:
		return "lanetop: " + oneLine(err) + " (retrying; showing the last state seen)"
	case v.screen.rawKeys():
		return "n/p or ↓/↑ select · / task name · v strip/dashboard · q quit"
	}
	return "n/p select · v strip/dashboard · q quit (each + Enter)"
}

// showError shows a failed load in place of a frame.
func (v *viewer) showError(err error) {
	width, _ := v.screen.size()
	text := cut("lanetop: "+oneLine(err), width)
	if v.view == viewStrip {
		v.screen.strip(text)
		return
	}
	v.screen.dashboard(text + "\n")
}

// oneLine is the error's text on one line, without control characters: it
// may quote what the API server or a proxy sent.
func oneLine(err error) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, err.Error())
}

// cut shortens s to width runes (0: no limit), ending it with "…".
func cut(s string, width int) string {
	r := []rune(s)
	if width <= 0 || len(r) <= width {
		return s
	}
	return string(r[:width-1]) + "…"
}
