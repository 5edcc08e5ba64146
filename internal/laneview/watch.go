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

package laneview

import (
	"context"
	"io"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Watch loads a snapshot of namespace (all namespaces when empty) at once
// and then every interval until ctx ends, and hands each to fn. When a load
// fails fn gets the error and a nil snapshot, and Watch carries on: the next
// load may succeed. Loads do not overlap; a slow load delays the next one.
// Watch returns when ctx ends.
func Watch(ctx context.Context, r client.Reader, namespace string, interval time.Duration, fn func(*Snapshot, error)) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		snap, err := Load(ctx, r, namespace)
		if ctx.Err() != nil {
			return
		}
		fn(snap, err)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// Follow writes the strip of namespace's queues (see Strip) to w, one line
// each time it changes, checking every interval until ctx ends. A failed
// load is written as a line "laneview: <error>", once until the error
// changes. It returns nil when ctx ends, or the first error writing to w.
//
// It suits a log or a demo's progress: the strip has no clock in it, so
// nothing is written while the queues stand still.
//
//	go laneview.Follow(ctx, reader, "default", time.Second, os.Stdout, laneview.StripOptions{})
func Follow(ctx context.Context, r client.Reader, namespace string, interval time.Duration, w io.Writer, opts StripOptions) error {
	var last string
	var werr error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	Watch(ctx, r, namespace, interval, func(snap *Snapshot, err error) {
		text := "laneview: " + errorText(err)
		if err == nil {
			text = Strip(snap, opts)
		}
		if text == last {
			return
		}
		last = text
		if _, werr = io.WriteString(w, text+"\n"); werr != nil {
			cancel()
		}
	})
	return werr
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
