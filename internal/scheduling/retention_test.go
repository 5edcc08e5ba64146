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

package scheduling

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

func TestRetentionLimitsOf(t *testing.T) {
	defaults := RetentionLimits{MaxRuns: 100, MaxEventsPerRun: 10000, MaxEventBytesPerRun: 16 << 20,
		MaxTraceEvents: 10000, MaxFinishedTasks: 100}
	cases := map[string]struct {
		in   *agentlanev1alpha1.SessionRetention
		want RetentionLimits
	}{
		"no retention: the CRD's defaults": {want: defaults},
		"fields left out keep their defaults": {
			in:   &agentlanev1alpha1.SessionRetention{MaxRuns: ptr.To[int32](3), MaxFinishedTasks: ptr.To[int32](0)},
			want: RetentionLimits{MaxRuns: 3, MaxEventsPerRun: 10000, MaxEventBytesPerRun: 16 << 20, MaxTraceEvents: 10000},
		},
		"every field": {
			in: &agentlanev1alpha1.SessionRetention{MaxRuns: ptr.To[int32](1), MaxEventsPerRun: ptr.To[int32](2),
				MaxEventBytesPerRun: ptr.To[int64](2048), MaxTraceEvents: ptr.To[int32](4), MaxFinishedTasks: ptr.To[int32](5)},
			want: RetentionLimits{MaxRuns: 1, MaxEventsPerRun: 2, MaxEventBytesPerRun: 2048, MaxTraceEvents: 4, MaxFinishedTasks: 5},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, RetentionLimitsOf(tc.in)); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
