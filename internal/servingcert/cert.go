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

// Package servingcert makes and keeps the Session API's serving certificate
// when no one provides one: a private CA and a certificate it signs for the
// names runtimes reach the API by. Both live in a Secret in the manager's
// namespace, so that restarts and replicas serve the same certificate and
// runtimes keep trusting the same CA; runtimes get only the CA's
// certificate. The CA lives for ten years, the serving certificate for one
// and is issued again by the same CA a month before it expires.
package servingcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// Lifetimes of what Generate and Issue make.
const (
	CALifetime   = 10 * 365 * 24 * time.Hour
	CertLifetime = 365 * 24 * time.Hour
	// RenewBefore is how long before its end a serving certificate is
	// replaced.
	RenewBefore = 30 * 24 * time.Hour
	// clockSkew backdates NotBefore, so that a peer whose clock is a little
	// behind accepts a fresh certificate.
	clockSkew = 5 * time.Minute
)

// Bundle is a CA and a serving certificate it signed, PEM-encoded.
type Bundle struct {
	// CACert is the CA's certificate, what clients trust.
	CACert []byte
	// CAKey is the CA's private key; it never leaves the Secret and the
	// manager.
	CAKey []byte
	// Cert and Key are the serving certificate and its private key.
	Cert, Key []byte
}

// Generate makes a new CA and a serving certificate for hosts (DNS names
// and IP addresses) signed by it.
func Generate(hosts []string, now time.Time) (*Bundle, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "agentlane-session-api-ca"},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	if tmpl.SerialNumber, err = serial(); err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("sign the CA certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	b := &Bundle{CACert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), CAKey: keyPEM}
	if err := b.Issue(hosts, now); err != nil {
		return nil, err
	}
	return b, nil
}

// Issue replaces the bundle's serving certificate with a new one for hosts,
// signed by the bundle's CA.
func (b *Bundle) Issue(hosts []string, now time.Time) error {
	if len(hosts) == 0 {
		return errors.New("a serving certificate needs at least one host name or address")
	}
	ca, err := tls.X509KeyPair(b.CACert, b.CAKey)
	if err != nil {
		return fmt.Errorf("read the CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return fmt.Errorf("read the CA certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate the serving key: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0]},
		NotBefore:   now.Add(-clockSkew),
		NotAfter:    now.Add(CertLifetime),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if caCert.NotAfter.Before(tmpl.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if tmpl.SerialNumber, err = serial(); err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), ca.PrivateKey)
	if err != nil {
		return fmt.Errorf("sign the serving certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return err
	}
	b.Cert, b.Key = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM
	return nil
}

// CheckCA returns nil when the bundle's CA is usable: its certificate and
// key parse and match, and it is valid for longer than RenewBefore.
func (b *Bundle) CheckCA(now time.Time) error {
	ca, err := tls.X509KeyPair(b.CACert, b.CAKey)
	if err != nil {
		return fmt.Errorf("the CA does not load: %w", err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return fmt.Errorf("the CA certificate does not parse: %w", err)
	}
	if !caCert.IsCA {
		return errors.New("the CA certificate is not a CA")
	}
	if now.Add(RenewBefore).After(caCert.NotAfter) {
		return fmt.Errorf("the CA expires at %s", caCert.NotAfter.Format(time.RFC3339))
	}
	return nil
}

// Check returns nil when the serving certificate can be served as it is:
// its key matches, it chains to the bundle's CA, names every host and is
// valid for longer than RenewBefore.
func (b *Bundle) Check(hosts []string, now time.Time) error {
	if err := b.CheckCA(now); err != nil {
		return err
	}
	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		return fmt.Errorf("the serving certificate does not load: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("the serving certificate does not parse: %w", err)
	}
	if now.Add(RenewBefore).After(cert.NotAfter) {
		return fmt.Errorf("the serving certificate expires at %s", cert.NotAfter.Format(time.RFC3339))
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(b.CACert)
	for _, h := range hosts {
		opts := x509.VerifyOptions{Roots: roots, DNSName: h, CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		if _, err := cert.Verify(opts); err != nil {
			return fmt.Errorf("the serving certificate does not verify for %s: %w", h, err)
		}
	}
	return nil
}

// NotAfter is when the serving certificate expires; the zero time when it
// does not parse.
func (b *Bundle) NotAfter() time.Time {
	block, _ := pem.Decode(b.Cert)
	if block == nil {
		return time.Time{}
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}
	}
	return cert.NotAfter
}

// Hosts returns hosts without duplicates or empty entries, in their order.
func Hosts(hosts ...string) []string {
	var out []string
	for _, h := range hosts {
		if h != "" && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("draw a serial number: %w", err)
	}
	return n, nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode the private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
