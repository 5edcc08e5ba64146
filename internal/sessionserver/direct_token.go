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

package sessionserver

import (
	"context"
	"net/http"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentlane/agentlane/internal/workerproto"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// A Direct worker's token rotates (the kubelet writes a new projected token
// at 80% of its life) while its stream lives for days. The worker sends
// the new token in a Token frame (workerproto, item 6 of the protocol);
// refreshWorkerToken reviews it as admitWorker reviews a stream's token,
// requires the identity the stream was admitted with, and from then on
// reauthorizeWorker checks the stream with it: the stream, and the
// attempts it holds, outlive the token it connected with.

// Outcomes of a rotated token: the values of the outcome label of
// directTokenRefreshes.
const (
	tokenAccepted = "accepted"
	tokenRefused  = "refused"
	tokenDeferred = "deferred"
)

var directTokenRefreshes = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "agentlane_direct_token_refreshes_total",
	Help: "Rotated tokens Direct workers sent on their streams, by outcome: accepted (the stream is checked with it from then on), " +
		"refused (not valid, another identity, or no right to serve the stream's namespace: the stream ends) or deferred " +
		"(it could not be reviewed for now, the API server unavailable: reviewed again at the stream's next check).",
}, []string{"outcome"})

// Token extra keys that name the pod (and its node) a service-account
// token is bound to, besides extraPodName and extraNodeName: a rotated
// token must name the same.
const (
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
	extraNodeUID = "authentication.kubernetes.io/node-uid"
)

// boundExtras are the token extras that bind a token to a pod and node.
var boundExtras = []string{extraPodName, extraPodUID, extraNodeName, extraNodeUID}

// refreshWorkerToken checks token, the rotated token a Token frame of r's
// stream carries (direct.Refresher): it authenticates it, paying for the
// review as admitWorker does, requires it to name the identity the stream
// was admitted with (user, UID, and the pod and node a pod-bound token
// names) with the right to serve the stream's namespace, and makes it the
// token the stream is checked with. A refusal is returned (the stream
// ends); a token that could not be reviewed for now (the API server
// unavailable, a rate) is kept for the stream's next check, and the stream
// goes on with the token it has.
func (s *Server) refreshWorkerToken(ctx context.Context, r *http.Request, token string) error {
	admitted, ok := r.Context().Value(admittedWorkerKey{}).(*admittedWorker)
	if !ok {
		return apiError(http.StatusInternalServerError, sessionapi.CodeInternal, "a Direct stream's token was refreshed outside its route")
	}
	return s.refreshAdmitted(ctx, r, admitted, token)
}

// refreshAdmitted is refreshWorkerToken for the stream admitted as
// admitted; reauthorizeWorker calls it for a token kept for its check.
func (s *Server) refreshAdmitted(ctx context.Context, r *http.Request, admitted *admittedWorker, token string) error {
	admitted.mu.Lock()
	prev, ns, hello := admitted.caller, admitted.namespace, admitted.hello
	admitted.mu.Unlock()
	if prev == nil {
		return apiError(http.StatusInternalServerError, sessionapi.CodeInternal, "a Direct stream's token was refreshed before the stream was admitted")
	}
	creds := r.Clone(ctx)
	creds.Header.Set("Authorization", "Bearer "+token)
	err := s.checkRotatedToken(ctx, creds, *prev, ns, hello)
	if e := refusalOf(err); e != nil {
		directTokenRefreshes.WithLabelValues(tokenRefused).Inc()
		return e
	}
	admitted.mu.Lock()
	defer admitted.mu.Unlock()
	if err != nil {
		directTokenRefreshes.WithLabelValues(tokenDeferred).Inc()
		s.log.Info("A Direct worker's rotated token could not be reviewed; reviewing it again at the stream's next check",
			"user", prev.Username, "namespace", ns, "worker", hello.Worker, "error", err.Error())
		admitted.pending = token
		return nil
	}
	directTokenRefreshes.WithLabelValues(tokenAccepted).Inc()
	s.log.V(1).Info("A Direct worker's rotated token was accepted", "user", prev.Username, "namespace", ns, "worker", hello.Worker)
	admitted.creds, admitted.pending = creds, ""
	return nil
}

// checkRotatedToken tells whether the token creds carry names the identity
// prev, the stream's, with the right to serve namespace ns as the worker
// hello names.
func (s *Server) checkRotatedToken(ctx context.Context, creds *http.Request, prev Caller, ns string, hello workerproto.DirectHello) error {
	wa, ok := s.Auth.(workerAuthorizer)
	if !ok {
		return apiError(http.StatusInternalServerError, sessionapi.CodeInternal, "this Session API's authorizer cannot authorize Direct workers")
	}
	ctx, c, err := s.authenticate(ctx, creds)
	if err != nil {
		return err
	}
	if err := sameWorkerIdentity(prev, c); err != nil {
		return err
	}
	if err := checkWorkerName(c, hello); err != nil {
		return err
	}
	return wa.AuthorizeWorker(ctx, c, ns)
}

// sameWorkerIdentity refuses a rotated token whose identity is not the
// stream's: another user or UID, or another pod or node for a pod-bound
// token.
func sameWorkerIdentity(prev, c Caller) error {
	if c.Username != prev.Username || c.UID != prev.UID {
		return apiErrorf(http.StatusForbidden, sessionapi.CodeForbidden,
			"the rotated token names user %q, but the stream was admitted as %q: a Direct stream keeps its identity", c.Username, prev.Username)
	}
	for _, k := range boundExtras {
		if !slices.Equal(prev.Extra[k], c.Extra[k]) {
			return apiErrorf(http.StatusForbidden, sessionapi.CodeForbidden,
				"the rotated token's %s is %q, but the stream's was %q: a Direct stream keeps its pod", k, c.Extra[k], prev.Extra[k])
		}
	}
	return nil
}
