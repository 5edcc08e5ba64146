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

package main

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/laneview"
)

// TestViewerKeys feeds keys as a terminal in cbreak mode sends them.
func TestViewerKeys(t *testing.T) {
	tasks := []agentlanev1alpha1.ExternalTask{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "build-1"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "lint-1"}},
	}
	cases := map[string]struct {
		keys         []string
		wantSelected string
		wantTyping   bool
		wantLast     action
	}{
		"/ then a name and Enter selects the task": {
			keys:         []string{"/", "l", "i", "x", keyBackspace, "n", "t", "-", "1", keyEnter},
			wantSelected: "lint-1", wantLast: redraw,
		},
		"Escape cancels the name": {
			keys:         []string{"/", "l", "i", keyEscape},
			wantSelected: "build-1", wantLast: redraw,
		},
		"a name that matches no task changes nothing": {
			keys:         []string{"/", "n", "o", keyEnter},
			wantSelected: "build-1", wantLast: redraw,
		},
		"q while typing is part of the name": {
			keys:         []string{"/", "q"},
			wantSelected: "build-1", wantTyping: true, wantLast: redraw,
		},
		"q quits":                    {keys: []string{"q"}, wantSelected: "build-1", wantLast: quit},
		"Ctrl-C quits":               {keys: []string{keyInterrupt}, wantSelected: "build-1", wantLast: quit},
		"down selects the next task": {keys: []string{keyDown}, wantSelected: "default/lint-1", wantLast: redraw},
		"an unknown key is ignored":  {keys: []string{"x"}, wantSelected: "build-1", wantLast: ignore},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := &viewer{
				screen:   &screen{restoreKeys: func() error { return nil }},
				view:     viewDashboard,
				selected: "build-1",
				last:     laneview.New("default", nil, tasks, nil),
			}
			var last action
			for _, k := range tc.keys {
				last = v.key(k)
			}
			if v.selected != tc.wantSelected || v.typing != tc.wantTyping || last != tc.wantLast {
				t.Errorf("selected %q, typing %v, last action %d; want %q, %v, %d",
					v.selected, v.typing, last, tc.wantSelected, tc.wantTyping, tc.wantLast)
			}
		})
	}
}

// TestErrorsCannotDriveTheTerminal: an error may quote what a server sent;
// shown on the status line, it must not move the cursor or clear the screen.
func TestErrorsCannotDriveTheTerminal(t *testing.T) {
	got := oneLine(errors.New("denied\x1b[2J\x1b[H\u009b31m\nby proxy"))
	if want := "denied [2J [H 31m by proxy"; got != want {
		t.Errorf("oneLine = %q, want %q", got, want)
	}
}
