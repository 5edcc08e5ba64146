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
	"testing"
	"unsafe"
)

// Every command costs a Ticket while it lives and an attemptCtx per
// attempt; both are allocated on the hot path, so a field that pushes one
// into the next allocation size class (288 and 144 bytes) should be a
// deliberate choice.
func TestRecordSizes(t *testing.T) {
	if s := unsafe.Sizeof(Ticket{}); s > 288 {
		t.Errorf("Ticket is %d bytes, more than the 288-byte size class", s)
	}
	if s := unsafe.Sizeof(attemptCtx{}); s > 144 {
		t.Errorf("attemptCtx is %d bytes, more than the 144-byte size class", s)
	}
}
