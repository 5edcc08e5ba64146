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
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/sessionstore"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// inboxSaveTimeout bounds a save of an inbox record that no request waits
// for (after a turn took messages).
const inboxSaveTimeout = 10 * time.Second

// inboxRecord is what a session's inbox holds, as the session store keeps
// it for a restarted manager.
type inboxRecord struct {
	Queued   []sessionapi.Message     `json:"queued,omitempty"`
	Dropped  []sessionapi.Message     `json:"dropped,omitempty"`
	Override *sessionapi.QueueOptions `json:"override,omitempty"`
	// Lost counts the oldest messages left out to keep the record within
	// sessionstore.MaxInboxBytes.
	Lost int `json:"lost,omitempty"`
}

// inboxKeeper keeps each session's queued messages and /queue override in
// the session store, so that a restarted manager puts them back. A post
// saves before it is answered; a turn that took messages saves in the
// background. The first call of this server that touches a session's inbox
// restores what the store holds. Without a store that keeps inboxes,
// nothing is kept.
type inboxKeeper struct {
	store      sessionstore.InboxStore
	schedulers *scheduling.Schedulers
	log        logr.Logger
	// announce puts the inbox_restored event on the session's stream.
	announce func(types.NamespacedName, sessionapi.Event)

	mu       sync.Mutex
	sessions map[types.NamespacedName]*keptInbox
}

// keptInbox is one session's record keeping; mu orders its saves.
type keptInbox struct {
	mu       sync.Mutex
	restored bool
	// saved is the hash of the record last written, to skip rewriting it.
	saved [sha256.Size]byte
}

func newInboxKeeper(store sessionstore.Store, sch *scheduling.Schedulers, log logr.Logger,
	announce func(types.NamespacedName, sessionapi.Event)) *inboxKeeper {
	k := &inboxKeeper{schedulers: sch, log: log, announce: announce, sessions: map[types.NamespacedName]*keptInbox{}}
	k.store, _ = store.(sessionstore.InboxStore)
	return k
}

func (k *inboxKeeper) session(key types.NamespacedName) *keptInbox {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.sessions[key]
	if s == nil {
		s = &keptInbox{saved: sha256.Sum256(nil)}
		k.sessions[key] = s
	}
	return s
}

// forget drops the record keeping of a deleted session (its ConfigMap goes
// with it).
func (k *inboxKeeper) forget(key types.NamespacedName) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.sessions, key)
}

// restore puts back, once per server, what the store holds of the
// session's inbox, and tells the session's stream.
func (k *inboxKeeper) restore(ctx context.Context, key types.NamespacedName, inbox *lanequeue.Inbox) {
	if k.store == nil {
		return
	}
	s := k.session(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.restored {
		return
	}
	data, err := k.store.LoadInbox(ctx, key)
	if err != nil {
		k.log.Error(err, "Cannot read the session's kept inbox; trying again at its next call", "session", key)
		return
	}
	s.restored = true
	if len(data) == 0 {
		return
	}
	s.saved = sha256.Sum256(data)
	var rec inboxRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		k.log.Error(err, "The session's kept inbox does not decode; it is dropped", "session", key)
		return
	}
	st := rec.state()
	if len(st.Queued) > 0 || len(st.Dropped) > 0 || rec.Lost > 0 {
		ev := sessionapi.Event{Type: sessionapi.EventInboxRestored, Lost: uint64(rec.Lost),
			Messages: append(append([]sessionapi.Message{}, rec.Dropped...), rec.Queued...)}
		k.announce(key, ev)
	}
	inbox.Restore(key.Name, st)
}

// save writes what the session's inbox holds now.
func (k *inboxKeeper) save(ctx context.Context, key types.NamespacedName, inbox *lanequeue.Inbox) {
	if k.store == nil {
		return
	}
	s := k.session(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	data := recordOf(inbox.State(key.Name))
	sum := sha256.Sum256(data)
	if sum == s.saved {
		return
	}
	if err := k.store.SaveInbox(ctx, key, data); err != nil {
		k.log.Error(err, "Cannot keep the session's inbox; a manager restart would lose it", "session", key)
		return
	}
	s.saved = sum
}

// turnTaken saves, in the background, the inbox of a session whose turn
// took messages.
func (k *inboxKeeper) turnTaken(queue types.NamespacedName, session string) {
	if k.store == nil {
		return
	}
	go func() {
		_, inbox, ok := k.schedulers.Session(queue)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), inboxSaveTimeout)
		defer cancel()
		k.save(ctx, types.NamespacedName{Namespace: queue.Namespace, Name: session}, inbox)
	}()
}

// recordOf is the JSON of st, without its oldest messages if it would be
// over sessionstore.MaxInboxBytes; empty when st holds nothing.
func recordOf(st lanequeue.InboxState) []byte {
	if st.Empty() {
		return nil
	}
	rec := inboxRecord{}
	for _, m := range st.Queued {
		rec.Queued = append(rec.Queued, messageOf(m))
	}
	for _, m := range st.Dropped {
		rec.Dropped = append(rec.Dropped, messageOf(m))
	}
	if o := st.Override; o != nil {
		opts := queueOptionsOf(*o)
		rec.Override = &opts
	}
	for {
		data, _ := json.Marshal(rec) // every field encodes
		if len(data) <= sessionstore.MaxInboxBytes || len(rec.Dropped)+len(rec.Queued) == 0 {
			return data
		}
		if len(rec.Dropped) > 0 {
			rec.Dropped = rec.Dropped[1:]
		} else {
			rec.Queued = rec.Queued[1:]
		}
		rec.Lost++
	}
}

// state is the inbox state rec keeps.
func (rec inboxRecord) state() lanequeue.InboxState {
	var st lanequeue.InboxState
	for _, m := range rec.Queued {
		st.Queued = append(st.Queued, inboxMessage(m))
	}
	for _, m := range rec.Dropped {
		st.Dropped = append(st.Dropped, inboxMessage(m))
	}
	if o := rec.Override; o != nil {
		st.Override = &lanequeue.MessageOptions{Mode: lanequeue.MessageMode(o.Mode), Debounce: o.Debounce.Duration,
			Cap: o.Cap, Drop: lanequeue.DropPolicy(o.Drop)}
		for ch, m := range o.ByChannel {
			if st.Override.ByChannel == nil {
				st.Override.ByChannel = make(map[string]lanequeue.MessageMode, len(o.ByChannel))
			}
			st.Override.ByChannel[ch] = lanequeue.MessageMode(m)
		}
	}
	return st
}

func inboxMessage(m sessionapi.Message) lanequeue.Message {
	return lanequeue.Message{ID: m.ID, Text: m.Text, Channel: m.Channel, Thread: m.Thread, ReceivedAt: m.ReceivedAt}
}
