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

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemo runs the demo as `make demo` does, with freshly built binaries,
// and checks that it exits 0 after every check held.
func TestDemo(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, which builds the control plane")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, name := range []string{"manager", "worker", "agent", "demo"} {
		pkg := "./cmd/" + name
		if name == "demo" {
			pkg = "./hack/demo"
		}
		build := exec.Command("go", "build", "-o", filepath.Join(bin, name), pkg)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}

	demo := exec.Command(filepath.Join(bin, "demo"), "--bin="+bin)
	demo.Dir = root
	out, err := demo.CombinedOutput()
	text := string(out)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, text)
	}
	held, failed := 0, 0
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "    ✓ "):
			held++
		case strings.HasPrefix(line, "    ✗ "):
			failed++
		}
	}
	if held != 11 || failed != 0 {
		t.Errorf("want the 11 checks held, got %d held and %d failed:\n%s", held, failed, text)
	}
	for _, want := range []string{
		"worker-node-a", "worker-node-b", "worker-node-c", // per-worker summary
		"execute   External", // per-lane summary
		"state       DeadLettered · attempt 4",
		"PassivationRequested   reason manual", // the session's Kubernetes Events
		"manager          stopped (exit 0)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q:\n%s", want, text)
		}
	}
}
