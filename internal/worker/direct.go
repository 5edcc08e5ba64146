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

package worker

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/oklog/ulid/v2"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/workerproto"
)

// The worker's side of the Direct stream (workerproto/direct.go): a
// DirectClient holds one HTTP/2 request to the leading manager's Session
// API and runs the attempts the manager hands it over that request, through
// the same Registry (sandbox or runner) as the pool worker's attempts, and
// answers each with exactly one Result. Nothing of it writes to the API
// server.
//
// A stream is lost when a side stops hearing the other (DirectDeadAfter),
// when the connection fails, or when the manager ends it (another leader,
// or the manager stopping). Every attempt received over a lost stream is
// stopped at once and its result dropped: no other stream may deliver it,
// and another manager may already run the attempt again. The client waits
// for those runs to end before it connects again, so that the worker never
// runs more than its capacity however often it reconnects.

// Outcome of a Direct attempt stopped by a Cancel frame or at shutdown:
// the value of the outcome label of direct_tasks_finished_total.
const outcomeCancelled = "cancelled"

// Reasons a Direct task is answered without being run: the values of the
// reason label of direct_tasks_refused_total.
const (
	refusedCapacity  = "capacity"
	refusedDuplicate = "duplicate"
	refusedNamespace = "namespace"
	refusedNotServed = "not_served"
	refusedDraining  = "draining"
	refusedInvalid   = "invalid"
)

// Reconnection delays of the Direct stream.
var (
	// directBackoff spaces the attempts to connect after a failure or a
	// lost stream: 100ms doubling up to 5s, jittered so that the workers
	// of a failed-over manager do not all come back at once. A stream that
	// was welcomed starts the sequence again.
	directBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: 5 * time.Second}
	// directRefusedRetry is how long a worker the manager refused (401,
	// 403, 400: a token, a binding or a setting to fix) waits before it
	// tries again.
	directRefusedRetry = 30 * time.Second
)

var (
	// errStreamLost stops the runs of a lost stream: their results can no
	// longer be delivered.
	errStreamLost = errors.New("the Direct stream was lost")
	// errStreamClosed ends a stream the worker closed after its drain.
	errStreamClosed = errors.New("the Direct stream was closed")
)

// DirectOptions configure a DirectClient. Name, NodeName, Namespace,
// Queues, Lanes, Labels and GracePeriod are the pool worker's (Options).
type DirectOptions struct {
	// Server is the https URL of the Session API; the stream is POSTed to
	// its path followed by workerproto.DirectPath.
	Server string
	// CAFile is the CA bundle (PEM) the server's certificate is verified
	// with; empty means the system's roots. It is read again at each
	// connection, so a rotated CA is picked up.
	CAFile string
	// TokenFile holds the bearer token, a projected service-account token
	// for audience agentlane; read again at each connection, and every
	// TokenCheckInterval while a stream is open: a rotated token is sent
	// on the stream (a Token frame), which then outlives the token it
	// connected with. The tasks never see it: they run in the Registry's
	// sandbox or runner.
	TokenFile string
	// TokenCheckInterval is how often an open stream reads TokenFile for a
	// rotated token; workerproto.DirectTokenCheckInterval when zero. The
	// manager ends a stream that sends tokens more often than
	// workerproto.DirectMinTokenInterval, so a shorter interval only
	// helps a test.
	TokenCheckInterval time.Duration

	Name        string
	NodeName    string
	Namespace   string
	Queues      []string
	Lanes       []string
	Labels      map[string]string
	GracePeriod time.Duration
	// Incarnation names this process of the worker in the Hello; empty
	// means a new ULID. A worker that also runs the pool gives its
	// Worker's Incarnation.
	Incarnation string
	// Capacity is how many Direct attempts the worker runs at once, 1 to
	// workerproto.MaxDirectCapacity.
	Capacity int
	// Registry runs the attempts; nil means executor.NewSandboxedRegistry
	// with the default output limit and task root.
	Registry *executor.Registry
	// Log is the client's logger; the zero value means
	// ctrl.Log.WithName("worker").
	Log logr.Logger
}

// Validate reports every setting the client cannot run with, each as an
// *OptionError.
func (o *DirectOptions) Validate() error {
	var errs optionErrors
	if o.Server == "" {
		errs.add("direct-server", "Direct server", "is required")
	} else if u, err := url.Parse(o.Server); err != nil {
		errs.add("direct-server", "Direct server", "%q is not a URL: %v", o.Server, err)
	} else if u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		errs.add("direct-server", "Direct server", "%q must be https://host[:port][/path], the Session API's URL", o.Server)
	}
	if o.TokenFile == "" {
		errs.add("direct-token-file", "Direct token file", "is required: the stream authenticates with a projected token for audience agentlane")
	}
	if o.Capacity < 1 || o.Capacity > workerproto.MaxDirectCapacity {
		errs.add("direct-capacity", "Direct capacity", "must be 1 to %d, got %d", workerproto.MaxDirectCapacity, o.Capacity)
	}
	if o.Name == "" {
		errs.add("name", "name", "is required")
	}
	if o.Namespace == "" {
		errs.add("namespace", "namespace", "is required")
	}
	if o.GracePeriod < 0 {
		errs.add("grace-period", "grace period", "must not be negative, got %s", o.GracePeriod)
	}
	if o.TokenCheckInterval < 0 {
		errs.add("direct-token-check-interval", "Direct token check interval", "must not be negative, got %s", o.TokenCheckInterval)
	}
	if o.Incarnation != "" && !workerproto.ValidIncarnation(o.Incarnation) {
		errs.add("incarnation", "incarnation", "%q is not a valid incarnation", o.Incarnation)
	}
	return errs.join()
}

// DirectClient is a worker's side of the Direct stream. It runs once.
type DirectClient struct {
	opts DirectOptions
	log  logr.Logger
	// endpoint is the URL the stream is POSTed to.
	endpoint string

	// The stream's timing, workerproto's values outside tests.
	pingInterval, deadAfter time.Duration
	backoff                 wait.Backoff
	refusedRetry            time.Duration

	// The transport of the last connection and the CA bundle it trusts;
	// only Run's goroutine uses them.
	transport *http.Transport
	caPEM     []byte
}

// NewDirectClient checks opts and returns a client of the Direct stream
// they describe.
func NewDirectClient(opts DirectOptions) (*DirectClient, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Registry == nil {
		opts.Registry = executor.NewSandboxedRegistry(executor.DefaultMaxOutputBytes, executor.Sandbox{})
	}
	if opts.Incarnation == "" {
		opts.Incarnation = ulid.Make().String()
	}
	if opts.Log.GetSink() == nil {
		opts.Log = ctrl.Log.WithName("worker")
	}
	return &DirectClient{
		opts:         opts,
		log:          opts.Log.WithValues("worker", opts.Name, "incarnation", opts.Incarnation, "direct", opts.Server),
		endpoint:     strings.TrimRight(opts.Server, "/") + workerproto.DirectPath,
		pingInterval: workerproto.DirectPingInterval,
		deadAfter:    workerproto.DirectDeadAfter,
		backoff:      directBackoff,
		refusedRetry: directRefusedRetry,
	}, nil
}

// RunDirect runs a DirectClient made of opts until ctx ends.
func RunDirect(ctx context.Context, opts DirectOptions) error {
	c, err := NewDirectClient(opts)
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

// Run holds the Direct stream until ctx ends, connecting again with
// backoff whenever it is refused or lost. When ctx ends on an open stream
// it drains: it sends Drain, lets the running attempts finish within the
// grace period, stops the rest (their Results marked Cancelled), and closes
// the stream. It returns nil once stopped.
func (c *DirectClient) Run(ctx context.Context) error {
	defer directConnected.Set(0)
	backoff := c.backoff
	for {
		welcomed, err := c.stream(ctx)
		if ctx.Err() != nil {
			c.log.Info("Direct stream stopped")
			return nil
		}
		if welcomed {
			backoff = c.backoff
		}
		delay := backoff.Step()
		var refused *DirectRefusedError
		switch {
		case errors.As(err, &refused) && refused.Permanent():
			delay = c.refusedRetry
			c.log.Error(err, "The manager refused the Direct stream; check the worker's token, its RBAC in its namespace and its settings",
				"retryIn", delay)
		case welcomed:
			c.log.Info("Direct stream lost; connecting again", "reason", err.Error(), "retryIn", delay)
		default:
			c.log.Info("Could not open the Direct stream; trying again", "reason", err.Error(), "retryIn", delay)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			c.log.Info("Direct stream stopped")
			return nil
		case <-t.C:
		}
	}
}

// DirectRefusedError is the manager's answer to a Direct stream it did not
// accept.
type DirectRefusedError struct {
	// Status is the HTTP status, Code and Message the Session API error
	// body's (empty when the body was not one).
	Status  int
	Code    string
	Message string
}

func (e *DirectRefusedError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("refused with HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("refused with HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// Permanent tells whether the refusal will not go away by itself: a token,
// an identity or a Hello the manager does not accept. A 503 (NotLeader, or
// a manager starting) and other statuses are retried with backoff.
func (e *DirectRefusedError) Permanent() bool {
	return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden || e.Status == http.StatusBadRequest
}

// httpClient returns the client of one connection: HTTP/2 over TLS,
// verified with the CA bundle as the file holds it now. The transport is
// kept while the bundle is unchanged.
func (c *DirectClient) httpClient() (*http.Client, error) {
	var pem []byte
	if c.opts.CAFile != "" {
		b, err := os.ReadFile(c.opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read the CA file: %w", err)
		}
		pem = b
	}
	if c.transport == nil || !bytes.Equal(pem, c.caPEM) {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if pem != nil {
			roots := x509.NewCertPool()
			if !roots.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("the CA file %s holds no PEM certificate", c.opts.CAFile)
			}
			cfg.RootCAs = roots
		}
		if c.transport != nil {
			c.transport.CloseIdleConnections()
		}
		tr := &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			TLSClientConfig:     cfg,
			TLSHandshakeTimeout: 10 * time.Second,
			ForceAttemptHTTP2:   true,
			Protocols:           new(http.Protocols),
			// The connection is checked below the stream too: a
			// connection silent this long is pinged, and closed when the
			// ping is not answered.
			HTTP2: &http.HTTP2Config{SendPingTimeout: c.deadAfter, PingTimeout: c.deadAfter},
		}
		tr.Protocols.SetHTTP2(true)
		c.transport, c.caPEM = tr, pem
	}
	return &http.Client{
		Transport: c.transport,
		// The token goes to the Session API only: a redirect is a refusal.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// token reads the bearer token from its file.
func (c *DirectClient) token() (string, error) {
	return readToken(c.opts.TokenFile)
}

// readToken reads a bearer token from file: at most
// workerproto.MaxDirectTokenBytes, the most the manager takes in a Token
// frame (a projected token is about 1 KiB).
func readToken(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("read the token file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, workerproto.MaxDirectTokenBytes+1))
	if err != nil {
		return "", fmt.Errorf("read the token file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	switch {
	case token == "":
		return "", fmt.Errorf("the token file %s is empty", file)
	case len(token) > workerproto.MaxDirectTokenBytes:
		return "", fmt.Errorf("the token file %s holds more than %d bytes", file, workerproto.MaxDirectTokenBytes)
	}
	return token, nil
}

// tokenWatch tells when the token file holds another token than the one
// the stream sent last: the kubelet rotated it.
type tokenWatch struct {
	file string
	// sent is the token the manager has: the stream's, then the last one
	// sent in a Token frame.
	sent string
}

// changed reads the file and returns its token if it is not the one sent;
// "" when it is, or when the file cannot be read (the kubelet swaps it
// whole; the next check reads it again). A token it returns counts as
// sent.
func (w *tokenWatch) changed() (string, error) {
	token, err := readToken(w.file)
	if err != nil || token == w.sent {
		return "", err
	}
	w.sent = token
	return token, nil
}

// hello is the worker's first frame.
func (c *DirectClient) hello() *workerproto.DirectHello {
	labels := maps.Clone(c.opts.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	// As on the worker's Lease, so that a lane's workerSelector matches
	// the worker alike on either path.
	labels[workerproto.WorkerLabel] = "true"
	if c.opts.NodeName != "" {
		labels[workerproto.NodeLabel] = c.opts.NodeName
	}
	return &workerproto.DirectHello{
		Worker:       c.opts.Name,
		Node:         c.opts.NodeName,
		Namespace:    c.opts.Namespace,
		Incarnation:  c.opts.Incarnation,
		Capacity:     c.opts.Capacity,
		Queues:       c.opts.Queues,
		Lanes:        c.opts.Lanes,
		CommandTypes: c.opts.Registry.CommandTypes(),
		Labels:       labels,
	}
}

// stream opens one Direct stream and serves it until it is lost, or until
// ctx ends and it has drained. It tells whether the manager welcomed it,
// and why it ended. It returns only once every run of the stream ended.
func (c *DirectClient) stream(ctx context.Context) (welcomed bool, err error) {
	hc, err := c.httpClient()
	if err != nil {
		return false, err
	}
	token, err := c.token()
	if err != nil {
		return false, err
	}
	hello, err := encodeFrame(workerproto.WorkerFrame{Hello: c.hello()})
	if err != nil {
		return false, err
	}
	// The stream outlives ctx while it drains; before the Welcome, ctx's
	// end, or a manager that takes more than twice deadAfter to answer,
	// aborts it.
	streamCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(errStreamClosed)
	s := newDirectStream(c, cancel)
	s.tokens = &tokenWatch{file: c.opts.TokenFile, sent: token}
	s.out <- hello
	go s.write()
	defer s.wait()
	var open atomic.Bool
	stopConnecting := context.AfterFunc(ctx, func() {
		if !open.Load() {
			s.lose(context.Cause(ctx))
		}
	})
	defer stopConnecting()
	connectTimeout := time.AfterFunc(2*c.deadAfter, func() {
		if !open.Load() {
			s.lose(fmt.Errorf("%w: no Welcome within %s", errStreamLost, 2*c.deadAfter))
		}
	})
	defer connectTimeout.Stop()

	req, err := http.NewRequestWithContext(streamCtx, http.MethodPost, c.endpoint, s.body)
	if err != nil {
		s.lose(err)
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", workerproto.DirectContentType)
	req.Header.Set("Accept", workerproto.DirectContentType)
	resp, err := hc.Do(req)
	if err != nil {
		s.lose(err)
		c.transport.CloseIdleConnections()
		if cause := context.Cause(streamCtx); cause != nil && !errors.Is(err, cause) {
			return false, fmt.Errorf("connect: %w (%w)", cause, err)
		}
		return false, fmt.Errorf("connect: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := refusal(resp)
		s.lose(err)
		return false, err
	}
	if resp.ProtoMajor != 2 {
		err := fmt.Errorf("the server answered over %s; the Direct stream needs HTTP/2", resp.Proto)
		s.lose(err)
		return false, err
	}
	frames := make(chan managerFrame)
	go s.read(resp.Body, frames)

	err = s.serve(ctx, frames, &open)
	if errors.Is(err, errStreamLost) || errors.Is(err, errStreamClosed) {
		err = context.Cause(streamCtx)
	}
	c.transport.CloseIdleConnections()
	return open.Load(), err
}

// refusal reads the manager's error reply.
func refusal(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &DirectRefusedError{Status: resp.StatusCode}
	var apiErr struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &apiErr) == nil && apiErr.Code != "" {
		e.Code, e.Message = apiErr.Code, apiErr.Message
	} else {
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 512 {
			e.Message = e.Message[:512]
		}
	}
	return e
}

// managerFrame is one frame read from the manager, or why reading ended.
type managerFrame struct {
	frame workerproto.ManagerFrame
	err   error
}

// directKey names one attempt of the stream.
type directKey struct {
	id      string
	attempt int
}

// directRun is one attempt the stream runs.
type directRun struct {
	// cancel stops the run with a cause: a *cancelledError, errStreamLost
	// or errShuttingDown.
	cancel context.CancelCauseFunc
}

// cancelledError is the cause of a run the manager cancelled.
type cancelledError struct{ reason string }

func (e *cancelledError) Error() string {
	if e.reason == "" {
		return "cancelled by the manager"
	}
	return "cancelled by the manager: " + e.reason
}

// directStream is one Direct stream: the request body the worker writes
// and the runs of the attempts it received.
type directStream struct {
	c   *DirectClient
	log logr.Logger
	// body is the request body; pw its writing end.
	body *io.PipeReader
	pw   *io.PipeWriter
	// out holds the encoded frames the writer sends, in order; a nil
	// frame closes the request body.
	out chan []byte
	// lost is closed once the stream is lost or closed; cancelRequest
	// ends its request.
	lost          chan struct{}
	loseOnce      sync.Once
	cancelRequest context.CancelCauseFunc
	// writerDone is closed when the writer returns.
	writerDone chan struct{}

	// runsWG counts the run goroutines.
	runsWG sync.WaitGroup
	// runEnded is signalled (without blocking) whenever a run ends.
	runEnded chan struct{}

	// serving is set while the stream serves the manager's frames: from
	// the Welcome until it closes. The reader then acts on Task and Cancel
	// frames itself, so that a run starts without waiting for another
	// goroutine; heard is when it read the last frame (Unix nanos), which
	// serve's dead timer checks.
	serving atomic.Bool
	heard   atomic.Int64

	mu sync.Mutex
	// runs are the attempts running, len(runs) <= Capacity. A run leaves
	// it before its Result is queued: the manager may hand the slot over
	// again as soon as it has the Result.
	runs map[directKey]*directRun
	// sending counts the Results of ended runs not yet queued; the stream
	// is closed only once it is 0.
	sending int
	// draining is set once the worker sent Drain.
	draining bool

	// tokens watches the token file for a rotated token, which serve
	// sends in a Token frame.
	tokens *tokenWatch
}

func newDirectStream(c *DirectClient, cancelRequest context.CancelCauseFunc) *directStream {
	pr, pw := io.Pipe()
	return &directStream{
		c:             c,
		log:           c.log,
		body:          pr,
		pw:            pw,
		out:           make(chan []byte, c.opts.Capacity+16),
		lost:          make(chan struct{}),
		cancelRequest: cancelRequest,
		writerDone:    make(chan struct{}),
		runEnded:      make(chan struct{}, 1),
		runs:          map[directKey]*directRun{},
	}
}

// lose ends the stream for cause: the request is cancelled and every run
// of the stream stopped, its result dropped.
func (s *directStream) lose(cause error) {
	s.loseOnce.Do(func() {
		if cause == nil {
			cause = errStreamLost
		}
		s.cancelRequest(cause)
		close(s.lost)
		_ = s.pw.CloseWithError(cause)
		s.mu.Lock()
		for _, r := range s.runs {
			r.cancel(errStreamLost)
		}
		s.mu.Unlock()
	})
}

// wait returns once the stream's goroutines that hold slots ended.
func (s *directStream) wait() {
	s.lose(errStreamClosed)
	s.runsWG.Wait()
	<-s.writerDone
}

// send queues an encoded frame for the writer; false when the stream is
// lost.
func (s *directStream) send(frame []byte) bool {
	select {
	case <-s.lost:
		return false
	default:
	}
	select {
	case s.out <- frame:
		return true
	case <-s.lost:
		return false
	}
}

// maxWriteBatch bounds the frames the writer sends in one write.
const maxWriteBatch = 64 << 10

// write sends the queued frames, and a Ping when nothing was sent for
// pingInterval, until the stream is lost or closed. Frames queued together
// go out in one write.
func (s *directStream) write() {
	defer close(s.writerDone)
	ping, _ := encodeFrame(workerproto.WorkerFrame{Ping: true})
	t := time.NewTimer(s.c.pingInterval)
	defer t.Stop()
	var batch bytes.Buffer
	for {
		batch.Reset()
		closing := false
		select {
		case <-s.lost:
			return
		case frame := <-s.out:
			closing = frame == nil
			batch.Write(frame)
		case <-t.C:
			batch.Write(ping)
		}
	queued:
		for !closing && batch.Len() < maxWriteBatch {
			select {
			case frame := <-s.out:
				closing = frame == nil
				batch.Write(frame)
			default:
				break queued
			}
		}
		if batch.Len() > 0 {
			if _, err := s.pw.Write(batch.Bytes()); err != nil {
				s.lose(fmt.Errorf("%w: send: %w", errStreamLost, err))
				return
			}
		}
		if closing {
			_ = s.pw.Close()
			return
		}
		t.Reset(s.c.pingInterval)
	}
}

// read decodes the manager's frames into frames until the body ends or
// a frame is over the bound.
func (s *directStream) read(body io.Reader, frames chan<- managerFrame) {
	r := bufio.NewReaderSize(body, 64<<10)
	for {
		line, err := readLine(r, workerproto.MaxDirectFrameBytes)
		var f managerFrame
		switch {
		case err != nil:
			f.err = err
		case len(bytes.TrimSpace(line)) == 0:
			continue
		default:
			if err := json.Unmarshal(line, &f.frame); err != nil {
				f.err = fmt.Errorf("malformed frame: %w", err)
			} else if n := frameFields(f.frame); n != 1 {
				f.err = fmt.Errorf("malformed frame: %d fields set, want 1", n)
			} else {
				s.heard.Store(time.Now().UnixNano())
				if (f.frame.Task != nil || f.frame.Cancel != nil) && s.serving.Load() {
					s.handle(f.frame)
					continue
				}
			}
		}
		select {
		case frames <- f:
		case <-s.lost:
			return
		}
		if f.err != nil {
			return
		}
	}
}

// errFrameTooLarge is a frame of the manager over MaxDirectFrameBytes.
var errFrameTooLarge = fmt.Errorf("a frame is over %d bytes", workerproto.MaxDirectFrameBytes)

// readLine reads one line of at most limit bytes, newline included.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			return nil, errFrameTooLarge
		}
		line = append(line, chunk...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, io.ErrUnexpectedEOF
		case err != nil:
			return nil, err
		}
		return line, nil
	}
}

// frameFields counts the fields set in f.
func frameFields(f workerproto.ManagerFrame) int {
	n := 0
	for _, set := range []bool{f.Welcome != nil, f.Task != nil, f.Cancel != nil, f.Ping} {
		if set {
			n++
		}
	}
	return n
}

// encodeFrame encodes f as one line.
func encodeFrame(f workerproto.WorkerFrame) ([]byte, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// serve reads the Welcome, then serves the manager's frames until the
// stream is lost, or until ctx ends and the stream has drained. open is
// set once the Welcome came.
func (s *directStream) serve(ctx context.Context, frames <-chan managerFrame, open *atomic.Bool) error {
	dead := time.NewTimer(s.c.deadAfter)
	defer dead.Stop()
	select {
	case f := <-frames:
		if f.err != nil {
			s.lose(fmt.Errorf("%w: before the Welcome: %w", errStreamLost, f.err))
			return errStreamLost
		}
		if f.frame.Welcome == nil {
			s.lose(fmt.Errorf("%w: the manager's first frame is not a Welcome", errStreamLost))
			return errStreamLost
		}
		open.Store(true)
		s.heard.Store(time.Now().UnixNano())
		s.serving.Store(true)
		directConnected.Set(1)
		defer directConnected.Set(0)
		s.log.Info("Direct stream open", "manager", f.frame.Welcome.Manager, "runId", f.frame.Welcome.RunID,
			"capacity", s.c.opts.Capacity)
	case <-dead.C:
		s.lose(fmt.Errorf("%w: no Welcome within %s", errStreamLost, s.c.deadAfter))
		return errStreamLost
	case <-s.lost:
		return errStreamLost
	}
	dead.Reset(s.c.deadAfter)
	tokenCheck := time.NewTicker(cmp.Or(s.c.opts.TokenCheckInterval, workerproto.DirectTokenCheckInterval))
	defer tokenCheck.Stop()
	var grace <-chan time.Time
	graceTimer := time.NewTimer(time.Hour)
	graceTimer.Stop()
	defer graceTimer.Stop()
	stopping := ctx.Done()
	for {
		select {
		case f := <-frames:
			if f.err != nil {
				if errors.Is(f.err, io.EOF) {
					f.err = errors.New("the manager ended the stream")
				}
				s.lose(fmt.Errorf("%w: %w", errStreamLost, f.err))
				return errStreamLost
			}
			dead.Reset(s.c.deadAfter)
			s.handle(f.frame)
		case <-dead.C:
			// The reader took the frames that came since: dead only once
			// nothing came for deadAfter.
			if quiet := time.Since(time.Unix(0, s.heard.Load())); quiet < s.c.deadAfter {
				dead.Reset(s.c.deadAfter - quiet)
				break
			}
			s.lose(fmt.Errorf("%w: nothing from the manager for %s", errStreamLost, s.c.deadAfter))
			return errStreamLost
		case <-s.lost:
			return errStreamLost
		case <-stopping:
			stopping = nil
			s.startDrain()
			graceTimer.Reset(s.c.opts.GracePeriod)
			grace = graceTimer.C
		case <-grace:
			grace = nil
			s.stopRuns(errShuttingDown)
		case <-tokenCheck.C:
			s.sendRotatedToken()
		case <-s.runEnded:
		}
		if stopping == nil && s.idle() {
			return s.close(frames)
		}
	}
}

// sendRotatedToken sends the token file's token in a Token frame if it is
// not the one the manager has: the manager checks the stream with it from
// then on, and the stream outlives the token it connected with.
func (s *directStream) sendRotatedToken() {
	token, err := s.tokens.changed()
	if err != nil {
		s.log.Info("Could not read the token file for a rotated token; the stream goes on with the token it has", "error", err.Error())
		return
	}
	if token == "" {
		return
	}
	frame, err := encodeFrame(workerproto.WorkerFrame{Token: token})
	if err != nil {
		return
	}
	if s.send(frame) {
		directTokenRotations.Inc()
		s.log.Info("Sent the rotated token on the Direct stream")
	}
}

// startDrain tells the manager to hand the worker nothing more.
func (s *directStream) startDrain() {
	s.mu.Lock()
	s.draining = true
	n := len(s.runs)
	s.mu.Unlock()
	s.log.Info("Draining the Direct stream", "running", n, "gracePeriod", s.c.opts.GracePeriod)
	drain, _ := encodeFrame(workerproto.WorkerFrame{Drain: true})
	s.send(drain)
}

// idle tells whether no attempt runs.
func (s *directStream) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.runs) == 0 && s.sending == 0
}

// stopRuns stops every run with cause.
func (s *directStream) stopRuns(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.runs {
		r.cancel(cause)
	}
}

// close ends a drained stream: the request body is closed once the queued
// frames are sent, and the manager's end of the stream awaited for a
// while.
func (s *directStream) close(frames <-chan managerFrame) error {
	s.serving.Store(false)
	if !s.send(nil) {
		return errStreamLost
	}
	select {
	case <-s.writerDone:
	case <-s.lost:
		return errStreamLost
	}
	t := time.NewTimer(s.c.deadAfter)
	defer t.Stop()
	for {
		select {
		case f := <-frames:
			if f.err == nil {
				if f.frame.Task != nil {
					// The manager has not seen the Drain yet; the body
					// is closed, so it cannot be answered.
					s.log.Info("Task received after the stream was closed", "id", f.frame.Task.ID, "attempt", f.frame.Task.Attempt)
				}
				continue
			}
		case <-t.C:
		case <-s.lost:
		}
		s.lose(errStreamClosed)
		return errStreamClosed
	}
}

// handle acts on one frame of the manager.
func (s *directStream) handle(f workerproto.ManagerFrame) {
	switch {
	case f.Task != nil:
		s.startTask(f.Task)
	case f.Cancel != nil:
		s.mu.Lock()
		r := s.runs[directKey{f.Cancel.ID, f.Cancel.Attempt}]
		s.mu.Unlock()
		if r == nil {
			s.log.V(1).Info("Cancel of an attempt that does not run here", "id", f.Cancel.ID, "attempt", f.Cancel.Attempt)
			return
		}
		s.log.V(1).Info("Attempt cancelled by the manager", "id", f.Cancel.ID, "attempt", f.Cancel.Attempt, "reason", f.Cancel.Reason)
		r.cancel(&cancelledError{reason: f.Cancel.Reason})
	case f.Welcome != nil:
		s.log.Info("Ignoring a second Welcome on the Direct stream", "runId", f.Welcome.RunID)
	}
}

// startTask starts the run of a task, or answers it at once with a failed
// Result when the worker will not run it, so that the manager's slot frees.
func (s *directStream) startTask(t *workerproto.DirectTask) {
	key := directKey{t.ID, t.Attempt}
	s.mu.Lock()
	select {
	case <-s.lost:
		// Its result could not be sent; and the stream's runs are being
		// waited for, so no run may start.
		s.mu.Unlock()
		return
	default:
	}
	reason, why := "", ""
	switch {
	case t.ID == "" || t.Attempt < 1:
		reason, why = refusedInvalid, "a task needs an id and an attempt of at least 1"
	case t.Namespace != s.c.opts.Namespace:
		reason, why = refusedNamespace, fmt.Sprintf("worker %s serves namespace %s, not %s", s.c.opts.Name, s.c.opts.Namespace, t.Namespace)
	case !s.serves(t):
		reason, why = refusedNotServed, fmt.Sprintf("worker %s does not serve queue %s, lane %s", s.c.opts.Name, t.Queue, t.Lane)
	case s.runs[key] != nil:
		reason, why = refusedDuplicate, "the worker already runs this attempt"
	case s.draining:
		reason, why = refusedDraining, fmt.Sprintf("worker %s is stopping", s.c.opts.Name)
	case len(s.runs) >= s.c.opts.Capacity:
		reason, why = refusedCapacity, fmt.Sprintf("worker %s already runs its capacity of %d attempts", s.c.opts.Name, s.c.opts.Capacity)
	}
	if reason != "" {
		s.mu.Unlock()
		directTasksRefused.WithLabelValues(reason).Inc()
		s.log.Info("Refusing a task of the Direct stream", "id", t.ID, "attempt", t.Attempt, "namespace", t.Namespace,
			"reason", why)
		frame, err := encodeFrame(workerproto.WorkerFrame{Result: &workerproto.DirectResult{
			ID: t.ID, Attempt: t.Attempt, Error: "not run: " + why,
		}})
		if err == nil {
			s.send(frame)
		}
		return
	}
	// Runs outlive the worker's context: the drain decides when they stop.
	ctx, cancel := context.WithCancelCause(context.Background())
	r := &directRun{cancel: cancel}
	s.runs[key] = r
	s.runsWG.Add(1)
	s.mu.Unlock()
	go s.run(ctx, key, r, t)
}

// serves tells whether the task belongs to a queue and lane the worker
// serves.
func (s *directStream) serves(t *workerproto.DirectTask) bool {
	if len(s.c.opts.Queues) > 0 && !slices.Contains(s.c.opts.Queues, t.Queue) {
		return false
	}
	return len(s.c.opts.Lanes) == 0 || slices.Contains(s.c.opts.Lanes, t.Lane)
}

// run runs one attempt and sends its Result, unless the stream was lost.
func (s *directStream) run(ctx context.Context, key directKey, r *directRun, t *workerproto.DirectTask) {
	defer s.runsWG.Done()
	// The slot frees before the Result is queued (free), and the stream
	// may close once it is (defer).
	s.mu.Lock()
	s.sending++
	s.mu.Unlock()
	free := sync.OnceFunc(func() {
		r.cancel(nil)
		s.mu.Lock()
		delete(s.runs, key)
		s.mu.Unlock()
	})
	defer func() {
		free()
		s.mu.Lock()
		s.sending--
		s.mu.Unlock()
		select {
		case s.runEnded <- struct{}{}:
		default:
		}
	}()
	// Each line names the attempt itself: a logger WithValues, or the
	// arguments of a line that is not logged, would allocate on every
	// attempt.
	debug := s.log.V(1)
	if debug.Enabled() {
		debug.Info("Direct attempt started", "id", t.ID, "attempt", t.Attempt, "commandType", t.CommandType, "queue", t.Queue, "lane", t.Lane)
	}
	tasksStarted.Inc()
	directTasksStarted.Inc()
	tasksRunning.Inc()
	timeout := time.Duration(t.TimeoutMillis) * time.Millisecond
	started := time.Now()
	tp, span := startRun(t.Traceparent, s.c.opts.Name, directRunCommand(t))
	out, runErr := runCommand(ctx, s.c.opts.Registry, executor.Task{CommandType: t.CommandType, Payload: t.Payload, Traceparent: tp}, timeout)
	endRun(span, out, runErr)
	tasksRunning.Dec()

	cause := context.Cause(ctx)
	var cancelled *cancelledError
	outcome, directOutcome := "", ""
	switch {
	case errors.Is(cause, errStreamLost):
		tasksFinished.WithLabelValues(outcomeLost).Inc()
		directTasksFinished.WithLabelValues(outcomeLost).Inc()
		debug.Info("Direct attempt stopped: its stream was lost", "id", t.ID, "attempt", t.Attempt)
		return
	case runErr != nil && errors.As(cause, &cancelled):
		outcome, directOutcome = outcomeLost, outcomeCancelled
	case runErr != nil && errors.Is(cause, errShuttingDown):
		outcome, directOutcome = outcomeFailed, outcomeCancelled
		if !errors.Is(runErr, executor.ErrNotStarted) {
			runErr = interruptedAtShutdown(s.c.opts.Name, runErr)
		}
	}
	res := directResult(t, out, runErr)
	res.Cancelled = directOutcome == outcomeCancelled
	res.StartedAt = started.UnixNano()
	if outcome == "" {
		outcome = outcomeFailed
		if res.Success {
			outcome = outcomeSucceeded
		}
		directOutcome = outcome
	}
	frame, err := encodeResult(res)
	if err != nil {
		s.log.Error(err, "Could not encode the result", "id", t.ID, "attempt", t.Attempt)
		return
	}
	tasksFinished.WithLabelValues(outcome).Inc()
	free()
	if !s.send(frame) {
		directTasksFinished.WithLabelValues(outcomeLost).Inc()
		debug.Info("Direct attempt ended after its stream was lost; result dropped", "id", t.ID, "attempt", t.Attempt)
		return
	}
	directTasksFinished.WithLabelValues(directOutcome).Inc()
	debug.Info("Direct attempt finished", "id", t.ID, "attempt", t.Attempt, "outcome", directOutcome)
}

// directResult is the Result of a run: the same success, exit code, error
// and output JSON as taskResult reports on an ExternalTask for that run
// (status.result).
func directResult(t *workerproto.DirectTask, out executor.Output, runErr error) *workerproto.DirectResult {
	tr := taskResult(out, runErr)
	res := &workerproto.DirectResult{ID: t.ID, Attempt: t.Attempt, Success: tr.Success, Error: tr.Error}
	if tr.ExitCode != nil {
		res.ExitCode = int(*tr.ExitCode)
	}
	if tr.Result != nil {
		res.Output = tr.Result.Raw
	}
	return res
}

// encodeResult encodes a Result frame. A result over MaxDirectFrameBytes
// (an output limit set that high) is replaced by a failure that says so:
// the manager would drop the frame, and the stream with it.
func encodeResult(res *workerproto.DirectResult) ([]byte, error) {
	frame, err := encodeFrame(workerproto.WorkerFrame{Result: res})
	if err != nil || len(frame) <= workerproto.MaxDirectFrameBytes {
		return frame, err
	}
	short := *res
	short.Success, short.Output = false, nil
	short.Error = fmt.Sprintf("the result is %d bytes, over the Direct stream's bound of %d; lower the output limit (--max-output-bytes)",
		len(frame), workerproto.MaxDirectFrameBytes)
	return encodeFrame(workerproto.WorkerFrame{Result: &short})
}

// isDirectRecord tells whether task is the record of a Direct lane's
// command: the leading manager's Session API writes it while the command
// runs over a Direct stream, and the pool never acts on it. A recorded
// attempt shows Running on this worker's name without a result while it
// runs here over the stream; the pool would take it for one an earlier
// process left behind and report it failed.
func isDirectRecord(task *agentlanev1alpha1.ExternalTask) bool {
	return task.Labels[agentlanev1alpha1.TargetLabel] == string(agentlanev1alpha1.ExternalTargetDirect) ||
		task.Status.Holder == agentlanev1alpha1.HolderDirect
}
