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

package sessionapi

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

func TestWithCA(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"session": {}}`))
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		opts    []ClientOption
		wantErr bool
	}{
		"the server's CA":            {opts: []ClientOption{WithCA(ca)}},
		"the server's CA, in a file": {opts: []ClientOption{WithCAFile(caFile)}},
		"the system's roots":         {wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := NewClient(srv.URL, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Session("ns", "s").Stats(context.Background())
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Errorf("Stats error = %v, want error %v", err, tc.wantErr)
			}
		})
	}
	if _, err := NewClient(srv.URL, WithCAFile(filepath.Join(t.TempDir(), "missing"))); err == nil {
		t.Error("a missing CA file is not an error")
	}
	if _, err := NewClient(srv.URL, WithCA([]byte("no PEM here"))); err == nil {
		t.Error("a CA bundle without certificates is not an error")
	}
}
