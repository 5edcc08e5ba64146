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
	"errors"
	"testing"
)

// A lane's SessionModes bound what a session may switch it to: an override
// to another mode is refused, and one set before a reconfiguration narrowed
// the list no longer decides the mode of new commands.
func TestSessionModesBoundOverrides(t *testing.T) {
	cfg := DefaultConfig()
	for i := range cfg.Lanes {
		if cfg.Lanes[i].Name == "execute" {
			cfg.Lanes[i].Mode = Internal
			cfg.Lanes[i].SessionModes = []HandlerMode{Internal, Hybrid}
		}
	}
	h := newHarness(t, cfg)
	if err := h.q.SetSessionLaneMode("tenant", "execute", External); !errors.Is(err, ErrModeOverrideRefused) {
		t.Fatalf("switching an Internal lane to External = %v, want ErrModeOverrideRefused", err)
	}
	if _, mode, err := h.q.Route("tenant", "", "bash"); err != nil || mode != Internal {
		t.Errorf("Route after the refused override = %s, %v; want Internal", mode, err)
	}
	if err := h.q.SetSessionLaneMode("tenant", "execute", Hybrid); err != nil {
		t.Errorf("an allowed switch to Hybrid: %v", err)
	}
	if err := h.q.SetSessionLaneMode("tenant", "execute", Internal); err != nil {
		t.Errorf("the lane's own mode is always allowed: %v", err)
	}

	withModes := func(modes []HandlerMode) Config {
		c := cfg.clone()
		for i := range c.Lanes {
			if c.Lanes[i].Name == "execute" {
				c.Lanes[i].SessionModes = modes
			}
		}
		return c
	}
	if err := h.q.Reconfigure(withModes([]HandlerMode{External})); err != nil {
		t.Fatal(err)
	}
	if err := h.q.SetSessionLaneMode("tenant", "execute", External); err != nil {
		t.Fatalf("a switch the lane allows: %v", err)
	}
	if _, mode, _ := h.q.Route("tenant", "", "bash"); mode != External {
		t.Fatalf("Route with the allowed override = %s, want External", mode)
	}
	if err := h.q.Reconfigure(withModes([]HandlerMode{})); err != nil {
		t.Fatal(err)
	}
	if _, mode, _ := h.q.Route("tenant", "", "bash"); mode != Internal {
		t.Errorf("Route once the lane allows no switch = %s, want the lane's own Internal", mode)
	}
}
