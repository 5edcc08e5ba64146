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
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"

	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
	"github.com/agentlane/agentlane/internal/sessionstore"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// inboxSaveTimeout bounds a save of an inbox record that no request waits
// for (after a turn took messages).
const inboxSaveTimeout = 10 * time.Second

// recentWriteDelay is how long a change of a session's record that only
// adds remembered message IDs waits to be written, with whatever changed
// meanwhile: a message a turn took at once costs no write of its own
// (one per recentWriteDelay at most), and a restart within it forgets the
// IDs of that time only.
const recentWriteDelay = 2 * time.Second

// inboxRecord is what a session's inbox holds, as the session store keeps
// it for a restarted manager.
type inboxRecord struct {
	Queued  []sessionapi.Message `json:"queued,omitempty"`
	Dropped []sessionapi.Message `json:"dropped,omitempty"`
	// DroppedMore counts the messages dropped past the summary lines kept.
	DroppedMore int                      `json:"droppedMore,omitempty"`
	Override    *sessionapi.QueueOptions `json:"override,omitempty"`
	// Lost counts the oldest messages left out to keep the record within
	// sessionstore.MaxInboxBytes.
	Lost int `json:"lost,omitempty"`
	// Recent are the IDs the inbox remembers to refuse re-delivered
	// messages (lanequeue.InboxState.Recent), oldest first, without those
	// of the queued messages, which carry theirs: at most
	// lanequeue.DefaultMaxRememberedIDs of at most
	// lanequeue.MaxRememberedIDLength bytes, some 17 KiB.
	Recent []string `json:"recent,omitempty"`
	// LaneHandlers are the session's lane handler switches
	// (PUT .../lanes/{lane}/handler), by lane: at most one a lane of the
	// queue.
	LaneHandlers map[string]string `json:"laneHandlers,omitempty"`
}

// inboxKeeper keeps each session's queued messages and /queue override in
// the session store, so that a restarted manager puts them back. A post
// saves before it is answered, unless the session's record was written less
// than interval ago or the namespace's write budget is spent: then the
// change is written with the ones that follow, once the interval has passed
// (or the budget has room). A turn that took messages saves the same way in
// the background. So a session's record is written at most once per
// interval. The first call of this server that touches a session's inbox
// restores what the store holds; a record that does not verify (written by
// someone else than the manager) is refused with a Warning event. Without a
// store that keeps inboxes, nothing is kept.
type inboxKeeper struct {
	store      sessionstore.InboxStore
	schedulers *scheduling.Schedulers
	log        logr.Logger
	// announce puts the inbox_restored event on the session's stream.
	announce func(types.NamespacedName, sessionapi.Event)

	// interval is the least time between two writes of a session's
	// record; clock measures it.
	interval time.Duration
	clock    clock.Clock
	// recorder and client record the Warning of a refused record.
	recorder events.EventRecorder
	client   client.Client

	mu       sync.Mutex
	sessions map[types.NamespacedName]*keptInbox
}

// keptInbox is one session's record keeping; mu orders its saves.
type keptInbox struct {
	mu       sync.Mutex
	restored bool
	// once mirrors restored for readers that do not take mu; tried is
	// when a submit last read the record (unix nanoseconds).
	once  atomic.Bool
	tried atomic.Int64
	// saved is the hash of the record last written, to skip rewriting it;
	// savedCore the hash of that record without its remembered IDs.
	saved, savedCore [sha256.Size]byte
	// written is when the record was last written; flushing is set while a
	// deferred write waits for its time.
	written  time.Time
	flushing bool
	// recentOnly is set while the deferred write waits only to write
	// remembered IDs: a change of messages is not held back by it.
	recentOnly bool

	// handlers are the session's lane handler switches, by lane, guarded
	// by hmu (not mu, which a write holds: a submit reads them).
	hmu      sync.Mutex
	handlers map[string]string
}

// mayTryRestore tells whether a submit may read the session's record now:
// its last try, if any, is at least every old.
func (s *keptInbox) mayTryRestore(now time.Time, every time.Duration) bool {
	last := s.tried.Load()
	if last != 0 && now.UnixNano()-last < int64(every) {
		return false
	}
	return s.tried.CompareAndSwap(last, now.UnixNano())
}

// restoredOnce tells whether the session's record was read (or there is
// none to read).
func (s *keptInbox) restoredOnce() bool { return s.once.Load() }

// laneHandler returns the session's lane handler switch for lane, "" when
// it has none.
func (s *keptInbox) laneHandler(lane string) string {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	return s.handlers[lane]
}

// setLaneHandler sets (or, with "", removes) the session's switch for lane.
func (s *keptInbox) setLaneHandler(lane, mode string) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	if mode == "" {
		delete(s.handlers, lane)
		return
	}
	if s.handlers == nil {
		s.handlers = map[string]string{}
	}
	s.handlers[lane] = mode
}

// laneHandlers returns a copy of the session's switches, nil for none.
func (s *keptInbox) laneHandlers() map[string]string {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	if len(s.handlers) == 0 {
		return nil
	}
	return maps.Clone(s.handlers)
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
		s = &keptInbox{saved: sha256.Sum256(nil), savedCore: sha256.Sum256(nil)}
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
	if errors.Is(err, sessionstore.ErrForged) {
		s.restored = true
		s.once.Store(true)
		k.refused(ctx, key, err)
		return
	}
	if err != nil {
		k.log.Error(err, "Cannot read the session's kept inbox; trying again at its next call", "session", key)
		return
	}
	s.restored = true
	s.once.Store(true)
	if len(data) == 0 {
		return
	}
	s.saved = sha256.Sum256(data)
	var rec inboxRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		k.log.Error(err, "The session's kept inbox does not decode; it is dropped", "session", key)
		return
	}
	s.savedCore = coreSum(&rec)
	for lane, mode := range rec.LaneHandlers {
		if len(lane) <= maxLaneNameLength && validLaneHandler(mode) && len(s.laneHandlers()) < maxLaneHandlers {
			s.setLaneHandler(lane, mode)
		}
	}
	st := rec.state()
	if len(st.Queued) > 0 || len(st.Dropped) > 0 || rec.Lost > 0 || rec.DroppedMore > 0 {
		ev := sessionapi.Event{Type: sessionapi.EventInboxRestored, Lost: uint64(rec.Lost),
			Messages: append(append([]sessionapi.Message{}, rec.Dropped...), rec.Queued...)}
		k.announce(key, ev)
	}
	inbox.Restore(key.Name, st)
}

// refused logs and records that the session's stored inbox record was not
// written by the manager; the next save replaces it.
func (k *inboxKeeper) refused(ctx context.Context, key types.NamespacedName, err error) {
	k.log.Info("Warning: the session's stored inbox record was not written by this manager; it is not applied", "session", key, "error", err.Error())
	if k.recorder == nil || k.client == nil {
		return
	}
	sess := &agentlanev1alpha1.AgentSession{}
	if k.client.Get(ctx, key, sess) != nil {
		return
	}
	k.recorder.Eventf(sess, nil, corev1.EventTypeWarning, agentlanev1alpha1.AgentSessionInboxRecordRefusedReason, "RestoreInbox",
		"The stored inbox record %s does not verify with the manager's key (written or altered by someone else); nothing of it was applied: %v",
		sessionstore.InboxConfigMapName(key.Name), err)
}

// save writes what the session's inbox holds now, or later with the changes
// that follow when the session's record was written less than interval ago
// or the namespace's write budget is spent.
func (k *inboxKeeper) save(ctx context.Context, key types.NamespacedName, inbox *lanequeue.Inbox) {
	if k.store == nil {
		return
	}
	s := k.session(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.record(inbox.State(key.Name))
	if coreSum(rec) == s.savedCore {
		// Only remembered IDs changed, if anything: they go with the next
		// write, at the latest after recentWriteDelay.
		if !s.flushing && sha256.Sum256(encodeRecord(rec)) != s.saved {
			k.deferLocked(key, s, inbox, recentWriteDelay, true)
		}
		return
	}
	if s.flushing && !s.recentOnly {
		return // the deferred write takes this change too
	}
	now := k.now()
	if due := s.written.Add(k.interval); k.interval > 0 && now.Before(due) {
		if !s.flushing {
			k.deferLocked(key, s, inbox, due.Sub(now), false)
		}
		s.recentOnly = false
		return
	}
	k.writeLocked(ctx, key, s, inbox)
}

// writeLocked writes the record now, deferring it when the write budget
// refuses it.
func (k *inboxKeeper) writeLocked(ctx context.Context, key types.NamespacedName, s *keptInbox, inbox *lanequeue.Inbox) {
	rec := s.record(inbox.State(key.Name))
	data := encodeRecord(rec)
	sum := sha256.Sum256(data)
	if sum == s.saved {
		return
	}
	err := k.store.SaveInbox(ctx, key, data)
	var limited *sessionstore.RateLimitedError
	if errors.As(err, &limited) && limited.RetryAfter < time.Hour {
		k.deferLocked(key, s, inbox, limited.RetryAfter, false)
		return
	}
	if err != nil {
		k.log.Error(err, "Cannot keep the session's inbox; a manager restart would lose it", "session", key)
		return
	}
	s.saved, s.savedCore = sum, coreSum(rec)
	s.written = k.now()
}

// deferLocked writes the session's record after d, with whatever it holds
// then; recentOnly tells that it waits only to write remembered IDs.
func (k *inboxKeeper) deferLocked(key types.NamespacedName, s *keptInbox, inbox *lanequeue.Inbox, d time.Duration, recentOnly bool) {
	s.flushing, s.recentOnly = true, recentOnly
	t := k.clockOrReal().NewTimer(d)
	go func() {
		<-t.C()
		ctx, cancel := context.WithTimeout(context.Background(), inboxSaveTimeout)
		defer cancel()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.flushing, s.recentOnly = false, false
		k.mu.Lock()
		current := k.sessions[key] == s
		k.mu.Unlock()
		if current {
			k.writeLocked(ctx, key, s, inbox)
		}
	}()
}

func (k *inboxKeeper) clockOrReal() clock.Clock {
	if k.clock == nil {
		return clock.RealClock{}
	}
	return k.clock
}

func (k *inboxKeeper) now() time.Time { return k.clockOrReal().Now() }

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
// over sessionstore.MaxInboxBytes or hold more than
// sessionstore.MaxInboxMessages queued messages; empty when st holds
// nothing. Each message is encoded once to know its size, and the record
// once.
func recordOf(st lanequeue.InboxState) []byte {
	return encodeRecord(recordFor(st))
}

// encodeRecord is the JSON of rec, empty when it holds nothing.
func encodeRecord(rec *inboxRecord) []byte {
	if rec == nil {
		return nil
	}
	data, _ := json.Marshal(rec) // every field encodes
	return data
}

// coreSum is the hash of rec's encoding without its remembered IDs.
func coreSum(rec *inboxRecord) [sha256.Size]byte {
	if rec == nil {
		return sha256.Sum256(nil)
	}
	core := *rec
	core.Recent = nil
	if data := encodeRecord(&core); string(data) != "{}" {
		return sha256.Sum256(data)
	}
	return sha256.Sum256(nil)
}

// record is the session's record: st's (recordFor) and the lane handler
// switches; nil when both are empty.
func (s *keptInbox) record(st lanequeue.InboxState) *inboxRecord {
	rec := recordFor(st)
	if h := s.laneHandlers(); h != nil {
		if rec == nil {
			rec = &inboxRecord{}
		}
		rec.LaneHandlers = h
	}
	return rec
}

// recordFor is the record of st (see recordOf), nil when st holds nothing.
func recordFor(st lanequeue.InboxState) *inboxRecord {
	if st.Empty() {
		return nil
	}
	rec := &inboxRecord{DroppedMore: st.DroppedMore}
	queued := make(map[string]struct{}, len(st.Queued))
	for _, m := range st.Queued {
		if m.ID != "" {
			queued[m.ID] = struct{}{}
		}
	}
	for _, id := range st.Recent {
		if _, ok := queued[id]; !ok {
			rec.Recent = append(rec.Recent, id)
		}
	}
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
	if n := len(rec.Queued) - sessionstore.MaxInboxMessages; n > 0 {
		rec.Queued = rec.Queued[n:]
		rec.Lost += n
	}
	data, _ := json.Marshal(rec) // every field encodes
	if len(data) <= sessionstore.MaxInboxBytes {
		return rec
	}
	size := len(data)
	sizeOf := func(m sessionapi.Message) int {
		b, _ := json.Marshal(m)
		return len(b) + 1 // and its comma
	}
	// "lost":N takes at most 20 bytes.
	for size+20 > sessionstore.MaxInboxBytes && len(rec.Dropped)+len(rec.Queued) > 0 {
		if len(rec.Dropped) > 0 {
			size -= sizeOf(rec.Dropped[0])
			rec.Dropped = rec.Dropped[1:]
		} else {
			size -= sizeOf(rec.Queued[0])
			rec.Queued = rec.Queued[1:]
		}
		rec.Lost++
	}
	return rec
}

// state is the inbox state rec keeps.
func (rec inboxRecord) state() lanequeue.InboxState {
	st := lanequeue.InboxState{DroppedMore: max(rec.DroppedMore, 0), Recent: rec.Recent}
	if n := len(st.Recent) - lanequeue.DefaultMaxRememberedIDs; n > 0 {
		st.Recent = st.Recent[n:]
	}
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
