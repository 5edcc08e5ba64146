//go:build linux

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
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	. "github.com/onsi/gomega"

	"github.com/agentlane/agentlane/internal/testenv"
)

// pty is a pseudo-terminal: lanetop gets the terminal end, the test the
// other.
type pty struct {
	control, term *os.File
}

// openPTY opens a pseudo-terminal of cols x rows with the standard
// library's ioctls.
func openPTY(t *testing.T, cols, rows int) *pty {
	t.Helper()
	control, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	var unlock int32
	if err := ioctl(control, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		t.Fatal(err)
	}
	var n uint32
	if err := ioctl(control, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		t.Fatal(err)
	}
	term, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &pty{control: control, term: term}
	p.resize(t, cols, rows)
	t.Cleanup(func() { control.Close(); term.Close() })
	return p
}

func (p *pty) resize(t *testing.T, cols, rows int) {
	t.Helper()
	ws := struct{ Row, Col, X, Y uint16 }{Row: uint16(rows), Col: uint16(cols)}
	if err := ioctl(p.term, syscall.TIOCSWINSZ, unsafe.Pointer(&ws)); err != nil {
		t.Fatal(err)
	}
}

// lineMode reports whether the terminal reads lines and echoes them, as a
// shell leaves it.
func (p *pty) lineMode(t *testing.T) bool {
	t.Helper()
	var tio syscall.Termios
	if err := ioctl(p.term, ioctlGetTermios, unsafe.Pointer(&tio)); err != nil {
		t.Fatal(err)
	}
	return tio.Lflag&syscall.ICANON != 0 && tio.Lflag&syscall.ECHO != 0
}

// startOnTerminal runs lanetop with stdin, stdout and stderr on p.
func startOnTerminal(t *testing.T, p *pty, bin string, args ...string) (*exec.Cmd, *testenv.LockedBuffer, chan error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.term, p.term, p.term
	cmd.Env = append(os.Environ(), "NO_COLOR=")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := &testenv.LockedBuffer{}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := p.control.Read(buf)
			_, _ = out.Write(buf[:n]) // a bytes.Buffer's Write returns no error
			if err != nil {
				return
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, out, exited
}

var escapes = regexp.MustCompile(`\x1b\[[0-9;?]*[a-zA-Z]`)

// screenFrames are the frames drawn, each as its lines without escapes;
// the last one may be incomplete.
func screenFrames(out string) [][]string {
	var frames [][]string
	for _, f := range strings.Split(out, cursorHome)[1:] {
		// The terminal turns each "\n" into "\r\n".
		text := strings.ReplaceAll(escapes.ReplaceAllString(f, ""), "\r", "")
		frames = append(frames, strings.Split(text, "\n"))
	}
	return frames
}

// lastScreen is the last complete frame: the one before the frame being
// drawn.
func lastScreen(out *testenv.LockedBuffer) func() string {
	return func() string {
		frames := screenFrames(out.String())
		if len(frames) < 2 {
			return ""
		}
		return strings.Join(frames[len(frames)-2], "\n")
	}
}

// onTerminal runs lanetop on a pseudo-terminal of 80x24: the alternate
// screen, frames that fit, keys without Enter, and the terminal as it was
// after q and after SIGTERM.
func onTerminal(t *testing.T, bin, kubeconfig string) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(20 * time.Second)
	p := openPTY(t, 80, 24)
	g.Expect(p.lineMode(t)).To(BeTrue(), "a new terminal reads lines")
	cmd, out, exited := startOnTerminal(t, p, bin, "--kubeconfig="+kubeconfig, "--task=lint-1")

	g.Eventually(lastScreen(out)).Should(ContainSubstring("── TASK lint-1 "))
	g.Expect(out.String()).To(HavePrefix(altScreenOn+cursorHide), "the alternate screen, no cursor")
	g.Expect(p.lineMode(t)).To(BeFalse(), "keys are read as typed")
	for i, frame := range screenFrames(out.String()) {
		g.Expect(len(frame)).To(BeNumerically("<=", 24), "frame %d has more lines than the terminal", i)
		for _, l := range frame {
			g.Expect(utf8.RuneCountInString(l)).To(BeNumerically("<=", 80), "frame %d: %q", i, l)
		}
	}
	g.Expect(lastScreen(out)()).To(ContainSubstring(" more"), "80x24 cannot hold this dashboard whole")

	// n, without Enter, moves the selection on.
	_, err := p.control.WriteString("n")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(lastScreen(out)).Should(And(ContainSubstring("── TASK "), Not(ContainSubstring("── TASK lint-1 "))))

	// A smaller terminal: the next frame fits it.
	p.resize(t, 60, 12)
	g.Expect(cmd.Process.Signal(syscall.SIGWINCH)).To(Succeed())
	g.Eventually(func() int {
		frames := screenFrames(out.String())
		last := frames[len(frames)-2]
		if len(last[0]) == 0 || utf8.RuneCountInString(last[1]) > 60 {
			return -1
		}
		return len(last)
	}).Should(BeNumerically("<=", 12))

	_, err = p.control.WriteString("q")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(exited).Should(Receive(BeNil()), "q exits with status 0")
	g.Eventually(out.String).Should(HaveSuffix(cursorShow + altScreenOff))
	g.Expect(p.lineMode(t)).To(BeTrue(), "the terminal reads lines again")

	// SIGTERM restores the terminal too. (A terminal of its own: the
	// reader of the first one's output still reads it.)
	p = openPTY(t, 80, 24)
	cmd, out, exited = startOnTerminal(t, p, bin, "--kubeconfig="+kubeconfig)
	g.Eventually(lastScreen(out)).Should(ContainSubstring("── QUEUES "))
	g.Expect(p.lineMode(t)).To(BeFalse())
	g.Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	g.Eventually(exited).Should(Receive(BeNil()), "SIGTERM exits with status 0")
	g.Eventually(out.String).Should(HaveSuffix(cursorShow + altScreenOff))
	g.Expect(p.lineMode(t)).To(BeTrue(), "the terminal reads lines again")
}
