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

package sdk

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// typescriptTimeout bounds the TypeScript client's test run (npm ci and
// the build excluded).
const typescriptTimeout = 3 * time.Minute

// TestTypeScriptClient installs the TypeScript client's dependencies from
// its lockfile (npm ci), compiles it, checks that `npm pack` makes a
// package another project can install and import, and runs its tests
// (node --test) with the address, CA and tokens of a live manager in their
// environment and AGENTLANE_SDK_REQUIRE_LIVE set, so that a test missing
// what it needs fails instead of skipping. node or npm missing fails the
// test: the client's checks against the live server run nowhere else.
func TestTypeScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node (20 or newer) is needed to test the TypeScript client (sdk/typescript): %v", err)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("npm is needed to test the TypeScript client (sdk/typescript): %v", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "sdk", "typescript")
	work := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	run := func(timeout time.Duration, cwd string, name string, args ...string) []byte {
		t.Helper()
		runCtx, stop := context.WithTimeout(ctx, timeout)
		defer stop()
		cmd := exec.CommandContext(runCtx, name, args...)
		cmd.Dir = cwd
		cmd.Env = append(os.Environ(), "npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s (in %s): %v\n%s", filepath.Base(name), strings.Join(args, " "), cwd, err, out)
		}
		return out
	}
	version := strings.TrimSpace(string(run(time.Minute, dir, node, "--version")))
	if major, _, _ := strings.Cut(strings.TrimPrefix(version, "v"), "."); atoi(major) < 20 {
		t.Fatalf("node %s: the TypeScript client needs node 20 or newer", version)
	}
	run(10*time.Minute, dir, npm, "ci")
	run(5*time.Minute, dir, npm, "run", "build")
	checkPackage(t, run, npm, node, dir, work)

	l := startLive(ctx, t, root, work)

	tests, err := filepath.Glob(filepath.Join(dir, "dist", "test", "*.test.js"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no compiled tests in %s: %v", filepath.Join(dir, "dist", "test"), err)
	}
	runCtx, stop := context.WithTimeout(ctx, typescriptTimeout)
	defer stop()
	cmd := exec.CommandContext(runCtx, node, append([]string{"--test", "--test-reporter=tap"}, tests...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), l.Env...)
	started := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test failed: %v\n%s", err, out) // the manager's log follows
	}
	t.Logf("node --test (%s):\n%s", time.Since(started).Round(time.Second), out)
	l.checkNoTokens(t, out, "TypeScript")
	for _, want := range []string{`(?m)^ok \d+ - live manager$`, `(?m)^\s*ok \d+ - the example runtime serves a turn$`,
		`(?m)^# fail 0$`, `(?m)^# skipped 0$`, `(?m)^# todo 0$`} {
		if !regexp.MustCompile(want).Match(out) {
			t.Errorf("the TypeScript tests' output does not match %q: the live tests did not all run", want)
		}
	}
}

// checkPackage packs the client (npm pack) and installs the tarball into
// a new project in work, which imports it by its name and finds its
// Client, its type declarations and nothing of its tests.
func checkPackage(t *testing.T, run func(time.Duration, string, string, ...string) []byte, npm, node, dir, work string) {
	t.Helper()
	out := run(2*time.Minute, dir, npm, "pack", "--ignore-scripts", "--pack-destination", work)
	lines := strings.Fields(strings.TrimSpace(string(out)))
	tarball := filepath.Join(work, lines[len(lines)-1])
	if !strings.HasSuffix(tarball, ".tgz") {
		t.Fatalf("npm pack did not name a tarball:\n%s", out)
	}
	app := filepath.Join(work, "app")
	must(t, os.MkdirAll(app, 0o755))
	must(t, os.WriteFile(filepath.Join(app, "package.json"), []byte(`{"name":"app","private":true,"type":"module"}`), 0o600))
	run(2*time.Minute, app, npm, "install", "--no-package-lock", "--offline", tarball)
	script := `import { Client, ApiError, Code, errorCodeValues } from "@agentlane/client";
const c = new Client("https://127.0.0.1:1", { token: "t" });
if (typeof c.session("ns", "s").submitCommand !== "function" || Code.NotLeader !== "NotLeader" || !errorCodeValues.includes("Forbidden")) process.exit(2);
if (!(new ApiError(503, "NotLeader", "") instanceof Error)) process.exit(3);
console.log("imported");`
	got := run(time.Minute, app, node, "--input-type=module", "-e", script)
	if !bytes.Contains(got, []byte("imported")) {
		t.Fatalf("the installed package did not import:\n%s", got)
	}
	installed := filepath.Join(app, "node_modules", "@agentlane", "client")
	if _, err := os.Stat(filepath.Join(installed, "dist", "src", "index.d.ts")); err != nil {
		t.Errorf("the package has no type declarations: %v", err)
	}
	if _, err := os.Stat(filepath.Join(installed, "dist", "test")); err == nil {
		t.Error("the package holds the client's tests")
	}
}

// atoi is s as a number, 0 when it is not one.
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}
