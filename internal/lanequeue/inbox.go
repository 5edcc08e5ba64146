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

package lanequeue

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/agentlane/agentlane/internal/truncate"
)

// Message is an inbound message for a session.
type Message struct {
	ID   string
	Text string
	// Channel and Thread route the reply; collect merges only messages of
	// the same channel and thread.
	Channel string
	Thread  string
	// ReceivedAt is set by Post when zero.
	ReceivedAt time.Time
}

// InboxEventType names what the inbox tells a session's runtime.
type InboxEventType string

const (
	// InboxTurn: start a run with the turn's messages.
	InboxTurn InboxEventType = "turn"
	// InboxSteer: inject the message into the run at its next tool
	// boundary.
	InboxSteer InboxEventType = "steer"
	// InboxAbort: stop the run now.
	InboxAbort InboxEventType = "abort"
	// InboxDropped: a message did not fit in the queue, or (Superseded) an
	// interrupt dropped the messages that waited.
	InboxDropped InboxEventType = "dropped"
	// InboxQueued: a message was taken for a turn, at once when it is posted
	// and before the turn it may start, so that its channel can show a
	// typing indicator while it waits. RunID is the run it waits for, if
	// any.
	InboxQueued InboxEventType = "queued"
	// InboxWaiting: messages have waited more than SlowWait for a turn while
	// run RunID is active; each message is reported once, Waited is the
	// longest wait among them.
	InboxWaiting InboxEventType = "waiting"
)

// InboxEvent is one instruction or report of the inbox to a session's
// runtime, in the order the inbox made them.
type InboxEvent struct {
	Type    InboxEventType
	Session string
	// RunID is the run a turn starts, or the run steered or aborted.
	RunID string
	// Messages are a turn's messages, the steering message, or the dropped
	// one.
	Messages []Message
	// Text is a turn's prompt: the messages' texts, one per line, or the
	// summary of dropped messages.
	Text string
	// Summary marks the synthetic turn that lists dropped messages.
	Summary bool
	// Channel and Thread route a turn's reply.
	Channel, Thread string
	// Waited is how long a turn's first message waited for the turn (Slow is
	// set when that exceeds SlowWait), or the longest wait of a waiting
	// event's messages.
	Waited time.Duration
	Slow   bool
	// Superseded marks the dropped event of an interrupt: the messages that
	// waited for a turn were dropped for the newest one. Messages are those
	// whose text was kept (the summary lines of messages dropped earlier,
	// then the queued ones), Count all of them, also those counted past the
	// summary's lines; RunID is the run the interrupt aborted, if any.
	Superseded bool
	Count      int
}

// PostResult says what Post did with a message.
type PostResult struct {
	// Directive is set for a /queue command; Options are the session's
	// options after it.
	Directive bool
	Options   MessageOptions
	// Queued, Steered and Dropped say where the message went (a
	// steer-backlog message is both steered and queued). Aborted names the
	// run an interrupt aborted.
	Queued, Steered, Dropped bool
	Aborted                  string
	// Duplicate: a message of the same ID is queued or was taken recently
	// (see MaxRememberedIDs); this one was ignored.
	Duplicate bool
}

// InboxOptions are the host environment of an inbox.
type InboxOptions struct {
	// Clock drives debounce; the real clock by default.
	Clock clock.WithDelayedExecution
	// IDs names runs; lowercase ULIDs by default.
	IDs IDGenerator
	// Queue, when set, is where the sessions' commands run: a steer and an
	// interrupt cancel the commands of the current run that have not
	// started (Queue.CancelRun).
	Queue *Queue
	// OnEvent receives the events, in order, outside the inbox lock. It may
	// call back into the inbox.
	OnEvent func(InboxEvent)
	// MaxSessionBytes bounds the text one session's inbox holds: its
	// queued messages and the summary lines of its dropped ones. A message
	// that would pass it is refused with ErrInboxFull and nothing changes;
	// DefaultMaxSessionBytes when 0.
	MaxSessionBytes int
	// MaxSummaryLines bounds the lines of dropped messages kept for the
	// summary turn; past it the summary counts the further messages
	// dropped instead ("and N more"). DefaultMaxSummaryLines when 0.
	MaxSummaryLines int
	// MaxRememberedIDs bounds how many IDs of the messages it took each
	// session remembers to report a re-delivered message as a duplicate
	// (IDs of at most MaxRememberedIDLength bytes); a message still queued
	// is found whatever the bound. DefaultMaxRememberedIDs when 0.
	MaxRememberedIDs int
}

// Defaults of InboxOptions.
const (
	DefaultMaxSessionBytes = 256 << 10
	DefaultMaxSummaryLines = 50
)

// ErrInboxFull: the session's inbox holds MaxSessionBytes of text; a
// message fits again once a turn took the queued ones.
var ErrInboxFull = errors.New("lanequeue: the session's inbox is full")

// Inbox applies the queue modes to the inbound messages of many sessions:
// it decides when each session starts a run (one at a time per session) and
// with which messages, and when a running one is steered or aborted. All
// methods are safe for concurrent use.
type Inbox struct {
	clock   clock.WithDelayedExecution
	ids     IDGenerator
	queue   *Queue
	onEvent func(InboxEvent)
	// maxBytes, maxLines and maxIDs are MaxSessionBytes, MaxSummaryLines
	// and MaxRememberedIDs.
	maxBytes, maxLines, maxIDs int

	mu       sync.Mutex
	sessions map[string]*inboxSession
	pending  []InboxEvent
	emitMu   sync.Mutex
}

type inboxSession struct {
	key          string
	defaults     MessageOptions
	override     *MessageOptions
	acceptsSteer bool
	queued       []Message
	// dropped are the summary lines of the messages dropped under
	// DropSummarize (each Text shortened to SummaryLineLength), at most
	// maxLines; droppedMore counts those dropped past them.
	dropped     []Message
	droppedMore int
	// bytes is the text of queued and dropped.
	bytes int
	// recent are the IDs of the last messages taken, for de-duplication.
	recent     recentIDs
	activeRun  string
	quietSince time.Time // last post, for debounce
	timer      clock.Timer
	timerAt    time.Time
	// noticedThrough: the queued messages received up to it have been
	// reported waiting (InboxWaiting); noticeTimer fires when the next one
	// will have waited SlowWait.
	noticedThrough time.Time
	noticeTimer    clock.Timer
	noticeAt       time.Time
}

// NewInbox returns an inbox.
func NewInbox(opts InboxOptions) *Inbox {
	in := &Inbox{clock: opts.Clock, ids: opts.IDs, queue: opts.Queue, onEvent: opts.OnEvent,
		maxBytes: opts.MaxSessionBytes, maxLines: opts.MaxSummaryLines, maxIDs: opts.MaxRememberedIDs,
		sessions: map[string]*inboxSession{}}
	if in.maxBytes <= 0 {
		in.maxBytes = DefaultMaxSessionBytes
	}
	if in.maxLines <= 0 {
		in.maxLines = DefaultMaxSummaryLines
	}
	if in.maxIDs <= 0 {
		in.maxIDs = DefaultMaxRememberedIDs
	}
	if in.clock == nil {
		in.clock = clock.RealClock{}
	}
	if in.ids == nil {
		in.ids = NewULIDGenerator(in.clock, nil)
	}
	return in
}

func (in *Inbox) sessionLocked(key string) *inboxSession {
	s := in.sessions[key]
	if s == nil {
		s = &inboxSession{key: key, defaults: DefaultMessageOptions()}
		in.sessions[key] = s
	}
	return s
}

func (s *inboxSession) options() MessageOptions {
	if s.override != nil {
		return *s.override
	}
	return s.defaults
}

// ConfigureSession sets a session's default options (from its AgentSession)
// and whether its runtime takes steers (it streams, so it can inject a
// message at a tool boundary). A legacy mode name is kept as the mode it
// stands for (Canonical). A /queue override stays in force.
func (in *Inbox) ConfigureSession(key string, defaults MessageOptions, acceptsSteer bool) error {
	if err := defaults.Validate(); err != nil {
		return err
	}
	defaults = defaults.canonical()
	in.mu.Lock()
	s := in.sessionLocked(key)
	s.defaults, s.acceptsSteer = defaults, acceptsSteer
	in.drainLocked(s)
	in.unlock()
	return nil
}

// Options returns a session's options in force.
func (in *Inbox) Options(key string) MessageOptions {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.sessionLocked(key).options()
}

// ActiveRun returns the session's current run, if any.
func (in *Inbox) ActiveRun(key string) (string, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	s := in.sessions[key]
	if s == nil || s.activeRun == "" {
		return "", false
	}
	return s.activeRun, true
}

// Queued returns how many messages wait for a turn in the session, dropped
// ones waiting to be summarized included.
func (in *Inbox) Queued(key string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	s := in.sessions[key]
	if s == nil {
		return 0
	}
	n := len(s.queued)
	if len(s.dropped) > 0 {
		n++
	}
	return n
}

// Post handles an inbound message according to the session's mode. A
// message that is only "/queue ..." changes the session's options instead
// (see ParseQueueDirective); an invalid one is an error and changes nothing.
func (in *Inbox) Post(key string, m Message) (PostResult, error) {
	directive, isDirective, err := ParseQueueDirective(m.Text)
	if err != nil {
		return PostResult{}, err
	}
	in.mu.Lock()
	defer in.unlock()
	s := in.sessionLocked(key)
	now := in.clock.Now()
	if isDirective {
		if directive == nil {
			s.override = nil
		} else {
			o := directive.apply(s.options())
			s.override = &o
		}
		return PostResult{Directive: true, Options: s.options()}, nil
	}
	if s.duplicateLocked(m.ID) {
		return PostResult{Duplicate: true}, nil
	}
	if m.ReceivedAt.IsZero() {
		m.ReceivedAt = now
	}
	opts := s.options()
	mode := opts.ModeFor(m.Channel)
	steerOnly := mode == ModeSteer && s.activeRun != "" && s.acceptsSteer
	held := s.bytes
	if mode == ModeInterrupt {
		held = 0 // the newest message supersedes what was waiting
	}
	if !steerOnly && held+len(m.Text) > in.maxBytes {
		return PostResult{}, fmt.Errorf("%w: it holds %d bytes of text; %d more would pass its bound of %d",
			ErrInboxFull, held, len(m.Text), in.maxBytes)
	}
	var res PostResult
	defer func() {
		if res.Queued || res.Steered {
			s.recent.add(m.ID, in.maxIDs)
		}
	}()
	switch mode {
	case ModeSteer, ModeSteerBacklog:
		if s.activeRun != "" && s.acceptsSteer {
			in.steerLocked(s, m)
			res.Steered = true
			if mode == ModeSteer {
				return res, nil
			}
		}
	case ModeInterrupt:
		if s.activeRun != "" {
			res.Aborted = s.activeRun
			in.abortLocked(s)
		}
		// The newest message supersedes what was waiting.
		if n := len(s.dropped) + len(s.queued) + s.droppedMore; n > 0 {
			gone := append(append([]Message{}, s.dropped...), s.queued...)
			in.pending = append(in.pending, InboxEvent{Type: InboxDropped, Session: s.key, RunID: res.Aborted,
				Messages: gone, Superseded: true, Count: n})
		}
		s.queued, s.dropped, s.droppedMore = nil, nil, 0
		s.queued = append(s.queued, m)
		s.recount()
		res.Queued = true
		in.queuedLocked(s, m)
		in.deliverLocked(s, now)
		return res, nil
	}
	// In every mode a message to an idle session with nothing waiting
	// starts its turn at once: the debounce only coalesces what arrives
	// while a run is active or other messages wait.
	idle := s.activeRun == "" && len(s.queued) == 0 && len(s.dropped) == 0 && s.droppedMore == 0
	res.Queued, res.Dropped = in.enqueueLocked(s, m, opts)
	if res.Queued {
		in.queuedLocked(s, m)
	}
	s.quietSince = now
	if idle {
		in.deliverLocked(s, now)
		return res, nil
	}
	in.drainLocked(s)
	in.noticeLocked(s)
	return res, nil
}

// RunFinished tells the inbox that the session's run ended, so that its next
// turn can start. Unknown or already ended runs are ignored.
func (in *Inbox) RunFinished(key, runID string) {
	in.mu.Lock()
	defer in.unlock()
	s := in.sessions[key]
	if s == nil || s.activeRun != runID || runID == "" {
		return
	}
	s.activeRun = ""
	in.drainLocked(s)
}

// ForgetSession drops a session's state: its queued messages are lost.
func (in *Inbox) ForgetSession(key string) {
	in.mu.Lock()
	defer in.unlock()
	if s := in.sessions[key]; s != nil {
		if s.timer != nil {
			s.timer.Stop()
		}
		if s.noticeTimer != nil {
			s.noticeTimer.Stop()
		}
	}
	delete(in.sessions, key)
}

// steerLocked injects m into the active run and cancels the run's commands
// that have not started.
func (in *Inbox) steerLocked(s *inboxSession, m Message) {
	if in.queue != nil {
		in.queue.CancelRun(s.key, s.activeRun)
	}
	in.pending = append(in.pending, InboxEvent{Type: InboxSteer, Session: s.key, RunID: s.activeRun,
		Messages: []Message{m}, Text: m.Text, Channel: m.Channel, Thread: m.Thread})
}

// queuedLocked reports that m was taken for a turn.
func (in *Inbox) queuedLocked(s *inboxSession, m Message) {
	in.pending = append(in.pending, InboxEvent{Type: InboxQueued, Session: s.key, RunID: s.activeRun,
		Messages: []Message{m}, Channel: m.Channel, Thread: m.Thread})
}

// noticeLocked reports the queued messages that have waited SlowWait or
// more while a run is active and were not reported yet, and arms the notice
// timer for the next one. Without an active run nothing is reported: the
// messages are waiting for the debounce, not for a run.
func (in *Inbox) noticeLocked(s *inboxSession) {
	if s.activeRun == "" {
		in.stopNoticeLocked(s)
		return
	}
	now := in.clock.Now()
	ev := InboxEvent{Type: InboxWaiting, Session: s.key, RunID: s.activeRun}
	var next time.Time
	for _, m := range s.queued {
		if !m.ReceivedAt.After(s.noticedThrough) {
			continue
		}
		if due := m.ReceivedAt.Add(SlowWait); now.Before(due) {
			if next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		ev.Messages = append(ev.Messages, m)
		ev.Waited = max(ev.Waited, now.Sub(m.ReceivedAt))
	}
	for _, m := range ev.Messages {
		if m.ReceivedAt.After(s.noticedThrough) {
			s.noticedThrough = m.ReceivedAt
		}
	}
	if len(ev.Messages) > 0 {
		ev.Channel, ev.Thread = ev.Messages[0].Channel, ev.Messages[0].Thread
		in.pending = append(in.pending, ev)
	}
	if next.IsZero() {
		in.stopNoticeLocked(s)
		return
	}
	if s.noticeTimer != nil && s.noticeAt.Equal(next) {
		return
	}
	in.stopNoticeLocked(s)
	s.noticeAt = next
	key := s.key
	fire := func() {
		in.mu.Lock()
		defer in.unlock()
		if cur := in.sessions[key]; cur == s && s.noticeAt.Equal(next) {
			s.noticeTimer = nil
			in.noticeLocked(s)
		}
	}
	// As in armLocked, the callback runs on a goroutine of its own.
	s.noticeTimer = in.clock.AfterFunc(next.Sub(now), func() { go fire() })
}

func (in *Inbox) stopNoticeLocked(s *inboxSession) {
	if s.noticeTimer != nil {
		s.noticeTimer.Stop()
		s.noticeTimer = nil
	}
	s.noticeAt = time.Time{}
}

// abortLocked ends the active run.
func (in *Inbox) abortLocked(s *inboxSession) {
	if in.queue != nil {
		in.queue.CancelRun(s.key, s.activeRun)
	}
	in.pending = append(in.pending, InboxEvent{Type: InboxAbort, Session: s.key, RunID: s.activeRun})
	s.activeRun = ""
}

// enqueueLocked queues m within the session's cap.
func (in *Inbox) enqueueLocked(s *inboxSession, m Message, opts MessageOptions) (queued, dropped bool) {
	if len(s.queued) >= opts.Cap {
		switch opts.Drop {
		case DropNew:
			in.pending = append(in.pending, InboxEvent{Type: InboxDropped, Session: s.key, Messages: []Message{m}})
			return false, true
		case DropSummarize:
			// Only a short line of it is kept, and only maxLines of them.
			if len(s.dropped) < in.maxLines {
				line := s.queued[0]
				line.Text = summaryLine(line.Text)
				s.dropped = append(s.dropped, line)
				s.bytes += len(line.Text)
			} else {
				s.droppedMore++
			}
		default:
			in.pending = append(in.pending, InboxEvent{Type: InboxDropped, Session: s.key, Messages: []Message{s.queued[0]}})
		}
		s.bytes -= len(s.queued[0].Text)
		s.queued[0] = Message{} // let go of its text
		s.queued = s.queued[1:]
		dropped = true
	}
	s.queued = append(s.queued, m)
	s.bytes += len(m.Text)
	return true, dropped
}

// drainLocked starts the session's next turn if it has no run and its
// messages have been quiet for the debounce, or arms the timer for when they
// will have been.
func (in *Inbox) drainLocked(s *inboxSession) {
	if s.activeRun != "" || (len(s.queued) == 0 && len(s.dropped) == 0 && s.droppedMore == 0) {
		return
	}
	now := in.clock.Now()
	if due := s.quietSince.Add(s.options().Debounce); now.Before(due) {
		in.armLocked(s, due)
		return
	}
	in.deliverLocked(s, now)
}

func (in *Inbox) armLocked(s *inboxSession, at time.Time) {
	if s.timer != nil && s.timerAt.Equal(at) {
		return
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	s.timerAt = at
	key := s.key
	fire := func() {
		in.mu.Lock()
		defer in.unlock()
		if cur := in.sessions[key]; cur == s && s.timerAt.Equal(at) {
			s.timer = nil
			in.drainLocked(s)
		}
	}
	// A fake clock runs the callback while it holds its own lock, so the
	// callback, which reads the clock, runs on a goroutine of its own.
	s.timer = in.clock.AfterFunc(at.Sub(in.clock.Now()), func() { go fire() })
}

// deliverLocked starts one turn: the summary of dropped messages first,
// else, in collect mode, every queued message of the first message's channel
// and thread, else the oldest message.
func (in *Inbox) deliverLocked(s *inboxSession, now time.Time) {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	ev := InboxEvent{Type: InboxTurn, Session: s.key, RunID: in.ids.NewID()}
	switch {
	case len(s.dropped) > 0 || s.droppedMore > 0:
		ev.Messages, s.dropped = s.dropped, nil
		ev.Summary = true
		ev.Text = summarize(ev.Messages, s.droppedMore)
		s.droppedMore = 0
		if len(ev.Messages) == 0 {
			// Restored with a count only: the summary has no line.
			ev.Messages = []Message{{ReceivedAt: now}}
		}
	case s.options().ModeFor(s.queued[0].Channel) == ModeCollect:
		first := s.queued[0]
		var rest []Message
		for _, m := range s.queued {
			if m.Channel == first.Channel && m.Thread == first.Thread {
				ev.Messages = append(ev.Messages, m)
			} else {
				rest = append(rest, m)
			}
		}
		s.queued = rest
	default:
		ev.Messages = []Message{s.queued[0]}
		s.queued = s.queued[1:]
	}
	if !ev.Summary {
		texts := make([]string, len(ev.Messages))
		for i, m := range ev.Messages {
			texts[i] = m.Text
		}
		ev.Text = strings.Join(texts, "\n")
	}
	ev.Channel, ev.Thread = ev.Messages[0].Channel, ev.Messages[0].Thread
	ev.Waited = now.Sub(ev.Messages[0].ReceivedAt)
	ev.Slow = ev.Waited > SlowWait
	s.activeRun = ev.RunID
	s.recount()
	in.pending = append(in.pending, ev)
	in.noticeLocked(s)
}

// recount sets s.bytes from what s holds.
func (s *inboxSession) recount() {
	s.bytes = 0
	for _, m := range s.queued {
		s.bytes += len(m.Text)
	}
	for _, m := range s.dropped {
		s.bytes += len(m.Text)
	}
}

// summaryLine is the line that stands for a dropped message's text in a
// summary: one line, at most SummaryLineLength characters.
func summaryLine(text string) string {
	return truncate.Runes(strings.Join(strings.Fields(text), " "), SummaryLineLength, "…")
}

// summarize lists dropped messages as bullets, each shortened to
// SummaryLineLength characters, and counts the more that were dropped
// without a line.
func summarize(ms []Message, more int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d queued messages were dropped because the queue was full:", len(ms)+more)
	for _, m := range ms {
		b.WriteString("\n- ")
		b.WriteString(summaryLine(m.Text))
	}
	if more > 0 {
		fmt.Fprintf(&b, "\n- … and %d more dropped", more)
	}
	return b.String()
}

// unlock releases the lock and delivers the events made under it, in order.
func (in *Inbox) unlock() {
	evs := in.pending
	in.pending = nil
	in.emitMu.Lock()
	in.mu.Unlock()
	defer in.emitMu.Unlock()
	if in.onEvent == nil {
		return
	}
	for _, ev := range evs {
		in.onEvent(ev)
	}
}
