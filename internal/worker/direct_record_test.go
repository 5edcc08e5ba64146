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
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

var _ = Describe("Worker pool and Direct records", func() {
	// A Direct command recorded as an ExternalTask shows its attempt
	// Running on the worker that runs it over its Direct stream, with no
	// result until the Session API records its end. The same worker's pool
	// sees that record in its namespace: it must leave it to the Session
	// API, neither report it failed as an attempt an earlier process left
	// behind (which made the record's end unwritable: the Session API's
	// next write conflicted, and the record ended Failed although the
	// command succeeded) nor run it.
	It("leaves the records of Direct commands alone, even those naming this worker", func() {
		ns := newNamespace()
		dir := GinkgoT().TempDir()
		const name = "w-direct"
		record := func(task string, phase agentlanev1alpha1.ExternalTaskPhase, byLabel bool) *agentlanev1alpha1.ExternalTask {
			b := bashTask(ns, task, "touch "+filepath.Join(dir, task))
			if byLabel {
				b.task.Labels[agentlanev1alpha1.TargetLabel] = string(agentlanev1alpha1.ExternalTargetDirect)
			}
			t := b.dispatch(name)
			return updateStatus(t, func(st *agentlanev1alpha1.ExternalTaskStatus) {
				st.Phase = phase
				st.Holder = agentlanev1alpha1.HolderDirect
				if phase == agentlanev1alpha1.ExternalTaskRunning {
					st.StartedAt = ptr.To(metav1.Now())
				}
			})
		}
		running := record("direct-running", agentlanev1alpha1.ExternalTaskRunning, true)
		dispatched := record("direct-dispatched", agentlanev1alpha1.ExternalTaskDispatched, true)
		heldOnly := record("direct-held", agentlanev1alpha1.ExternalTaskRunning, false)
		// The control: the pool acts on a pool attempt of the same shape.
		orphan := bashTask(ns, "orphan", "true").dispatch(name)
		updateStatus(orphan, func(st *agentlanev1alpha1.ExternalTaskStatus) {
			st.Phase = agentlanev1alpha1.ExternalTaskRunning
			st.StartedAt = ptr.To(metav1.Now())
		})

		startWorker(Options{Name: name, Namespace: ns})
		Expect(resultOf(orphan).Status.Result.Error).To(ContainSubstring("restarted while it ran the attempt"))
		Consistently(func(g Gomega) {
			for _, t := range []*agentlanev1alpha1.ExternalTask{running, dispatched, heldOnly} {
				cur := get(g, t)
				g.Expect(cur.ResourceVersion).To(Equal(t.ResourceVersion), "%s was written", t.Name)
				g.Expect(cur.Status.Result).To(BeNil(), t.Name)
				g.Expect(filepath.Join(dir, t.Name)).NotTo(BeAnExistingFile(), "%s ran in the pool", t.Name)
			}
		}, 2*time.Second).Should(Succeed())
	})
})
