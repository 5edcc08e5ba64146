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

package controller

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestSessionRefreshSpreadsSessions checks that the activity of a session
// is announced once per interval, one interval after its first activity,
// and that two sessions busy at different moments are announced at
// different moments, not together on one tick.
func TestSessionRefreshSpreadsSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r := newSessionRefresh(time.Second)
		go func() { _ = r.Start(ctx) }()
		start := time.Now()
		type announced struct {
			name  string
			after time.Duration
		}
		var mu sync.Mutex
		var seen []announced
		go func() {
			for ev := range r.events {
				mu.Lock()
				seen = append(seen, announced{ev.Object.GetName(), time.Since(start)})
				mu.Unlock()
			}
		}()
		announcements := func() []announced {
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			return append([]announced(nil), seen...)
		}
		a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}

		r.mark(a)
		time.Sleep(300 * time.Millisecond)
		r.mark(b)
		time.Sleep(200 * time.Millisecond)
		r.mark(a) // coalesced with the first
		time.Sleep(time.Second)
		got := announcements()
		want := []announced{{"a", time.Second}, {"b", 1300 * time.Millisecond}}
		if len(got) != len(want) {
			t.Fatalf("announced %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("announced %v, want %v", got, want)
			}
		}

		// Activity after an announcement waits for the next interval.
		r.mark(a)
		time.Sleep(999 * time.Millisecond)
		if got = announcements(); len(got) != 2 {
			t.Fatalf("announced again before the interval: %v", got)
		}
		time.Sleep(time.Millisecond)
		if got = announcements(); len(got) != 3 || got[2].name != "a" {
			t.Fatalf("announced %v, want a third announcement of a", got)
		}
		cancel()
		synctest.Wait()
		close(r.events)
	})
}
