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

package controller

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

func TestTaskKeysOldestFirst(t *testing.T) {
	key := func(ns string, i int) types.NamespacedName {
		return types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("t%02d", i)}
	}
	names := func(k *taskKeys, ns string, n int) []string {
		var out []string
		for _, r := range k.first(ns, n) {
			out = append(out, r.Name)
		}
		return out
	}
	var k taskKeys
	for i := range 40 {
		k.add(key("a", i))
		k.add(key("b", 100+i))
	}
	if diff := cmp.Diff([]string{"t00", "t01", "t02"}, names(&k, "a", 3)); diff != "" {
		t.Errorf("first 3 of a (-want,+got):\n%s", diff)
	}
	k.remove(key("a", 1))
	k.add(key("a", 0)) // woken, found nothing: to the back
	if diff := cmp.Diff([]string{"t02", "t03"}, names(&k, "a", 2)); diff != "" {
		t.Errorf("after removing t01 and re-adding t00 (-want,+got):\n%s", diff)
	}
	if got := names(&k, "a", -1); len(got) != 39 || got[38] != "t00" {
		t.Errorf("all of a: %d tasks ending with %v, want 39 ending with t00", len(got), got[len(got)-1:])
	}
	if got := names(&k, "b", 0); got != nil {
		t.Errorf("first 0 of b = %v, want none", got)
	}
	for i := range 40 {
		k.remove(key("b", 100+i))
	}
	if got := k.in("b"); got != nil {
		t.Errorf("b after removing all = %v, want none", got)
	}
	if _, ok := k.byNamespace["b"]; ok {
		t.Error("an empty namespace is still held")
	}
}
