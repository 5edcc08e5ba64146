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

package sessionapi

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
)

// WithCA makes the client trust only the CA certificates in caPEM for the
// server's certificate, such as the CA the manager generated for the
// Session API. It replaces the transport of WithHTTPClient's client.
func WithCA(caPEM []byte) ClientOption {
	return func(c *Client) { c.ca = caPEM }
}

// WithCAFile is WithCA with the bundle read from the file at path, such as
// $AGENTLANE_SESSION_API_CA_FILE in a runtime pod.
func WithCAFile(path string) ClientOption {
	return func(c *Client) {
		if c.ca, c.caErr = os.ReadFile(path); c.caErr != nil {
			c.caErr = fmt.Errorf("sessionapi: reading the CA file: %w", c.caErr)
		}
	}
}

// useCA makes the client's transport verify the server with c.ca.
func (c *Client) useCA() error {
	if c.caErr != nil || c.ca == nil {
		return c.caErr
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(c.ca) {
		return errors.New("sessionapi: the CA bundle holds no PEM certificate")
	}
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return errors.New("sessionapi: http.DefaultTransport is not an *http.Transport")
	}
	tr := base.Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
	hc := *c.hc
	hc.Transport = tr
	c.hc = &hc
	return nil
}
