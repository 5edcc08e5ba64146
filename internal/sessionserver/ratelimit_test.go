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
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestKeyedLimiterLimitsEachKeyApart(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	l := newKeyedLimiter(1, 2, 10, clk)
	for i := range 2 {
		if ok, _ := l.allow("a"); !ok {
			t.Fatalf("request %d of a refused within its burst", i)
		}
	}
	ok, after := l.allow("a")
	if ok || after <= 0 || after > time.Second {
		t.Fatalf("a over its burst: allowed=%v retry after %v, want refused for up to 1s", ok, after)
	}
	if ok, _ := l.allow("b"); !ok {
		t.Fatal("b refused because a is over its rate")
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if ok, _ := l.allow("a"); !ok {
		t.Fatal("a refused after a second refilled one token")
	}
}

func TestKeyedLimiterStaysBounded(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	// A bucket refills in burst/rate = 10s.
	l := newKeyedLimiter(1, 10, 3, clk)
	for i := range 100 {
		l.allow(fmt.Sprintf("caller-%d", i))
		clk.SetTime(clk.Now().Add(time.Millisecond))
		if n := l.size(); n > 3 {
			t.Fatalf("after %d callers the limiter keeps %d buckets, want at most 3", i+1, n)
		}
	}

	// A busy caller is not evicted while idle ones can go.
	l = newKeyedLimiter(1, 10, 3, clk)
	for range 10 {
		l.allow("busy")
	}
	clk.SetTime(clk.Now().Add(5 * time.Second))
	l.allow("idle-1")
	l.allow("idle-2")
	clk.SetTime(clk.Now().Add(10 * time.Second))
	// idle-1 and idle-2 have refilled; busy has too (15s): all may go, and
	// the newcomer fits.
	l.allow("new")
	if n := l.size(); n != 1 {
		t.Fatalf("after every bucket refilled the limiter keeps %d, want only the new one", n)
	}
	// new is now the least recently used: the full map drops it for y.
	clk.SetTime(clk.Now().Add(time.Millisecond))
	for range 10 {
		l.allow("busy")
	}
	clk.SetTime(clk.Now().Add(time.Millisecond))
	l.allow("x")
	clk.SetTime(clk.Now().Add(time.Millisecond))
	l.allow("y")
	if ok, _ := l.allow("busy"); ok {
		t.Fatal("busy got a fresh bucket: it was evicted though it was not the least recently used")
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{
		0:                       1,
		time.Millisecond:        1,
		time.Second:             1,
		1500 * time.Millisecond: 2,
		time.Duration(1 << 62):  3600,
	} {
		if got := retryAfterSeconds(d); got != want {
			t.Errorf("retryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}

func TestKeyedLimiterExhaustedTakesNothing(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	l := newKeyedLimiter(1, 2, 10, clk)
	if over, _ := l.exhausted("addr"); over {
		t.Fatal("an address never seen is exhausted")
	}
	for range 5 {
		l.exhausted("addr")
	}
	l.allow("addr")
	if over, _ := l.exhausted("addr"); over {
		t.Fatal("exhausted after one of two tokens: checking took tokens")
	}
	l.allow("addr")
	over, after := l.exhausted("addr")
	if !over || after <= 0 || after > time.Second {
		t.Fatalf("after its burst: exhausted=%v for %v, want true for up to 1s", over, after)
	}
	clk.SetTime(clk.Now().Add(after))
	if over, _ := l.exhausted("addr"); over {
		t.Fatal("still exhausted once the wait it gave has passed")
	}
}

// TestHoldChargesOnlyWhatFails: tokens set aside count against the next
// hold at once, however many attempts run together; an attempt settled as
// not charged puts its token back, one charged takes it.
func TestHoldChargesOnlyWhatFails(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	l := newKeyedLimiter(1, 3, 10, clk)
	var settles []func(bool)
	for i := range 3 {
		settle, ok, _ := l.hold("a")
		if !ok {
			t.Fatalf("hold %d refused within the burst", i)
		}
		settles = append(settles, settle)
	}
	if _, ok, after := l.hold("a"); ok || after <= 0 {
		t.Fatalf("a fourth hold while three are set aside: ok=%v after=%v, want refused", ok, after)
	}
	// Valid tokens: nothing is charged, however often.
	for _, settle := range settles {
		settle(false)
	}
	for range 100 {
		settle, ok, _ := l.hold("a")
		if !ok {
			t.Fatal("a hold refused after every earlier one was put back")
		}
		settle(false)
	}
	// Bad tokens: each takes its token.
	for i := range 3 {
		settle, ok, _ := l.hold("a")
		if !ok {
			t.Fatalf("hold %d refused", i)
		}
		settle(true)
	}
	if _, ok, _ := l.hold("a"); ok {
		t.Fatal("a hold after the burst was charged")
	}
	if over, _ := l.exhausted("a"); !over {
		t.Fatal("the address is not exhausted after its burst of failures")
	}
}
