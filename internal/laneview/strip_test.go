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
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

func TestStrip(t *testing.T) {
	ext := agentlanev1alpha1.HandlerModeExternal
	running := func(name string, offset time.Duration) agentlanev1alpha1.ExternalTask {
		return task(name, "s1", "execute", "bash").created(-time.Minute).running("w1", "n1", offset).obj()
	}
	five := make([]agentlanev1alpha1.LaneQueue, 5)
	for i := range five {
		// q0 has no cap at all; the others one lane capped at i.
		capped := int32(i)
		five[i] = queue(fmt.Sprintf("q%d", i)).lane("execute", 0, ext, capped, 0, int64(i), 1, int64(10*i), int64(i%2), int64(i/4)).obj()
	}
	cases := map[string]struct {
		snap *Snapshot
		opts StripOptions
		want string
	}{
		"no queues": {
			snap: New("team-a", nil, nil, nil),
			want: "no LaneQueues in namespace team-a",
		},
		"one queue: counts from the status, Internal lanes included, and the latest task in flight": {
			snap: a3sSnapshot(),
			want: "a3s ●3/64 ○1 ✓14 ✗1 ☠1 last: build-2 (bash)",
		},
		"one queue without dead letters or tasks in flight": {
			snap: New("default", []agentlanev1alpha1.LaneQueue{
				queue("batch").lane("execute", 0, ext, 2, 0, 0, 0, 7, 0).lane("cron", 1, "", 1, 0).isolated().obj(),
			}, nil, nil),
			want: "batch ●0/3 ○0 ✓7 ✗0",
		},
		"the latest task is the one started last, whatever its name or age": {
			snap: New("default", []agentlanev1alpha1.LaneQueue{queue("a3s").lane("execute", 0, ext, 4, 0, 0, 3).obj()},
				[]agentlanev1alpha1.ExternalTask{
					running("zz-early", -50*time.Second),
					running("aa-late", -2*time.Second),
					task("dispatched-only", "s1", "execute", "grep").created(-time.Minute).dispatched("w2", "n2", -5*time.Second).obj(),
				}, nil),
			want: "a3s ●3/4 ○0 ✓0 ✗0 last: aa-late (bash)",
		},
		"tasks started in the same second: the later ULID is the latest": {
			snap: New("default", []agentlanev1alpha1.LaneQueue{queue("a3s").lane("execute", 0, ext, 4, 0, 0, 2).obj()},
				[]agentlanev1alpha1.ExternalTask{
					running("01jdq8m9k2v7f3w4x5y6z7a8c0", -3*time.Second),
					running("01jdq8m9k2v7f3w4x5y6z7a8b9", -3*time.Second),
				}, nil),
			want: "a3s ●2/4 ○0 ✓0 ✗0 last: 01jdq8…7a8c0 (bash)",
		},
		"a task dispatched after the last start is the latest": {
			snap: New("default", []agentlanev1alpha1.LaneQueue{queue("a3s").lane("execute", 0, ext, 4, 0, 0, 2).obj()},
				[]agentlanev1alpha1.ExternalTask{
					running("started", -20*time.Second),
					task("dispatched", "s1", "execute", "grep").created(-time.Minute).dispatched("w2", "n2", -5*time.Second).obj(),
				}, nil),
			want: "a3s ●2/4 ○0 ✓0 ✗0 last: dispatched (grep)",
		},
		"three queues: running and pending of each": {
			snap: New("default", []agentlanev1alpha1.LaneQueue{
				queue("openclaw").lane("main", 0, "", 4, 1, 2, 3, 40, 1).obj(),
				queue("a3s").maxConcurrent(64).lane("execute", 0, ext, 16, 2, 1, 2).obj(),
				queue("batch").lane("execute", 0, ext, 0, 0).obj(),
			}, []agentlanev1alpha1.ExternalTask{running("01jdq8m9k2v7f3w4x5y6z7a8b9", -time.Second)}, nil),
			want: "a3s ●2/16 ○1 · batch ●0/∞ ○0 · openclaw ●3/4 ○2 last: 01jdq8…7a8b9 (bash)",
		},
		"five queues: totals, capacity unbounded when one queue is": {
			snap: New("", five, nil, nil),
			want: "5 queues · ●5/∞ ○10 ✓100 ✗2 ☠1",
		},
		"four queues with caps: the capacities add up": {
			snap: New("", five[1:], nil, nil),
			want: "4 queues · ●4/10 ○10 ✓100 ✗2 ☠1",
		},
		"queues of several namespaces are qualified": {
			snap: New("", []agentlanev1alpha1.LaneQueue{
				queue("a3s").namespace("team-a").lane("execute", 0, ext, 1, 0).obj(),
				queue("a3s").namespace("team-b").lane("execute", 0, ext, 2, 0, 1).obj(),
			}, nil, nil),
			want: "team-a/a3s ●0/1 ○0 · team-b/a3s ●0/2 ○1",
		},
		"a narrow width cuts the line": {
			snap: a3sSnapshot(),
			opts: StripOptions{Width: 24},
			want: "a3s ●3/64 ○1 ✓14 ✗1 ☠1…",
		},
		"colour": {
			snap: a3sSnapshot(),
			opts: StripOptions{Color: true},
			want: "\x1b[1ma3s\x1b[0m \x1b[33m●3/64\x1b[0m ○1 \x1b[32m✓14\x1b[0m \x1b[31m✗1\x1b[0m \x1b[35m☠1\x1b[0m\x1b[2m last: \x1b[0m\x1b[1mbuild-2\x1b[0m (bash)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Strip(tc.snap, tc.opts)); diff != "" {
				t.Errorf("Strip (-want,+got):\n%s", diff)
			}
			var b strings.Builder
			if err := RenderStrip(&b, tc.snap, tc.opts); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want+"\n" {
				t.Errorf("RenderStrip wrote %q, want the strip and a line break", b.String())
			}
		})
	}
}

func TestCapacity(t *testing.T) {
	cases := map[string]struct {
		lanes         []Lane
		maxConcurrent int32
		want          int32
	}{
		"capped lanes add up":                      {lanes: []Lane{{MaxConcurrency: 2}, {MaxConcurrency: 3}}, want: 5},
		"one lane without a cap":                   {lanes: []Lane{{MaxConcurrency: 2}, {}}, want: Unlimited},
		"maxConcurrent bounds lanes without a cap": {lanes: []Lane{{MaxConcurrency: 2}, {}}, maxConcurrent: 8, want: 8},
		"maxConcurrent above the lanes' sum":       {lanes: []Lane{{MaxConcurrency: 2}, {MaxConcurrency: 3}}, maxConcurrent: 8, want: 5},
		"isolated lanes are outside maxConcurrent": {lanes: []Lane{{}, {MaxConcurrency: 3, Isolated: true}}, maxConcurrent: 8, want: 11},
		"an isolated lane without a cap":           {lanes: []Lane{{MaxConcurrency: 1}, {Isolated: true}}, maxConcurrent: 8, want: Unlimited},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := capacity(tc.lanes, tc.maxConcurrent); got != tc.want {
				t.Errorf("capacity = %d, want %d", got, tc.want)
			}
		})
	}
}
