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

package kubectlplugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/agentlane/agentlane/internal/laneview"
)

// The views of `top`.
const (
	viewDashboard = "dashboard"
	viewStrip     = "strip"
)

// topOptions are the flags of `top`.
type topOptions struct {
	all   bool
	view  string
	task  string
	watch bool
	width int
}

// topCommand is `top`: lanetop's dashboard or strip (internal/laneview),
// printed once, or again at each change with --watch.
func (r *root) topCommand() *cobra.Command {
	o := topOptions{}
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Show the lanetop dashboard (or strip) of the queues",
		Long: `Show the queues' dashboard, as lanetop draws it: queues and lanes,
sessions, tasks in flight, waiting and finished, and the detail of one task;
or, with --view strip, one line. Prints one frame, or with --watch a new
frame each time something changes, until interrupted. For the interactive
dashboard (keys, selection) run 'kubectl lanetop'. Needs only the
queue-viewer ClusterRole.`,
		Example: `  kubectl agentlane top
  kubectl agentlane top -A --view strip --watch
  kubectl agentlane top --task build-7`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.view != viewDashboard && o.view != viewStrip {
				return usageError(cmd, "--view must be dashboard or strip, got %q", o.view)
			}
			if o.width < 0 {
				return usageError(cmd, "--width must not be negative, got %d", o.width)
			}
			ns, err := r.scope(o.all)
			if err != nil {
				return err
			}
			cfg, err := r.config.ToRESTConfig()
			if err != nil {
				return err
			}
			cfg.UserAgent = userAgent
			if !o.watch {
				reader, err := laneview.NewReader(cfg)
				if err != nil {
					return err
				}
				snap, err := laneview.Load(cmd.Context(), reader, ns)
				if err != nil {
					return err
				}
				return r.frame(r.streams.Out, snap, o)
			}
			w, err := laneview.NewWatcher(cfg, ns)
			if err != nil {
				return err
			}
			return r.watchTop(cmd.Context(), w, o)
		},
	}
	cmd.Flags().BoolVarP(&o.all, "all-namespaces", "A", false, "Show the queues of every namespace.")
	cmd.Flags().StringVar(&o.view, "view", viewDashboard, "What to show: dashboard or strip (one line).")
	cmd.Flags().StringVar(&o.task, "task", "", "Task shown in the detail pane, as name or namespace/name; defaults to the latest in flight, else the most recently finished.")
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "Print a new frame each time the queues, sessions or tasks change, until interrupted.")
	cmd.Flags().IntVar(&o.width, "width", 0, "Cut lines to this many columns; 0 leaves them whole.")
	return cmd
}

// watchTop starts w and prints a frame after each change until ctx ends;
// frames are separated by a blank line. A broken watch is printed as one
// line, and the frames go on once it recovers.
func (r *root) watchTop(ctx context.Context, w *laneview.Watcher, o topOptions) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := w.Start(ctx); err != nil {
		return err
	}
	var werr error
	first, last := true, ""
	laneview.Watch(ctx, w, laneview.DefaultSettle, func(snap *laneview.Snapshot, err error) {
		var b bytes.Buffer
		if !first && o.view == viewDashboard {
			b.WriteString("\n") // a blank line between frames
		}
		switch {
		case snap == nil && errors.Is(err, laneview.ErrNotSynced):
			return
		case snap == nil:
			fmt.Fprintf(&b, "kubectl-agentlane: %s\n", cell(err.Error()))
		default:
			if ferr := r.frame(&b, snap, o); ferr != nil {
				werr = ferr
				cancel()
				return
			}
		}
		if o.view == viewStrip && b.String() == last {
			return // the strip has no clock: print it when it changed
		}
		first, last = false, b.String()
		if _, err := b.WriteTo(r.streams.Out); err != nil {
			werr = err
			cancel()
		}
	})
	return werr
}

// frame writes one dashboard, or one strip line, of snap.
func (r *root) frame(out io.Writer, snap *laneview.Snapshot, o topOptions) error {
	if o.view == viewStrip {
		_, err := fmt.Fprintln(out, laneview.Strip(snap, laneview.StripOptions{Width: o.width}))
		return err
	}
	return laneview.RenderDashboard(out, snap, laneview.DashboardOptions{Now: r.clock.Now(), Width: o.width, Selected: o.task})
}
