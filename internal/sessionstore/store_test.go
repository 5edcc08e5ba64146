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
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

var (
	t0      = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	session = types.NamespacedName{Namespace: "tenant-a", Name: "s1"}
)

func TestPrepare(t *testing.T) {
	cases := map[string]struct {
		cp      Checkpoint
		want    Checkpoint
		wantErr error
		// wantMsg is part of the error's message.
		wantMsg string
	}{
		"fills the schema version and the time": {
			cp:   Checkpoint{RunID: "01jrun", Turn: 2, Round: 3},
			want: Checkpoint{SchemaVersion: CurrentSchemaVersion, RunID: "01jrun", Turn: 2, Round: 3, Time: t0},
		},
		"a caller's time is replaced by the store's": {
			cp:   Checkpoint{RunID: "r", Time: t0.Add(100 * 365 * 24 * time.Hour).In(time.FixedZone("CET", 3600))},
			want: Checkpoint{SchemaVersion: CurrentSchemaVersion, RunID: "r", Time: t0},
		},
		"a newer schema is refused": {
			cp:      Checkpoint{SchemaVersion: CurrentSchemaVersion + 1, RunID: "r"},
			wantErr: ErrSchemaTooNew,
			wantMsg: "the checkpoint of run r has schema version 2, this build reads up to 1",
		},
		"no run": {
			cp:      Checkpoint{},
			wantErr: ErrInvalid,
			wantMsg: "runId is required",
		},
		"a run named latest": {
			cp:      Checkpoint{RunID: "latest"},
			wantErr: ErrInvalid,
			wantMsg: "reserved",
		},
		"a run that cannot be a data key": {
			cp:      Checkpoint{RunID: "a/b"},
			wantErr: ErrInvalid,
			wantMsg: `runId "a/b" must be letters`,
		},
		"a run too long": {
			cp:      Checkpoint{RunID: strings.Repeat("r", 129)},
			wantErr: ErrInvalid,
			wantMsg: "at most 128",
		},
		"a negative round": {
			cp:      Checkpoint{RunID: "r", Round: -1},
			wantErr: ErrInvalid,
		},
		"state that is not JSON": {
			cp:      Checkpoint{RunID: "r", State: json.RawMessage(`{"turn":`)},
			wantErr: ErrInvalid,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := prepare(tc.cp, t0)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("error = %v, want %v containing %q", err, tc.wantErr, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("checkpoint (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestConfigMapName(t *testing.T) {
	if got := ConfigMapName("s1"); got != "agentlane-checkpoint-s1" {
		t.Errorf("ConfigMapName(s1) = %q", got)
	}
	// The cut falls on the dot, which must not end up before the hash.
	long := strings.Repeat("a", 214) + "." + strings.Repeat("b", 40)
	other := strings.Repeat("a", 214) + "." + strings.Repeat("c", 40)
	got := ConfigMapName(long)
	if len(got) > 253 || !strings.HasPrefix(got, "agentlane-checkpoint-aaa") {
		t.Errorf("ConfigMapName(long) = %q (%d characters), want a name of at most 253 with the prefix", got, len(got))
	}
	if got == ConfigMapName(other) {
		t.Errorf("two long session names share the ConfigMap %q", got)
	}
	if strings.Contains(got, ".-") || strings.Contains(got, "-.") {
		t.Errorf("ConfigMapName(long) = %q is not a valid object name", got)
	}
}
