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

package sessionserver

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// startPlain starts a Server on loopback over plain HTTP, as set by
// configure, until the test ends, and returns its address.
func startPlain(t *testing.T, configure func(*Config)) string {
	t.Helper()
	leading := make(chan struct{})
	close(leading)
	cfg := plainConfig(Config{Addr: "127.0.0.1:0", TLS: TLS{InsecureHTTP: true}, Leading: leading})
	configure(&cfg)
	s := mustNew(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start = %v", err)
		}
	})
	addr, err := s.BoundAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// keepAlive is a client connection that made one request and stays open.
type keepAlive struct {
	net.Conn
	r *bufio.Reader
}

// dial connects to addr and asks /healthz over HTTP/1.1 with keep-alive;
// ok tells whether the server answered.
func dial(t *testing.T, addr string) (*keepAlive, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // bounds a hang, not a timing
	k := &keepAlive{Conn: c, r: bufio.NewReader(c)}
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: agentlane\r\n\r\n"); err != nil {
		return k, false
	}
	resp, err := http.ReadResponse(k.r, nil)
	if err != nil {
		return k, false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return k, resp.StatusCode == http.StatusOK
}

// closedByServer tells whether the server closed k (its next read ends
// without data) within the guard of the connection's deadline.
func (k *keepAlive) closedByServer() bool {
	_, err := k.r.ReadByte()
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		return false
	}
	return true
}

// TestConnectionsAreBounded: a connection past the server's bound, or past
// one address's part of it, takes the place of an idle keep-alive
// connection, which is closed; when no connection is idle (each has a
// request on its way) the new one is closed at once.
func TestConnectionsAreBounded(t *testing.T) {
	for name, tc := range map[string]struct{ server, perAddress int }{
		"server":  {server: 3, perAddress: 100},
		"address": {server: 100, perAddress: 3},
	} {
		t.Run(name, func(t *testing.T) {
			addr := startPlain(t, func(s *Config) {
				s.MaxConnections, s.MaxConnectionsPerAddress = tc.server, tc.perAddress
			})
			var idle []*keepAlive
			for i := range 3 {
				k, ok := dial(t, addr)
				if !ok {
					t.Fatalf("connection %d within the bound was not served", i+1)
				}
				idle = append(idle, k)
			}
			if _, ok := dial(t, addr); !ok {
				t.Fatal("a connection past the bound was not served while others were idle")
			}
			closed := 0
			for _, k := range idle {
				_ = k.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				if k.closedByServer() {
					closed++
				}
			}
			if closed != 1 {
				t.Fatalf("%d idle connections closed for the new one, want 1", closed)
			}
		})
	}
}

// TestConnectionsPastTheBoundAreRefused: connections that each have a
// request on its way hold their places; one more is closed before any
// byte, and is served once a place is given back.
func TestConnectionsPastTheBoundAreRefused(t *testing.T) {
	addr := startPlain(t, func(s *Config) { s.MaxConnections = 3 })
	var busy []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		// Half a request: the connection is not idle.
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\n"); err != nil {
			t.Fatal(err)
		}
		busy = append(busy, c)
	}
	if _, ok := dial(t, addr); ok {
		t.Fatal("a connection past the bound was served while none was idle")
	}
	_ = busy[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := dial(t, addr); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection is served after one that held a place closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestIdleConnectionIsClosed: a keep-alive connection that sends nothing
// after its request is closed once IdleTimeout passes.
func TestIdleConnectionIsClosed(t *testing.T) {
	addr := startPlain(t, func(s *Config) { s.IdleTimeout = 200 * time.Millisecond })
	k, ok := dial(t, addr)
	if !ok {
		t.Fatal("the request was not served")
	}
	if !k.closedByServer() {
		t.Fatal("the idle connection was still open after 10s")
	}
}
