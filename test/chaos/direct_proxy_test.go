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

package chaos

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// leaderProxy stands for the Session API's Service in front of two manager
// replicas: a TCP proxy (TLS passes through it) that sends each new
// connection to the replica whose readiness probe passes, which only the
// leader's does. A connection it cannot place (no replica ready) is closed
// at once, as a Service without ready endpoints refuses it; a connection
// whose replica dies is closed on both sides.
type leaderProxy struct {
	ln       net.Listener
	backends []proxyBackend

	mu      sync.Mutex
	current string // the address of the ready replica's Session API, "" when none
	conns   map[net.Conn]struct{}
}

// proxyBackend is one manager replica: its Session API address and the URL
// of its readiness probe.
type proxyBackend struct {
	addr, readyz string
}

// startLeaderProxy listens on a free loopback port and proxies to the ready
// one of backends until the spec ends.
func startLeaderProxy(backends ...proxyBackend) *leaderProxy {
	GinkgoHelper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	p := &leaderProxy{ln: ln, backends: backends, conns: map[net.Conn]struct{}{}}
	ctx, cancel := context.WithCancel(suiteCtx)
	go p.probe(ctx)
	go p.serve()
	DeferCleanup(func() {
		cancel()
		_ = ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for c := range p.conns {
			_ = c.Close()
		}
	})
	return p
}

// addr is the proxy's address.
func (p *leaderProxy) addr() string { return p.ln.Addr().String() }

// ready returns the Session API address of the ready replica, "" when none.
func (p *leaderProxy) ready() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.current
}

// probe polls the replicas' readiness every 100ms, as a kubelet's probe
// and the Service's endpoints would (faster, to keep the scenario short).
func (p *leaderProxy) probe(ctx context.Context) {
	hc := &http.Client{Timeout: 300 * time.Millisecond}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		current := ""
		for _, b := range p.backends {
			resp, err := hc.Get(b.readyz)
			if err != nil {
				continue
			}
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				current = b.addr
				break
			}
		}
		p.mu.Lock()
		p.current = current
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// serve accepts connections until the listener closes.
func (p *leaderProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

// pipe connects c to the ready replica and copies both ways until either
// side ends, then closes both.
func (p *leaderProxy) pipe(c net.Conn) {
	to := p.ready()
	if to == "" {
		_ = c.Close()
		return
	}
	b, err := net.DialTimeout("tcp", to, time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[b] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = b.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, b)
	p.mu.Unlock()
}
