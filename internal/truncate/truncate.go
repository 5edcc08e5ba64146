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
// Package truncate shortens text for fields and messages with a length limit
// counted in characters (runes), such as a CRD maxLength, a condition message
// or a summary line. It never splits a UTF-8 character.
package truncate

import "unicode/utf8"

// Runes cuts s to at most n runes. When it cuts, the result ends with mark,
// which counts toward n: Runes("abcdef", 4, "…") is "abc…". A mark as long as
// n or longer is dropped, and the cut keeps the first n runes.
func Runes(s string, n int, mark string) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n || utf8.RuneCountInString(s) <= n {
		return s
	}
	keep := n - utf8.RuneCountInString(mark)
	if keep <= 0 {
		keep, mark = n, ""
	}
	i := 0
	for pos := range s {
		if i == keep {
			return s[:pos] + mark
		}
		i++
	}
	return s
}
