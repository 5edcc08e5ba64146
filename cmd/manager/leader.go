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
	"flag"
	"fmt"
	"net/http"
	"time"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/agentlane/agentlane/internal/controller"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/sessionserver"
)

// Leader election timing. A standby takes over once it has seen the
// leader's Lease unrenewed for the lease duration. It looks at the Lease at
// jittered intervals of 1 to 2.2 retry periods, so it sees the last renewal
// and the expiry each up to 2.2 retry periods late: dispatch resumes
// between leaseDuration - retryPeriod and leaseDuration + 4.4 retryPeriods
// after a leader's SIGKILL (3.5-6.2 s), plus the new leader's start (its
// caches are already warm, see apply). A leader that stops on SIGTERM releases the Lease, and a
// standby takes it at its next retry. A leader whose renewals get no answer
// (the API server is down or unreachable) stops writing at the renew
// deadline but keeps leading for up to the outage hold (leaseHold): the
// first renewal the API server accepts again lets it write at once, and a
// refused one (a standby took the Lease) makes it stop leading and exit.
const (
	defaultLeaseDuration = 4 * time.Second
	defaultRenewDeadline = 3 * time.Second
	defaultRetryPeriod   = 500 * time.Millisecond
	// defaultOutageHold covers an API server's restart: a few seconds
	// down and a few more to start.
	defaultOutageHold = 30 * time.Second
	// shutdownTimeout bounds the manager's graceful shutdown, so that it
	// releases the Lease within the pod's default 30s termination grace.
	shutdownTimeout = 20 * time.Second
)

// leaderElection is the timing of the leader election.
type leaderElection struct {
	leaseDuration, renewDeadline, retryPeriod time.Duration
	// outageHold is how long a leader keeps leading, without writing,
	// while its renewals of the Lease get no answer.
	outageHold time.Duration
}

func (l *leaderElection) bindFlags(fs *flag.FlagSet) {
	fs.DurationVar(&l.leaseDuration, "leader-elect-lease-duration", defaultLeaseDuration,
		"How long a standby waits, after it last saw the leader renew the Lease, before it takes over: the bound of a failover after the leader dies.")
	fs.DurationVar(&l.renewDeadline, "leader-elect-renew-deadline", defaultRenewDeadline,
		"How long the leader keeps retrying to renew the Lease before it stops leading and exits; below --leader-elect-lease-duration.")
	fs.DurationVar(&l.retryPeriod, "leader-elect-retry-period", defaultRetryPeriod,
		"How often the leader renews the Lease and a standby tries to take it.")
	fs.DurationVar(&l.outageHold, "leader-elect-outage-hold", defaultOutageHold,
		"How long the leader keeps leading while its renewals of the Lease get no answer (the API server is down): it stops writing at --leader-elect-renew-deadline, and writes again as soon as the API server accepts a renewal, unless a standby took the Lease. 0 stops leading at the renew deadline, and the manager exits.")
}

// validate checks what client-go's leader election requires: lease
// duration > renew deadline > 1.2 retry periods.
func (l *leaderElection) validate() error {
	if l.retryPeriod <= 0 || l.renewDeadline <= time.Duration(1.2*float64(l.retryPeriod)) || l.leaseDuration <= l.renewDeadline {
		return fmt.Errorf("need --leader-elect-lease-duration (%s) > --leader-elect-renew-deadline (%s) > 1.2 x --leader-elect-retry-period (%s) > 0",
			l.leaseDuration, l.renewDeadline, l.retryPeriod)
	}
	if l.outageHold < 0 {
		return fmt.Errorf("--leader-elect-outage-hold (%s) must not be negative", l.outageHold)
	}
	return nil
}

// apply sets the timing on o, makes the leader release the Lease when it
// stops, and has standbys start the controllers' watches before they lead
// (warm caches: a new leader does not list every object first).
func (l *leaderElection) apply(o ctrl.Options) ctrl.Options {
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = &l.leaseDuration, &l.renewDeadline, &l.retryPeriod
	o.LeaderElectionReleaseOnCancel = true
	o.GracefulShutdownTimeout = ptr.To(shutdownTimeout)
	o.Controller = config.Controller{EnableWarmup: ptr.To(true)}
	return o
}

// addReadyChecks makes the manager ready only when it can do its work: it
// leads, its Session API serves, and every valid LaneQueue has a scheduler,
// rebuilt from the cluster's tasks. A standby is therefore not ready, and a
// Service sends it no Session API calls.
func addReadyChecks(mgr manager.Manager, api *sessionserver.Server, schedulers *scheduling.Schedulers) error {
	checks := map[string]healthz.Checker{
		"leader": func(*http.Request) error {
			select {
			case <-mgr.Elected():
				return nil
			default:
				return errors.New("a standby: another replica leads")
			}
		},
		"schedulers": controller.SchedulersReady(mgr.GetCache(), schedulers),
	}
	if api != nil {
		checks["session-api"] = api.ReadyCheck
	}
	for name, check := range checks {
		if err := mgr.AddReadyzCheck(name, check); err != nil {
			return fmt.Errorf("add the %s ready check: %w", name, err)
		}
	}
	return nil
}
