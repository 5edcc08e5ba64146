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
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

const (
	// inboxSlotPrefix starts the name of every inbox message slot.
	inboxSlotPrefix = "agentlane-inmsg-"
	// queuedField is the field of an inbox record whose elements are kept
	// one per slot.
	queuedField = "queued"
	// headKey and headSigKey are the data keys of the head of an inbox
	// record (all of it but its messages) and of its signature.
	headKey    = "head.json"
	headSigKey = "head.sig"
	// messageKey and messageSigKey are the data keys of a slot's message
	// and of its signature.
	messageKey    = "message.json"
	messageSigKey = "message.sig"

	// The domains of the signatures, so that no signed part passes for
	// another.
	legacyDomain  = "agentlane-inbox-v1"
	headDomain    = "agentlane-inbox-head-v1"
	messageDomain = "agentlane-inbox-message-v1"

	// StoreInboxMessage labels an inbox message slot.
	StoreInboxMessage = "inbox-message"
	// InboxSlotAnnotation is a slot's index.
	InboxSlotAnnotation = "agentlane.io/inbox-slot"
	// InboxSeqAnnotation is the sequence number of a slot's message,
	// assigned by the store and signed with it: it orders the messages. An
	// emptied slot keeps it, so numbers are not reused.
	InboxSeqAnnotation = "agentlane.io/inbox-seq"
	// InboxHashAnnotation is the SHA-256 of a slot's message, which tells
	// a save what the slot holds without reading it; a free slot has none.
	InboxHashAnnotation = "agentlane.io/inbox-hash"
)

// InboxSlotName is the name of the session's inbox message slot i:
// agentlane-inmsg-<session>-<i>, the session's name shortened with a hash
// if that is too long for an object name.
func InboxSlotName(session string, i int) string {
	return objectName(inboxSlotPrefix, session, "-"+strconv.Itoa(i))
}

// splitInbox parts record into its head and its messages: when it is a
// JSON object with a "queued" array, the array's elements (compacted) and
// the rest of the object, "" when nothing; otherwise the whole record and
// no messages.
func splitInbox(record []byte) (head string, items []string) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(record, &obj) != nil || obj == nil {
		return string(record), nil
	}
	var queued []json.RawMessage
	if q, ok := obj[queuedField]; !ok || json.Unmarshal(q, &queued) != nil || queued == nil {
		return string(record), nil
	}
	delete(obj, queuedField)
	if len(obj) > 0 {
		b, _ := json.Marshal(obj) // decoded from JSON
		head = string(b)
	}
	for _, m := range queued {
		var buf bytes.Buffer
		_ = json.Compact(&buf, m) // valid: decoded from JSON
		items = append(items, buf.String())
	}
	return head, items
}

// joinInbox is the record of head and items, nil when both are empty.
func joinInbox(head string, items []string) ([]byte, error) {
	if len(items) == 0 {
		if head == "" {
			return nil, nil
		}
		return []byte(head), nil
	}
	obj := map[string]json.RawMessage{}
	if head != "" {
		if err := json.Unmarshal([]byte(head), &obj); err != nil {
			return nil, fmt.Errorf("its head is not a JSON object: %w", err)
		}
	}
	queued := make([]json.RawMessage, len(items))
	for i, m := range items {
		queued[i] = json.RawMessage(m)
	}
	q, err := json.Marshal(queued)
	if err != nil {
		return nil, fmt.Errorf("its messages: %w", err)
	}
	obj[queuedField] = q
	return json.Marshal(obj)
}

func itemHash(item string) string {
	sum := sha256.Sum256([]byte(item))
	return hex.EncodeToString(sum[:])
}

// inboxSlot is what a save needs of one of a session's inbox slots, from
// its metadata.
type inboxSlot struct {
	index int
	meta  metav1.ObjectMeta
	seq   int64
	// hash is its message's, "" for a free slot.
	hash string
	// foreign: an earlier session of the same name left it. alien: no
	// AgentSession of that name controls it; it is never written.
	foreign, alien bool
}

// inboxSlots lists the session's inbox slots from their metadata.
func (s *ConfigMaps) inboxSlots(ctx context.Context, session types.NamespacedName, owner *agentlanev1alpha1.AgentSession) ([]inboxSlot, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := s.Reader.List(ctx, list, client.InNamespace(session.Namespace),
		client.MatchingLabels{agentlanev1alpha1.SessionLabel: session.Name, StoreLabel: StoreInboxMessage}); err != nil {
		return nil, fmt.Errorf("list the inbox slots of session %s: %w", session, err)
	}
	var out []inboxSlot
	for i := range list.Items {
		m := list.Items[i].ObjectMeta
		index, err := strconv.Atoi(m.Annotations[InboxSlotAnnotation])
		if err != nil || index < 0 || m.Name != InboxSlotName(session.Name, index) {
			continue // labelled so, but not named as a slot of the session
		}
		sl := inboxSlot{index: index, meta: m}
		if !metav1.IsControlledBy(&list.Items[i], owner) {
			ref := metav1.GetControllerOfNoCopy(&list.Items[i])
			sl.foreign = ref != nil && ref.Kind == "AgentSession" && ref.Name == owner.Name
			sl.alien = !sl.foreign
		} else {
			sl.seq, _ = strconv.ParseInt(m.Annotations[InboxSeqAnnotation], 10, 64)
			sl.hash = m.Annotations[InboxHashAnnotation]
		}
		out = append(out, sl)
	}
	slices.SortFunc(out, func(a, b inboxSlot) int { return cmp.Compare(a.index, b.index) })
	return out, nil
}

// inboxAdd is a message to write to a slot.
type inboxAdd struct {
	slot inboxSlot
	item string
}

// planInbox compares the session's slots with the messages items the
// record holds, oldest first. The live slots, in sequence order, that hold
// items in the same order are kept (all but none when rewrite is set); the
// messages after the last kept one go to slots (those of messages no longer
// held first, then free ones, then new indices); the slots of messages no
// longer held that no new message takes are emptied. seq is the highest
// sequence number the session's slots have used. With rewrite, the free
// slots are emptied again too, whatever they hold.
func planInbox(slots []inboxSlot, items []string, rewrite bool) (add []inboxAdd, clear []inboxSlot, seq int64) {
	var live, free []inboxSlot
	used := map[int]bool{}
	for _, sl := range slots {
		used[sl.index] = true
		seq = max(seq, sl.seq)
		switch {
		case sl.alien:
		case sl.foreign || sl.hash == "":
			free = append(free, sl)
		default:
			live = append(live, sl)
		}
	}
	slices.SortFunc(live, func(a, b inboxSlot) int { return cmp.Or(cmp.Compare(a.seq, b.seq), cmp.Compare(a.index, b.index)) })
	var gone []inboxSlot
	j := 0
	for _, sl := range live {
		if !rewrite && j < len(items) && sl.hash == itemHash(items[j]) {
			j++
			continue
		}
		gone = append(gone, sl)
	}
	reuse := slices.Concat(gone, free)
	next := 0
	for _, item := range items[j:] {
		var sl inboxSlot
		if len(reuse) > 0 {
			sl, reuse = reuse[0], reuse[1:]
		} else {
			for used[next] {
				next++
			}
			used[next] = true
			sl = inboxSlot{index: next}
		}
		add = append(add, inboxAdd{slot: sl, item: item})
	}
	for _, sl := range reuse {
		if !sl.foreign && (sl.hash != "" || rewrite) {
			clear = append(clear, sl)
		}
	}
	return add, clear, seq
}

// writeInboxSlot writes item, signed, with its sequence number seq to the
// slot sl of session; an empty item frees the slot.
func (s *ConfigMaps) writeInboxSlot(ctx context.Context, session types.NamespacedName, owner *agentlanev1alpha1.AgentSession,
	sl inboxSlot, seq int64, item string, secret []byte) error {
	key := types.NamespacedName{Namespace: session.Namespace, Name: InboxSlotName(session.Name, sl.index)}
	cm := newConfigMap(key, owner)
	cm.ResourceVersion = sl.meta.ResourceVersion
	cm.Labels[StoreLabel] = StoreInboxMessage
	cm.Annotations = map[string]string{
		InboxSlotAnnotation: strconv.Itoa(sl.index),
		InboxSeqAnnotation:  strconv.FormatInt(seq, 10),
	}
	if item != "" {
		cm.Annotations[InboxHashAnnotation] = itemHash(item)
		cm.Data = map[string]string{
			messageKey:    item,
			messageSigKey: sign(secret, messageDomain, key, owner.UID, strconv.FormatInt(seq, 10), item),
		}
	}
	return s.write(ctx, cm, sl.meta.ResourceVersion == "")
}

// markRewrite makes the next SaveInbox of session write every part: a
// load found one that does not verify, and a save cannot tell which from
// their metadata.
func (s *ConfigMaps) markRewrite(session types.NamespacedName) {
	s.rewriteMu.Lock()
	defer s.rewriteMu.Unlock()
	if s.rewrite == nil {
		s.rewrite = map[types.NamespacedName]bool{}
	}
	s.rewrite[session] = true
}

// takeRewrite tells whether the next save of session writes every part,
// and resets it.
func (s *ConfigMaps) takeRewrite(session types.NamespacedName) bool {
	s.rewriteMu.Lock()
	defer s.rewriteMu.Unlock()
	r := s.rewrite[session]
	delete(s.rewrite, session)
	return r
}
