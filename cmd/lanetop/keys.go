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
	"bufio"
	"io"
	"strings"
	"unicode"
)

// Names of the keys that are not characters.
const (
	keyEnter     = "enter"
	keyEscape    = "esc"
	keyBackspace = "backspace"
	keyUp        = "up"
	keyDown      = "down"
	keyInterrupt = "ctrl-c"
)

// readLines sends each line read from r, trimmed, until r ends: stdin that
// is not a terminal gives commands one a line.
func readLines(r io.Reader, keys chan<- string) {
	defer close(keys)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		keys <- strings.TrimSpace(sc.Text())
	}
}

// readKeys sends each key read from r, a terminal in cbreak mode, until r
// ends: a character as itself, the others by name (keyEnter and so on).
func readKeys(r io.Reader, keys chan<- string) {
	defer close(keys)
	br := bufio.NewReader(r)
	for {
		k, err := nextKey(br)
		if err != nil {
			return
		}
		if k != "" {
			keys <- k
		}
	}
}

// nextKey reads one key; "" for one it does not know. An escape sequence
// (an arrow key) arrives in one write, so an ESC with nothing buffered after
// it is the Escape key itself.
func nextKey(br *bufio.Reader) (string, error) {
	r, _, err := br.ReadRune()
	if err != nil {
		return "", err
	}
	switch r {
	case '\r', '\n':
		return keyEnter, nil
	case 0x7f, 0x08:
		return keyBackspace, nil
	case 0x03:
		return keyInterrupt, nil
	case 0x1b:
		if br.Buffered() == 0 {
			return keyEscape, nil
		}
		return escapeSequence(br)
	}
	if unicode.IsControl(r) {
		return "", nil
	}
	return string(r), nil
}

// escapeSequence reads the rest of a CSI or SS3 sequence after ESC and names
// the arrow keys; other sequences are read and dropped.
func escapeSequence(br *bufio.Reader) (string, error) {
	intro, err := br.ReadByte()
	if err != nil || (intro != '[' && intro != 'O') {
		return "", err
	}
	for {
		b, err := br.ReadByte()
		if err != nil {
			return "", err
		}
		if b >= 0x40 && b <= 0x7e { // the final byte
			switch b {
			case 'A':
				return keyUp, nil
			case 'B':
				return keyDown, nil
			}
			return "", nil
		}
	}
}
