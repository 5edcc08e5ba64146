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

package laneview

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// style is an ANSI SGR parameter list, such as "1" (bold) or "32" (green).
// Renderers write it only when colour is on.
type style string

const (
	plain   style = ""
	bold    style = "1"
	dim     style = "2"
	red     style = "31"
	green   style = "32"
	yellow  style = "33"
	magenta style = "35"
	cyan    style = "36"
	heading style = "1;36"
)

// span is a run of text in one style. Its text is free of control
// characters: newSpan replaces them, so that payloads and results, which are
// user data, cannot move the cursor or change the terminal's colours.
type span struct {
	text  string
	style style
}

func newSpan(s string, st style) span {
	return span{text: sanitize(s), style: st}
}

// sanitize replaces control characters (newlines, tabs, escapes) with spaces.
func sanitize(s string) string {
	if strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return ' '
		}
		return r
	}, s)
}

func isControl(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0)
}

// line is one line of output, made of spans.
type line []span

// width is the number of runes in the line. Renderers count one terminal
// cell per rune, which holds for the glyphs they use and for the Latin
// text of names.
func (l line) width() int {
	n := 0
	for _, s := range l {
		n += utf8.RuneCountInString(s.text)
	}
	return n
}

// render writes the line cut to width runes (a cut line ends with "…"; 0
// means no limit), in colour when color is set, without trailing spaces.
func (l line) render(b *strings.Builder, width int, color bool) {
	if width > 0 && l.width() > width {
		l = l.cut(width)
	}
	l = l.trimRight()
	for _, s := range l {
		if color && s.style != plain && s.text != "" {
			b.WriteString("\x1b[" + string(s.style) + "m" + s.text + "\x1b[0m")
			continue
		}
		b.WriteString(s.text)
	}
	b.WriteByte('\n')
}

// cut keeps the first width-1 runes and appends "…".
func (l line) cut(width int) line {
	out := make(line, 0, len(l))
	left := width - 1
	for _, s := range l {
		if left <= 0 {
			break
		}
		if n := utf8.RuneCountInString(s.text); n > left {
			s.text = string([]rune(s.text)[:left])
		}
		left -= utf8.RuneCountInString(s.text)
		out = append(out, s)
	}
	return append(out.trimRight(), span{text: "…"})
}

func (l line) trimRight() line {
	for len(l) > 0 {
		last := l[len(l)-1]
		t := strings.TrimRight(last.text, " ")
		if t != "" {
			out := append(line{}, l...)
			out[len(out)-1].text = t
			return out
		}
		l = l[:len(l)-1]
	}
	return l
}

// table lays out rows of cells in aligned columns, two spaces apart, each
// row after its prefix (an indent, or a selection marker). A column that is
// empty in every row takes no room. The last cell of a row is not padded, so
// a long preview there is what a narrow width cuts.
type table struct {
	rows []tableRow
}

type tableRow struct {
	prefix line
	cells  []span
}

func (t *table) add(prefix line, cells ...span) {
	t.rows = append(t.rows, tableRow{prefix: prefix, cells: cells})
}

func (t *table) lines() []line {
	var widths []int
	for _, row := range t.rows {
		for i, c := range row.cells {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c.text))
		}
	}
	out := make([]line, 0, len(t.rows))
	for _, row := range t.rows {
		l := append(line{}, row.prefix...)
		first := true
		for i, c := range row.cells {
			if widths[i] == 0 {
				continue
			}
			if !first {
				l = append(l, span{text: "  "})
			}
			first = false
			l = append(l, c)
			if i < len(row.cells)-1 {
				if pad := widths[i] - utf8.RuneCountInString(c.text); pad > 0 {
					l = append(l, span{text: strings.Repeat(" ", pad)})
				}
			}
		}
		out = append(out, l)
	}
	return out
}

// shortName keeps names of up to 16 runes and shortens longer ones, such as
// ULIDs, to their first six and last five runes: ULIDs made in the same
// millisecond share their beginning and differ at the end.
func shortName(name string) string {
	r := []rune(name)
	if len(r) <= 16 {
		return name
	}
	return string(r[:6]) + "…" + string(r[len(r)-5:])
}

// preview is s on one line, cut to n runes.
func preview(s string, n int) string {
	s = strings.Join(strings.Fields(sanitize(s)), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// age formats a duration the way a glance needs it: 0s, 42s, 4m05s, 3h07m,
// 2d03h. Negative durations (clock skew) read as 0s.
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return itoa(s) + "s"
	case s < 3600:
		return itoa(s/60) + "m" + pad2(s%60) + "s"
	case s < 86400:
		return itoa(s/3600) + "h" + pad2(s%3600/60) + "m"
	}
	return itoa(s/86400) + "d" + pad2(s%86400/3600) + "h"
}

func itoa(n int64) string {
	return strconv.FormatInt(n, 10)
}

func pad2(n int64) string {
	if n < 10 {
		return "0" + itoa(n)
	}
	return itoa(n)
}

// timestamp formats t as RFC 3339 in UTC, or "—" when it is not set.
func timestamp(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format(time.RFC3339)
}

// unmarshal decodes a JSON text.
func unmarshal(s string, v any) error {
	return json.Unmarshal([]byte(s), v)
}
