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

package servingcert

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys of the Secret. The serving pair is under the kubernetes.io/tls keys,
// so the Secret reads like any TLS Secret.
const (
	KeyCACert = "ca.crt"
	KeyCAKey  = "ca.key"
	KeyCert   = corev1.TLSCertKey
	KeyKey    = corev1.TLSPrivateKeyKey
)

// Store keeps a Bundle in a Secret.
type Store struct {
	// Client creates and updates the Secret.
	Client client.Client
	// Reader reads it; an uncached reader (the manager's API reader), so
	// that the manager neither needs nor keeps a watch on every Secret.
	Reader client.Reader
	// Key names the Secret, in the manager's own namespace.
	Key types.NamespacedName
	// Hosts are the DNS names and IP addresses the serving certificate
	// must name.
	Hosts []string
}

// Ensure returns the bundle of the Secret. It creates the Secret when it is
// missing and replaces what no longer serves: a serving certificate that
// misses one of Hosts or is about to expire is issued again by the same CA;
// a CA that is unreadable or about to expire is replaced with a new one. A
// Secret that serves is never written, so replicas and restarts agree.
func (s *Store) Ensure(ctx context.Context, now time.Time) (*Bundle, error) {
	var lastErr error
	for range 3 {
		b, err := s.ensureOnce(ctx, now)
		if err == nil {
			return b, nil
		}
		if !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
			return nil, err
		}
		lastErr = err // another replica wrote it first: read it again
	}
	return nil, fmt.Errorf("the Secret %s keeps changing: %w", s.Key, lastErr)
}

func (s *Store) ensureOnce(ctx context.Context, now time.Time) (*Bundle, error) {
	secret := &corev1.Secret{}
	err := s.Reader.Get(ctx, s.Key, secret)
	if apierrors.IsNotFound(err) {
		b, err := Generate(s.Hosts, now)
		if err != nil {
			return nil, err
		}
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Key.Namespace, Name: s.Key.Name,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "agentlane"}},
			Type: corev1.SecretTypeTLS,
		}
		b.into(secret)
		if err := s.Client.Create(ctx, secret); err != nil {
			return nil, fmt.Errorf("create Secret %s: %w", s.Key, err)
		}
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Secret %s: %w", s.Key, err)
	}
	b := fromSecret(secret)
	if b.Check(s.Hosts, now) == nil {
		return b, nil
	}
	if b.CheckCA(now) == nil {
		err = b.Issue(s.Hosts, now)
	} else {
		b, err = Generate(s.Hosts, now)
	}
	if err != nil {
		return nil, err
	}
	b.into(secret)
	if err := s.Client.Update(ctx, secret); err != nil {
		return nil, fmt.Errorf("update Secret %s: %w", s.Key, err)
	}
	return b, nil
}

func fromSecret(s *corev1.Secret) *Bundle {
	return &Bundle{CACert: s.Data[KeyCACert], CAKey: s.Data[KeyCAKey], Cert: s.Data[KeyCert], Key: s.Data[KeyKey]}
}

func (b *Bundle) into(s *corev1.Secret) {
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[KeyCACert], s.Data[KeyCAKey], s.Data[KeyCert], s.Data[KeyKey] = b.CACert, b.CAKey, b.Cert, b.Key
}
