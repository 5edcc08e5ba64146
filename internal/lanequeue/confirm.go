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

// With Options.ConfirmExternalTimeouts, the timeout of an External attempt
// acts at once (its slots are freed, the command waits for a retry or ends)
// but is counted only when its runner's record of it stands. The runner
// may have finished the attempt just before, and the durable record (an
// ExternalTask's status, fenced on its version) keeps whichever write came
// first: ConfirmTimeout counts the timeout when the record of it won,
// Settle counts the result instead when the runner's result won.

// unconfirmedTimeout is what an External attempt's timeout will count once
// confirmed.
type unconfirmedTimeout struct {
	t       *Ticket
	attempt int32
	// retried: the command waits for a retry; final: the state it ended in
	// (stQueued while it goes on); dead: its dead letter.
	retried bool
	final   state
	dead    *DeadLetter
	// err is the timeout's error, which names the budget that ran out.
	err error
}

// holdTimeoutLocked starts holding the count of attempt a's timeout, or
// returns nil when it counts at once. An earlier attempt's timeout still
// held is counted first: the command went on after it.
func (q *Queue) holdTimeoutLocked(t *Ticket, a *attemptCtx, kind endKind) *unconfirmedTimeout {
	if u := q.unconfirmed[t.id]; u != nil && u.attempt < a.number {
		q.countTimeoutLocked(u)
	}
	if kind != endTimeout || a.mode != External || q.unconfirmed == nil {
		return nil
	}
	u := &unconfirmedTimeout{t: t, attempt: a.number, final: stQueued}
	q.unconfirmed[t.id] = u
	return u
}

// ConfirmTimeout counts the timeout of the given attempt of command id,
// whose runner's record stood: the timed-out attempt, and the retry or the
// command's end it caused. It does nothing unless that timeout waits to be
// counted.
func (q *Queue) ConfirmTimeout(id string, attempt int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if u := q.unconfirmed[id]; u != nil && int(u.attempt) == attempt {
		q.countTimeoutLocked(u)
	}
}

// countTimeoutLocked counts what u held back.
func (q *Queue) countTimeoutLocked(u *unconfirmedTimeout) {
	delete(q.unconfirmed, u.t.id)
	ln := u.t.ls.lane
	ln.m.attemptsFinished[AttemptTimedOut].Inc()
	ln.counts.timeouts++
	if u.retried {
		ln.counts.retried++
		ln.m.retries.Inc()
	}
	if u.dead != nil {
		q.dlq.add(*u.dead)
	}
	if u.final != stQueued {
		q.countTerminalLocked(u.t, u.final)
	}
}

// settleUnconfirmedLocked drops the count u held back: the runner's result
// r won over the record of the timeout. The timed-out attempt is counted
// as what r says. A command the timeout ended is ended again as r says;
// it returns false for a command the timeout did not end, which the caller
// ends.
func (q *Queue) settleUnconfirmedLocked(u *unconfirmedTimeout, r Result, err error, now int64) bool {
	delete(q.unconfirmed, u.t.id)
	t := u.t
	kind, st := endSuccess, stSucceeded
	if !r.Success {
		kind, st = endFailure, stFailed
	}
	if t.state == stRunning {
		// The next attempt runs; ending it counts an attempt already.
		return false
	}
	t.ls.lane.m.attemptsFinished[kind.outcome()].Inc()
	if u.final == stQueued {
		return false
	}
	t.state = st
	t.fin = nil
	if err != nil || !r.Success || r.Output != nil || r.Error != "" || r.ExitCode != 0 {
		t.fin = &finish{result: r, err: err}
	}
	q.countTerminalLocked(t, st)
	if st == stSucceeded {
		q.cmdEventLocked(EventCompleted, t, now, nil).setTerminal()
	} else {
		q.cmdEventLocked(EventFailed, t, now, err).setTerminal()
	}
	return true
}
