//go:build linux || darwin

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
	"os/signal"
	"syscall"
	"unsafe"
)

// terminalSize returns the columns and rows of the terminal f is, and false
// when f is not a terminal.
func terminalSize(f *os.File) (cols, rows int, ok bool) {
	var ws struct{ Row, Col, X, Y uint16 }
	if err := ioctl(f, syscall.TIOCGWINSZ, unsafe.Pointer(&ws)); err != nil {
		return 0, 0, false
	}
	return int(ws.Col), int(ws.Row), true
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	var t syscall.Termios
	return ioctl(f, ioctlGetTermios, unsafe.Pointer(&t)) == nil
}

// keysMode puts the terminal f into cbreak mode: keys are read as they are
// typed, without Enter and without echo. Ctrl-C still interrupts (the
// signal is caught), Ctrl-Z no longer suspends (a suspended lanetop would
// leave the terminal in this mode). restore puts back the settings f had.
func keysMode(f *os.File) (restore func() error, err error) {
	var old syscall.Termios
	if err := ioctl(f, ioctlGetTermios, unsafe.Pointer(&old)); err != nil {
		return nil, err
	}
	t := old
	t.Lflag &^= syscall.ICANON | syscall.ECHO
	t.Cc[syscall.VMIN], t.Cc[syscall.VTIME] = 1, 0
	t.Cc[syscall.VSUSP] = 0 // disabled
	if err := ioctl(f, ioctlSetTermios, unsafe.Pointer(&t)); err != nil {
		return nil, err
	}
	return func() error { return ioctl(f, ioctlSetTermios, unsafe.Pointer(&old)) }, nil
}

func ioctl(f *os.File, request uintptr, arg unsafe.Pointer) error {
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), request, uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}

// notifyResize sends on ch when the terminal's size changes.
func notifyResize(ch chan<- os.Signal) {
	signal.Notify(ch, syscall.SIGWINCH)
}

// exitSignals are the signals that end lanetop cleanly.
var exitSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}
