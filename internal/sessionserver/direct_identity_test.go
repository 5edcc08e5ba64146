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
	"maps"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

func TestSameWorkerIdentity(t *testing.T) {
	stream := Caller{Username: "system:serviceaccount:ns:worker", UID: "sa-uid", Extra: map[string]authorizationv1.ExtraValue{
		extraPodName: {"worker-abc"}, extraPodUID: {"pod-uid"}, extraNodeName: {"node-1"}, extraNodeUID: {"node-uid"},
		"authentication.kubernetes.io/credential-id": {"JTI=first"}}}
	with := func(edit func(c *Caller)) Caller {
		c := stream
		c.Extra = maps.Clone(stream.Extra)
		edit(&c)
		return c
	}
	for _, tc := range []struct {
		name    string
		rotated Caller
		ok      bool
	}{
		{"the same pod's renewed token", with(func(c *Caller) {
			c.Extra["authentication.kubernetes.io/credential-id"] = authorizationv1.ExtraValue{"JTI=second"}
		}), true},
		{"another service account", with(func(c *Caller) { c.Username = "system:serviceaccount:ns:intruder" }), false},
		{"the service account deleted and made again", with(func(c *Caller) { c.UID = "other-uid" }), false},
		{"another pod", with(func(c *Caller) { c.Extra[extraPodName] = authorizationv1.ExtraValue{"worker-xyz"} }), false},
		{"a pod of the same name made again", with(func(c *Caller) { c.Extra[extraPodUID] = authorizationv1.ExtraValue{"pod-uid-2"} }), false},
		{"another node", with(func(c *Caller) { c.Extra[extraNodeName] = authorizationv1.ExtraValue{"node-2"} }), false},
		{"a node of the same name made again", with(func(c *Caller) { c.Extra[extraNodeUID] = authorizationv1.ExtraValue{"node-uid-2"} }), false},
		{"a token bound to no pod", with(func(c *Caller) {
			delete(c.Extra, extraPodName)
			delete(c.Extra, extraPodUID)
			delete(c.Extra, extraNodeName)
			delete(c.Extra, extraNodeUID)
		}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sameWorkerIdentity(stream, tc.rotated)
			if tc.ok != (err == nil) {
				t.Fatalf("sameWorkerIdentity: %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !sessionapi.IsCode(err, sessionapi.CodeForbidden) {
				t.Errorf("refused with %v, want Forbidden", err)
			}
		})
	}
}
