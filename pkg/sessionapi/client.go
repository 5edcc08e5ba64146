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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

const (
	// pollWait is the wait of each long poll made by Await, AwaitFinal and
	// Run.
	pollWait = 30 * time.Second
	// tokenFileTTL is how long a token read from a file is used before the
	// file is read again. The kubelet rotates projected service-account
	// tokens well before they expire, so a minute-old token is still valid.
	tokenFileTTL = time.Minute
	// maxErrorBody bounds how much of an error reply is read.
	maxErrorBody = 64 << 10
	// Bounds of the backoff between reconnects of an event stream, and
	// between polls of a command whose grant the server reports at once.
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
	// streamIdle is how long an event stream may stay silent before it is
	// taken for dead: the server sends a keepalive every 15s.
	streamIdle = 45 * time.Second
	// DefaultNotLeaderRetries is how many times a call answered NotLeader
	// (a standby replica, during a leader failover) is sent again.
	DefaultNotLeaderRetries = 5
	// maxNotLeaderWait bounds the wait before each of those retries,
	// whatever Retry-After asks.
	maxNotLeaderWait = 10 * time.Second
)

// Client talks to one Session API server. It is safe for concurrent use.
type Client struct {
	// base is scheme://host[:port][/path], escaped, without a trailing slash.
	base  string
	hc    *http.Client
	token func() (string, error) // nil: no Authorization header
	// ca, when set, are the only CAs the client trusts (WithCA); caErr is
	// why WithCAFile could not read them.
	ca    []byte
	caErr error
	// The durations below are the package constants; tests shorten them.
	minBackoff time.Duration
	maxBackoff time.Duration
	streamIdle time.Duration
	// notLeaderRetries is how many times a NotLeader answer is retried.
	notLeaderRetries int
	maxNotLeaderWait time.Duration
}

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithToken sends token as the bearer token of every request.
func WithToken(token string) ClientOption {
	return func(c *Client) {
		c.token = func() (string, error) { return token, nil }
	}
}

// WithTokenFile sends the token held in the file at path, such as a
// projected service-account token. The file is read again at most once a
// minute, so a rotated token is picked up; if a read fails, the last token
// read is kept.
func WithTokenFile(path string) ClientOption {
	return func(c *Client) {
		c.token = (&tokenFile{path: path, now: clock.RealClock{}.Now}).get
	}
}

// WithHTTPClient makes the client use hc instead of http.DefaultClient.
// hc.Timeout bounds whole requests, long polls and event streams included:
// leave it 0 and bound calls with their context.
func WithHTTPClient(hc *http.Client) ClientOption {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithNotLeaderRetries sets how many times a call answered 503 NotLeader is
// sent again, after the reply's Retry-After (1s when absent, at most 10s);
// 0 turns retrying off. A standby refuses a call before reading it, so
// sending a write again cannot apply it twice. The default is
// DefaultNotLeaderRetries.
func WithNotLeaderRetries(n int) ClientOption {
	return func(c *Client) {
		c.notLeaderRetries = max(n, 0)
	}
}

// NewClient returns a client of the Session API server at baseURL, such as
// https://agentlane-session-api.agentlane-system.svc:8443. A path in baseURL
// prefixes every route.
func NewClient(baseURL string, opts ...ClientOption) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("sessionapi: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("sessionapi: base URL %q: want http(s)://host[:port][/path]", baseURL)
	}
	c := &Client{
		base:       u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/"),
		hc:         http.DefaultClient,
		minBackoff: minBackoff,
		maxBackoff: maxBackoff,
		streamIdle: streamIdle,

		notLeaderRetries: DefaultNotLeaderRetries,
		maxNotLeaderWait: maxNotLeaderWait,
	}
	for _, opt := range opts {
		opt(c)
	}
	if err := c.useCA(); err != nil {
		return nil, err
	}
	return c, nil
}

// Session returns a client of the routes of one session.
func (c *Client) Session(namespace, name string) *SessionClient {
	return &SessionClient{
		c:      c,
		prefix: "/" + Version + "/namespaces/" + url.PathEscape(namespace) + "/sessions/" + url.PathEscape(name),
	}
}

// newRequest builds a request for path (already escaped) with in, if not
// nil, as its JSON body.
func (c *Client) newRequest(ctx context.Context, method, path string, query url.Values, in any) (*http.Request, error) {
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("sessionapi: %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, fmt.Errorf("sessionapi: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != nil {
		token, err := c.token()
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req, nil
}

// send makes the request; a non-2xx reply is returned as an *Error, with its
// body closed.
func (c *Client) send(req *http.Request) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer drainClose(resp.Body)
		return nil, decodeError(resp)
	}
	return resp, nil
}

// decodeError turns a non-2xx reply into an *Error. A body that is not an
// Error (a proxy's page, a plain-text panic) becomes the message of an
// Internal error.
func decodeError(resp *http.Response) *Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var e Error
	if json.Unmarshal(body, &e) == nil && e.Code != "" {
		e.Status = resp.StatusCode
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
		return &e
	}
	msg := strings.TrimSpace(string(body))
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &Error{Status: resp.StatusCode, Code: CodeInternal, Message: msg}
}

// drainClose reads a little of what is left of body, so the connection can
// be reused, and closes it.
func drainClose(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 4<<10))
	_ = body.Close()
}

// tokenFile caches the token held in a file.
type tokenFile struct {
	path string
	now  func() time.Time

	mu     sync.Mutex
	token  string
	readAt time.Time
}

func (f *tokenFile) get() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if f.token != "" && now.Sub(f.readAt) < tokenFileTTL {
		return f.token, nil
	}
	b, err := os.ReadFile(f.path)
	token := strings.TrimSpace(string(b))
	if err == nil && token == "" {
		err = errors.New("the file is empty")
	}
	if err != nil {
		if f.token != "" {
			f.readAt = now // try again in a minute, not on every request
			return f.token, nil
		}
		return "", fmt.Errorf("sessionapi: reading the token file %s: %w", f.path, err)
	}
	f.token, f.readAt = token, now
	return token, nil
}

// SessionClient calls the routes of one session. It is safe for concurrent
// use.
type SessionClient struct {
	c *Client
	// prefix is the escaped path of the session's routes.
	prefix string
}

// do calls the route at path (escaped, under the session's prefix) and
// decodes a 2xx reply into out, if not nil. A NotLeader answer is retried
// as WithNotLeaderRetries says.
func (s *SessionClient) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var resp *http.Response
	for retries := s.c.notLeaderRetries; ; retries-- {
		req, err := s.c.newRequest(ctx, method, s.prefix+path, query, in)
		if err != nil {
			return err
		}
		resp, err = s.c.send(req) //nolint:bodyclose // closed by the deferred drainClose after the loop
		var apiErr *Error
		if err == nil || retries == 0 || !errors.As(err, &apiErr) || apiErr.Code != CodeNotLeader {
			if err != nil {
				return err
			}
			break
		}
		wait := apiErr.RetryAfter
		if wait <= 0 {
			wait = time.Second
		}
		if err := sleep(ctx, min(wait, s.c.maxNotLeaderWait)); err != nil {
			return apiErr
		}
	}
	defer drainClose(resp.Body)
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("sessionapi: %s %s: decoding the reply: %w", method, path, err)
	}
	return nil
}

// Submit submits a command. It returns once an Internal or Hybrid command
// holds a grant, an External command is final, or req.Wait ran out (the
// server's 202); the returned Command tells which.
//
// When ctx ends while the server holds the call, the request is abandoned
// and the server sees its client disconnect: a command no attempt of which
// was granted yet is cancelled (it ends Cancelled and frees its place in
// the session's pending bound); one already granted, or an External one
// already dispatched, goes on under its lane's rules (an Internal grant
// nobody reports times out and is retried as the lane's policy says).
// Submit does not cancel anything itself: a command it returned keeps
// running whatever ctx does later; Cancel ends it.
func (s *SessionClient) Submit(ctx context.Context, req SubmitRequest) (*Command, error) {
	if req.ParentID == "" {
		req.ParentID = ParentFrom(ctx)
	}
	var cmd Command
	if err := s.do(ctx, http.MethodPost, "/commands", nil, req, &cmd); err != nil {
		return nil, err
	}
	return &cmd, nil
}

// Get reads a command. With wait > 0 the server holds the call until the
// command holds a grant or is final, or wait runs out.
func (s *SessionClient) Get(ctx context.Context, id string, wait time.Duration) (*Command, error) {
	var query url.Values
	if wait > 0 {
		query = url.Values{"wait": {wait.String()}}
	}
	var cmd Command
	if err := s.do(ctx, http.MethodGet, "/commands/"+url.PathEscape(id), query, nil, &cmd); err != nil {
		return nil, err
	}
	return &cmd, nil
}

// Report reports the result of the attempt r.Attempt of an Internal or
// Hybrid command and returns the command after the scheduler took it. A
// report for an attempt that lost its slot fails with StaleAttempt or
// NotRunning.
func (s *SessionClient) Report(ctx context.Context, id string, r ReportRequest) (*Command, error) {
	var cmd Command
	if err := s.do(ctx, http.MethodPost, "/commands/"+url.PathEscape(id)+"/result", nil, r, &cmd); err != nil {
		return nil, err
	}
	return &cmd, nil
}

// Await waits until the command holds a grant or is final.
func (s *SessionClient) Await(ctx context.Context, id string) (*Command, error) {
	return s.poll(ctx, id, func(cmd *Command) bool { return cmd.Grant != nil || cmd.Final() })
}

// AwaitFinal waits until the command is final. While an attempt holds a
// grant the server answers polls at once, so they are then spaced by a
// backoff of up to 5s.
func (s *SessionClient) AwaitFinal(ctx context.Context, id string) (*Command, error) {
	return s.poll(ctx, id, (*Command).Final)
}

// poll repeats long polls of the command until done says it is.
func (s *SessionClient) poll(ctx context.Context, id string, done func(*Command) bool) (*Command, error) {
	var backoff time.Duration
	for {
		cmd, err := s.Get(ctx, id, pollWait)
		if err != nil {
			return nil, err
		}
		if done(cmd) {
			return cmd, nil
		}
		if cmd.Grant == nil {
			backoff = 0
			continue
		}
		// The server does not wait while the command holds a grant: do not
		// spin until the grant ends.
		backoff = s.c.nextBackoff(backoff)
		if err := sleep(ctx, backoff); err != nil {
			return nil, err
		}
	}
}

// Run submits req and carries the command to its end. Whenever the command
// holds a grant of an attempt not seen before (Internal and Hybrid commands,
// once per retry), Run calls fn with a context that ends at the grant's
// deadline and reports fn's Result for that attempt. A StaleAttempt or
// NotRunning reply to the report means the attempt was taken away (it timed
// out or was cancelled): Run goes on waiting. An External command is just
// awaited. Run returns the final Command; on an error it returns the last
// Command seen, if any, so that the caller knows its ID.
//
// When ctx ends before the command is final, Run cancels the command on
// the server (POST /cancel, bounded by 5s of its own) and returns ctx's
// error: a queued command ends Cancelled, a running attempt is cancelled
// (fn's context ends with ctx in any case). If ctx ends while the submission
// itself is held, the server cancels the command if no attempt of it was
// granted yet (see Submit), and Run also cancels it by req.ID when one was
// set, in case it was granted in between.
func (s *SessionClient) Run(ctx context.Context, req SubmitRequest, fn func(ctx context.Context, cmd *Command) Result) (*Command, error) {
	return s.RunWithUsage(ctx, req, func(ctx context.Context, cmd *Command) (Result, *Usage) { return fn(ctx, cmd), nil })
}

// RunWithUsage is Run for commands that consume budget, such as LLM calls:
// fn also returns what the attempt consumed, if known, and it is reported
// with the attempt's result (ReportRequest.Usage).
func (s *SessionClient) RunWithUsage(ctx context.Context, req SubmitRequest, fn func(ctx context.Context, cmd *Command) (Result, *Usage)) (out *Command, err error) {
	cmd, err := s.Submit(ctx, req)
	if err != nil {
		if ctx.Err() != nil && req.ID != "" {
			s.abandon(ctx, req.ID) // granted just before the call was abandoned
		}
		return nil, err
	}
	defer func() {
		if err != nil && ctx.Err() != nil && (out == nil || !out.Final()) {
			s.abandon(ctx, cmd.ID)
		}
	}()
	handled := 0 // the last attempt passed to fn; attempts count from 1
	for {
		if cmd.Final() {
			return cmd, nil
		}
		if cmd.Grant != nil && cmd.Grant.Attempt > handled {
			grant := *cmd.Grant
			handled = grant.Attempt
			attemptCtx, cancel := context.WithDeadline(WithParent(ctx, cmd.ID), grant.Deadline)
			res, usage := fn(attemptCtx, cmd)
			cancel()
			next, err := s.Report(ctx, cmd.ID, ReportRequest{Attempt: grant.Attempt, Result: res, Usage: usage})
			switch {
			case err == nil:
				cmd = next
				continue
			case IsCode(err, CodeStaleAttempt), IsCode(err, CodeNotRunning):
				// The attempt lost its slot; a retry brings a new grant.
			default:
				return cmd, err
			}
		}
		next, err := s.poll(ctx, cmd.ID, func(c *Command) bool {
			return c.Final() || (c.Grant != nil && c.Grant.Attempt > handled)
		})
		if err != nil {
			return cmd, err
		}
		cmd = next
	}
}

// abandonTimeout bounds the cancellation Run sends for a command its
// caller gave up on.
const abandonTimeout = 5 * time.Second

// abandon cancels the command id, which Run's caller gave up on (ctx
// ended) before it was final: POST /cancel with a context of its own, since
// ctx is done. Whatever the answer (the command may have ended meanwhile),
// Run returns ctx's error.
func (s *SessionClient) abandon(ctx context.Context, id string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	defer cancel()
	_, _ = s.Cancel(cctx, CancelRequest{CommandID: id})
}

// Post posts an inbound message to the session.
func (s *SessionClient) Post(ctx context.Context, m Message) (*PostResult, error) {
	var res PostResult
	if err := s.do(ctx, http.MethodPost, "/messages", nil, m, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// FinishRun tells the session that the run ended, so its next turn may
// start.
func (s *SessionClient) FinishRun(ctx context.Context, runID string) error {
	return s.do(ctx, http.MethodPost, "/runs/"+url.PathEscape(runID)+"/finish", nil, nil, nil)
}

// Cancel cancels what req names and returns how many commands were
// cancelled.
func (s *SessionClient) Cancel(ctx context.Context, req CancelRequest) (int, error) {
	var res CancelResult
	if err := s.do(ctx, http.MethodPost, "/cancel", nil, req, &res); err != nil {
		return 0, err
	}
	return res.Cancelled, nil
}

// Stats returns the session's counts and its queue's lanes.
func (s *SessionClient) Stats(ctx context.Context) (*Stats, error) {
	var st Stats
	if err := s.do(ctx, http.MethodGet, "/stats", nil, nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// PendingExternal returns the session's External attempts waiting for a
// result, oldest grant first.
func (s *SessionClient) PendingExternal(ctx context.Context) ([]ExternalTask, error) {
	var list ExternalTaskList
	if err := s.do(ctx, http.MethodGet, "/external", nil, nil, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// DeadLetters returns the session's commands that failed for good, oldest
// first.
func (s *SessionClient) DeadLetters(ctx context.Context) ([]DeadLetter, error) {
	var list DeadLetterList
	if err := s.do(ctx, http.MethodGet, "/deadletters", nil, nil, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// nextBackoff doubles b within the client's bounds.
func (c *Client) nextBackoff(b time.Duration) time.Duration {
	if b < c.minBackoff {
		return c.minBackoff
	}
	return min(2*b, c.maxBackoff)
}

// sleep waits for d or the end of ctx.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
