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

package sessionstore

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// A session's inbox record is saved in a ConfigMap of its own, controlled
// by the session, replaced by each save and cleared by an empty one.
func TestConfigMapsInboxRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, sess, c := fakeStore(t)
	if got, err := s.LoadInbox(ctx, session); err != nil || got != nil {
		t.Fatalf("LoadInbox before any save = %q, %v; want nothing", got, err)
	}
	if err := s.SaveInbox(ctx, session, nil); err != nil {
		t.Fatalf("clearing a record never saved: %v", err)
	}
	for _, rec := range []string{`{"queued":1}`, `{"queued":2}`} {
		if err := s.SaveInbox(ctx, session, []byte(rec)); err != nil {
			t.Fatal(err)
		}
		if got, err := s.LoadInbox(ctx, session); err != nil || string(got) != rec {
			t.Fatalf("LoadInbox = %q, %v; want %s", got, err, rec)
		}
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: session.Namespace, Name: "agentlane-inbox-s1"}, cm); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(cm, sess) || cm.Labels[agentlanev1alpha1.SessionLabel] != "s1" {
		t.Errorf("the ConfigMap is not the session's: %+v", cm.ObjectMeta)
	}
	if err := s.SaveInbox(ctx, session, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LoadInbox(ctx, session); err != nil || got != nil {
		t.Errorf("LoadInbox after clearing = %q, %v; want nothing", got, err)
	}
	err := s.SaveInbox(ctx, session, []byte(`"`+strings.Repeat("x", MaxInboxBytes)+`"`))
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("saving an oversized record: %v, want ErrTooLarge", err)
	}
}
