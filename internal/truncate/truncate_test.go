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
package truncate

import (
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestRunes(t *testing.T) {
	cases := map[string]struct {
		s    string
		n    int
		mark string
		want string
	}{
		"short":                      {s: "abc", n: 5, want: "abc"},
		"exact":                      {s: "abcde", n: 5, mark: "…", want: "abcde"},
		"cut":                        {s: "abcdef", n: 3, want: "abc"},
		"cut with an ellipsis":       {s: "abcdef", n: 4, mark: "…", want: "abc…"},
		"cut with three dots":        {s: "abcdefgh", n: 6, mark: "...", want: "abc..."},
		"multi-byte kept":            {s: "ééé", n: 3, mark: "…", want: "ééé"},
		"multi-byte cut":             {s: "éééé", n: 2, want: "éé"},
		"multi-byte cut with a mark": {s: "日本語のテキスト", n: 4, mark: "...", want: "日..."},
		"mark longer than the limit": {s: "abcdef", n: 2, mark: "...", want: "ab"},
		"nothing kept":               {s: "abc", n: 0, want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Runes(tc.s, tc.n, tc.mark)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
			if !utf8.ValidString(got) {
				t.Errorf("%q is not valid UTF-8", got)
			}
		})
	}
}
