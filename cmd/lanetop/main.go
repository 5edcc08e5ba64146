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

// Command lanetop shows the live state of agentlane's queues in a terminal:
// a one-line strip or a dashboard of queues, lanes, sessions, tasks in
// flight, waiting and finished, and the detail of one task. It reads the
// cluster of a kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config, or the
// pod's service account in a cluster) and needs only get/list on the
// LaneQueues, ExternalTasks and AgentSessions (config/rbac/queue_viewer_role.yaml).
//
// On a terminal it redraws in place; keys are read from stdin as lines
// (n, p, v, q, each followed by Enter). With --headless, or when stdout is
// not a terminal, it writes plain frames one after the other, for logs and
// tests. See docs/lanetop.md.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentlane/agentlane/internal/laneview"
)

// The views lanetop can show.
const (
	viewStrip     = "strip"
	viewDashboard = "dashboard"
)

// options are lanetop's command-line settings.
type options struct {
	kubeconfig string
	context    string
	namespace  string
	view       string
	interval   time.Duration
	once       bool
	headless   bool
	task       string
	width      int
}

// parseFlags reads the command line.
func parseFlags(args []string, output io.Writer) (options, error) {
	o := options{}
	fs := flag.NewFlagSet("lanetop", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path of the kubeconfig; defaults to $KUBECONFIG, then ~/.kube/config, then the in-cluster service account.")
	fs.StringVar(&o.context, "context", "", "Kubeconfig context to use; defaults to the current context.")
	fs.StringVar(&o.namespace, "namespace", "", "Namespace to show; empty shows all namespaces.")
	fs.StringVar(&o.namespace, "n", "", "Shorthand for --namespace.")
	fs.StringVar(&o.view, "view", viewDashboard, "What to show: strip (one line) or dashboard.")
	fs.DurationVar(&o.interval, "interval", time.Second, "How often to refresh.")
	fs.BoolVar(&o.once, "once", false, "Print one frame and exit; exit status 1 when the cluster cannot be read.")
	fs.BoolVar(&o.headless, "headless", false, "No ANSI escapes, no screen clearing: each refresh prints a new dashboard after a blank line; the strip prints a line when it changed.")
	fs.StringVar(&o.task, "task", "", "Task shown in the detail pane, as name or namespace/name; defaults to the latest in flight, else the most recently finished.")
	fs.IntVar(&o.width, "width", 0, "Cut lines to this many columns; 0 uses the terminal's width, or no limit when stdout is not a terminal.")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var errs []error
	if o.view != viewStrip && o.view != viewDashboard {
		errs = append(errs, fmt.Errorf("--view must be strip or dashboard, got %q", o.view))
	}
	if o.interval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("--interval must be at least 100ms, got %s", o.interval))
	}
	if o.width < 0 {
		errs = append(errs, fmt.Errorf("--width must not be negative, got %d", o.width))
	}
	return o, errors.Join(errs...)
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lanetop:", err)
		os.Exit(2)
	}
	cfg, err := restConfig(o.kubeconfig, o.context)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lanetop:", err)
		os.Exit(1)
	}
	reader, err := laneview.NewReader(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lanetop:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := newScreen(os.Stdout, o)
	if err := run(ctx, o, reader, os.Stdin, out); err != nil {
		fmt.Fprintln(os.Stderr, "lanetop:", err)
		stop()
		os.Exit(1)
	}
}

// restConfig loads the kubeconfig the way kubectl does: the explicit path,
// else $KUBECONFIG, else ~/.kube/config; with none of them, the service
// account of the pod lanetop runs in.
func restConfig(path, kubeContext string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load a kubeconfig: %w", err)
	}
	// Each refresh lists three kinds; leave room for short intervals.
	cfg.QPS, cfg.Burst = 30, 60
	cfg.UserAgent = "lanetop"
	return cfg, nil
}

// viewer holds what changes between frames: the view and the selection.
type viewer struct {
	o        options
	reader   client.Reader
	screen   *screen
	view     string
	selected string
	last     *laneview.Snapshot
}

// run shows frames until ctx ends or q is read from stdin; with --once it
// shows one. It returns an error only when --once could not read the
// cluster: otherwise errors are shown in the frames and the next refresh
// tries again.
func run(ctx context.Context, o options, r client.Reader, stdin io.Reader, out *screen) error {
	v := &viewer{o: o, reader: r, screen: out, view: o.view, selected: o.task}
	if o.once {
		return v.frame(ctx)
	}
	out.start()
	defer out.stop()
	keys := make(chan string)
	if stdin != nil {
		go readKeys(stdin, keys)
	}
	ticker := time.NewTicker(o.interval)
	defer ticker.Stop()
	for {
		_ = v.frame(ctx)
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-ticker.C:
				break wait
			case key, ok := <-keys:
				if !ok {
					keys = nil // stdin closed: no more keys, keep refreshing
					continue
				}
				switch v.key(key) {
				case quit:
					return nil
				case redraw:
					break wait
				}
			}
		}
	}
}

// readKeys sends each line read from r, trimmed, until r ends.
func readKeys(r io.Reader, keys chan<- string) {
	defer close(keys)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		keys <- strings.TrimSpace(sc.Text())
	}
}

type action int

const (
	ignore action = iota
	redraw
	quit
)

// key applies one line of input.
func (v *viewer) key(k string) action {
	switch k {
	case "q", "quit":
		return quit
	case "", "r":
		return redraw
	case "n", "j":
		v.step(1)
	case "p", "k":
		v.step(-1)
	case "v":
		v.view = map[string]string{viewStrip: viewDashboard, viewDashboard: viewStrip}[v.view]
		v.screen.clear()
	default:
		// Any other line selects the task of that name, if there is one.
		if v.last == nil || v.last.Find(k) == nil {
			return ignore
		}
		v.selected = k
	}
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

// frame loads the queues and shows them, or the error.
func (v *viewer) frame(ctx context.Context) error {
	snap, err := laneview.Load(ctx, v.reader, v.o.namespace)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		if !v.o.once {
			v.showError(err)
		}
		return err
	}
	v.last = snap
	width, rows := v.screen.size()
	if v.view == viewStrip {
		v.screen.strip(laneview.Strip(snap, laneview.StripOptions{Width: width, Color: v.screen.color}))
		return nil
	}
	var b bytes.Buffer
	_ = laneview.RenderDashboard(&b, snap, laneview.DashboardOptions{
		Now: time.Now(), Width: width, Color: v.screen.color, Selected: v.selected, MaxRows: listRows(snap, rows),
	})
	if v.screen.live {
		b.WriteString("n/p select · v strip/dashboard · q quit (each + Enter)\n")
	}
	v.screen.dashboard(b.String())
	return nil
}

// showError shows a failed load in place of a frame.
func (v *viewer) showError(err error) {
	text := "lanetop: " + strings.ReplaceAll(err.Error(), "\n", " ")
	if v.view == viewStrip {
		v.screen.strip(text)
		return
	}
	v.screen.dashboard(text + "\n")
}

// listRows is how many rows each list may take so that the dashboard fits
// in a terminal of the given rows (0: unknown); between 3 and 10.
func listRows(snap *laneview.Snapshot, rows int) int {
	if rows <= 0 {
		return 10
	}
	fixed := 1 + 6 + 16 + 1 // header, rules, a detail pane, key help
	for _, q := range snap.Queues {
		fixed += 1 + len(q.Lanes)
	}
	return min(max((rows-fixed)/4, 3), 10)
}

// screen writes frames to stdout: in place on a terminal (live), one after
// the other otherwise (headless).
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
}

func newScreen(f *os.File, o options) *screen {
	_, _, tty := terminalSize(f)
	s := &screen{f: f, w: f, width: o.width}
	s.live = tty && !o.headless && !o.once
	s.color = tty && !o.headless && os.Getenv("NO_COLOR") == ""
	return s
}

// size is the width to cut lines to and the terminal's rows (0 when
// unknown).
func (s *screen) size() (width, rows int) {
	if s.width > 0 {
		return s.width, 0
	}
	cols, rows, _ := terminalSize(s.f)
	return cols, rows
}

func (s *screen) start() {
	if s.live {
		io.WriteString(s.w, "\x1b[?25l") // hide the cursor
	}
}

// clear blanks a live screen, when the view changes.
func (s *screen) clear() {
	if s.live {
		io.WriteString(s.w, "\x1b[H\x1b[J")
	}
}

func (s *screen) stop() {
	if s.live {
		io.WriteString(s.w, "\x1b[?25h\n")
	}
}

// strip shows a strip line: over the previous one on a terminal; else on a
// line of its own, and only when it changed, so that a log of strips reads
// as a history of the queues.
func (s *screen) strip(line string) {
	if s.live {
		io.WriteString(s.w, "\r"+line+"\x1b[K")
		return
	}
	if line == s.lastStrip {
		return
	}
	s.lastStrip = line
	io.WriteString(s.w, line+"\n")
}

func (s *screen) dashboard(frame string) {
	if s.live {
		// Home, each line over the old one, then clear what is left below.
		frame = "\x1b[H" + strings.ReplaceAll(frame, "\n", "\x1b[K\n") + "\x1b[J"
	} else if s.frames > 0 {
		frame = "\n" + frame
	}
	s.frames++
	io.WriteString(s.w, frame)
}
