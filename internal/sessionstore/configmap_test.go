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
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// checkpoint is a prepared checkpoint of run with state.
func checkpoint(run, state string) Checkpoint {
	cp := Checkpoint{SchemaVersion: CurrentSchemaVersion, RunID: run, Time: t0}
	if state != "" {
		cp.State = json.RawMessage(state)
	}
	return cp
}

// legacyData is the data of a checkpoint ConfigMap of the earlier format
// holding cps, saved in that order.
func legacyData(t *testing.T, cps ...Checkpoint) map[string]string {
	t.Helper()
	data := map[string]string{}
	for i, cp := range cps {
		v, err := json.Marshal(record{Seq: int64(i + 1), Checkpoint: cp})
		if err != nil {
			t.Fatal(err)
		}
		data[runKey(cp.RunID)] = string(v)
	}
	return data
}

func TestGet(t *testing.T) {
	data := legacyData(t, checkpoint("r2", `{"n":2}`), checkpoint("r1", `{"n":3}`))
	newer := map[string]string{"run.r9": fmt.Sprintf(`{"seq":1,"checkpoint":{"schemaVersion":%d,"runId":"r9","future":true}}`, CurrentSchemaVersion+1)}
	cases := map[string]struct {
		data      map[string]string
		run       string
		wantState string
		wantErr   error
		wantMsg   string
	}{
		"the latest is the run saved last":    {data: data, run: "", wantState: `{"n":3}`},
		"a run's own checkpoint":              {data: data, run: "r2", wantState: `{"n":2}`},
		"a run without a checkpoint":          {data: data, run: "r7", wantErr: ErrNoCheckpoint, wantMsg: "no checkpoint for run r7"},
		"a session without any checkpoint":    {data: map[string]string{"note": "x"}, run: "", wantErr: ErrNoCheckpoint, wantMsg: "no checkpoint for session tenant-a/s1"},
		"a newer schema is refused by run":    {data: newer, run: "r9", wantErr: ErrSchemaTooNew, wantMsg: "schema version 2"},
		"a newer schema is refused as latest": {data: newer, run: "", wantErr: ErrSchemaTooNew},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cp, err := get(tc.data, session, tc.run)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("error = %v, want %v containing %q", err, tc.wantErr, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(cp.State) != tc.wantState {
				t.Errorf("state = %s, want %s", cp.State, tc.wantState)
			}
		})
	}
}

// fakeStore is a ConfigMaps store over a fake API server holding the
// AgentSession tenant-a/s1.
func fakeStore(t *testing.T, objs ...client.Object) (*ConfigMaps, *agentlanev1alpha1.AgentSession, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(agentlanev1alpha1.AddToScheme(scheme))
	sess := &agentlanev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: session.Namespace, Name: session.Name, UID: "uid-1"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(objs, sess)...).Build()
	s := NewConfigMaps(c, c)
	s.Clock = clocktesting.NewFakePassiveClock(t0)
	return s, sess, c
}

func TestConfigMapsRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, sess, c := fakeStore(t)
	if _, err := s.Load(ctx, session, ""); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("Load before any save: %v, want ErrNoCheckpoint", err)
	}
	in := Checkpoint{RunID: "01jrun", Turn: 1, Round: 2,
		Identity: agentlanev1alpha1.Identity{TenantID: "acme"}, State: json.RawMessage(`{"nextStep":2}`)}
	saved, err := s.Save(ctx, session, in)
	if err != nil {
		t.Fatal(err)
	}
	if saved.Location != "configmap/agentlane-ckpt-s1-0#01jrun" {
		t.Errorf("location = %q", saved.Location)
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: session.Namespace, Name: "agentlane-ckpt-s1-0"}, cm); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(cm, sess) || cm.Labels[agentlanev1alpha1.SessionLabel] != "s1" {
		t.Errorf("ConfigMap owners %v, labels %v: want controlled by the session and labelled", cm.OwnerReferences, cm.Labels)
	}
	want := in
	want.SchemaVersion, want.Time = CurrentSchemaVersion, t0
	for _, run := range []string{"", "01jrun"} {
		got, err := s.Load(ctx, session, run)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Load(%q) (-want,+got):\n%s", run, diff)
		}
	}
}

// A ConfigMap left by an earlier session of the same name is taken over;
// one that is not a session's is left alone.
func TestConfigMapsOwnership(t *testing.T) {
	ctx := context.Background()
	earlier := &agentlanev1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: session.Namespace, Name: session.Name, UID: "uid-0"}}
	stale := newConfigMap(types.NamespacedName{Namespace: session.Namespace, Name: SlotName(session.Name, 0)}, earlier)
	stale.Labels[StoreLabel] = StoreCheckpoint
	stale.Annotations = map[string]string{RunAnnotation: "old", SeqAnnotation: "7"}
	stale.Data[checkpointKey] = `{"runId":"old"}`
	staleLegacy := newConfigMap(types.NamespacedName{Namespace: session.Namespace, Name: ConfigMapName(session.Name)}, earlier)
	staleLegacy.Data = legacyData(t, checkpoint("old", ""))
	s, _, _ := fakeStore(t, stale, staleLegacy)
	if _, err := s.Load(ctx, session, "old"); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Load of the earlier session's run: %v, want ErrNoCheckpoint", err)
	}
	if _, err := s.Save(ctx, session, checkpoint("new", "")); err != nil {
		t.Fatal(err)
	}
	cp, err := s.Load(ctx, session, "")
	if err != nil || cp.RunID != "new" {
		t.Fatalf("Load latest = %+v, %v; want run new", cp, err)
	}
	if _, err := s.Load(ctx, session, "old"); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("the earlier session's run survived the takeover: %v", err)
	}

	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: session.Namespace, Name: SlotName(session.Name, 0)},
		Data: map[string]string{"app.conf": "x"}}
	s, _, c := fakeStore(t, foreign)
	if _, err := s.Save(ctx, session, checkpoint("r1", "")); err == nil || !strings.Contains(err.Error(), "is not controlled by an AgentSession") {
		t.Errorf("Save over a foreign ConfigMap: %v, want a refusal", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(foreign), foreign); err != nil || foreign.Data["app.conf"] != "x" || len(foreign.Data) != 1 {
		t.Errorf("the foreign ConfigMap changed: %v, %v", foreign.Data, err)
	}
}

// A session's spec.retention.maxRuns lowers the store's run bound, never
// raises it.
func TestConfigMapsSessionMaxRuns(t *testing.T) {
	cases := map[string]struct {
		storeMaxRuns, sessionMaxRuns int32
		wantEvicted                  []string
	}{
		"the session's lower bound wins":     {storeMaxRuns: 16, sessionMaxRuns: 2, wantEvicted: []string{"r1", "r2"}},
		"the store's lower bound wins":       {storeMaxRuns: 3, sessionMaxRuns: 50, wantEvicted: []string{"r1"}},
		"without a session bound, the store": {storeMaxRuns: 3, wantEvicted: []string{"r1"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, sess, c := fakeStore(t)
			s.MaxRuns = int(tc.storeMaxRuns)
			if tc.sessionMaxRuns > 0 {
				sess.Spec.Retention = &agentlanev1alpha1.SessionRetention{MaxRuns: &tc.sessionMaxRuns}
				if err := c.Update(ctx, sess); err != nil {
					t.Fatal(err)
				}
			}
			var evicted []string
			for _, run := range []string{"r1", "r2", "r3", "r4"} {
				saved, err := s.Save(ctx, session, checkpoint(run, ""))
				if err != nil {
					t.Fatal(err)
				}
				evicted = append(evicted, saved.Evicted...)
			}
			if diff := cmp.Diff(tc.wantEvicted, evicted); diff != "" {
				t.Errorf("evicted runs (-want,+got):\n%s", diff)
			}
			for _, run := range tc.wantEvicted {
				if _, err := s.Load(ctx, session, run); !errors.Is(err, ErrNoCheckpoint) {
					t.Errorf("Load(%s) = %v, want ErrNoCheckpoint", run, err)
				}
			}
		})
	}
}

// Savers that race on the same session's ConfigMap keep every checkpoint.
func TestConfigMapsConcurrentSaves(t *testing.T) {
	ctx := context.Background()
	s, _, _ := fakeStore(t)
	s.MaxRuns = 100
	const savers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, savers*each)
	for i := range savers {
		wg.Go(func() {
			for j := range each {
				if _, err := s.Save(ctx, session, checkpoint(fmt.Sprintf("r%d-%d", i, j), "")); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var got []string
	for i := range savers {
		for j := range each {
			run := fmt.Sprintf("r%d-%d", i, j)
			if _, err := s.Load(ctx, session, run); err == nil {
				got = append(got, run)
			}
		}
	}
	if len(got) != savers*each {
		t.Errorf("%d of %d checkpoints kept; lost: %v", len(got), savers*each, slices.DeleteFunc(allRuns(savers, each), func(r string) bool {
			return slices.Contains(got, r)
		}))
	}
}

func allRuns(savers, each int) []string {
	var out []string
	for i := range savers {
		for j := range each {
			out = append(out, fmt.Sprintf("r%d-%d", i, j))
		}
	}
	return out
}
