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

package sessionserver

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// TestStandbyAnswersNotLeader: a replica that does not lead listens, fails
// its readiness and answers session calls 503 NotLeader at once; once it
// leads it is ready and its run (event ids, Interrupted) starts then.
func TestStandbyAnswersNotLeader(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	leading := make(chan struct{})
	s := mustNew(plainConfig(Config{Addr: "127.0.0.1:0", TLS: TLS{InsecureHTTP: true}, Clock: clk, Leading: leading}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	addr, err := s.BoundAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}

	if err := s.ReadyCheck(nil); err == nil {
		t.Error("a standby is ready")
	}
	resp, err := http.Post("http://"+addr+"/v1/namespaces/ns/sessions/s1/commands", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	var body sessionapi.Error
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || body.Code != sessionapi.CodeNotLeader || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("a standby answered %d %+v (Retry-After %q), want 503 NotLeader with Retry-After 1",
			resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}

	clk.Step(time.Minute) // the standby waited a minute before it led
	close(leading)
	select {
	case <-s.serving:
	case <-time.After(10 * time.Second):
		t.Fatal("the server does not serve after it leads")
	}
	if err := s.ReadyCheck(nil); err != nil {
		t.Errorf("the leader is not ready: %v", err)
	}
	if want := t0.Add(time.Minute); !s.StartedAt.Equal(want) {
		t.Errorf("StartedAt = %v, want the time it began to lead, %v", s.StartedAt, want)
	}
	if got, want := s.hub.log(types.NamespacedName{Namespace: "ns", Name: "s1"}).events.base, eventIDBase(t0.Add(time.Minute)); got != want {
		t.Errorf("event id base = %d, want %d (from the time it began to lead)", got, want)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start = %v", err)
	}
}
