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

package direct

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentlane/agentlane/internal/workerproto"
)

// refresher is a Refresher that hands each token to the test, and refuses
// the token "bad".
func refresher(tokens chan<- string) envOption {
	return func(o *Options, _ *httptest.Server) {
		o.Refresh = func(_ context.Context, r *http.Request, token string) error {
			if r == nil {
				return errors.New("no request")
			}
			tokens <- token
			if token == "bad" {
				return errors.New("refused by the test")
			}
			return nil
		}
	}
}

// nextToken waits for the next token Refresh was given.
func nextToken(t *testing.T, tokens <-chan string) string {
	t.Helper()
	select {
	case tok := <-tokens:
		return tok
	case <-time.After(guard):
		t.Fatal("Refresh was not called")
		return ""
	}
}

func TestTokenFrames(t *testing.T) {
	t.Run("tokens spaced by the interval keep the stream and its attempt", func(t *testing.T) {
		tokens := make(chan string, 16)
		e := newEnv(t, refresher(tokens))
		w, _ := e.dial(hello("w1"))
		out := e.start(context.Background(), task("c1"), 1)
		w.nextTask()
		for _, tok := range []string{"t1", "t2", "t3"} {
			_ = w.send(workerproto.WorkerFrame{Token: tok})
			if got := nextToken(t, tokens); got != tok {
				t.Fatalf("Refresh got %q, want %q", got, tok)
			}
			e.clk.Step(workerproto.DirectMinTokenInterval)
		}
		w.result("c1", 1, true, `{}`)
		if r := wait(t, out); r.err != nil || !r.res.Success {
			t.Fatalf("Run: %+v, want the worker's success", r)
		}
	})

	t.Run("a token frame sooner than the interval ends the stream", func(t *testing.T) {
		tokens := make(chan string, 16)
		e := newEnv(t, refresher(tokens))
		w, _ := e.dial(hello("w1"))
		out := e.start(context.Background(), task("c1"), 1)
		w.nextTask()
		flood := counter(StreamsEnded.WithLabelValues(EndTokenFlood))
		_ = w.send(workerproto.WorkerFrame{Token: "t1"})
		e.clk.Step(workerproto.DirectMinTokenInterval - time.Millisecond)
		_ = w.send(workerproto.WorkerFrame{Token: "t2"})
		if r := wait(t, out); !errors.Is(r.err, ErrWorkerLost) {
			t.Fatalf("Run: %v, want ErrWorkerLost", r.err)
		}
		w.waitEnded()
		if got := counter(StreamsEnded.WithLabelValues(EndTokenFlood)) - flood; got != 1 {
			t.Errorf("token_flood ends: %v, want 1", got)
		}
		for len(tokens) > 0 {
			if tok := <-tokens; tok != "t1" {
				t.Errorf("Refresh got %q of the flood", tok)
			}
		}
	})

	t.Run("a refused token ends the stream", func(t *testing.T) {
		tokens := make(chan string, 16)
		e := newEnv(t, refresher(tokens))
		w, _ := e.dial(hello("w1"))
		out := e.start(context.Background(), task("c1"), 1)
		w.nextTask()
		refused := counter(StreamsEnded.WithLabelValues(EndTokenRefused))
		_ = w.send(workerproto.WorkerFrame{Token: "bad"})
		if r := wait(t, out); !errors.Is(r.err, ErrWorkerLost) {
			t.Fatalf("Run: %v, want ErrWorkerLost", r.err)
		}
		w.waitEnded()
		if got := counter(StreamsEnded.WithLabelValues(EndTokenRefused)) - refused; got != 1 {
			t.Errorf("token_refused ends: %v, want 1", got)
		}
	})

	t.Run("a token over the bound ends the stream unreviewed", func(t *testing.T) {
		tokens := make(chan string, 16)
		e := newEnv(t, refresher(tokens))
		w, _ := e.dial(hello("w1"))
		tooLarge := counter(StreamsEnded.WithLabelValues(EndTooLarge))
		_ = w.send(workerproto.WorkerFrame{Token: strings.Repeat("x", workerproto.MaxDirectTokenBytes+1)})
		w.waitEnded()
		if got := counter(StreamsEnded.WithLabelValues(EndTooLarge)) - tooLarge; got != 1 {
			t.Errorf("too_large ends: %v, want 1", got)
		}
		if len(tokens) != 0 {
			t.Error("the token was reviewed")
		}
	})

	t.Run("a hub without Refresh takes no token frame", func(t *testing.T) {
		e := newEnv(t)
		w, _ := e.dial(hello("w1"))
		protocol := counter(StreamsEnded.WithLabelValues(EndProtocol))
		_ = w.send(workerproto.WorkerFrame{Token: "t1"})
		w.waitEnded()
		if got := counter(StreamsEnded.WithLabelValues(EndProtocol)) - protocol; got != 1 {
			t.Errorf("protocol ends: %v, want 1", got)
		}
	})
}
