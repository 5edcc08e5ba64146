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

package lanequeue

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// channelOptions are followup for every channel but the ones of by.
func channelOptions(mode MessageMode, by map[string]MessageMode) MessageOptions {
	o := DefaultMessageOptions()
	o.Mode, o.ByChannel = mode, by
	return o
}

// A message's channel selects its mode: discord collects while slack, on the
// session's followup, gets one turn per message.
func TestInboxByChannelSelectsTheModeOfEachMessage(t *testing.T) {
	h := newInboxHarness(t, nil)
	h.configure(channelOptions(ModeFollowup, map[string]MessageMode{"discord": ModeCollect}), false)
	h.postTo("start", "slack", "")
	h.step(time.Second) // a followup waits for the debounce
	run := h.next()
	for _, m := range []struct{ text, channel string }{{"d1", "discord"}, {"s1", "slack"}, {"d2", "discord"}, {"s2", "slack"}} {
		if res := h.postTo(m.text, m.channel, ""); !res.Queued {
			t.Fatalf("%s was not queued: %+v", m.text, res)
		}
	}
	var got [][]string
	for range 3 {
		h.in.RunFinished("s", run.RunID)
		h.step(time.Second)
		run = h.next()
		got = append(got, texts(run))
	}
	if diff := cmp.Diff([][]string{{"d1", "d2"}, {"s1"}, {"s2"}}, got); diff != "" {
		t.Fatalf("turns (-want,+got):\n%s", diff)
	}
}

// A channel in steer mode steers the active run; the others queue.
func TestInboxByChannelSteersOnlyItsChannel(t *testing.T) {
	h := newInboxHarness(t, nil)
	h.configure(channelOptions(ModeCollect, map[string]MessageMode{"telegram": ModeQueue}), true)
	h.postTo("start", "telegram", "")
	h.step(time.Second) // no run to steer: a followup
	h.next()
	if res := h.postTo("faster", "telegram", ""); !res.Steered || res.Queued {
		t.Fatalf("telegram message: %+v, want steered (queue is the legacy steer)", res)
	}
	if ev := h.next(); ev.Type != InboxSteer {
		t.Fatalf("event %+v, want a steer", ev)
	}
	if res := h.postTo("later", "slack", ""); res.Steered || !res.Queued {
		t.Fatalf("slack message: %+v, want queued", res)
	}
}

// A /queue directive that names a mode sets it for every channel; one that
// changes only an option keeps the channels' modes.
func TestInboxQueueDirectiveModeHoldsOnEveryChannel(t *testing.T) {
	h := newInboxHarness(t, nil)
	h.configure(channelOptions(ModeCollect, map[string]MessageMode{"discord": ModeSteer}), true)
	if res := h.post("/queue debounce:2s"); res.Options.ModeFor("discord") != ModeSteer {
		t.Fatalf("after a debounce directive discord takes %s, want steer", res.Options.ModeFor("discord"))
	}
	if res := h.post("/queue followup"); res.Options.ModeFor("discord") != ModeFollowup || res.Options.Debounce != 2*time.Second {
		t.Fatalf("after /queue followup: %+v", res.Options)
	}
	h.postTo("start", "discord", "")
	h.step(2 * time.Second)
	h.next()
	if res := h.postTo("not a steer", "discord", ""); res.Steered || !res.Queued {
		t.Fatalf("discord message under /queue followup: %+v, want queued", res)
	}
	if res := h.post("/queue reset"); res.Options.ModeFor("discord") != ModeSteer {
		t.Fatalf("after /queue reset discord takes %s, want steer again", res.Options.ModeFor("discord"))
	}
}

func TestInboxByChannelValidation(t *testing.T) {
	h := newInboxHarness(t, nil)
	err := h.in.ConfigureSession("s", channelOptions(ModeCollect, map[string]MessageMode{"discord": "shout", "": ModeCollect}), false)
	if err == nil || !strings.Contains(err.Error(), `byChannel[discord]: unknown mode "shout"`) || !strings.Contains(err.Error(), "empty channel name") {
		t.Fatalf("ConfigureSession = %v, want both byChannel errors", err)
	}
	h.configure(channelOptions(ModeCollect, map[string]MessageMode{"discord": ModeQueue}), false)
	if got := h.in.Options("s").ByChannel["discord"]; got != ModeSteer {
		t.Fatalf("discord's legacy queue mode is kept as %q, want steer", got)
	}
}
