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
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/sessionstore"
)

var _ = Describe("Inbox records in the session store", func() {
	It("writes the message a post adds, not the inbox, and reads every message back in order", func() {
		a := newTenant()
		a.newQueue(internalLanes())
		a.newSession("s1", nil)
		session := types.NamespacedName{Namespace: a.ns, Name: "s1"}
		counted := &bytesWritten{Client: k8sClient}
		store := &sessionstore.ConfigMaps{Client: counted, Reader: k8sClient, Keys: sessionstore.StaticKey(strings.Repeat("k", 32))}
		at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
		st := lanequeue.InboxState{
			Override: &lanequeue.MessageOptions{Mode: lanequeue.ModeCollect, Cap: 50, Drop: lanequeue.DropSummarize},
			Dropped:  []lanequeue.Message{{ID: "d1", Text: "dropped", ReceivedAt: at}},
		}
		for i := range 10 {
			st.Queued = append(st.Queued, lanequeue.Message{ID: fmt.Sprintf("m%d", i), ReceivedAt: at,
				Text: fmt.Sprintf("%d %s", i, strings.Repeat("x", 40<<10))})
		}
		Expect(store.SaveInbox(ctx, session, recordOf(st))).To(Succeed())
		before := counted.total()

		By("posting a small message beside ten of 40 KiB")
		st.Queued = append(st.Queued, lanequeue.Message{ID: "small", Text: "small", ReceivedAt: at})
		record := recordOf(st)
		Expect(store.SaveInbox(ctx, session, record)).To(Succeed())
		written := counted.total() - before
		GinkgoWriter.Printf("posting a small message beside a record of %d bytes wrote %d bytes\n", len(record), written)
		Expect(written).To(BeNumerically("<", 1<<10), "one small slot, not the %d bytes of the record", len(record))

		By("a turn taking the three oldest")
		before = counted.total()
		st.Queued = st.Queued[3:]
		Expect(store.SaveInbox(ctx, session, recordOf(st))).To(Succeed())
		Expect(counted.total()-before).To(BeNumerically("<", 3<<10), "three slots emptied")

		By("reading it back as a restarted manager does")
		data, err := store.LoadInbox(ctx, session)
		Expect(err).NotTo(HaveOccurred())
		var rec inboxRecord
		Expect(json.Unmarshal(data, &rec)).To(Succeed())
		Expect(cmp.Diff(st, rec.state())).To(BeEmpty())
	})
})

// More queued messages than the store keeps (a session may raise its cap):
// the oldest are left out and counted, as for the byte bound.
func TestRecordOfBoundsMessages(t *testing.T) {
	st := lanequeue.InboxState{}
	for i := range sessionstore.MaxInboxMessages + 5 {
		st.Queued = append(st.Queued, lanequeue.Message{Text: fmt.Sprint(i)})
	}
	var rec inboxRecord
	if err := json.Unmarshal(recordOf(st), &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Queued) != sessionstore.MaxInboxMessages || rec.Lost != 5 || rec.Queued[0].Text != "5" {
		t.Errorf("kept %d messages from %q, lost %d; want the newest %d and 5 counted",
			len(rec.Queued), rec.Queued[0].Text, rec.Lost, sessionstore.MaxInboxMessages)
	}
}
