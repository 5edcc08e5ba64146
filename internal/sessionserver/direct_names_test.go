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
	"errors"
	"net/http"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentlane/agentlane/internal/workerproto"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

func TestCheckWorkerName(t *testing.T) {
	bound := Caller{Username: "system:serviceaccount:ns:worker", Extra: map[string]authorizationv1.ExtraValue{
		extraPodName: {"worker-abc"}, extraNodeName: {"node-1"}}}
	for _, tc := range []struct {
		name   string
		caller Caller
		hello  workerproto.DirectHello
		ok     bool
	}{
		{"the token's pod and node", bound, workerproto.DirectHello{Worker: "worker-abc", Node: "node-1"}, true},
		{"another pod's name", bound, workerproto.DirectHello{Worker: "worker-xyz", Node: "node-1"}, false},
		{"another node", bound, workerproto.DirectHello{Worker: "worker-abc", Node: "node-2"}, false},
		{"a worker user's own name", Caller{Username: "agentlane-worker:w1"}, workerproto.DirectHello{Worker: "w1"}, true},
		{"a worker user naming another", Caller{Username: "agentlane-worker:w1"}, workerproto.DirectHello{Worker: "w2"}, false},
		{"a token bound to no pod names nothing", Caller{Username: "system:serviceaccount:ns:worker"}, workerproto.DirectHello{Worker: "any"}, true},
	} {
		err := checkWorkerName(tc.caller, tc.hello)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
		if err != nil && !sessionapi.IsCode(err, sessionapi.CodeForbidden) {
			t.Errorf("%s: %v, want Forbidden", tc.name, err)
		}
	}
}

func TestWorkerNamesHeldByOneUser(t *testing.T) {
	var n workerNames
	w := types.NamespacedName{Namespace: "ns", Name: "w1"}
	if err := n.claim(w, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := n.claim(w, "alice"); err != nil {
		t.Fatalf("the same user reconnecting: %v", err)
	}
	err := n.claim(w, "mallory")
	var e *sessionapi.Error
	if !errors.As(err, &e) || e.Status != http.StatusConflict {
		t.Fatalf("another user taking the name: %v, want 409", err)
	}
	n.release(w)
	if err := n.claim(w, "mallory"); err == nil {
		t.Fatal("the name is still held by alice's other stream")
	}
	n.release(w)
	if err := n.claim(w, "mallory"); err != nil {
		t.Fatalf("once alice's streams ended: %v", err)
	}
}
