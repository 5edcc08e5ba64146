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

package kubectlplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

func TestRetryName(t *testing.T) {
	g := NewWithT(t)
	for in, want := range map[string]string{
		"build-7":              "build-7-retry",
		"build-7-retry":        "build-7-retry-2",
		"build-7-retry-2":      "build-7-retry-3",
		"build-7-retry-19":     "build-7-retry-20",
		"build-7-retry-0":      "build-7-retry-0-retry",
		"build-7-retry-1":      "build-7-retry-1-retry",
		"build-7-retry-x":      "build-7-retry-x-retry",
		"retry":                "retry-retry",
		"01jdq8m9k2v7f3w4x5y6": "01jdq8m9k2v7f3w4x5y6-retry",
	} {
		got, err := retryName(in)
		g.Expect(err).NotTo(HaveOccurred(), in)
		g.Expect(got).To(Equal(want), in)
	}
	_, err := retryName(strings.Repeat("a", 250))
	g.Expect(err).To(MatchError(ContainSubstring("cannot name the retry of")))
}

func TestPausePatch(t *testing.T) {
	g := NewWithT(t)
	q := &agentlanev1alpha1.LaneQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"},
		Spec: agentlanev1alpha1.LaneQueueSpec{Lanes: []agentlanev1alpha1.Lane{
			{Name: "a"}, {Name: "b", Paused: true}, {Name: "c"},
		}}}
	ops := func(data []byte) []jsonPatchOp {
		var out []jsonPatchOp
		g.Expect(json.Unmarshal(data, &out)).To(Succeed())
		return out
	}
	patch, err := pausePatch(q, []string{"c", "c", "b"}, false, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ops(patch)).To(Equal([]jsonPatchOp{
		{Op: "test", Path: "/spec/lanes/2/name", Value: "c"},
		{Op: "add", Path: "/spec/lanes/2/paused", Value: true},
	}), "each lane once, and a paused lane is left alone")

	patch, err = pausePatch(q, nil, true, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ops(patch)).To(Equal([]jsonPatchOp{
		{Op: "test", Path: "/spec/lanes/1/name", Value: "b"},
		{Op: "remove", Path: "/spec/lanes/1/paused"},
	}))

	patch, err = pausePatch(q, []string{"b"}, false, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(patch).To(BeNil(), "nothing to change")

	_, err = pausePatch(q, []string{"a", "zz"}, false, true)
	g.Expect(err).To(MatchError(`lanequeue ns/q has no lane "zz" (its lanes: a, b, c)`))
}

func TestCell(t *testing.T) {
	g := NewWithT(t)
	g.Expect(cell("")).To(Equal("<none>"))
	g.Expect(cell("a\tb\nc\x1b[31md\x00")).To(Equal("a b c [31md "), "no tab, line break or escape reaches the terminal")
	long := cell(strings.Repeat("é", 500))
	g.Expect([]rune(long)).To(HaveLen(maxCell))
	g.Expect(long).To(HaveSuffix("..."))
}

func TestTableAlignsColumnsAndSaysWhenEmpty(t *testing.T) {
	g := NewWithT(t)
	tb := newTable(true, "NAME", "PHASE", "AGE")
	tb.add("team-a", "build-1", "Running", "5s")
	tb.add("b", "x", "", "12d")
	var out, errOut bytes.Buffer
	g.Expect(tb.write(&out, &errOut, "ExternalTasks", "")).To(Succeed())
	g.Expect(out.String()).To(Equal("" +
		"NAMESPACE   NAME      PHASE     AGE\n" +
		"team-a      build-1   Running   5s\n" +
		"b           x         <none>    12d\n"))
	g.Expect(errOut.String()).To(BeEmpty())

	out.Reset()
	g.Expect(newTable(false, "NAME").write(&out, &errOut, "ExternalTasks", "ns")).To(Succeed())
	g.Expect(out.String()).To(BeEmpty())
	g.Expect(errOut.String()).To(Equal("No ExternalTasks found in ns namespace.\n"))
}

func TestSince(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	g.Expect(since(now, time.Time{})).To(Equal("<unknown>"))
	g.Expect(since(now, now.Add(-42*time.Second))).To(Equal("42s"))
	g.Expect(since(now, now.Add(-90*time.Minute))).To(Equal("90m"))
	g.Expect(since(now, now.Add(-50*time.Hour))).To(Equal("2d2h"))
}

func TestValidReason(t *testing.T) {
	g := NewWithT(t)
	g.Expect(validReason("rebalance")).To(Succeed())
	g.Expect(validReason(strings.Repeat("é", 128))).To(Succeed())
	g.Expect(validReason("")).To(MatchError("must not be empty"))
	g.Expect(validReason(strings.Repeat("é", 129))).To(MatchError("must be at most 256 bytes"))
	g.Expect(validReason("a\nb")).To(MatchError("must not hold control characters"))
	g.Expect(validReason("\xff")).To(MatchError("must be UTF-8"))
}

// pagedClient answers List with pages of at most the asked limit out of
// total tasks, and records each call's limit.
type pagedClient struct {
	client.Client
	total  int
	limits []int64
}

func (p *pagedClient) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	p.limits = append(p.limits, o.Limit)
	start := 0
	if o.Continue != "" {
		start, _ = strconv.Atoi(o.Continue)
	}
	end := min(start+int(o.Limit), p.total)
	l := list.(*agentlanev1alpha1.ExternalTaskList)
	l.Items = l.Items[:0]
	for i := start; i < end; i++ {
		l.Items = append(l.Items, agentlanev1alpha1.ExternalTask{ObjectMeta: metav1.ObjectMeta{Name: "t-" + strconv.Itoa(i)}})
	}
	l.Continue = ""
	if end < p.total {
		l.Continue = strconv.Itoa(end)
	}
	return nil
}

// TestListsArePaged: a namespace flooded with tasks is read in pages of
// listPageSize, never in one response.
func TestListsArePaged(t *testing.T) {
	g := NewWithT(t)
	c := &pagedClient{total: 2*listPageSize + 7}
	page := &agentlanev1alpha1.ExternalTaskList{}
	seen := 0
	g.Expect(listAll(t.Context(), c, page, []client.ListOption{client.Limit(listPageSize)}, func() { seen += len(page.Items) })).To(Succeed())
	g.Expect(seen).To(Equal(c.total))
	g.Expect(c.limits).To(Equal([]int64{listPageSize, listPageSize, listPageSize}))
}
