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
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentlane/agentlane/internal/servingcert"
)

// The manager keeps its generated certificate in a Secret of its own
// namespace (config/default: agentlane-system; the namespace below is
// replaced by kustomize): it reads and replaces only that Secret, and
// create cannot be limited to a name.
//
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,resourceNames=agentlane-session-api-tls,verbs=get;update

// renewCheckInterval is how often a generated serving certificate is checked
// for renewal.
const renewCheckInterval = time.Hour

// TLS is how the Session API serves TLS. The zero value serves a
// certificate generated in memory for localhost; the manager sets Secret
// and Hosts so that restarts and replicas serve the same one.
type TLS struct {
	// InsecureHTTP serves plain HTTP: bearer tokens cross the network in
	// clear text. Only for a loopback address or a network that is
	// otherwise encrypted.
	InsecureHTTP bool
	// CertFile and KeyFile, when both set, are the serving certificate and
	// key; they are read again when they change (cert-manager renewing
	// them). CAFile, when set, is the CA bundle that runtimes trust: the
	// manager gives it to the runtime pods it creates.
	CertFile, KeyFile, CAFile string
	// Secret, without files, keeps a generated CA and serving certificate
	// (servingcert); empty keeps them in memory only.
	Secret types.NamespacedName
	// Hosts are the DNS names and IP addresses the generated certificate
	// names; localhost and 127.0.0.1 when empty.
	Hosts []string
}

// serving is the certificate the server presents and the CA runtimes trust.
type serving struct {
	once sync.Once
	err  error
	// cert is the generated certificate; watcher serves files instead.
	cert    atomic.Pointer[tls.Certificate]
	watcher *certwatcher.CertWatcher
	store   *servingcert.Store
	notAft  atomic.Int64
	ca      atomic.Pointer[[]byte]
}

// LoadTLS reads or makes the serving certificate: it reads the files, or
// reads the Secret (creating it when missing) with c and r. Start calls it
// when it was not called before; the manager calls it before it starts, so
// that the controllers have the CA for the runtime pods (CABundle). A
// server with InsecureHTTP loads nothing.
func (s *Server) LoadTLS(ctx context.Context, c client.Client, r client.Reader) error {
	s.tls.once.Do(func() { s.tls.err = s.loadTLS(ctx, c, r) })
	return s.tls.err
}

func (s *Server) loadTLS(ctx context.Context, c client.Client, r client.Reader) error {
	t := s.TLS
	switch {
	case t.InsecureHTTP:
		return nil
	case t.CertFile != "" || t.KeyFile != "":
		if t.CertFile == "" || t.KeyFile == "" {
			return errors.New("session API: a certificate file needs its key file, and a key file its certificate")
		}
		w, err := certwatcher.New(t.CertFile, t.KeyFile)
		if err != nil {
			return fmt.Errorf("session API: load the serving certificate: %w", err)
		}
		s.tls.watcher = w
		if t.CAFile != "" {
			ca, err := os.ReadFile(t.CAFile)
			if err != nil {
				return fmt.Errorf("session API: read the CA bundle: %w", err)
			}
			s.tls.ca.Store(&ca)
		}
		return nil
	}
	hosts := servingcert.Hosts(t.Hosts...)
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1"}
	}
	var b *servingcert.Bundle
	var err error
	if t.Secret.Name == "" {
		b, err = servingcert.Generate(hosts, s.Clock.Now())
	} else {
		if c == nil || r == nil {
			return errors.New("session API: keeping the certificate in a Secret needs a client and a reader")
		}
		s.tls.store = &servingcert.Store{Client: c, Reader: r, Key: t.Secret, Hosts: hosts}
		b, err = s.tls.store.Ensure(ctx, s.Clock.Now())
	}
	if err != nil {
		return fmt.Errorf("session API: serving certificate: %w", err)
	}
	return s.useBundle(b)
}

func (s *Server) useBundle(b *servingcert.Bundle) error {
	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		return fmt.Errorf("session API: load the generated certificate: %w", err)
	}
	s.tls.cert.Store(&pair)
	ca := b.CACert
	s.tls.ca.Store(&ca)
	s.tls.notAft.Store(b.NotAfter().Unix())
	return nil
}

// CABundle is the PEM CA bundle runtimes verify the server with: the
// generated CA, or the contents of TLS.CAFile. Nil before LoadTLS, with
// InsecureHTTP, or with files and no CAFile (runtimes then use their
// system roots).
func (s *Server) CABundle() []byte {
	if ca := s.tls.ca.Load(); ca != nil {
		return *ca
	}
	return nil
}

// tlsConfig returns the listener's TLS configuration, and starts what keeps
// the certificate fresh until ctx ends.
func (s *Server) tlsConfig(ctx context.Context) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	if w := s.tls.watcher; w != nil {
		cfg.GetCertificate = w.GetCertificate
		go func() {
			if err := w.Start(ctx); err != nil {
				s.log.Error(err, "Watching the Session API's certificate files stopped")
			}
		}()
		return cfg
	}
	cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.tls.cert.Load(), nil }
	if s.tls.store != nil {
		go s.renew(ctx)
	}
	return cfg
}

// renew issues the generated serving certificate again before it expires,
// through the Secret, so that every replica moves to the same one.
func (s *Server) renew(ctx context.Context) {
	t := s.Clock.NewTicker(renewCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		now := s.Clock.Now()
		if now.Add(servingcert.RenewBefore).Before(time.Unix(s.tls.notAft.Load(), 0)) {
			continue
		}
		b, err := s.tls.store.Ensure(ctx, now)
		if err == nil {
			err = s.useBundle(b)
		}
		if err != nil {
			s.log.Error(err, "Renewing the Session API's certificate failed; retrying within the hour")
			continue
		}
		s.log.Info("Renewed the Session API's certificate", "notAfter", b.NotAfter())
	}
}
