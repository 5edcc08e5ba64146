//go:build !linux && !darwin

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
	"os"
)

// terminalSize reports no terminal where the size cannot be asked for:
// lanetop then prints frames one after the other, as with --headless.
func terminalSize(*os.File) (cols, rows int, ok bool) {
	return 0, 0, false
}

func isTerminal(*os.File) bool { return false }

func keysMode(*os.File) (func() error, error) {
	return nil, errors.New("keys without Enter are not supported on this system")
}

func notifyResize(chan<- os.Signal) {}

var exitSignals = []os.Signal{os.Interrupt}
