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
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"text/template"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/agentscript"
	"github.com/agentlane/agentlane/internal/testenv"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

//go:embed assets/*.yaml
var assets embed.FS

const namespace = "default"

// A scripted session of the demo: the AgentSession, the script its runtime
// follows and how the runtime runs it.
type scriptedSession struct {
	name, script string
	// serveTurns > 0 runs the agent in serve mode for that many turns.
	serveTurns int
}

var scriptedSessions = []scriptedSession{
	{name: "reviewer-42", script: "reviewer.yaml"},
	{name: "builder-7", script: "builder.yaml"},
	{name: "chat-9", script: "chat.yaml", serveTurns: 2},
}

// opening is the first message to chat-9: the session is idle, so it starts
// a turn at once. burst are the messages posted right after, while that
// turn runs: collect merges them into the next turn.
const opening = "hi, I need help with a red build"

var burst = []string{
	"the build is red on main",
	"it started after the lane refactor",
	"logs are in the CI run 4411",
	"only the integration job fails",
	"can you summarize what changed?",
}

// ready returns nil once the Session API answers, every worker holds its
// heartbeat Lease and the demo's sessions are Active.
func (d *demo) ready(ctx context.Context) error {
	resp, err := http.Get(d.apiURL + "/healthz")
	if err != nil {
		return fmt.Errorf("the Session API: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the Session API: %s", resp.Status)
	}
	leases := &coordinationv1.LeaseList{}
	if err := d.client.List(ctx, leases, client.InNamespace(namespace), client.MatchingLabels{"agentlane.io/worker": "true"}); err != nil {
		return err
	}
	if len(leases.Items) < len(d.pool) {
		return fmt.Errorf("%d of %d workers hold a Lease: %w", len(leases.Items), len(d.pool), errNotReady)
	}
	for _, s := range scriptedSessions {
		asn := &agentlanev1alpha1.AgentSession{}
		if err := d.client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: s.name}, asn); err != nil {
			return err
		}
		if asn.Status.Phase != agentlanev1alpha1.SessionActive {
			return fmt.Errorf("session %s is %q: %w", s.name, asn.Status.Phase, errNotReady)
		}
	}
	return nil
}

// tenantToken creates the service account the agent runtimes run as, binds
// it to config/rbac's session-user ClusterRole in the namespace, and writes
// a token of it to a file.
func (d *demo) tenantToken(ctx context.Context) (string, error) {
	raw, err := os.ReadFile(filepath.Join("config", "rbac", "session_user_role.yaml"))
	if err != nil {
		return "", err
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		return "", err
	}
	if err := d.client.Create(ctx, role); err != nil {
		return "", fmt.Errorf("create ClusterRole %s: %w", role.Name, err)
	}
	token, err := testenv.ServiceAccountToken(ctx, d.client, namespace, "agent-runtime", rbacv1.RoleRef{Kind: "ClusterRole", Name: role.Name})
	if err != nil {
		return "", err
	}
	path := filepath.Join(d.dir, "agent-runtime.token")
	return path, os.WriteFile(path, []byte(token), 0o600)
}

// writeWorkspace writes the files the scripts read and renders the scripts
// into the demo's directory.
func (d *demo) writeWorkspace() error {
	src := filepath.Join(d.dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"main.go":   "package main\n\nfunc main() { run() }\n",
		"lanes.go":  "package main\n\n// lanes: control, query, execute, generate\n",
		"README.md": "# demo project\n\nA small project the scripted agents review and build.\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	for _, s := range scriptedSessions {
		text, err := assets.ReadFile("assets/" + s.script)
		if err != nil {
			return err
		}
		tmpl, err := template.New(s.script).Parse(string(text))
		if err != nil {
			return err
		}
		var out bytes.Buffer
		if err := tmpl.Execute(&out, struct{ Dir string }{d.dir}); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d.dir, s.script), out.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// sessionResults are what the scripted sessions did.
type sessionResults struct {
	reports  map[string]agentscript.Report
	took     time.Duration
	posted   []*sessionapi.PostResult
	orderLog string
}

// runSessions runs the scripted agents, each as its own process, posts the
// burst of messages to chat-9 and shows the queues until every agent ended.
func (d *demo) runSessions(ctx context.Context) (res *sessionResults, err error) {
	if d.tokenFile, err = d.tenantToken(ctx); err != nil {
		return nil, err
	}
	if d.api, err = sessionapi.NewClient(d.apiURL, sessionapi.WithTokenFile(d.tokenFile)); err != nil {
		return nil, err
	}
	if err := d.writeWorkspace(); err != nil {
		return nil, err
	}
	step("running %d scripted agent sessions against the Session API", len(scriptedSessions))
	started := time.Now()
	var agents []*process
	for _, s := range scriptedSessions {
		var args []string
		mode := "runs its script"
		if s.serveTurns > 0 {
			args = append(args, "--mode=serve", fmt.Sprintf("--turns=%d", s.serveTurns))
			mode = fmt.Sprintf("serves %d turn", s.serveTurns)
		}
		p, err := d.startAgent(s.name, s.name, s.script, args...)
		if err != nil {
			return nil, err
		}
		agents = append(agents, p)
		fmt.Printf("    agent for %-12s %s (pid %d)\n", s.name, mode, p.cmd.Process.Pid)
	}

	res = &sessionResults{reports: map[string]agentscript.Report{}}
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	if res.posted, err = d.postBurst(ctx); err != nil {
		return nil, err
	}
	if err := d.follow(ctx, agents); err != nil {
		return nil, err
	}
	res.took = time.Since(started)
	for i, s := range scriptedSessions {
		if agents[i].err != nil {
			return nil, fmt.Errorf("agent for %s: %s; see %s", s.name, exitText(agents[i].err), agents[i].log)
		}
		if res.reports[s.name], err = d.report(s.name); err != nil {
			return nil, err
		}
	}
	order, _ := os.ReadFile(filepath.Join(d.dir, "order.log"))
	res.orderLog = string(order)
	return res, nil
}

// startAgent starts a scripted agent runtime for session, as process
// agent-<name>, writing its report to <name>.report.json.
func (d *demo) startAgent(name, session, script string, args ...string) (*process, error) {
	args = append([]string{"--server=" + d.apiURL, "--token-file=" + d.tokenFile, "--namespace=" + namespace,
		"--session=" + session, "--script=" + filepath.Join(d.dir, script),
		"--report=" + filepath.Join(d.dir, name+".report.json")}, args...)
	return d.procs.start("agent-"+name, filepath.Join(d.binDir, "agent"), args...)
}

// report reads the report of agent-<name>.
func (d *demo) report(name string) (agentscript.Report, error) {
	var rep agentscript.Report
	raw, err := os.ReadFile(filepath.Join(d.dir, name+".report.json"))
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		return rep, fmt.Errorf("report of agent-%s: %w", name, err)
	}
	return rep, nil
}

// postBurst posts the burst of messages to chat-9, one right after the
// other, as a user typing fast would.
func (d *demo) postBurst(ctx context.Context) ([]*sessionapi.PostResult, error) {
	chat := d.api.Session(namespace, "chat-9")
	var out []*sessionapi.PostResult
	for _, text := range append([]string{opening}, burst...) {
		r, err := chat.Post(ctx, sessionapi.Message{Text: text, Channel: "web"})
		if err != nil {
			return nil, fmt.Errorf("post to chat-9: %w", err)
		}
		out = append(out, r)
	}
	fmt.Printf("    posted 1 message to idle chat-9, then %d while its turn ran (collect, 500ms debounce)\n", len(burst))
	return out, nil
}

// follow shows the queues' state whenever it changes, until every agent
// process has ended.
func (d *demo) follow(ctx context.Context, agents []*process) error {
	started := time.Now()
	last := ""
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		done := true
		for _, a := range agents {
			done = done && a.exited()
		}
		line, err := d.strip(ctx)
		if err == nil && line != last {
			fmt.Printf("    %5.1fs  %s\n", time.Since(started).Seconds(), line)
			last = line
		}
		if done {
			return nil
		}
		if err := d.procs.alive(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the scripted sessions did not end within %s: %w", d.timeout, ctx.Err())
		case <-tick.C:
		}
	}
}

// kubectl is the kubectl binary that came with the control plane.
func (d *demo) kubectl() string {
	return filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
}

func (d *demo) kubectlOutput(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, d.kubectl(), append([]string{"--kubeconfig", d.kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %v: %w", args, err)
	}
	return string(out), nil
}
