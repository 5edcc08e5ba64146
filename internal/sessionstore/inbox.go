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
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

const (
	// inboxConfigMapPrefix starts the name of every inbox ConfigMap.
	inboxConfigMapPrefix = "agentlane-inbox-"
	// inboxKey is the data key of the inbox record of the earlier format,
	// still read (never written).
	inboxKey = "inbox.json"
	// inboxSigKey is the data key of the record's signature.
	inboxSigKey = "inbox.sig"
	// MaxInboxBytes bounds one session's inbox record, well within the
	// 1 MiB the API server allows an object.
	MaxInboxBytes = 512 << 10
	// MaxInboxMessages bounds the messages of one session's inbox record,
	// and so its slots.
	MaxInboxMessages = 1024
)

// ErrForged: a stored inbox record whose signature does not verify with the
// manager's key: written or altered by someone else (or by a manager with
// another key). It is not used.
var ErrForged = errors.New("stored record not written by this manager")

// InboxStore keeps one record per session of what the session's inbox
// holds (its queued messages and /queue override), so that a restarted
// manager finds it again. The record is JSON, opaque to the store but for
// its "queued" array, whose elements a store may keep apart so that adding
// or taking a message writes that message only (see ConfigMaps.SaveInbox);
// LoadInbox returns an equivalent record (its keys may be reordered). The
// store signs what it keeps with the manager's key: whoever may write
// ConfigMaps in the namespace cannot make the manager take a record of
// theirs.
type InboxStore interface {
	// SaveInbox replaces the session's record; an empty one clears it. A
	// record over MaxInboxBytes or MaxInboxMessages is refused, and one the namespace's write
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

// signature is the HMAC-SHA256 of a record of the earlier format for the
// ConfigMap key of the session owner: a record is valid only where the
// manager wrote it, for the session it wrote it for (not an earlier session
// of that name).
func signature(key []byte, cm types.NamespacedName, owner types.UID, record string) string {
	return sign(key, legacyDomain, cm, owner, record)
}

// sign is the HMAC-SHA256 of parts in domain, bound to the ConfigMap cm and
// the AgentSession's UID.
func sign(key []byte, domain string, cm types.NamespacedName, owner types.UID, parts ...string) string {
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s\x00%s\x00%s\x00%s\x00", domain, cm.Namespace, cm.Name, owner)
	for i, p := range parts {
		if i > 0 {
			mac.Write([]byte{0})
		}
		mac.Write([]byte(p))
	}
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// SaveInbox implements InboxStore. A record that is a JSON object with a
// "queued" array is kept in parts, so that a save writes what changed, not
// the whole record: each element of "queued" in a slot ConfigMap of its own
// (InboxSlotName, labelled agentlane.io/store=inbox-message), the rest of
// the object (the head) in the ConfigMap InboxConfigMapName (labelled
// agentlane.io/store=inbox). Any other record is kept whole as the head.
// Each part is signed, bound to its ConfigMap, the AgentSession's UID and,
// for a message, its sequence number, which orders the messages. A save
// lists the session's slots by label, metadata only, keeps the slots whose
// messages the record still holds in the same order, writes each new
// message to a free slot, empties the slots of messages no longer held
// (never deletes them) and rewrites the head only when it changed: posting
// a message writes one slot, a turn that takes messages empties theirs.
// All ConfigMaps are controlled by the AgentSession. The earlier format,
// the whole record signed in the head ConfigMap, is still read, and
// replaced by the next save.
func (s *ConfigMaps) SaveInbox(ctx context.Context, session types.NamespacedName, record []byte) error {
	if len(record) > MaxInboxBytes {
		return fmt.Errorf("the inbox record of session %s is %d bytes, over %d: %w", session, len(record), MaxInboxBytes, ErrTooLarge)
	}
	head, items := splitInbox(record)
	if len(items) > MaxInboxMessages {
		return fmt.Errorf("the inbox record of session %s holds %d messages, over %d: %w", session, len(items), MaxInboxMessages, ErrTooLarge)
	}
	owner, err := s.session(ctx, session)
	if err != nil {
		return err
	}
	secret, err := s.key(ctx)
	if err != nil {
		return fmt.Errorf("the key that signs inbox records: %w", err)
	}
	rewrite := s.takeRewrite(session)
	err = retry.OnError(conflictBackoff, retriable, func() error {
		slots, err := s.inboxSlots(ctx, session, owner)
		if err != nil {
			return err
		}
		add, clear, seq := planInbox(slots, items, rewrite)
		// New messages first, then the head, then the slots to empty: a
		// save cut short leaves messages twice rather than none (and a
		// record of the earlier format in the head wins over the slots).
		for _, a := range add {
			seq++
			if err := s.writeInboxSlot(ctx, session, owner, a.slot, seq, a.item, secret); err != nil {
				return err
			}
		}
		if err := s.writeInboxHead(ctx, session, owner, head, secret); err != nil {
			return err
		}
		for _, sl := range clear {
			if err := s.writeInboxSlot(ctx, session, owner, sl, sl.seq, "", secret); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if rewrite {
			s.markRewrite(session)
		}
		return fmt.Errorf("save the inbox of session %s: %w", session, err)
	}
	return nil
}

// writeInboxHead writes the head ConfigMap when it does not hold head
// (signed) already.
func (s *ConfigMaps) writeInboxHead(ctx context.Context, session types.NamespacedName, owner *agentlanev1alpha1.AgentSession, head string, secret []byte) error {
	key := types.NamespacedName{Namespace: session.Namespace, Name: InboxConfigMapName(session.Name)}
	data := map[string]string{}
	if head != "" {
		data = map[string]string{headKey: head, headSigKey: sign(secret, headDomain, key, owner.UID, head)}
	}
	cm := &corev1.ConfigMap{}
	err := s.Reader.Get(ctx, key, cm)
	if apierrors.IsNotFound(err) {
		if len(data) == 0 {
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
	if maps.Equal(cm.Data, data) && cm.Labels[StoreLabel] == StoreInbox {
		return nil
	}
	cm.Labels[StoreLabel] = StoreInbox
	cm.Data = data
	return s.write(ctx, cm, false)
}

// LoadInbox implements InboxStore: the head and the messages of the live
// slots, ordered by their sequence numbers, as one record. A part whose
// signature does not verify makes it ErrForged, and the next save rewrites
// every part.
func (s *ConfigMaps) LoadInbox(ctx context.Context, session types.NamespacedName) ([]byte, error) {
	data, err := s.loadInbox(ctx, session)
	if errors.Is(err, ErrForged) {
		s.markRewrite(session)
	}
	return data, err
}

func (s *ConfigMaps) loadInbox(ctx context.Context, session types.NamespacedName) ([]byte, error) {
	owner, err := s.session(ctx, session)
	if err != nil {
		return nil, err
	}
	secret, err := s.key(ctx)
	if err != nil {
		return nil, fmt.Errorf("the key that signs inbox records: %w", err)
	}
	key := types.NamespacedName{Namespace: session.Namespace, Name: InboxConfigMapName(session.Name)}
	cm := &corev1.ConfigMap{}
	err = s.Reader.Get(ctx, key, cm)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read ConfigMap %s: %w", key, err)
	}
	var head string
	if err == nil && metav1.IsControlledBy(cm, owner) {
		if legacy := cm.Data[inboxKey]; legacy != "" {
			// The earlier format: the whole record, signed as one.
			want := signature(secret, key, owner.UID, legacy)
			if !hmac.Equal([]byte(want), []byte(cm.Data[inboxSigKey])) {
				return nil, fmt.Errorf("the inbox record in ConfigMap %s: %w (its signature does not verify)", key, ErrForged)
			}
			return []byte(legacy), nil
		}
		head = cm.Data[headKey]
		if head != "" && !hmac.Equal([]byte(sign(secret, headDomain, key, owner.UID, head)), []byte(cm.Data[headSigKey])) {
			return nil, fmt.Errorf("the inbox record in ConfigMap %s: %w (its signature does not verify)", key, ErrForged)
		}
	}
	list := &corev1.ConfigMapList{}
	if err := s.Reader.List(ctx, list, client.InNamespace(session.Namespace),
		client.MatchingLabels{agentlanev1alpha1.SessionLabel: session.Name, StoreLabel: StoreInboxMessage}); err != nil {
		return nil, fmt.Errorf("list the inbox slots of session %s: %w", session, err)
	}
	type message struct {
		seq  int64
		text string
	}
	var msgs []message
	for i := range list.Items {
		cm := &list.Items[i]
		index, err := strconv.Atoi(cm.Annotations[InboxSlotAnnotation])
		if err != nil || cm.Name != InboxSlotName(session.Name, index) ||
			!metav1.IsControlledBy(cm, owner) || cm.Data[messageKey] == "" {
			continue // not a slot of the session, left by an earlier session of that name, or free
		}
		seq, _ := strconv.ParseInt(cm.Annotations[InboxSeqAnnotation], 10, 64)
		slotKey := types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}
		text := cm.Data[messageKey]
		want := sign(secret, messageDomain, slotKey, owner.UID, strconv.FormatInt(seq, 10), text)
		if !hmac.Equal([]byte(want), []byte(cm.Data[messageSigKey])) {
			return nil, fmt.Errorf("the inbox message in ConfigMap %s: %w (its signature does not verify)", slotKey, ErrForged)
		}
		msgs = append(msgs, message{seq: seq, text: text})
	}
	slices.SortFunc(msgs, func(a, b message) int { return cmp.Compare(a.seq, b.seq) })
	items := make([]string, len(msgs))
	for i, m := range msgs {
		items[i] = m.text
	}
	data, err := joinInbox(head, items)
	if err != nil {
		return nil, fmt.Errorf("the inbox record of session %s: %w", session, err)
	}
	return data, nil
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
			return nil, fmt.Errorf("the Secret %s has no %s of at least 32 bytes", k.Secret, keySecretField)
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
	return nil, fmt.Errorf("the Secret %s could not be read or created", k.Secret)
}
