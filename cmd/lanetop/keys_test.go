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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadKeys(t *testing.T) {
	cases := map[string]struct {
		typed string
		want  []string
	}{
		"characters as themselves":          {typed: "nvq", want: []string{"n", "v", "q"}},
		"Enter, either end of line":         {typed: "\r\n", want: []string{keyEnter, keyEnter}},
		"arrows, CSI and SS3":               {typed: "\x1b[A\x1b[B\x1bOA\x1bOB", want: []string{keyUp, keyDown, keyUp, keyDown}},
		"other sequences are dropped":       {typed: "\x1b[1;5Cx\x1b[3~", want: []string{"x"}},
		"a lone Escape":                     {typed: "\x1b", want: []string{keyEscape}},
		"backspace, Ctrl-C; other controls": {typed: "\x7f\x03\x01\x1a", want: []string{keyBackspace, keyInterrupt}},
		"C1 controls are dropped":           {typed: "a\u009bb", want: []string{"a", "b"}},
		"a name with a multi-byte rune":     {typed: "tâche", want: []string{"t", "â", "c", "h", "e"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			keys := make(chan string, 32)
			readKeys(strings.NewReader(tc.typed), keys)
			var got []string
			for k := range keys {
				got = append(got, k)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("keys (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestInPlace(t *testing.T) {
	got := inPlace("one\ntwo\nthree\n")
	want := cursorHome + "one" + clearLine + "\r\ntwo" + clearLine + "\r\nthree" + clearLine + clearBelow
	if got != want {
		t.Errorf("inPlace = %q, want %q", got, want)
	}
}
