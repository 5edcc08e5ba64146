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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/agentlane/agentlane/internal/executor"
	"github.com/agentlane/agentlane/internal/workerproto"
)

func TestDirectTokenWatchReportsEachChangeOnce(t *testing.T) {
	g := NewWithT(t)
	file := filepath.Join(t.TempDir(), "token")
	write := func(s string) { g.Expect(os.WriteFile(file, []byte(s), 0o600)).To(Succeed()) }
	write("first\n")
	w := &tokenWatch{file: file, sent: "first"}

	changed := func() string {
		tok, err := w.changed()
		g.Expect(err).NotTo(HaveOccurred())
		return tok
	}
	g.Expect(changed()).To(BeEmpty(), "the token the stream has")
	write("second\n")
	g.Expect(changed()).To(Equal("second"))
	g.Expect(changed()).To(BeEmpty(), "a change is reported once")
	write("second")
	g.Expect(changed()).To(BeEmpty(), "the same token without its newline")
	write("third")
	g.Expect(changed()).To(Equal("third"))

	// A file being swapped or cut is no change; the next check reads it
	// again.
	g.Expect(os.Remove(file)).To(Succeed())
	_, err := w.changed()
	g.Expect(err).To(HaveOccurred())
	write("")
	_, err = w.changed()
	g.Expect(err).To(HaveOccurred())
	write(strings.Repeat("x", workerproto.MaxDirectTokenBytes+1))
	_, err = w.changed()
	g.Expect(err).To(MatchError(ContainSubstring("more than")))
	g.Expect(w.sent).To(Equal("third"))
	write("fourth")
	g.Expect(changed()).To(Equal("fourth"))
}

func TestDirectSendsOneTokenFramePerRotation(t *testing.T) {
	g := NewWithT(t)
	m := newFakeManager(t)
	d := startDirect(t, m, func(c *DirectClient) { c.opts.TokenCheckInterval = 10 * time.Millisecond })
	s := m.nextStream(t)

	// nextToken waits for the next frame of the stream that is not a
	// Result, which must be a Token frame.
	nextToken := func() string {
		t.Helper()
		select {
		case f, ok := <-s.frames:
			g.Expect(ok).To(BeTrue(), "the stream goes on")
			return f.Token
		case <-time.After(20 * time.Second):
			t.Fatal("no Token frame")
			return ""
		}
	}
	g.Consistently(s.frames, "200ms").ShouldNot(Receive(), "the token it connected with is not sent again")
	for _, tok := range []string{"rotated-1", "rotated-2"} {
		// Replaced whole, as the kubelet does: never read half written.
		g.Expect(os.WriteFile(m.tokenFile+".new", []byte(tok+"\n"), 0o600)).To(Succeed())
		g.Expect(os.Rename(m.tokenFile+".new", m.tokenFile)).To(Succeed())
		g.Expect(nextToken()).To(Equal(tok))
		g.Consistently(s.frames, "200ms").ShouldNot(Receive(), "one frame per rotation")
	}
	g.Expect(s.send(workerproto.ManagerFrame{Task: task("t1", executor.NoopCommandType, nil)})).To(Succeed())
	r := s.result(t)
	g.Expect(r.Success).To(BeTrue(), "the stream still runs tasks: %+v", r)
	d.stop(t)
}
