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

package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// heapProfile saves the manager's heap profile (after a garbage
// collection, so inuse_space is the live heap) as heap-<name>.pb.gz in
// -profile-dir and returns the Go heap in use right after it, from the
// manager's metrics. Without -profile-dir it only reads the metric.
func (e *env) heapProfile(name string) int64 {
	e.t.Helper()
	if e.pprofURL != "" {
		e.saveProfile("heap?gc=1", "heap-"+name+".pb.gz", time.Minute)
	}
	m, err := e.managerMetrics()
	if err != nil {
		e.t.Fatal(err)
	}
	return int64(m.sum("go_memstats_heap_alloc_bytes", nil))
}

// cpuProfile saves a CPU profile of the manager over d as cpu-<name>.pb.gz
// in -profile-dir; nothing without it.
func (e *env) cpuProfile(name string, d time.Duration) {
	e.t.Helper()
	if e.pprofURL == "" || d <= 0 {
		return
	}
	e.saveProfile(fmt.Sprintf("profile?seconds=%d", int(d.Seconds())), "cpu-"+name+".pb.gz", d+time.Minute)
}

func (e *env) saveProfile(query, file string, timeout time.Duration) {
	e.t.Helper()
	hc := &http.Client{Timeout: timeout}
	resp, err := hc.Get(e.pprofURL + query)
	if err != nil {
		e.t.Fatalf("profile %s: %v", query, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("profile %s: %s", query, resp.Status)
	}
	if err := os.MkdirAll(*flagProfileDir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	path := filepath.Join(*flagProfileDir, file)
	f, err := os.Create(path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		e.t.Fatalf("profile %s: %v", query, err)
	}
	e.t.Logf("saved %s", path)
}
