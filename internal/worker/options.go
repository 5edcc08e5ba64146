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

package worker

import (
	"errors"
	"fmt"
)

// OptionError is one setting of Options or TaskOptions that the worker
// cannot run with. Its message names the setting in words ("heartbeat
// interval must be positive, got 0s"); Flag is the setting's name as
// cmd/worker's command-line flag, so that the binary can name the flag
// without checking the settings a second time.
type OptionError struct {
	// Flag is the setting as a flag name, without dashes: "heartbeat-interval".
	Flag string
	// Setting is the setting in words: "heartbeat interval".
	Setting string
	// Problem is what is wrong with it: "must be positive, got 0s".
	Problem string
}

func (e *OptionError) Error() string { return e.Setting + " " + e.Problem }

// optionErrors collects OptionErrors.
type optionErrors []error

func (errs *optionErrors) add(flag, setting, format string, args ...any) {
	*errs = append(*errs, &OptionError{Flag: flag, Setting: setting, Problem: fmt.Sprintf(format, args...)})
}

func (errs optionErrors) join() error { return errors.Join(errs...) }

// OptionErrors lists the OptionErrors that err, as returned by Validate,
// holds.
func OptionErrors(err error) []*OptionError {
	var out []*OptionError
	var walk func(error)
	walk = func(err error) {
		var oe *OptionError
		switch e := err.(type) { //nolint:errorlint // walks the tree of joined errors itself: errors.As stops at the first match
		case nil:
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
		default:
			if errors.As(err, &oe) {
				out = append(out, oe)
			}
		}
	}
	walk(err)
	return out
}
