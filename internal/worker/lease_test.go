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
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/agentlane/agentlane/internal/workerproto"
)

func TestLeaseApply(t *testing.T) {
	now := metav1.NewMicroTime(time.Date(2026, 5, 21, 14, 30, 0, 0, time.UTC))
	earlier := metav1.NewMicroTime(now.Add(-time.Hour))
	id := leaseIdentity{
		namespace: "agents", name: "w1", nodeName: "node-a",
		labels:   map[string]string{"gpu": "a100"},
		capacity: 3, queues: []string{"q1", "q2"}, commandTypes: []string{"bash", "exec"},
		heartbeat: 5 * time.Second,
	}
	wantLabels := map[string]string{"gpu": "a100", workerproto.WorkerLabel: "true", workerproto.NodeLabel: "node-a"}
	wantAnnotations := map[string]string{
		workerproto.CapacityAnnotation: "3", workerproto.QueuesAnnotation: "q1,q2", workerproto.LanesAnnotation: "", workerproto.CommandTypesAnnotation: "bash,exec",
	}
	wantSpec := func(acquired metav1.MicroTime) coordinationv1.LeaseSpec {
		return coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("w1"), LeaseDurationSeconds: ptr.To[int32](15),
			AcquireTime: &acquired, RenewTime: &now,
		}
	}
	cases := map[string]struct {
		lease    coordinationv1.Lease
		draining bool
		want     coordinationv1.Lease
	}{
		"new Lease": {
			want: coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "agentlane-worker-w1", Labels: wantLabels, Annotations: wantAnnotations},
				Spec:       wantSpec(now),
			},
		},
		"renewal keeps the acquire time and the resource version": {
			lease: coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "agentlane-worker-w1", ResourceVersion: "7"},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("w1"), AcquireTime: &earlier, RenewTime: &earlier},
			},
			want: coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "agentlane-worker-w1", ResourceVersion: "7", Labels: wantLabels, Annotations: wantAnnotations},
				Spec:       wantSpec(earlier),
			},
		},
		"draining, over a Lease that advertised something else": {
			lease: coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      map[string]string{"old": "x"},
					Annotations: map[string]string{workerproto.CapacityAnnotation: "9", "stale": "y"},
				},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("someone-else"), AcquireTime: &earlier},
			},
			draining: true,
			want: coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{
					Namespace: "agents", Name: "agentlane-worker-w1", Labels: wantLabels,
					Annotations: map[string]string{
						workerproto.CapacityAnnotation: "3", workerproto.QueuesAnnotation: "q1,q2", workerproto.LanesAnnotation: "",
						workerproto.CommandTypesAnnotation: "bash,exec", workerproto.DrainingAnnotation: "true",
					},
				},
				Spec: wantSpec(now),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.lease.DeepCopy()
			id.apply(got, tc.draining, now)
			if diff := cmp.Diff(tc.want, *got); diff != "" {
				t.Errorf("Lease (-want,+got):\n%s", diff)
			}
		})
	}
	if id.labels[workerproto.WorkerLabel] != "" {
		t.Errorf("apply changed the worker's own label map: %v", id.labels)
	}
}

func TestOptionsValidate(t *testing.T) {
	valid := func() Options {
		return Options{Name: "w1", NodeName: "node-a", Namespace: "agents", Capacity: 1, HeartbeatInterval: time.Second}
	}
	cases := map[string]struct {
		change func(*Options)
		want   []string
	}{
		"valid":   {change: func(*Options) {}},
		"no name": {change: func(o *Options) { o.Name = "" }, want: []string{"name is required"}},
		"name that cannot name a Lease": {
			change: func(o *Options) { o.Name = "Worker_1" },
			want:   []string{`name "Worker_1" cannot name a Lease`},
		},
		"name too long for a Lease": {
			change: func(o *Options) { o.Name = strings.Repeat("w", 240) },
			want:   []string{"cannot name a Lease: must be no more than 253 characters"},
		},
		"node name too long for a label": {
			change: func(o *Options) { o.NodeName = strings.Repeat("n", 64) },
			want:   []string{"cannot be a label value"},
		},
		"reserved label": {
			change: func(o *Options) { o.Labels = map[string]string{workerproto.NodeLabel: "elsewhere"} },
			want:   []string{"label agentlane.io/node is set by the worker itself"},
		},
		"invalid label": {
			change: func(o *Options) { o.Labels = map[string]string{"gpu": "a 100"} },
			want:   []string{`label gpu value "a 100"`},
		},
		"everything wrong": {
			change: func(o *Options) {
				o.Namespace, o.Capacity, o.HeartbeatInterval, o.GracePeriod = "", 0, 0, -time.Second
			},
			want: []string{"namespace is required", "capacity must be at least 1, got 0",
				"heartbeat interval must be positive, got 0s", "grace period must not be negative, got -1s"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := valid()
			tc.change(&o)
			err := o.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
