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

// Command agent is a scripted agent runtime: it drives one AgentSession
// through the Session API from a script (see internal/agentscript and
// config/samples/scripts/agent-script.yaml), for demos, tests and
// benchmarks.
//
// With --mode=script it runs each turn of the script once and exits. With
// --mode=serve it is the session's runtime: it takes the session's turns
// from its event stream, runs one script turn for each, takes steering
// messages at tool boundaries and stops a run the session aborts, until
// --turns turns ran or it gets SIGTERM or SIGINT.
//
// In the runtime pod the operator creates for a session, --server,
// --namespace, --session and --pod default to the AGENTLANE_* variables the
// operator sets, and the agent resumes from the session's latest checkpoint
// in both modes (--resume): a pod created on resume continues the run the
// previous pod left, and a restarted container continues its own.
//
// In a warm runtime pod (AGENTLANE_WARM_POOL set, or --warm-pool), built
// by a RuntimePool before any session chose it, the agent has no session
// yet: it waits until the Session API tells it the session that adopted
// its pod (GET .../runtime/assignment, with the pod's own token) and only
// then runs as that session's runtime, exactly as with --session, resuming
// from the session's checkpoint when the assignment names one.
//
// Both modes follow the session's events: on PassivationRequested the
// agent finishes the tool round in progress, saves a checkpoint at that
// boundary, leaves the commands that had not started queued for the agent
// that resumes the session, and exits 0 with a line on stderr saying it
// passivated.
//
// The JSON report of what every command did goes to --report (stdout by
// default); logs go to stderr. The exit code is 0 once the script ran,
// whatever state its commands ended in (the report says), or once the agent
// passivated, 1 when the API refused the agent (authentication,
// authorization, a missing session), the server could not be reached or the
// run was stopped before it ended, and 2 for bad flags or an invalid script.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"github.com/agentlane/agentlane/internal/agentscript"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// Modes of --mode.
const (
	modeScript = "script"
	modeServe  = "serve"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1 // the API refused, or the run did not finish
	exitInvalid = 2 // bad flags or script
)

// options are the agent's command-line settings.
type options struct {
	server    string
	token     string
	tokenFile string
	caFile    string
	namespace string
	session   string
	script    string
	mode      string
	turns     int
	report    string
	pod       string
	resume    bool
	warmPool  string
	log       logOptions
}

func (o *options) validate() error {
	var errs []error
	if o.server == "" {
		errs = append(errs, errors.New("--server is required"))
	}
	if o.token != "" && o.tokenFile != "" {
		errs = append(errs, errors.New("--token and --token-file cannot both be set"))
	}
	if o.namespace == "" {
		errs = append(errs, errors.New("--namespace is required"))
	}
	if o.session == "" && o.warmPool == "" {
		errs = append(errs, errors.New("--session is required"))
	}
	if o.script == "" {
		errs = append(errs, errors.New("--script is required"))
	}
	switch o.mode {
	case modeScript:
		if o.turns != 0 {
			errs = append(errs, errors.New("--turns applies to --mode=serve only"))
		}
	case modeServe:
		if o.turns < 0 {
			errs = append(errs, fmt.Errorf("--turns must not be negative, got %d", o.turns))
		}
	default:
		errs = append(errs, fmt.Errorf("--mode must be %s or %s, got %q", modeScript, modeServe, o.mode))
	}
	if o.report == "" {
		errs = append(errs, errors.New(`--report must name a file, or "-" for stdout`))
	}
	return errors.Join(errs...)
}

// parseFlags reads the command line; getenv reads the variables the
// operator sets in a runtime pod, which some flags default to.
func parseFlags(args []string, output io.Writer, getenv func(string) string) (options, error) {
	var o options
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&o.server, "server", getenv(sessionapi.EnvSessionAPIURL), "Base URL of the Session API, such as http://127.0.0.1:8443; defaults to $"+sessionapi.EnvSessionAPIURL+".")
	fs.StringVar(&o.token, "token", "", "Bearer token (a Kubernetes token); prefer --token-file, which keeps it out of the process list.")
	fs.StringVar(&o.tokenFile, "token-file", "", "File holding the bearer token, such as a projected service-account token; read again when it rotates. Without --token and --token-file, $"+sessionapi.EnvSessionAPITokenFile+" (the runtime pod's token for the Session API).")
	fs.StringVar(&o.caFile, "ca-file", getenv(sessionapi.EnvSessionAPICAFile), "CA bundle (PEM) the Session API's certificate is verified with, instead of the system's roots; defaults to $"+sessionapi.EnvSessionAPICAFile+".")
	fs.StringVar(&o.namespace, "namespace", cmp.Or(getenv(sessionapi.EnvNamespace), "default"), "Namespace of the AgentSession; defaults to $"+sessionapi.EnvNamespace+", else default.")
	fs.StringVar(&o.session, "session", getenv(sessionapi.EnvSession), "Name of the AgentSession; defaults to $"+sessionapi.EnvSession+".")
	fs.StringVar(&o.script, "script", "", "Script file (YAML or JSON) of the agent's turns.")
	fs.StringVar(&o.mode, "mode", modeScript, "script: run each turn of the script once; serve: run a script turn for each turn the session sends.")
	fs.IntVar(&o.turns, "turns", 0, "Serve mode: stop after this many turns; 0 runs until SIGTERM or SIGINT.")
	fs.StringVar(&o.report, "report", "-", `File the JSON report is written to; "-" is stdout.`)
	fs.StringVar(&o.pod, "pod", getenv(sessionapi.EnvPodName), "Name of the runtime pod the agent runs in; a passivation request for another pod is ignored. Defaults to $"+sessionapi.EnvPodName+".")
	inPod := getenv(sessionapi.EnvPodName) != "" || getenv(sessionapi.EnvResumeRunID) != ""
	fs.BoolVar(&o.resume, "resume", inPod, "Script mode: start from the session's latest checkpoint (serve mode always does). Defaults to true in a runtime pod ($"+sessionapi.EnvPodName+" or $"+sessionapi.EnvResumeRunID+" set), so that a restarted container continues rather than starts over.")
	fs.StringVar(&o.warmPool, "warm-pool", getenv(sessionapi.EnvWarmPool), "The RuntimePool of the warm pod the agent runs in: without --session, the agent waits for the session that adopts the pod (the Session API's assignment) before it does anything. Defaults to $"+sessionapi.EnvWarmPool+".")
	o.log.bindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if o.token == "" && o.tokenFile == "" {
		o.tokenFile = getenv(sessionapi.EnvSessionAPITokenFile)
	}
	err := o.validate()
	return o, err
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole program; it returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "agent:", err)
		return exitInvalid
	}
	script, err := agentscript.Load(o.script)
	if err != nil {
		fmt.Fprintf(stderr, "agent: --script: %v\n", err)
		return exitInvalid
	}
	var copts []sessionapi.ClientOption
	switch {
	case o.token != "":
		copts = append(copts, sessionapi.WithToken(o.token))
	case o.tokenFile != "":
		copts = append(copts, sessionapi.WithTokenFile(o.tokenFile))
	}
	if o.caFile != "" {
		copts = append(copts, sessionapi.WithCAFile(o.caFile))
	}
	client, err := sessionapi.NewClient(o.server, copts...)
	if err != nil {
		fmt.Fprintf(stderr, "agent: --server: %v\n", err)
		return exitInvalid
	}
	if o.session == "" {
		a, err := awaitAssignment(ctx, client, &o, o.log.logger(stderr).WithName("agent"))
		if err != nil {
			fmt.Fprintln(stderr, "agent:", err)
			return exitFailed
		}
		o.session = a.Session
		if a.ResumeRunID != "" {
			o.resume = true
		}
	}
	log := o.log.logger(stderr).WithName("agent").WithValues("session", o.namespace+"/"+o.session)
	rt := &agentscript.Runtime{Session: client.Session(o.namespace, o.session), Script: script, Log: log,
		Pod: o.pod, Resume: o.resume}

	var rep agentscript.Report
	switch o.mode {
	case modeScript:
		rep = rt.RunScript(ctx)
		unfinished := rep.Unfinished()
		switch {
		case rep.Passivated != nil:
		case rep.Refusal() != nil:
			err = fmt.Errorf("the Session API refused the agent: %w", rep.Refusal())
		case ctx.Err() != nil:
			err = fmt.Errorf("stopped before the script ended: %w", context.Cause(ctx))
		case len(unfinished) > 0:
			err = fmt.Errorf("%d commands did not finish, the first with: %s", len(unfinished), unfinished[0].Error)
		}
	case modeServe:
		rep, err = rt.Serve(ctx, o.turns)
	}
	if werr := writeReport(o.report, stdout, rep); werr != nil {
		fmt.Fprintf(stderr, "agent: --report: %v\n", werr)
		return exitFailed
	}
	if err != nil {
		fmt.Fprintln(stderr, "agent:", err)
		return exitFailed
	}
	if p := rep.Passivated; p != nil {
		fmt.Fprintln(stderr, "agent:", passivationLine(p))
	}
	logSummary(log, rep)
	return exitOK
}

// awaitAssignment waits, in a warm pod of pool o.warmPool, until a session
// adopts the pod, and returns the assignment.
func awaitAssignment(ctx context.Context, client *sessionapi.Client, o *options, log logr.Logger) (*sessionapi.Assignment, error) {
	log = log.WithValues("pool", o.warmPool, "namespace", o.namespace, "pod", o.pod)
	log.Info("Warm pod: waiting for a session to adopt it")
	a, err := client.AwaitAssignment(ctx, o.namespace)
	if err != nil {
		return nil, fmt.Errorf("waiting for the warm pod's assignment: %w", err)
	}
	if a.Namespace != o.namespace || a.Session == "" {
		return nil, fmt.Errorf("the assignment names session %q of namespace %q, not one of namespace %q", a.Session, a.Namespace, o.namespace)
	}
	log.Info("Adopted", "session", a.Session, "resumeRunID", a.ResumeRunID)
	return a, nil
}

// passivationLine says that the agent passivated and what it left for the
// agent that resumes the session.
func passivationLine(p *agentscript.Passivation) string {
	at := fmt.Sprintf("checkpoint of run %s", p.RunID)
	if p.Step > 0 {
		at += fmt.Sprintf(" at step %d", p.Step)
	}
	if p.CheckpointError != "" {
		at = "no checkpoint saved (" + p.CheckpointError + ")"
	}
	return fmt.Sprintf("passivated (%s, deadline %s): %s, %d queued commands left for the resumed runtime",
		p.Reason, p.Deadline.UTC().Format(time.RFC3339), at, len(p.Held))
}

// writeReport writes rep as indented JSON to path, or to stdout for "-".
func writeReport(path string, stdout io.Writer, rep agentscript.Report) error {
	if rep.Turns == nil {
		rep.Turns = []agentscript.TurnReport{} // "turns": [], not null
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if path == "-" {
		_, err = stdout.Write(data)
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// logSummary logs how many commands ended in each state.
func logSummary(log logr.Logger, rep agentscript.Report) {
	states := map[string]int{}
	commands := 0
	for _, t := range rep.Turns {
		for _, c := range t.Commands {
			commands++
			state := c.State
			if state == "" {
				state = "Unfinished"
			}
			states[state]++
		}
	}
	log.Info("Done", "turns", len(rep.Turns), "commands", commands, "states", states)
}
