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

package controller

import (
	"context"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// caPublishInterval is how often the leader checks the published CA bundle
// against the one the Session API serves with (a rotated CA reaches the
// ConfigMap within it), and retryInterval how soon it tries again after a
// failed write.
const (
	caPublishInterval = time.Minute
	caRetryInterval   = 5 * time.Second
)

// caPublisher keeps the Session API's CA bundle in the ConfigMap
// SessionAPICAConfigMap of the manager's own namespace, where the worker
// pods that stream to the Session API (Direct lanes) project it from. A
// ConfigMap holds the certificate alone: projecting the ca.crt of the
// Session API's TLS Secret instead would let the kubelet of every worker
// node read that Secret, with the server's key and, for a generated
// certificate, the CA's key. Runtime pods get the same bundle in their own
// namespaces from the AgentSession controller.
type caPublisher struct {
	Reader    client.Reader
	Client    client.Client
	Namespace string
	CA        func() []byte
	Clock     clock.Clock
}

// NeedLeaderElection makes only the leader write the ConfigMap.
func (p *caPublisher) NeedLeaderElection() bool { return true }

// Start publishes the bundle now and then every caPublishInterval until ctx
// ends. It reads the ConfigMap around the cache: one GET a minute.
func (p *caPublisher) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("session-api-ca")
	for {
		wait := caPublishInterval
		if ca := p.CA(); len(ca) > 0 {
			// A write cut short by the end of ctx is no error: the
			// select below returns.
			if err := ensureCAConfigMap(ctx, p.Reader, p.Client, p.Namespace, ca); err != nil && ctx.Err() == nil {
				log.Error(err, "Publishing the Session API's CA bundle", "namespace", p.Namespace)
				wait = caRetryInterval
			}
		}
		t := p.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}
