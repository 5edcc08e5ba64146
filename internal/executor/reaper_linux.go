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
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A task's init ends the task's whole process tree with its attempt. A
// sandbox with an Init runs each process task as a child of a small init
// process (the program's own binary, re-executed with TaskInitArg) that is a
// child subreaper: whatever the task starts, also a process that called
// setsid() or was double-forked, stays its descendant, because an orphan is
// re-parented to its nearest subreaper ancestor. When the task's main
// process exits (success or failure), or when the program asks it to stop
// (timeout or cancellation: SIGTERM to every descendant, SIGKILL after the
// grace period) or goes away, the init kills every descendant it finds in
// /proc, again until none is left, reaps them, and only then exits. The
// attempt ends when the init has exited.
//
// The init talks to the program over two pipes it inherits: fd 3, on which
// the program writes one byte to stop the task gracefully, or which it closes
// (or which closes when the program dies) to stop it at once; and fd 4, where
// the init writes how the task ended ("exit N", "signal N", "start ERROR", or
// "notstarted" when the stop came before the task started).
// The init is not dumpable (PR_SET_DUMPABLE 0), so the task, running as the
// same user, cannot trace it or read its memory; it can still kill it, which
// the program notices (no status) and answers by killing the processes
// re-parented to it (AdoptOrphans).

// TaskInitArg is the first argument that makes a program run as a task's
// init; see RunTaskInitIfAsked.
const TaskInitArg = "agentlane-task-init"

const (
	initCtlFD    = 3
	initStatusFD = 4
	// initStop asks the init to stop the task gracefully.
	initStop = 's'
)

// RunTaskInitIfAsked runs the program as a task's init, and exits, when its
// first argument is TaskInitArg; otherwise it returns at once. A program
// whose binary is a Sandbox's Init calls it first thing in main.
func RunTaskInitIfAsked() {
	if len(os.Args) > 1 && os.Args[1] == TaskInitArg {
		os.Exit(runTaskInit(os.Args[2:]))
	}
}

// runTaskInit runs args (--grace=D -- PROGRAM ARGS...) as a task and
// returns the init's exit code.
func runTaskInit(args []string) int {
	fs := flag.NewFlagSet(TaskInitArg, flag.ContinueOnError)
	grace := fs.Duration("grace", 2*time.Second, "time between SIGTERM and SIGKILL on a stop")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, TaskInitArg+": usage: --grace=D -- PROGRAM ARGS...")
		return 2
	}
	syscall.CloseOnExec(initCtlFD)
	syscall.CloseOnExec(initStatusFD)
	ctl := os.NewFile(initCtlFD, "ctl")
	status := os.NewFile(initStatusFD, "status")
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(status, "start become a subreaper: %v", err)
		return 1
	}
	// A handler, not SIG_IGN: the task must not inherit ignored signals.
	// The task may signal its init; only SIGKILL stops it.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE)

	// A stop that came while this process was starting finds the task not
	// started: it is reported as such, so that a worker shutting down hands
	// the attempt back instead of counting a run that never began.
	if stopRequested(initCtlFD) {
		fmt.Fprint(status, statusNotStarted)
		return 0
	}
	argv := fs.Args()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(status, "start %v", err)
		return 1
	}
	mainPID := cmd.Process.Pid

	// Reap every child: the task's main process and every orphan
	// re-parented here. ECHILD means no descendant is left.
	exited := make(chan syscall.WaitStatus, 1)
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, 0, nil)
			switch {
			case errors.Is(err, syscall.EINTR):
			case err != nil:
				return
			case pid == mainPID:
				exited <- ws
			}
		}
	}()
	stop := make(chan bool, 1) // true: graceful
	go func() {
		b := make([]byte, 1)
		n, _ := ctl.Read(b)
		stop <- n == 1 && b[0] == initStop
	}()

	var ws syscall.WaitStatus
	ended := false
	select {
	case ws = <-exited:
		ended = true
	case graceful := <-stop:
		if graceful {
			signalTree(syscall.SIGTERM)
			select {
			case ws = <-exited:
				ended = true
			case <-time.After(*grace):
			}
		}
	}
	killTree()
	<-reaped
	if !ended {
		select {
		case ws = <-exited:
			ended = true
		default:
		}
	}
	switch {
	case !ended: // stopped before it could be reaped
		fmt.Fprint(status, "signal 9")
	case ws.Signaled():
		fmt.Fprintf(status, "signal %d", ws.Signal())
	case ws.Exited():
		fmt.Fprintf(status, "exit %d", ws.ExitStatus())
	default:
		fmt.Fprint(status, "signal 9")
	}
	return 0
}

// statusNotStarted is the init's status for a task it never started.
const statusNotStarted = "notstarted"

// stopRequested tells, without waiting, whether the program asked the init
// to stop: a byte to read on fd, or its write end closed.
func stopRequested(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLIN|unix.POLLHUP) != 0
}

// killTree kills every descendant of this process, again until none is
// left: a process forked while the others were being killed is found on the
// next pass, re-parented here if its parent is gone.
func killTree() {
	for {
		pids := descendants(os.Getpid())
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(2 * time.Millisecond) // let them die and be reaped
	}
}

// signalTree sends sig to every descendant of this process.
func signalTree(sig syscall.Signal) {
	for _, pid := range descendants(os.Getpid()) {
		_ = syscall.Kill(pid, sig)
	}
}

// descendants lists the live (not zombie) descendants of pid, from /proc.
func descendants(root int) []int {
	procs := procTable()
	children := map[int][]int{}
	for pid, p := range procs {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			queue = append(queue, c)
			if procs[c].state != 'Z' {
				out = append(out, c)
			}
		}
	}
	return out
}

// procInfo is what killTree needs of a process.
type procInfo struct {
	ppid  int
	state byte
}

// procTable reads the parent and state of every process in /proc.
func procTable() map[int]procInfo {
	out := map[int]procInfo{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			out[pid] = p
		}
	}
	return out
}

// readProc reads the state and parent of pid from /proc/<pid>/stat, whose
// second field, the command name in parentheses, may hold anything.
func readProc(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return procInfo{}, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return procInfo{}, false
	}
	return procInfo{ppid: ppid, state: f[0][0]}, true
}

// orphans tracks the processes this program starts as task inits, so that
// AdoptOrphans can tell them from the orphans re-parented to it.
var orphans struct {
	mu      sync.Mutex
	enabled bool
	inits   map[int]bool
}

// AdoptOrphans makes this process a child subreaper and kills, after every
// attempt, the processes re-parented to it: the descendants of a task that
// killed its own init. A runner calls it once at start; a program that
// starts children of its own elsewhere must not (they would be killed).
func AdoptOrphans() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become a child subreaper: %w", err)
	}
	orphans.mu.Lock()
	defer orphans.mu.Unlock()
	orphans.enabled = true
	return nil
}

// startInit starts an init under the orphans lock, so that a sweep running
// at the same time never takes it for an orphan.
func startInit(cmd *exec.Cmd) error {
	orphans.mu.Lock()
	defer orphans.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	if orphans.inits == nil {
		orphans.inits = map[int]bool{}
	}
	orphans.inits[cmd.Process.Pid] = true
	return nil
}

// initDone forgets an init that was waited for and kills the orphans.
func initDone(pid int) {
	orphans.mu.Lock()
	defer orphans.mu.Unlock()
	delete(orphans.inits, pid)
	if !orphans.enabled {
		return
	}
	self := os.Getpid()
	for {
		var found bool
		for pid, p := range procTable() {
			if p.ppid != self || orphans.inits[pid] {
				continue
			}
			found = true
			if p.state != 'Z' {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			// Their own children come here next, found on the next pass.
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, 0, nil)
		}
		if !found {
			return
		}
	}
}

// ForbidTracing makes this process not dumpable (PR_SET_DUMPABLE 0): the
// tasks it runs, as the same user, can then neither trace it nor read its
// memory or /proc/<pid>/environ. A runner calls it once at start.
func ForbidTracing() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make the process not dumpable: %w", err)
	}
	return nil
}

// executeUnderInit runs cmd, built but not started, under a task init at
// initPath and waits for the init, that is for the task's whole process tree.
func (p *ProcessExecutor) executeUnderInit(ctx context.Context, initPath string, cmd *exec.Cmd, grace time.Duration, stdout, stderr *limitedBuffer) (Output, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return Output{}, fmt.Errorf("start the task's init: %w", err)
	}
	defer func() { _ = ctlW.Close() }()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		_ = ctlR.Close()
		return Output{}, fmt.Errorf("start the task's init: %w", err)
	}
	defer func() { _ = statusR.Close() }()

	args := append([]string{TaskInitArg, "--grace=" + grace.String(), "--", cmd.Path}, cmd.Args[1:]...)
	ic := exec.Command(initPath, args...)
	ic.Dir, ic.Env, ic.Stdin, ic.Stdout, ic.Stderr = cmd.Dir, cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr
	ic.ExtraFiles = []*os.File{ctlR, statusW} // fds 3 and 4
	ic.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Only a killed init leaves processes holding the output pipes.
	ic.WaitDelay = grace
	if ctx.Err() != nil {
		// Already stopped: the init finds the stop before it starts the task.
		_, _ = ctlW.Write([]byte{initStop})
	}
	err = startInit(ic)
	_ = ctlR.Close()
	_ = statusW.Close()
	if err != nil {
		return Output{}, fmt.Errorf("start the task's init %s: %w", initPath, err)
	}
	waited := make(chan struct{})
	go func() {
		_ = ic.Wait()
		close(waited)
	}()
	stopped := false
	select {
	case <-waited:
	case <-ctx.Done():
		stopped = true
		_, _ = ctlW.Write([]byte{initStop})
		select {
		case <-waited:
		case <-time.After(grace + 5*time.Second): // the init is stuck (stopped by the task)
			_ = ic.Process.Kill()
			<-waited
		}
	}
	status, _ := io.ReadAll(statusR)
	initDone(ic.Process.Pid)

	if string(status) == statusNotStarted {
		return Output{}, fmt.Errorf("%w: stopped before it started: %w", ErrNotStarted, context.Cause(ctx))
	}
	if stopped {
		return p.output(stdout, stderr, -1), fmt.Errorf("process stopped: %w", context.Cause(ctx))
	}
	word, value, _ := strings.Cut(string(status), " ")
	code := -1
	switch word {
	case "start":
		return Output{}, fmt.Errorf("start %s: %s", cmd.Args[0], value)
	case "exit":
		if c, err := strconv.Atoi(value); err == nil {
			code = c
		}
	}
	out := p.output(stdout, stderr, code)
	switch {
	case word == "":
		out.Error = "the task's init was killed"
	case code == 0:
		out.Success = true
	default:
		out.Error = fmt.Sprintf("exit code %d", code)
		if s := lastLine(out.Stderr); s != "" {
			out.Error += ": " + s
		}
	}
	return out, nil
}
