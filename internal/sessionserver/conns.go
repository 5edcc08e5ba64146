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
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
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

// connLimiter is a listener that bounds the connections open, in all and
// per client address. A connection past a bound takes the place of an idle
// keep-alive connection (of its address for the address's bound, of any
// for the server's), which is closed; when none is idle it is closed at
// once, before any byte. A connection that holds a place without a request
// in flight keeps it only as long as the server's timeouts let it.
type connLimiter struct {
	net.Listener
	max, perAddr int

	mu     sync.Mutex
	open   int
	byAddr map[string]map[*limitedConn]struct{}
}

func newConnLimiter(ln net.Listener, maxConns, perAddr int) *connLimiter {
	return &connLimiter{Listener: ln, max: maxConns, perAddr: perAddr, byAddr: map[string]map[*limitedConn]struct{}{}}
}

// Accept returns the next connection that is within the bounds.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitedConn{Conn: c, addr: hostOf(c.RemoteAddr().String()), l: l}
		admitted, evicted, bound := l.admit(lc)
		if evicted != nil {
			connectionsRefused.WithLabelValues(bound, "idle_closed").Inc()
			_ = evicted.Conn.Close() // the server sees it end and gives its place back
		}
		if admitted {
			connections.Inc()
			return lc, nil
		}
		connectionsRefused.WithLabelValues(bound, "refused").Inc()
		_ = c.Close()
	}
}

// admit counts lc in, making room by evicting an idle connection if a
// bound is reached; bound names the bound reached, if any.
func (l *connLimiter) admit(lc *limitedConn) (admitted bool, evicted *limitedConn, bound string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	mine := l.byAddr[lc.addr]
	switch {
	case l.perAddr > 0 && len(mine) >= l.perAddr:
		bound, evicted = "address", l.idleOf(mine)
	case l.max > 0 && l.open >= l.max:
		bound = "server"
		// Evict from the address with the most connections first.
		var most map[*limitedConn]struct{}
		for _, conns := range l.byAddr {
			if l.idleOf(conns) != nil && len(conns) > len(most) {
				most = conns
			}
		}
		evicted = l.idleOf(most)
	}
	if bound != "" && evicted == nil {
		return false, nil, bound
	}
	if evicted != nil {
		l.remove(evicted)
	}
	if mine == nil {
		mine = map[*limitedConn]struct{}{}
		l.byAddr[lc.addr] = mine
	}
	mine[lc] = struct{}{}
	l.open++
	return true, evicted, bound
}

// idleOf returns an idle connection of conns, or nil.
func (l *connLimiter) idleOf(conns map[*limitedConn]struct{}) *limitedConn {
	for c := range conns {
		if c.idle.Load() {
			return c
		}
	}
	return nil
}

// remove counts c out; it reports whether c was counted.
func (l *connLimiter) remove(c *limitedConn) bool {
	conns := l.byAddr[c.addr]
	if _, ok := conns[c]; !ok {
		return false
	}
	delete(conns, c)
	if len(conns) == 0 {
		delete(l.byAddr, c.addr)
	}
	l.open--
	connections.Dec()
	return true
}

// connState follows the server's connections: an idle keep-alive
// connection may be evicted for a new one.
func connState(c net.Conn, state http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	switch state {
	case http.StateIdle:
		lc.idle.Store(true)
	case http.StateActive:
		lc.idle.Store(false)
	case http.StateClosed, http.StateHijacked:
		lc.release()
	}
}

// limitedConn is a connection counted by its connLimiter.
type limitedConn struct {
	net.Conn
	addr string
	l    *connLimiter
	// idle tells that the connection waits for its next request.
	idle atomic.Bool
}

func (c *limitedConn) release() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.l.remove(c)
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release()
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
		ConnState:         connState,
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
