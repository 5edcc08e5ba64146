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
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// submitBody hides exactly the durations of SubmitRequest, by their JSON
// keys: every other field is decoded into the request itself.
func TestSubmitBodyHidesTheDurations(t *testing.T) {
	durations := map[string]bool{}
	req := reflect.TypeFor[sessionapi.SubmitRequest]()
	for i := range req.NumField() {
		if f := req.Field(i); f.Type == reflect.TypeFor[*metav1.Duration]() {
			durations[f.Tag.Get("json")] = true
		}
	}
	hidden := map[string]bool{}
	body := reflect.TypeFor[submitBody]()
	for i := range body.NumField() {
		if f := body.Field(i); !f.Anonymous {
			hidden[f.Tag.Get("json")] = true
		}
	}
	if diff := cmp.Diff(durations, hidden); diff != "" {
		t.Errorf("SubmitRequest's durations and the fields submitBody hides differ (-durations,+hidden):\n%s", diff)
	}
}

// readSubmit reads what readJSON reads into a SubmitRequest, and refuses
// what it refuses.
func TestReadSubmit(t *testing.T) {
	deadline := time.Date(2026, 11, 28, 1, 2, 3, 0, time.UTC)
	good := []string{
		`{"type":"noop"}`,
		`{"id":"c1","type":"bash","lane":"direct","payload":{"command":"date"},"priority":2,"timeout":"30s","deadline":"2026-11-28T01:02:03Z","runId":"r1","wait":"1m30s"}`,
		`{"type":"noop","wait":null,"timeout":null}`,
		`{"type":"noop","wait":"0s"}`,
		`{"type":"noop","wait":"1.5h"}`,
	}
	for _, body := range good {
		var want sessionapi.SubmitRequest
		if err := readJSON(request(body), &want); err != nil {
			t.Fatalf("readJSON %s: %v", body, err)
		}
		got, err := readSubmit(request(body))
		if err != nil {
			t.Errorf("readSubmit %s: %v", body, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("readSubmit %s (-readJSON,+readSubmit):\n%s", body, diff)
		}
	}
	got, _ := readSubmit(request(good[1]))
	if got.Wait == nil || got.Wait.Duration != 90*time.Second || got.Timeout == nil || got.Timeout.Duration != 30*time.Second ||
		got.Deadline == nil || !got.Deadline.Equal(deadline) {
		t.Errorf("readSubmit: %+v", got)
	}

	bad := []string{
		`{"type":"noop","wait":"soon"}`,
		`{"type":"noop","wait":30}`,
		`{"type":"noop","timeout":"-"}`,
		`{"type":"noop","timeout":{"duration":"1s"}}`,
		`{"type":"noop","wait":"1s","unknown":1}`,
		`{"type":"noop"`,
		`{"type":"noop","wait":"` + strings.Repeat("9", 4096) + `s"}`,
	}
	for _, body := range bad {
		var want sessionapi.SubmitRequest
		if err := readJSON(request(body), &want); err == nil {
			t.Fatalf("readJSON %s: no error", body)
		}
		_, err := readSubmit(request(body))
		var apiErr *sessionapi.Error
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || apiErr.Code != sessionapi.CodeInvalidRequest {
			t.Errorf("readSubmit %s: %v, want 400 InvalidRequest", body, err)
		}
	}
	// The answer is the same either way for what a client sends.
	d := metav1.Duration{Duration: 45 * time.Second}
	b, _ := json.Marshal(sessionapi.SubmitRequest{Type: "noop", Wait: &d, Timeout: &d})
	if got, err := readSubmit(request(string(b))); err != nil || got.Wait.Duration != d.Duration || got.Timeout.Duration != d.Duration {
		t.Errorf("readSubmit of a client's request: %+v, %v", got, err)
	}
}

func request(body string) *http.Request {
	return httptest.NewRequest(http.MethodPost, "/commands", strings.NewReader(body))
}
