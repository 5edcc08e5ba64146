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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRenderDashboard(t *testing.T) {
	cases := map[string]struct {
		snap *Snapshot
		opts DashboardOptions
		want string
	}{
		"one queue: lanes, session, tasks in flight, waiting and finished; the latest in flight is selected": {
			snap: a3sSnapshot(),
			opts: DashboardOptions{Now: t0, Width: 80},
			want: `
agentlane · namespace default · 2026-05-21T17:30:00Z
── QUEUES (1) ──────────────────────────────────────────────────────────────────
  a3s                       ●3/64             ○1  ✓14  ✗1  ☠1  ready · 1 session
    control   P0  Internal  ●0/∞   2/session  ○0  ✓3   ✗0  ☠0
    query     P1  Internal  ●1/∞   4/session  ○0  ✓9   ✗0  ☠0
    execute   P2  External  ●2/16  2/session  ○1  ✓2   ✗1  ☠1
    generate  P3  Internal  ●0/8   1/session  ○0  ✓0   ✗0  ☠0
── SESSIONS (1) ────────────────────────────────────────────────────────────────
  reviewer-42  a3s  Active  node-a  acme-corp  ●3  ○1  ✓14  ✗2  ☠1
── IN-FLIGHT (2 + 1 internal) ──────────────────────────────────────────────────
▸ build-2  bash  execute  reviewer-42  Running  worker-a@node-a  10s  make build
  build-1  bash  execute  reviewer-42  Running  worker-b@node-b  30s  make test
── QUEUED (1) ──────────────────────────────────────────────────────────────────
  lint-1  bash  execute  reviewer-42  Queued  waiting 5s  golangci-lint run
── RECENT (2) ──────────────────────────────────────────────────────────────────
  ✓ test-1  bash  execute  worker-a@node-a  ran 1m30s  1m00s ago  ok pkg 1.2s
  ✗ test-2  bash  execute  worker-a@node-a  ran 10s    1m40s ago  exit status 1
── TASK build-2 ────────────────────────────────────────────────────────────────
  state       Running · attempt 1 · for 10s
  queue       a3s · lane execute · bash
  session     reviewer-42 · Active on node-a · pod reviewer-42-pod
  identity    tenant acme-corp · principal user:42 · template reviewer-v3 · cor…
  run         01jdq8m2r5t6y7p8q9s0t1v2w3
  worker      worker-a on node-a
  payload     {"command":"make build","workingDir":"/src"}
  created     2026-05-21T17:29:45Z (15s ago)
  queued      2026-05-21T17:29:45Z (15s ago)
  dispatched  2026-05-21T17:29:49Z (11s ago)
  started     2026-05-21T17:29:50Z (10s ago)
  finished    —
  result      —
`,
		},
		"a finished task selected: result, stderr, error and the attempt before": {
			snap: a3sSnapshot(),
			opts: DashboardOptions{Now: t0, Width: 80, Selected: "default/test-2"},
			want: `
agentlane · namespace default · 2026-05-21T17:30:00Z
── QUEUES (1) ──────────────────────────────────────────────────────────────────
  a3s                       ●3/64             ○1  ✓14  ✗1  ☠1  ready · 1 session
    control   P0  Internal  ●0/∞   2/session  ○0  ✓3   ✗0  ☠0
    query     P1  Internal  ●1/∞   4/session  ○0  ✓9   ✗0  ☠0
    execute   P2  External  ●2/16  2/session  ○1  ✓2   ✗1  ☠1
    generate  P3  Internal  ●0/8   1/session  ○0  ✓0   ✗0  ☠0
── SESSIONS (1) ────────────────────────────────────────────────────────────────
  reviewer-42  a3s  Active  node-a  acme-corp  ●3  ○1  ✓14  ✗2  ☠1
── IN-FLIGHT (2 + 1 internal) ──────────────────────────────────────────────────
  build-2  bash  execute  reviewer-42  Running  worker-a@node-a  10s  make build
  build-1  bash  execute  reviewer-42  Running  worker-b@node-b  30s  make test
── QUEUED (1) ──────────────────────────────────────────────────────────────────
  lint-1  bash  execute  reviewer-42  Queued  waiting 5s  golangci-lint run
── RECENT (2) ──────────────────────────────────────────────────────────────────
  ✓ test-1  bash  execute  worker-a@node-a  ran 1m30s  1m00s ago  ok pkg 1.2s
▸ ✗ test-2  bash  execute  worker-a@node-a  ran 10s    1m40s ago  exit status 1
── TASK test-2 ─────────────────────────────────────────────────────────────────
  state       Failed · attempt 2
  queue       a3s · lane execute · bash
  session     reviewer-42 · Active on node-a · pod reviewer-42-pod
  worker      worker-a on node-a
  payload     {"command":"go vet ./..."}
  created     2026-05-21T17:27:00Z (3m00s ago)
  queued      2026-05-21T17:27:00Z (3m00s ago)
  dispatched  2026-05-21T17:28:09Z (1m51s ago)
  started     2026-05-21T17:28:10Z (1m50s ago)
  finished    2026-05-21T17:28:20Z (1m40s ago)
  result      failed · exit 1
  stderr      vet: x.go:3: unreachable code
  error       exit status 1
  attempt 1   WorkerLost · worker-c on node-c · 2026-05-21T17:28:00Z · heartbea…
`,
		},
		"a narrow width cuts every line": {
			snap: a3sSnapshot(),
			opts: DashboardOptions{Now: t0, Width: 40, Selected: "lint-1"},
			want: `
agentlane · namespace default · 2026-05…
── QUEUES (1) ──────────────────────────
  a3s                       ●3/64…
    control   P0  Internal  ●0/∞   2/se…
    query     P1  Internal  ●1/∞   4/se…
    execute   P2  External  ●2/16  2/se…
    generate  P3  Internal  ●0/8   1/se…
── SESSIONS (1) ────────────────────────
  reviewer-42  a3s  Active  node-a  acm…
── IN-FLIGHT (2 + 1 internal) ──────────
  build-2  bash  execute  reviewer-42…
  build-1  bash  execute  reviewer-42…
── QUEUED (1) ──────────────────────────
▸ lint-1  bash  execute  reviewer-42  Q…
── RECENT (2) ──────────────────────────
  ✓ test-1  bash  execute  worker-a@nod…
  ✗ test-2  bash  execute  worker-a@nod…
── TASK lint-1 ─────────────────────────
  state       Queued · waiting 5s
  queue       a3s · lane execute · bash
  session     reviewer-42 · Active on n…
  payload     {"command":"golangci-lint…
  created     2026-05-21T17:29:55Z (5s…
  queued      2026-05-21T17:29:55Z (5s…
  dispatched  —
  started     —
  finished    —
  result      —
`,
		},
		"several namespaces and queues: qualified names, lists scrolled to the selection, control characters replaced": {
			snap: manySnapshot(),
			opts: DashboardOptions{Now: t0, MaxRows: 3, Selected: "team-b/t5"},
			want: `
agentlane · all namespaces · 2026-05-21T17:30:00Z
── QUEUES (2) ──────────────────────────────────────────────────────────
  team-a/q-team-a                ●5/4  ○1  ✓0  ✗0  ☠0  no status yet · 0 sessions · pressure: WarningDepthReached
    execute        P0  External  ●5/4  ○1  ✓0  ✗0  ☠0
  team-b/q-team-b                ●3/4  ○0  ✓0  ✗0  ☠0  no status yet · 0 sessions
    execute        P0  External  ●3/4  ○0  ✓0  ✗0  ☠0
── SESSIONS (0) ────────────────────────────────────────────────────────
  no AgentSessions
── IN-FLIGHT (8) ───────────────────────────────────────────────────────
  t3  bash  q-team-b/execute  —  Running  w  3m00s  sleep 3
  t4  bash  q-team-a/execute  —  Running  w  4m00s  sleep 4
▸ t5  bash  q-team-b/execute  —  Running  w  5m00s  sleep 5
  … 3 above, 2 below
── QUEUED (1) ──────────────────────────────────────────────────────────
  evil  bash  q-team-a/execute  —  Queued  waiting 1h30m  printf ' [2J' rm -rf /tmp/x
── RECENT (0) ──────────────────────────────────────────────────────────
  no tasks finished
── TASK team-b/t5 ──────────────────────────────────────────────────────
  state       Running · attempt 1 · for 5m00s
  queue       q-team-b · lane execute · bash
  worker      w
  payload     {"command":"sleep 5"}
  created     2026-05-21T16:30:00Z (1h00m ago)
  queued      2026-05-21T16:30:00Z (1h00m ago)
  dispatched  2026-05-21T17:24:59Z (5m01s ago)
  started     2026-05-21T17:25:00Z (5m00s ago)
  finished    —
  result      —
`,
		},
		"a task dispatched to a Job": {
			snap: manySnapshot(),
			opts: DashboardOptions{Now: t0, Selected: "job-task"},
			want: `
agentlane · all namespaces · 2026-05-21T17:30:00Z
── QUEUES (2) ──────────────────────────────────────────────────────────
  team-a/q-team-a                ●5/4  ○1  ✓0  ✗0  ☠0  no status yet · 0 sessions · pressure: WarningDepthReached
    execute        P0  External  ●5/4  ○1  ✓0  ✗0  ☠0
  team-b/q-team-b                ●3/4  ○0  ✓0  ✗0  ☠0  no status yet · 0 sessions
    execute        P0  External  ●3/4  ○0  ✓0  ✗0  ☠0
── SESSIONS (0) ────────────────────────────────────────────────────────
  no AgentSessions
── IN-FLIGHT (8) ───────────────────────────────────────────────────────
  t0        bash  q-team-a/execute  —  Running     w          0s     sleep 0
  t1        bash  q-team-b/execute  —  Running     w          1m00s  sleep 1
  t2        bash  q-team-a/execute  —  Running     w          2m00s  sleep 2
  t3        bash  q-team-b/execute  —  Running     w          3m00s  sleep 3
  t4        bash  q-team-a/execute  —  Running     w          4m00s  sleep 4
  t5        bash  q-team-b/execute  —  Running     w          5m00s  sleep 5
  t6        bash  q-team-a/execute  —  Running     w          6m00s  sleep 6
▸ job-task  bash  q-team-a/execute  —  Dispatched  job job-7  1d01h
── QUEUED (1) ──────────────────────────────────────────────────────────
  evil  bash  q-team-a/execute  —  Queued  waiting 1h30m  printf ' [2J' rm -rf /tmp/x
── RECENT (0) ──────────────────────────────────────────────────────────
  no tasks finished
── TASK team-a/job-task ────────────────────────────────────────────────
  state       Dispatched · attempt 1 · for 1d01h
  queue       q-team-a · lane execute · bash
  worker      job job-7
  payload     —
  created     2026-05-20T15:30:00Z (1d02h ago)
  queued      2026-05-20T15:30:00Z (1d02h ago)
  dispatched  2026-05-20T16:30:00Z (1d01h ago)
  started     —
  finished    —
  result      —
`,
		},
		"finished tasks: long output keeps its end, other result shapes as JSON, outcome glyphs": {
			snap: outputSnapshot(),
			opts: DashboardOptions{Now: t0},
			want: `
agentlane · namespace default · 2026-05-21T17:30:00Z
── QUEUES (1) ──────────────────────────────────────────────────────────
  a3s                      ●0/1  ○0  ✓2  ✗0  ☠1  no status yet · 0 sessions
    execute  P0  External  ●0/1  ○0  ✓2  ✗0  ☠1
── SESSIONS (0) ────────────────────────────────────────────────────────
  no AgentSessions
── IN-FLIGHT (0) ───────────────────────────────────────────────────────
  no tasks running
── QUEUED (0) ──────────────────────────────────────────────────────────
  no tasks waiting
── RECENT (4) ──────────────────────────────────────────────────────────
▸ ✓ long       bash   execute  w1@n1  ran 1m00s  1m00s ago   line 1
  ✓ shaped     fetch  execute  w1@n1  ran 30s    1m30s ago   {"status":200,"bytes":512}
  ⊘ cancelled  bash   execute  —                 9m00s ago   cancelled
  ☠ dead       bash   execute  —                 18m00s ago  heartbeat expired
── TASK long ───────────────────────────────────────────────────────────
  state       Succeeded · attempt 1
  queue       a3s · lane execute · bash
  worker      w1 on n1
  payload     —
  created     2026-05-21T17:27:00Z (3m00s ago)
  queued      2026-05-21T17:27:00Z (3m00s ago)
  dispatched  2026-05-21T17:27:59Z (2m01s ago)
  started     2026-05-21T17:28:00Z (2m00s ago)
  finished    2026-05-21T17:29:00Z (1m00s ago)
  result      ok · exit 0 · output truncated
  stdout      … 4 earlier lines
              line 5
              line 6
              line 7
              line 8
              line 9
              line 10
              line 11
              line 12
  stderr      warning: slow
`,
		},
		"a dead letter: finished when its last attempt ended, every attempt listed": {
			snap: outputSnapshot(),
			opts: DashboardOptions{Now: t0, Selected: "dead"},
			want: `
agentlane · namespace default · 2026-05-21T17:30:00Z
── QUEUES (1) ──────────────────────────────────────────────────────────
  a3s                      ●0/1  ○0  ✓2  ✗0  ☠1  no status yet · 0 sessions
    execute  P0  External  ●0/1  ○0  ✓2  ✗0  ☠1
── SESSIONS (0) ────────────────────────────────────────────────────────
  no AgentSessions
── IN-FLIGHT (0) ───────────────────────────────────────────────────────
  no tasks running
── QUEUED (0) ──────────────────────────────────────────────────────────
  no tasks waiting
── RECENT (4) ──────────────────────────────────────────────────────────
  ✓ long       bash   execute  w1@n1  ran 1m00s  1m00s ago   line 1
  ✓ shaped     fetch  execute  w1@n1  ran 30s    1m30s ago   {"status":200,"bytes":512}
  ⊘ cancelled  bash   execute  —                 9m00s ago   cancelled
▸ ☠ dead       bash   execute  —                 18m00s ago  heartbeat expired
── TASK dead ───────────────────────────────────────────────────────────
  state       DeadLettered · attempt 2
  queue       a3s · lane execute · bash
  payload     —
  created     2026-05-21T17:10:00Z (20m00s ago)
  queued      2026-05-21T17:10:00Z (20m00s ago)
  dispatched  —
  started     —
  finished    2026-05-21T17:12:00Z (18m00s ago)
  result      —
  attempt 1   TimedOut · w1 on n1 · 2026-05-21T17:11:00Z
  attempt 2   WorkerLost · w2 on n2 · 2026-05-21T17:12:00Z · heartbeat expired
`,
		},
		"RECENT scrolls to the selection too": {
			snap: outputSnapshot(),
			opts: DashboardOptions{Now: t0, MaxRows: 2, Selected: "cancelled", Width: 60},
			want: `
agentlane · namespace default · 2026-05-21T17:30:00Z
── QUEUES (1) ──────────────────────────────────────────────
  a3s                      ●0/1  ○0  ✓2  ✗0  ☠1  no status…
    execute  P0  External  ●0/1  ○0  ✓2  ✗0  ☠1
── SESSIONS (0) ────────────────────────────────────────────
  no AgentSessions
── IN-FLIGHT (0) ───────────────────────────────────────────
  no tasks running
── QUEUED (0) ──────────────────────────────────────────────
  no tasks waiting
── RECENT (4) ──────────────────────────────────────────────
  ✓ shaped     fetch  execute  w1@n1  ran 30s  1m30s ago  {…
▸ ⊘ cancelled  bash   execute  —               9m00s ago  c…
  … 1 above, 1 below
── TASK cancelled ──────────────────────────────────────────
  state       Cancelled
  queue       a3s · lane execute · bash
  payload     —
  created     2026-05-21T17:20:00Z (10m00s ago)
  queued      2026-05-21T17:20:00Z (10m00s ago)
  dispatched  —
  started     —
  finished    2026-05-21T17:21:00Z (9m00s ago)
  result      —
`,
		},
		"a selection that names no task": {
			snap: a3sSnapshot(),
			opts: DashboardOptions{Now: t0, Width: 60, Selected: "nope"},
			want: `
agentlane · namespace default · 2026-05-21T17:30:00Z
── QUEUES (1) ──────────────────────────────────────────────
  a3s                       ●3/64             ○1  ✓14  ✗1…
    control   P0  Internal  ●0/∞   2/session  ○0  ✓3   ✗0…
    query     P1  Internal  ●1/∞   4/session  ○0  ✓9   ✗0…
    execute   P2  External  ●2/16  2/session  ○1  ✓2   ✗1…
    generate  P3  Internal  ●0/8   1/session  ○0  ✓0   ✗0…
── SESSIONS (1) ────────────────────────────────────────────
  reviewer-42  a3s  Active  node-a  acme-corp  ●3  ○1  ✓14…
── IN-FLIGHT (2 + 1 internal) ──────────────────────────────
  build-2  bash  execute  reviewer-42  Running  worker-a@no…
  build-1  bash  execute  reviewer-42  Running  worker-b@no…
── QUEUED (1) ──────────────────────────────────────────────
  lint-1  bash  execute  reviewer-42  Queued  waiting 5s  g…
── RECENT (2) ──────────────────────────────────────────────
  ✓ test-1  bash  execute  worker-a@node-a  ran 1m30s  1m00…
  ✗ test-2  bash  execute  worker-a@node-a  ran 10s    1m40…
── TASK nope ───────────────────────────────────────────────
  not found
`,
		},
		"an empty namespace": {
			snap: New("team-a", nil, nil, nil),
			opts: DashboardOptions{Now: t0},
			want: `
agentlane · namespace team-a · 2026-05-21T17:30:00Z
── QUEUES (0) ──────────────────────────────────────────────────────────
  no LaneQueues
── SESSIONS (0) ────────────────────────────────────────────────────────
  no AgentSessions
── IN-FLIGHT (0) ───────────────────────────────────────────────────────
  no tasks running
── QUEUED (0) ──────────────────────────────────────────────────────────
  no tasks waiting
── RECENT (0) ──────────────────────────────────────────────────────────
  no tasks finished
`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			if err := RenderDashboard(&b, tc.snap, tc.opts); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(strings.TrimPrefix(tc.want, "\n"), b.String()); diff != "" {
				t.Errorf("RenderDashboard (-want,+got):\n%s", diff)
			}
		})
	}
}
