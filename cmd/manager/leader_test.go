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
	"flag"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

func TestLeaderElectionTiming(t *testing.T) {
	tests := map[string]struct {
		args    []string
		wantErr bool
	}{
		"defaults":                        {},
		"slower":                          {args: []string{"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s"}},
		"renew deadline not below lease":  {args: []string{"--leader-elect-renew-deadline=4s"}, wantErr: true},
		"retry period too close to renew": {args: []string{"--leader-elect-retry-period=2600ms"}, wantErr: true},
		"no retry period":                 {args: []string{"--leader-elect-retry-period=0"}, wantErr: true},
		"no outage hold":                  {args: []string{"--leader-elect-outage-hold=0"}},
		"negative outage hold":            {args: []string{"--leader-elect-outage-hold=-1s"}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var l leaderElection
			fs := flag.NewFlagSet(name, flag.ContinueOnError)
			l.bindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if err := l.validate(); (err != nil) != tc.wantErr {
				t.Errorf("validate() = %v, want error %v", err, tc.wantErr)
			}
		})
	}
	var l leaderElection
	l.bindFlags(flag.NewFlagSet("defaults", flag.ContinueOnError))
	o := l.apply(ctrl.Options{})
	if !o.LeaderElectionReleaseOnCancel || *o.LeaseDuration != 4*time.Second || *o.RetryPeriod != 500*time.Millisecond {
		t.Errorf("options: release on cancel %v, lease %v, retry %v; want true, 4s, 500ms",
			o.LeaderElectionReleaseOnCancel, *o.LeaseDuration, *o.RetryPeriod)
	}
}
