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
	"math/rand/v2"
	"testing"
)

// FuzzQueue drives the property driver (see property_test.go) with fuzz
// input: each byte is one choice, so any input is a valid scenario and a
// failing input replays exactly.
func FuzzQueue(f *testing.F) {
	for seed := range 8 {
		r := rand.New(rand.NewPCG(uint64(seed), 1))
		b := make([]byte, 64+seed*64)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 2<<10 { // about a thousand steps
			data = data[:2<<10]
		}
		runProperties(t, &byteSource{data: data})
	})
}
