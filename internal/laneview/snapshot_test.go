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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

func keys(tasks []*Task) []string {
	out := []string{}
	for _, t := range tasks {
		out = append(out, t.Key())
	}
	return out
}

func TestNewSortsTheLists(t *testing.T) {
	snap := a3sSnapshot()
	got := map[string][]string{
		"in flight": keys(snap.InFlight), "queued": keys(snap.Queued), "finished": keys(snap.Finished), "tasks": keys(snap.Tasks()),
	}
	want := map[string][]string{
		"in flight": {"default/build-2", "default/build-1"},
		"queued":    {"default/lint-1"},
		"finished":  {"default/test-1", "default/test-2"},
		"tasks":     {"default/build-2", "default/build-1", "default/lint-1", "default/test-1", "default/test-2"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lists (-want,+got):\n%s", diff)
	}
	if got := snap.Queues[0].Lanes; got[0].Name != "control" || got[3].Name != "generate" {
		t.Errorf("lanes not in priority order: %v", got)
	}

	// Waiting tasks: the longest waiting first; a task the operator has not
	// seen yet (no phase, no queuedAt) waits since its creation.
	unseen := task("new", "s", "execute", "bash").obj()
	unseen.CreationTimestamp = *at(-30 * time.Minute)
	b := New("default", nil, []agentlanev1alpha1.ExternalTask{
		task("retry", "s", "execute", "bash").created(-time.Minute).attempt(2).obj(),
		unseen,
		task("old", "s", "execute", "bash").created(-time.Hour).obj(),
	}, nil)
	if diff := cmp.Diff([]string{"default/old", "default/new", "default/retry"}, keys(b.Queued)); diff != "" {
		t.Errorf("queued (-want,+got):\n%s", diff)
	}
}

func TestTaskFields(t *testing.T) {
	labelled := task("labelled", "", "", "bash").created(-time.Minute).obj()
	labelled.Labels = map[string]string{
		agentlanev1alpha1.QueueLabel: "a3s", agentlanev1alpha1.LaneLabel: "execute", agentlanev1alpha1.SessionLabel: "s1",
	}
	viaSession := task("via-session", "s2", "", "bash").created(-time.Minute).obj()
	viaSession.Status.Lane = "query"
	sessions := []agentlanev1alpha1.AgentSession{session("s2", "openclaw", agentlanev1alpha1.SessionActive, "")}
	snap := New("default", nil, []agentlanev1alpha1.ExternalTask{labelled, viaSession}, sessions)

	type where struct{ Queue, Lane, Session string }
	got := map[string]where{}
	for _, x := range snap.Queued {
		got[x.Name] = where{x.Queue, x.Lane, x.Session}
	}
	want := map[string]where{
		"labelled":    {"a3s", "execute", "s1"},
		"via-session": {"openclaw", "query", "s2"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("queue, lane and session (-want,+got):\n%s", diff)
	}
}

func TestNewResult(t *testing.T) {
	one := int32(1)
	cases := map[string]struct {
		raw  string
		want Result
	}{
		"bash output":      {raw: `{"stdout":"a\n","stderr":"b","truncated":true}`, want: Result{Stdout: "a\n", Stderr: "b", Truncated: true, ExitCode: &one}},
		"stderr only":      {raw: `{"stderr":"b"}`, want: Result{Stderr: "b", ExitCode: &one}},
		"another shape":    {raw: `{ "status": 200 }`, want: Result{JSON: `{"status":200}`, ExitCode: &one}},
		"not an object":    {raw: `[1, 2]`, want: Result{JSON: `[1,2]`, ExitCode: &one}},
		"no result at all": {want: Result{ExitCode: &one}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			x := task("x", "", "execute", "bash").finished(agentlanev1alpha1.ExternalTaskFailed, 0, tc.raw, "", 1).obj()
			got := New("", nil, []agentlanev1alpha1.ExternalTask{x}, nil).Finished[0].Result
			if diff := cmp.Diff(&tc.want, got); diff != "" {
				t.Errorf("result (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSelection(t *testing.T) {
	snap := a3sSnapshot()
	cases := map[string]struct {
		from  string
		delta int
		want  string
	}{
		"next from the default":            {from: "", delta: 1, want: "default/build-1"},
		"next crosses into QUEUED":         {from: "default/build-1", delta: 1, want: "default/lint-1"},
		"next crosses into RECENT":         {from: "default/lint-1", delta: 1, want: "default/test-1"},
		"next wraps around":                {from: "default/test-2", delta: 1, want: "default/build-2"},
		"previous wraps around":            {from: "default/build-2", delta: -1, want: "default/test-2"},
		"a task that left starts over":     {from: "default/deleted", delta: 1, want: "default/build-1"},
		"zero steps keeps a listed task":   {from: "default/lint-1", delta: 0, want: "default/lint-1"},
		"zero steps from nothing: default": {from: "", delta: 0, want: "default/build-2"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := snap.Step(tc.from, tc.delta); got != tc.want {
				t.Errorf("Step(%q, %d) = %q, want %q", tc.from, tc.delta, got, tc.want)
			}
		})
	}
	if got := New("", nil, nil, nil).Step("", 1); got != "" {
		t.Errorf("Step without tasks = %q, want empty", got)
	}
}

func TestDefaultTask(t *testing.T) {
	running := task("running", "", "execute", "bash").created(-time.Minute).running("w", "n", -time.Second).obj()
	waiting := task("waiting", "", "execute", "bash").created(-time.Minute).obj()
	done := task("done", "", "execute", "bash").created(-time.Minute).finished(agentlanev1alpha1.ExternalTaskSucceeded, 0, "", "", 0).obj()
	cases := map[string]struct {
		tasks []agentlanev1alpha1.ExternalTask
		want  string
	}{
		"the latest in flight":            {tasks: []agentlanev1alpha1.ExternalTask{waiting, done, running}, want: "running"},
		"else the most recently finished": {tasks: []agentlanev1alpha1.ExternalTask{waiting, done}, want: "done"},
		"else the one waiting longest":    {tasks: []agentlanev1alpha1.ExternalTask{waiting}, want: "waiting"},
		"none without tasks":              {want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ""
			if x := New("", nil, tc.tasks, nil).DefaultTask(); x != nil {
				got = x.Name
			}
			if got != tc.want {
				t.Errorf("DefaultTask = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFind(t *testing.T) {
	snap := New("", nil, []agentlanev1alpha1.ExternalTask{
		task("same", "", "execute", "bash").namespace("team-a").obj(),
		task("same", "", "execute", "bash").namespace("team-b").obj(),
		task("unique", "", "execute", "bash").namespace("team-b").obj(),
	}, nil)
	cases := map[string]string{
		"team-a/same": "team-a/same",
		"same":        "", // in two namespaces
		"unique":      "team-b/unique",
		"team-a/uniq": "",
	}
	for name, want := range cases {
		got := ""
		if x := snap.Find(name); x != nil {
			got = x.Key()
		}
		if got != want {
			t.Errorf("Find(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestAge(t *testing.T) {
	cases := map[time.Duration]string{
		-time.Second:                  "0s",
		0:                             "0s",
		999 * time.Millisecond:        "0s",
		42 * time.Second:              "42s",
		4*time.Minute + 5*time.Second: "4m05s",
		3*time.Hour + 7*time.Minute:   "3h07m",
		50*time.Hour + 59*time.Minute: "2d02h",
	}
	for d, want := range cases {
		if got := age(d); got != want {
			t.Errorf("age(%s) = %q, want %q", d, got, want)
		}
	}
}
