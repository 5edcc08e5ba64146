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
	"strings"
	"testing"
)

func TestRouting(t *testing.T) {
	tests := map[string]struct {
		cfg      func(*Config)
		cmd      Command
		wantLane string
		wantErr  error
	}{
		"read goes to query":           {cmd: Command{Type: "read"}, wantLane: "query"},
		"web_search goes to query":     {cmd: Command{Type: "web_search"}, wantLane: "query"},
		"bash goes to execute":         {cmd: Command{Type: "bash"}, wantLane: "execute"},
		"move goes to execute":         {cmd: Command{Type: "move"}, wantLane: "execute"},
		"llm goes to generate":         {cmd: Command{Type: "llm"}, wantLane: "generate"},
		"unknown type goes to execute": {cmd: Command{Type: "frobnicate"}, wantLane: "execute"},
		"explicit lane wins":           {cmd: Command{Type: "read", Lane: "control"}, wantLane: "control"},
		"override route": {
			cfg:      func(c *Config) { c.Routing = map[string]string{"grep": "control"} },
			cmd:      Command{Type: "grep"},
			wantLane: "control",
		},
		"override default lane": {
			cfg:      func(c *Config) { c.DefaultLane = "generate" },
			cmd:      Command{Type: "frobnicate"},
			wantLane: "generate",
		},
		"unknown explicit lane": {cmd: Command{Type: "read", Lane: "nope"}, wantErr: ErrUnknownLane},
		"lane accepts the routed type": {
			cfg:      func(c *Config) { c.Lanes[2].CommandTypes = []string{"bash", "write"} },
			cmd:      Command{Type: "bash"},
			wantLane: "execute",
		},
		"routed type the lane refuses": {
			cfg:     func(c *Config) { c.Lanes[2].CommandTypes = []string{"read", "grep"} },
			cmd:     Command{Type: "bash"},
			wantErr: ErrCommandTypeRefused,
		},
		"type sent to a lane that refuses it": {
			cfg:     func(c *Config) { c.Lanes[1].CommandTypes = []string{"read", "grep"} },
			cmd:     Command{Type: "exec", Lane: "query"},
			wantErr: ErrCommandTypeRefused,
		},
		"type without a route goes to a default lane that refuses it": {
			cfg:     func(c *Config) { c.Lanes[2].CommandTypes = []string{"bash"} },
			cmd:     Command{Type: "frobnicate"},
			wantErr: ErrCommandTypeRefused,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			h := newHarness(t, cfg)
			tc.cmd.SessionKey = "s"
			routed, _, routeErr := h.q.Route("s", tc.cmd.Lane, tc.cmd.Type)
			if !errors.Is(routeErr, tc.wantErr) || (routeErr == nil && routed != tc.wantLane) {
				t.Errorf("Route = %q, %v; want %q, %v", routed, routeErr, tc.wantLane, tc.wantErr)
			}
			tk, err := h.q.Submit(tc.cmd)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Submit error = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if got := h.events()[0].Lane; got != tc.wantLane {
				t.Errorf("lane = %q, want %q (ticket %s)", got, tc.wantLane, tk.ID())
			}
		})
	}
}

func TestDefaultRoutesIsACopy(t *testing.T) {
	r := DefaultRoutes()
	if r["read"] != "query" || r["bash"] != "execute" || r["llm"] != "generate" || len(r) != 16 {
		t.Errorf("DefaultRoutes = %v", r)
	}
	r["read"] = "execute"
	if DefaultRoutes()["read"] != "query" {
		t.Error("DefaultRoutes shares its map")
	}
	var err error = &laneError{name: "x"}
	if !errors.Is(err, ErrUnknownLane) || err.Error() != `lanequeue: unknown lane "x"` {
		t.Errorf("lane error = %v", err)
	}
}

func TestRouteReportsTheSessionMode(t *testing.T) {
	cfg := DefaultConfig()
	for i := range cfg.Lanes {
		if cfg.Lanes[i].Name == "query" {
			cfg.Lanes[i].Mode = Hybrid
		}
	}
	h := newHarness(t, cfg)
	check := func(session, typ, wantLane string, want HandlerMode) {
		t.Helper()
		lane, mode, err := h.q.Route(session, "", typ)
		if err != nil || lane != wantLane || mode != want {
			t.Errorf("Route(%s, %s) = %s, %s, %v; want %s, %s", session, typ, lane, mode, err, wantLane, want)
		}
	}
	check("a", "bash", "execute", Internal)
	check("a", "read", "query", Hybrid)
	if err := h.q.SetSessionLaneMode("a", "execute", External); err != nil {
		t.Fatal(err)
	}
	check("a", "bash", "execute", External)
	check("b", "bash", "execute", Internal)
	h.q.ClearSessionLaneMode("a", "execute")
	check("a", "bash", "execute", Internal)
}

func TestCommandTypeRefusal(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Lanes[1].CommandTypes = []string{"read", "grep"}
	h := newHarness(t, cfg)
	_, err := h.q.Submit(Command{SessionKey: "s", Type: "bash", Lane: "query"})
	if want := `lane "query" does not accept command type "bash"; it accepts read, grep`; err == nil || err.Error() != want {
		t.Errorf("Submit error = %v, want %q", err, want)
	}
	if !IsPermanent(err) {
		t.Errorf("a refused command type is not permanent: %v", err)
	}
	if n := len(h.events()); n != 0 {
		t.Errorf("a refused command emitted %d events", n)
	}
	if st := h.q.SessionStats("s"); st.Pending != 0 || st.Active != 0 {
		t.Errorf("a refused command left the session with %d pending, %d active", st.Pending, st.Active)
	}
	// A command already running is adopted whatever the lane accepts now:
	// it was accepted when it was submitted.
	if _, err := h.q.Adopt(Command{ID: "held", SessionKey: "s", Type: "bash", Lane: "query", External: true}, 1, h.clk.Now()); err != nil {
		t.Errorf("Adopt of a running command of a type the lane no longer accepts: %v", err)
	}
}

func TestCommandTypesValidation(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Lanes[1].CommandTypes = []string{"read", "", "read"}
	cfg.Routing = map[string]string{"bash": "query"}
	err := cfg.Validate()
	for _, want := range []string{
		"lanes[1].commandTypes[1]: must not be empty",
		`lanes[1].commandTypes[2]: duplicate command type "read"`,
		`routing["bash"]: lane "query" does not accept command type "bash" (its commandTypes: read, , read)`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v; want it to contain %q", err, want)
		}
	}
}
