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
	"errors"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/taskstate"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// A recorded Direct command's end must reach its record: its submitter was
// told how it ended, and a record released unfinished is failed,
// interrupted, by the ExternalTask controller.
var _ = Describe("Direct records' end", func() {
	// recordedCall returns a Direct command's handler on a server whose
	// status writes go through failStatus (nil passes them), its attempt 1
	// running on worker w1, and the record written once (created, and its
	// status written if failStatus let it).
	recordedCall := func(failStatus func() error) (*directCall, *Server, *atomic.Int64) {
		ns := newTenant().ns
		var writes atomic.Int64
		c := statusFailing{Client: k8sClient, fail: failStatus, writes: &writes}
		// The suite manager's schedulers: its ExternalTask controller
		// leaves a record they hold to the Session API.
		srv := &Server{Config: Config{Client: c, Clock: clock.RealClock{}, Schedulers: server.Schedulers},
			log: logr.Discard(), stopping: make(chan struct{})}
		started := metav1.Now()
		d := &directCall{s: srv, key: types.NamespacedName{Namespace: ns, Name: "rec"}, queue: "q", lane: "direct", session: "s",
			cmd:   lanequeue.Command{ID: "rec", Type: "bash"},
			owner: metav1.OwnerReference{APIVersion: agentlanev1alpha1.GroupVersion.String(), Kind: "AgentSession", Name: "s", UID: "uid-s"},
			attempt: taskstate.DirectAttempt{Lane: "direct", Attempt: 1, GrantedAt: started, Worker: "w1", Node: "node-w1",
				StartedAt: &started},
			version: 1, recorded: true}
		_ = d.write(nil)
		DeferCleanup(func() { srv.Schedulers.DirectTasks().Release(d.key) })
		return d, srv, &writes
	}
	succeeded := &directEnd{phase: agentlanev1alpha1.ExternalTaskSucceeded,
		result: &agentlanev1alpha1.TaskResult{Success: true}, msg: "attempt 1 Succeeded"}
	record := func(d *directCall) *agentlanev1alpha1.ExternalTask {
		GinkgoHelper()
		t := &agentlanev1alpha1.ExternalTask{}
		Expect(k8sClient.Get(ctx, d.key, t)).To(Succeed())
		return t
	}

	It("writes the end again while the API server does not answer, holding the record meanwhile", func() {
		var down atomic.Bool
		d, srv, writes := recordedCall(func() error {
			if down.Load() {
				return &netError{syscall.ECONNREFUSED}
			}
			return nil
		})
		Expect(record(d).Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskRunning))
		down.Store(true)
		done := make(chan struct{})
		go func() {
			defer close(done)
			d.recordEnd(succeeded)
		}()
		Eventually(writes.Load).Should(BeNumerically(">=", 4), "the end is written again")
		Consistently(done, 200*time.Millisecond).ShouldNot(BeClosed())
		Expect(srv.Schedulers.DirectTasks().Holds(d.key)).To(BeTrue(), "the record stays held")
		down.Store(false)
		Eventually(done, 10*time.Second).Should(BeClosed())
		t := record(d)
		Expect(t.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
		Expect(t.Status.Result.Success).To(BeTrue())
	})

	It("writes the end over the record as it is now after a conflicting write", func() {
		d, _, writes := recordedCall(nil)
		t := record(d)
		t.Annotations = map[string]string{"example.com/touched": "yes"}
		Expect(k8sClient.Update(ctx, t)).To(Succeed(), "another write changes the record")
		d.recordEnd(succeeded)
		Expect(writes.Load()).To(BeEquivalentTo(3), "the status write, a conflicting one, the end")
		Expect(record(d).Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskSucceeded))
	})

	It("gives up when the manager stops, and at once on a write that cannot succeed", func() {
		d, srv, _ := recordedCall(func() error { return &netError{syscall.ECONNREFUSED} })
		done := make(chan struct{})
		go func() {
			defer close(done)
			d.recordEnd(succeeded)
		}()
		Consistently(done, 300*time.Millisecond).ShouldNot(BeClosed())
		close(srv.stopping)
		Eventually(done).Should(BeClosed())

		forbidden := apierrors.NewForbidden(agentlanev1alpha1.GroupVersion.WithResource("externaltasks").GroupResource(), "rec", errors.New("no"))
		d, _, writes := recordedCall(func() error { return forbidden })
		before := writes.Load()
		d.recordEnd(succeeded)
		Expect(writes.Load()).To(Equal(before+1), "one write")
		Expect(record(d).Status.Phase).To(BeEmpty(), "never written")
	})
})

var _ = Describe("Direct records of an earlier manager run", func() {
	// A submitter whose call ended with the leader's connection asks the
	// next leader for its command: a record the earlier run left
	// unfinished is answered as the stopping leader answers its waiting
	// submitters, Interrupted, before and after the ExternalTask
	// controller fails it; a record that ended otherwise is the command.
	It("answers Interrupted for a record left unfinished, and a finished record as it ended", func() {
		t := newTenant()
		t.newQueue(directLanes())
		s := t.newSession("s", nil)
		record := func(name string) *agentlanev1alpha1.ExternalTask {
			task := &agentlanev1alpha1.ExternalTask{
				ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: name, Labels: map[string]string{
					agentlanev1alpha1.TargetLabel: "Direct", agentlanev1alpha1.QueueLabel: "q", agentlanev1alpha1.SessionLabel: "s"}},
				Spec: agentlanev1alpha1.ExternalTaskSpec{SessionRef: &agentlanev1alpha1.AgentSessionReference{Name: s.Name},
					Lane: "direct", CommandType: "bash"},
			}
			Expect(k8sClient.Create(ctx, task)).To(Succeed())
			return task
		}
		left := record("left")
		code, body := t.rawCall(t.token, http.MethodGet, "s", "/commands/left", nil)
		Expect(code).To(Equal(http.StatusGone), "%v", body)
		Expect(body["code"]).To(Equal(sessionapi.CodeInterrupted))
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(left), left)).To(Succeed())
			g.Expect(left.Status.Phase).To(Equal(agentlanev1alpha1.ExternalTaskFailed))
		}).Should(Succeed())
		code, body = t.rawCall(t.token, http.MethodGet, "s", "/commands/left", nil)
		Expect(code).To(Equal(http.StatusGone), "%v", body)
		Expect(body["code"]).To(Equal(sessionapi.CodeInterrupted))

		ended := record("ended")
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(ended), ended); err != nil {
				return err
			}
			now := metav1.Now()
			ended.Status = agentlanev1alpha1.ExternalTaskStatus{Phase: agentlanev1alpha1.ExternalTaskFailed, Attempt: 2,
				Holder: agentlanev1alpha1.HolderDirect, FinishedAt: &now}
			meta.SetStatusCondition(&ended.Status.Conditions, metav1.Condition{Type: agentlanev1alpha1.ExternalTaskFinishedCondition,
				Status: metav1.ConditionTrue, Reason: "Failed", Message: "attempt 2 Failed"})
			return k8sClient.Status().Update(ctx, ended)
		})).To(Succeed())
		// The manager reads the record from its cache, which may not show
		// the write above yet (or shows the controller's interruption of
		// the record, created unfinished, that the write replaced).
		Eventually(func(g Gomega) {
			code, body := t.rawCall(t.token, http.MethodGet, "s", "/commands/ended", nil)
			g.Expect(code).To(Equal(http.StatusOK), "%v", body)
			g.Expect(body["state"]).To(Equal(sessionapi.StateFailed))
			g.Expect(body["error"]).To(Equal("attempt 2 Failed"))
		}).Should(Succeed())
	})
})

// statusFailing is a client whose status writes fail while fail (if set)
// returns an error; writes counts them.
type statusFailing struct {
	client.Client
	fail   func() error
	writes *atomic.Int64
}

func (c statusFailing) Status() client.SubResourceWriter {
	return failingStatusWriter{SubResourceWriter: c.Client.Status(), c: c}
}

type failingStatusWriter struct {
	client.SubResourceWriter
	c statusFailing
}

func (w failingStatusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	w.c.writes.Add(1)
	if w.c.fail != nil {
		if err := w.c.fail(); err != nil {
			return err
		}
	}
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// netError is a connection error, as when the API server is down.
type netError struct{ err error }

func (e *netError) Error() string { return "dial tcp 127.0.0.1:6443: " + e.err.Error() }
func (e *netError) Unwrap() error { return e.err }
