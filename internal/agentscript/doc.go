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

// Package agentscript is a scripted agent runtime: it drives one session
// through the Session API the way an agent would, from a Script instead of a
// model, so that tests, the demo and benchmarks exercise the lanes with
// realistic traffic.
//
// A Script is a list of turns. A turn is an optional model call (a command
// of type "llm" that, once granted, takes a set time and reports a set token
// usage) followed by steps; a step is one tool command or a parallel group
// of them, submitted one after another in script order without waiting for
// each other, then awaited together. Scripts are YAML or
// JSON (Parse, Load); unknown fields are errors and every error names its
// field path.
//
// Every command of a turn carries the turn's run ID. A command that the
// session runs in Internal or Hybrid mode is granted to the runtime, which
// runs it locally with the same executors workers use (executor.Registry) and
// reports the result; an External command is run by a worker and the
// runtime waits for its result.
//
// RunScript runs each turn once under a new run ID. Serve is inbox mode: it
// takes the session's turns from its event stream as the session's runtime,
// runs one script turn per turn event, takes steering messages at tool
// boundaries and stops a run the session aborts.
//
// Both save a checkpoint through the Session API after each completed step
// (a tool round), never while a command of the step is in flight; its state
// is the turn, the next step and the run ID. Serve, and RunScript with
// Resume, start from the session's latest checkpoint: the interrupted turn
// continues from its next step under a new run ID, on whichever node the
// runtime now runs. No checkpoint means a fresh start; a manager without a
// session store is reported (Report.ResumeError, TurnReport.CheckpointError).
//
// Both also follow the session's PassivationRequested events (passivation.go).
// Told to passivate, the runtime starts nothing new, runs the commands that
// started to their end, stops waiting for those still queued (the paused
// session keeps them), saves a checkpoint at that tool boundary recording
// the round's commands, and returns with Report.Passivated set. The runtime
// that resumes follows the commands left queued by their IDs instead of
// submitting them again and skips those that ended, so every tool of the
// script runs once. A request for another pod than Runtime.Pod (one that
// moved the session off its previous pod, replayed by the stream) is
// ignored.
//
// Reports (Report, TurnReport, CommandReport) say how every command ended;
// they marshal to JSON.
package agentscript
