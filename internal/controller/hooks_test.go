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
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/internal/scheduling"
)

// boundSchedulers is a Schedulers with hooks that do nothing, for tests
// that drive schedulers without the reconcilers that consume them.
func boundSchedulers(t *testing.T) *scheduling.Schedulers {
	t.Helper()
	s := &scheduling.Schedulers{}
	if err := s.Bind(scheduling.Hooks{
		Observer:          scheduling.NoObserver,
		OnSessionActivity: func(types.NamespacedName, time.Time) {},
		Rebuild:           func(types.NamespacedName, *lanequeue.Queue, *scheduling.TaskSet) {},
	}); err != nil {
		t.Fatal(err)
	}
	return s
}
