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
	"net"
	"net/http"
	"sync"
	"time"
)

// Defaults of the Session API's connections.
const (
	// DefaultMaxConnections bounds the connections open at once.
	DefaultMaxConnections = 2048
	// DefaultMaxConnectionsPerAddress bounds those of one client address.
	DefaultMaxConnectionsPerAddress = 256
	// DefaultReadTimeout bounds the reading of a request, body included.
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds the writing of a response; a call that
	// waits (a submission, GET with wait) has it from the end of its wait,
	// an event stream from each write.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout is how long a keep-alive connection may wait for
	// its next request.
	DefaultIdleTimeout = 90 * time.Second
	// DefaultMaxHeaderBytes bounds a request's header.
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultHTTP2MaxConcurrentStreams bounds the requests in flight on
	// one HTTP/2 connection.
	DefaultHTTP2MaxConcurrentStreams = 100
	// readHeaderTimeout bounds the reading of a request's header.
	readHeaderTimeout = 10 * time.Second
)

// connLimiter is a listener that closes, at once, each connection past the
// bound on open connections or past its client address's part of them. A
// refused client sees its connection reset or closed before any byte; the
// connections that hold a place keep it only as long as the server's
// timeouts let them.
type connLimiter struct {
	net.Listener
	max, perAddr int

	mu     sync.Mutex
	open   int
	byAddr map[string]int
}

func newConnLimiter(ln net.Listener, maxConns, perAddr int) *connLimiter {
	return &connLimiter{Listener: ln, max: maxConns, perAddr: perAddr, byAddr: map[string]int{}}
}

// Accept returns the next connection that is within the bounds.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := hostOf(c.RemoteAddr().String())
		reason := l.admit(addr)
		if reason == "" {
			connections.Inc()
			return &limitedConn{Conn: c, release: func() { l.release(addr) }}, nil
		}
		connectionsRefused.WithLabelValues(reason).Inc()
		_ = c.Close()
	}
}

// admit counts a connection of addr in, or says which bound it passes.
func (l *connLimiter) admit(addr string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.max > 0 && l.open >= l.max:
		return "server"
	case l.perAddr > 0 && l.byAddr[addr] >= l.perAddr:
		return "address"
	}
	l.open++
	l.byAddr[addr]++
	return ""
}

func (l *connLimiter) release(addr string) {
	connections.Dec()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byAddr[addr]--; l.byAddr[addr] <= 0 {
		delete(l.byAddr, addr)
	}
}

// limitedConn gives its place back once closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// hostOf is the host of a host:port address.
func hostOf(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}

// httpServer is the HTTP server of the API, with its timeouts and limits.
func (s *Server) httpServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: min(readHeaderTimeout, s.ReadTimeout),
		ReadTimeout:       s.ReadTimeout,
		WriteTimeout:      s.WriteTimeout,
		IdleTimeout:       s.IdleTimeout,
		MaxHeaderBytes:    s.MaxHeaderBytes,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: s.HTTP2MaxConcurrentStreams,
			// One stream's and one connection's unread request bytes: a
			// body is at most maxBody.
			MaxReceiveBufferPerStream:     1 << 20,
			MaxReceiveBufferPerConnection: 4 << 20,
			MaxDecoderHeaderTableSize:     64 << 10,
			// A peer that stops answering is found and its connection
			// closed.
			SendPingTimeout: s.IdleTimeout,
			PingTimeout:     15 * time.Second,
		},
	}
}

// holdFor lets the call on w write for d more: a call that waits longer
// than the server's write timeout (a long-poll) extends its deadline
// before it waits.
func (s *Server) holdFor(w http.ResponseWriter, d time.Duration) {
	if s.WriteTimeout <= 0 {
		return
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d + s.WriteTimeout))
}
