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

// Package capacity holds the sizing rules of worker pools, as pure
// functions of their inputs and a clock: no Kubernetes client, no timer.
//
// A pool's raw recommendation is its work (the queued and running
// commands of the lanes it serves, each lane's count cut to what the lane
// may run at once) divided by the capacity of one worker, rounded up. The
// recommendation is then stabilized as an HPA's behavior does: every
// recommendation is remembered with its time; scaling up goes only as far
// as the lowest recommendation of the scale-up window, scaling down only
// as far as the highest of the scale-down window. With the defaults (0 up,
// 300 s down) a pool grows at once and shrinks five minutes after its
// backlog did. The result is clamped to [min, max]; max is the smaller of
// the pool's maxReplicas and the manager's bound.
//
// A Sizer is not safe for concurrent use: the pool's controller reconciles
// one pool at a time.
package capacity
