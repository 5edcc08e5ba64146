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
	"runtime/pprof"
	"sync"
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
	path, err := e.fetchProfile(query, file, timeout)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Logf("saved %s", path)
}

// fetchProfile saves the manager's profile query as file in -profile-dir
// and returns its path; it may run on any goroutine.
func (e *env) fetchProfile(query, file string, timeout time.Duration) (string, error) {
	hc := &http.Client{Timeout: timeout}
	resp, err := hc.Get(e.pprofURL + query)
	if err != nil {
		return "", fmt.Errorf("profile %s: %w", query, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("profile %s: %s", query, resp.Status)
	}
	if err := os.MkdirAll(*flagProfileDir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(*flagProfileDir, file)
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		return "", fmt.Errorf("profile %s: %w", query, err)
	}
	return path, nil
}

// profileRun, with -profile-dir, takes a CPU profile of the manager and
// one of the benchmark's own process (its clients) over the first d of a
// run, as cpu-<name>.pb.gz and cpu-bench-<name>.pb.gz; wait waits for both.
// Without -profile-dir it does nothing.
func (e *env) profileRun(name string, d time.Duration) (wait func()) {
	if e.pprofURL == "" || d <= 0 {
		return func() {}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		path, err := e.fetchProfile(fmt.Sprintf("profile?seconds=%d", int(d.Seconds())), "cpu-"+name+".pb.gz", d+time.Minute)
		if err != nil {
			e.t.Errorf("the manager's CPU profile of %s: %v", name, err)
			return
		}
		e.t.Logf("saved %s", path)
	})
	path := filepath.Join(*flagProfileDir, "cpu-bench-"+name+".pb.gz")
	if err := os.MkdirAll(*flagProfileDir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		e.t.Logf("no CPU profile of the benchmark: %v", err)
		return wg.Wait
	}
	wg.Go(func() {
		time.Sleep(d)
		pprof.StopCPUProfile()
		f.Close()
	})
	return wg.Wait
}
