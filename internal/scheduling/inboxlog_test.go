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

package scheduling

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentlane/agentlane/internal/lanequeue"
)

func TestLogInboxWaitLogsTheWaitNotices(t *testing.T) {
	session := types.NamespacedName{Namespace: "ns", Name: "chat"}
	msgs := []lanequeue.Message{{Text: "a"}}
	tests := map[string]struct {
		ev   lanequeue.InboxEvent
		want string // "" for no line
	}{
		"waiting": {ev: lanequeue.InboxEvent{Type: lanequeue.InboxWaiting, RunID: "r1", Messages: msgs, Waited: 2 * time.Second},
			want: `"level"=0 "msg"="Messages wait for a turn while a run is active" "session"={"name"="chat" "namespace"="ns"} "run"="r1" "messages"=1 "waited"="2s"`},
		"slow turn": {ev: lanequeue.InboxEvent{Type: lanequeue.InboxTurn, RunID: "r2", Messages: msgs, Waited: 3 * time.Second, Slow: true},
			want: `"level"=0 "msg"="Turn started after a slow wait" "session"={"name"="chat" "namespace"="ns"} "run"="r2" "messages"=1 "waited"="3s"`},
		"prompt turn": {ev: lanequeue.InboxEvent{Type: lanequeue.InboxTurn, RunID: "r3", Messages: msgs}},
		"queued":      {ev: lanequeue.InboxEvent{Type: lanequeue.InboxQueued, Messages: msgs}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var lines []string
			log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
			logInboxWait(log, session, tc.ev)
			got := strings.Join(lines, "\n")
			if got != tc.want {
				t.Errorf("logged %q, want %q", got, tc.want)
			}
		})
	}
}
