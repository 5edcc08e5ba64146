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

package sessionstore

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// inboxConfigMapPrefix starts the name of every inbox ConfigMap.
	inboxConfigMapPrefix = "agentlane-inbox-"
	// inboxKey is the data key of the inbox record.
	inboxKey = "inbox.json"
	// inboxSigKey is the data key of the record's signature.
	inboxSigKey = "inbox.sig"
	// MaxInboxBytes bounds one session's inbox record, well within the
	// 1 MiB the API server allows an object.
	MaxInboxBytes = 512 << 10
)

// ErrForged: a stored inbox record whose signature does not verify with the
// manager's key: written or altered by someone else (or by a manager with
// another key). It is not used.
var ErrForged = errors.New("stored record not written by this manager")

// InboxStore keeps one record per session of what the session's inbox
// holds (its queued messages and /queue override), so that a restarted
// manager finds it again. The record is opaque to the store, which signs it
// with the manager's key: whoever may write ConfigMaps in the namespace
// cannot make the manager take a record of theirs.
type InboxStore interface {
	// SaveInbox replaces the session's record; an empty one clears it. A
	// record over MaxInboxBytes is refused, and one the namespace's write
	// budget has no room for gets a RateLimitedError.
	SaveInbox(ctx context.Context, session types.NamespacedName, record []byte) error
	// LoadInbox returns the session's record, nil when it has none, and
	// ErrForged for one whose signature does not verify.
	LoadInbox(ctx context.Context, session types.NamespacedName) ([]byte, error)
}

var _ InboxStore = &ConfigMaps{}

// InboxConfigMapName is the name of the ConfigMap that holds the inbox
// record of the session named session: agentlane-inbox-<session>,
// shortened with a hash of the session's name if too long.
func InboxConfigMapName(session string) string {
	return objectName(inboxConfigMapPrefix, session, "")
}

// RecordKey gives the key that signs the records the store keeps for the
// manager.
type RecordKey interface {
	Key(ctx context.Context) ([]byte, error)
}

// StaticKey is a fixed key.
type StaticKey []byte

// Key implements RecordKey.
func (k StaticKey) Key(context.Context) ([]byte, error) { return k, nil }

// processKey is the key of a store without Keys: random, for this process
// only, so records outlive a restart of the Session API but not of the
// manager.
var processKey = sync.OnceValue(func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
})

func (s *ConfigMaps) key(ctx context.Context) ([]byte, error) {
	if s.Keys == nil {
		return processKey(), nil
	}
	return s.Keys.Key(ctx)
}

// signature is the HMAC-SHA256 of record for the ConfigMap key of the
// session owner: a record is valid only where the manager wrote it, for the
// session it wrote it for (not an earlier session of that name).
func signature(key []byte, cm types.NamespacedName, owner types.UID, record string) string {
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "agentlane-inbox-v1\x00%s\x00%s\x00%s\x00", cm.Namespace, cm.Name, owner)
	mac.Write([]byte(record))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// SaveInbox implements InboxStore: the record is kept in the ConfigMap
// InboxConfigMapName, labelled agentlane.io/store=inbox and controlled by
// the AgentSession like its checkpoints, with its signature.
func (s *ConfigMaps) SaveInbox(ctx context.Context, session types.NamespacedName, record []byte) error {
	if len(record) > MaxInboxBytes {
		return fmt.Errorf("the inbox record of session %s is %d bytes, over %d: %w", session, len(record), MaxInboxBytes, ErrTooLarge)
	}
	owner, err := s.session(ctx, session)
	if err != nil {
		return err
	}
	secret, err := s.key(ctx)
	if err != nil {
		return fmt.Errorf("the key that signs inbox records: %w", err)
	}
	key := types.NamespacedName{Namespace: session.Namespace, Name: InboxConfigMapName(session.Name)}
	data := map[string]string{inboxKey: string(record), inboxSigKey: signature(secret, key, owner.UID, string(record))}
	err = retry.OnError(conflictBackoff, retriable, func() error {
		cm := &corev1.ConfigMap{}
		err := s.Reader.Get(ctx, key, cm)
		if apierrors.IsNotFound(err) {
			if len(record) == 0 {
				return nil
			}
			cm = newConfigMap(key, owner)
			cm.Labels[StoreLabel] = StoreInbox
			cm.Data = data
			return s.write(ctx, cm, true)
		}
		if err != nil {
			return err
		}
		if err := adopt(cm, owner); err != nil {
			return err
		}
		if cm.Data[inboxKey] == data[inboxKey] && cm.Data[inboxSigKey] == data[inboxSigKey] {
			return nil
		}
		cm.Labels[StoreLabel] = StoreInbox
		cm.Data = data
		return s.write(ctx, cm, false)
	})
	if err != nil {
		return fmt.Errorf("save the inbox of session %s in ConfigMap %s: %w", session, key, err)
	}
	return nil
}

// LoadInbox implements InboxStore.
func (s *ConfigMaps) LoadInbox(ctx context.Context, session types.NamespacedName) ([]byte, error) {
	owner, err := s.session(ctx, session)
	if err != nil {
		return nil, err
	}
	key := types.NamespacedName{Namespace: session.Namespace, Name: InboxConfigMapName(session.Name)}
	cm := &corev1.ConfigMap{}
	if err := s.Reader.Get(ctx, key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read ConfigMap %s: %w", key, err)
	}
	if !metav1.IsControlledBy(cm, owner) || cm.Data[inboxKey] == "" {
		return nil, nil // left by an earlier session of that name, or cleared
	}
	secret, err := s.key(ctx)
	if err != nil {
		return nil, fmt.Errorf("the key that signs inbox records: %w", err)
	}
	want := signature(secret, key, owner.UID, cm.Data[inboxKey])
	if !hmac.Equal([]byte(want), []byte(cm.Data[inboxSigKey])) {
		return nil, fmt.Errorf("the inbox record in ConfigMap %s: %w (its signature does not verify)", key, ErrForged)
	}
	return []byte(cm.Data[inboxKey]), nil
}

// DefaultKeySecret is the name of the Secret that keeps the key.
const DefaultKeySecret = "agentlane-session-store-key"

// keySecretField is the Secret's data key of the key.
const keySecretField = "hmac-key"

// SecretKey is a RecordKey kept in a Secret: read once, created with a
// random key when missing. Every replica of the manager reads the same
// Secret, so a record one replica wrote verifies on the next leader.
type SecretKey struct {
	// Client creates the Secret; Reader reads it (around the cache).
	Client client.Client
	Reader client.Reader
	Secret types.NamespacedName

	mu  sync.Mutex
	key []byte
}

// Key implements RecordKey.
func (k *SecretKey) Key(ctx context.Context) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key != nil {
		return k.key, nil
	}
	for range 3 {
		sec := &corev1.Secret{}
		err := k.Reader.Get(ctx, k.Secret, sec)
		if err == nil {
			if v := sec.Data[keySecretField]; len(v) >= 32 {
				k.key = v
				return v, nil
			}
			return nil, fmt.Errorf("Secret %s has no %s of at least 32 bytes", k.Secret, keySecretField)
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("read Secret %s: %w", k.Secret, err)
		}
		v := make([]byte, 32)
		if _, err := rand.Read(v); err != nil {
			return nil, err
		}
		sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: k.Secret.Namespace, Name: k.Secret.Name,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "agentlane"}},
			Data: map[string][]byte{keySecretField: v}}
		err = k.Client.Create(ctx, sec)
		if err == nil {
			k.key = v
			return v, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create Secret %s: %w", k.Secret, err)
		}
		// Another replica created it first: read theirs.
	}
	return nil, fmt.Errorf("Secret %s could not be read or created", k.Secret)
}
