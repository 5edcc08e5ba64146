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

package executor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// DefaultPath is the PATH of a task in a sandbox, unless the sandbox's Env
// or the payload sets another.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Sandbox keeps the tasks a Registry runs away from the program that runs
// them: each attempt runs in a directory of its own, created for it under
// Root with mode 0700 and removed with everything in it when the attempt
// ends, and processes get an environment built from nothing:
//
//	PATH=DefaultPath, HOME=<attempt directory>, TMPDIR=<attempt directory>,
//	then Env in order, then the payload's env in key order
//
// (a later setting of a name wins). Nothing of the program's own environment
// reaches a task. A payload's workingDir and a read's path are relative to
// the attempt's directory and may not leave it.
//
// Directories are per attempt rather than per session: a retry starts from
// nothing, whichever worker runs it, and a worker never has to guess when a
// session is over to reclaim its space.
type Sandbox struct {
	// Root holds the attempts' directories; it is created (0700) when
	// missing. Empty means DefaultTaskRoot().
	Root string
	// Env lists the variables, as NAME=VALUE, that every task gets; see
	// ParseEnv.
	Env []string
	// Init is the program run as each process task's init, which ends the
	// task's whole process tree with its attempt: a binary that calls
	// RunTaskInitIfAsked first thing (cmd/worker's own). Empty runs tasks
	// without one: then only the task's process group is stopped, and only
	// on a timeout or cancellation.
	Init string
}

// DefaultTaskRoot is the Root of a Sandbox that names none: agentlane-tasks
// in the program's temporary directory.
func DefaultTaskRoot() string { return filepath.Join(os.TempDir(), "agentlane-tasks") }

// Attempt is the place one attempt runs in: its directory and the
// environment of its processes, before the payload's own variables.
type Attempt struct {
	// Dir is the attempt's private directory.
	Dir string
	// Env is the attempt's environment as NAME=VALUE.
	Env []string
	// init is the Sandbox's Init.
	init string
}

type attemptKey struct{}

// WithAttempt returns a context that makes the executors of this package run
// in a, as a sandboxed Registry does for each task. Executors a program
// registers find it with AttemptFrom.
func WithAttempt(ctx context.Context, a Attempt) context.Context {
	return context.WithValue(ctx, attemptKey{}, a)
}

// AttemptFrom returns the Attempt ctx runs in, if any.
func AttemptFrom(ctx context.Context) (Attempt, bool) {
	a, ok := ctx.Value(attemptKey{}).(Attempt)
	return a, ok
}

// newAttempt creates a fresh directory for one attempt and returns the
// attempt that runs in it.
func (s *Sandbox) newAttempt() (Attempt, error) {
	root := s.Root
	if root == "" {
		root = DefaultTaskRoot()
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return Attempt{}, fmt.Errorf("create the task root: %w", err)
	}
	dir, err := os.MkdirTemp(root, "attempt-") // mode 0700
	if err != nil {
		return Attempt{}, fmt.Errorf("create the task directory: %w", err)
	}
	env := make([]string, 0, 3+len(s.Env))
	env = append(env, "PATH="+DefaultPath, "HOME="+dir, "TMPDIR="+dir)
	return Attempt{Dir: dir, Env: append(env, s.Env...), init: s.Init}, nil
}

// removeAttemptDir removes dir and everything in it, also what a task made
// hard to remove by taking the write bit off its own directories.
func removeAttemptDir(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove the task directory: %w", err)
	}
	return nil
}

// ParseEnv checks variables given as NAME=VALUE (each item may also be a
// comma-separated list of them, as a repeatable flag's values are) and
// returns them one per item. A name is a letter or underscore followed by
// letters, digits and underscores.
func ParseEnv(items []string) ([]string, error) {
	var out []string
	var errs []error
	for _, item := range items {
		for kv := range strings.SplitSeq(item, ",") {
			kv = strings.TrimSpace(kv)
			if kv == "" {
				continue
			}
			name, _, ok := strings.Cut(kv, "=")
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("%q is not NAME=VALUE", kv))
			case !validEnvName(name):
				errs = append(errs, fmt.Errorf("invalid variable name %q", name))
			case strings.ContainsRune(kv, 0):
				errs = append(errs, fmt.Errorf("the value of %s holds a NUL byte", name))
			default:
				out = append(out, kv)
			}
		}
	}
	return out, errors.Join(errs...)
}

// validEnvName tells whether name is a portable environment variable name.
func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// payloadEnv returns a payload's variables as NAME=VALUE in name order,
// refusing names that are not valid.
func payloadEnv(env map[string]string) ([]string, error) {
	keys := make([]string, 0, len(env))
	for k, v := range env {
		if !validEnvName(k) {
			return nil, fmt.Errorf("invalid payload: env: invalid variable name %q", k)
		}
		if strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("invalid payload: env: the value of %s holds a NUL byte", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out, nil
}

// workingDir returns the directory a process of attempt a starts in: the
// attempt's directory, or the payload's relative workingDir inside it,
// created when missing.
func (a Attempt) workingDir(rel string) (string, error) {
	if rel == "" {
		return a.Dir, nil
	}
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("invalid payload: workingDir %q must be relative to the task directory and stay inside it", rel)
	}
	root, err := os.OpenRoot(a.Dir)
	if err != nil {
		return "", fmt.Errorf("open the task directory: %w", err)
	}
	defer func() { _ = root.Close() }()
	if err := root.MkdirAll(rel, 0o700); err != nil {
		return "", fmt.Errorf("create workingDir %s: %w", rel, err)
	}
	return filepath.Join(a.Dir, rel), nil
}
