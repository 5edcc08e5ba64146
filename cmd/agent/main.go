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
// The JSON report of what every command did goes to --report (stdout by
// default); logs go to stderr. The exit code is 0 once the script ran,
// whatever state its commands ended in (the report says), 1 when the API
// refused the agent (authentication, authorization, a missing session), the
// server could not be reached or the run was stopped before it ended, and 2
// for bad flags or an invalid script.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

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
	namespace string
	session   string
	script    string
	mode      string
	turns     int
	report    string
	zap       zap.Options
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
	if o.session == "" {
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

// parseFlags reads the command line.
func parseFlags(args []string, output io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&o.server, "server", "", "Base URL of the Session API, such as http://127.0.0.1:8443.")
	fs.StringVar(&o.token, "token", "", "Bearer token (a Kubernetes token); prefer --token-file, which keeps it out of the process list.")
	fs.StringVar(&o.tokenFile, "token-file", "", "File holding the bearer token, such as a projected service-account token; read again when it rotates.")
	fs.StringVar(&o.namespace, "namespace", "default", "Namespace of the AgentSession.")
	fs.StringVar(&o.session, "session", "", "Name of the AgentSession.")
	fs.StringVar(&o.script, "script", "", "Script file (YAML or JSON) of the agent's turns.")
	fs.StringVar(&o.mode, "mode", modeScript, "script: run each turn of the script once; serve: run a script turn for each turn the session sends.")
	fs.IntVar(&o.turns, "turns", 0, "Serve mode: stop after this many turns; 0 runs until SIGTERM or SIGINT.")
	fs.StringVar(&o.report, "report", "-", `File the JSON report is written to; "-" is stdout.`)
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return o, o.validate()
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole program; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
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
	client, err := sessionapi.NewClient(o.server, copts...)
	if err != nil {
		fmt.Fprintf(stderr, "agent: --server: %v\n", err)
		return exitInvalid
	}
	o.zap.DestWriter = stderr
	log := zap.New(zap.UseFlagOptions(&o.zap)).WithName("agent").WithValues("session", o.namespace+"/"+o.session)
	rt := &agentscript.Runtime{Session: client.Session(o.namespace, o.session), Script: script, Log: log}

	var rep agentscript.Report
	switch o.mode {
	case modeScript:
		rep = rt.RunScript(ctx)
		unfinished := rep.Unfinished()
		switch {
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
	logSummary(log, rep)
	return exitOK
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
