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
	"bytes"
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

var (
	secretKey = types.NamespacedName{Namespace: "agentlane-system", Name: "agentlane-session-api-tls"}
	hosts     = []string{"agentlane-session-api.agentlane-system.svc", "10.96.100.100"}
	start     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func newStore(c client.Client, hosts ...string) *Store {
	return &Store{Client: c, Reader: c, Key: secretKey, Hosts: hosts}
}

func TestEnsure(t *testing.T) {
	ctx := context.Background()
	cases := map[string]struct {
		// later is when the second start runs, with hosts2.
		later   time.Duration
		hosts2  []string
		sameCA  bool
		sameCrt bool
	}{
		"a restart keeps both":                     {later: time.Hour, hosts2: hosts, sameCA: true, sameCrt: true},
		"a new name re-issues with the same CA":    {later: time.Hour, hosts2: append([]string{"api.example.com"}, hosts...), sameCA: true},
		"near expiry re-issues with the same CA":   {later: CertLifetime - RenewBefore + time.Hour, hosts2: hosts, sameCA: true},
		"a CA near its end is replaced altogether": {later: CALifetime - RenewBefore + time.Hour, hosts2: hosts},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().Build()
			first, err := newStore(c, hosts...).Ensure(ctx, start)
			if err != nil {
				t.Fatal(err)
			}
			second, err := newStore(c, tc.hosts2...).Ensure(ctx, start.Add(tc.later))
			if err != nil {
				t.Fatal(err)
			}
			if got := bytes.Equal(first.CACert, second.CACert); got != tc.sameCA {
				t.Errorf("same CA = %v, want %v", got, tc.sameCA)
			}
			if got := bytes.Equal(first.Cert, second.Cert); got != tc.sameCrt {
				t.Errorf("same certificate = %v, want %v", got, tc.sameCrt)
			}
			if err := second.Check(tc.hosts2, start.Add(tc.later)); err != nil {
				t.Errorf("the second start's bundle does not serve: %v", err)
			}
			secret := &corev1.Secret{}
			if err := c.Get(ctx, secretKey, secret); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(secret.Data[KeyCert], second.Cert) || !bytes.Equal(secret.Data[KeyCACert], second.CACert) {
				t.Error("the Secret does not hold what the second start serves")
			}
		})
	}
}

func TestEnsureReplacesGarbage(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: secretKey.Namespace, Name: secretKey.Name},
		Data:       map[string][]byte{KeyCACert: []byte("not a certificate")},
	}).Build()
	b, err := newStore(c, hosts...).Ensure(ctx, start)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Check(hosts, start); err != nil {
		t.Errorf("the replaced bundle does not serve: %v", err)
	}
}

func TestCheckRefusesAnotherCA(t *testing.T) {
	a, err := Generate(hosts, start)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate(hosts, start)
	if err != nil {
		t.Fatal(err)
	}
	mixed := &Bundle{CACert: a.CACert, CAKey: a.CAKey, Cert: b.Cert, Key: b.Key}
	if err := mixed.Check(hosts, start); err == nil {
		t.Error("a certificate of another CA passes the check")
	}
}
