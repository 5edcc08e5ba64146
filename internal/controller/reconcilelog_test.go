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
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
)

// reconcileStartedMsg is what controller-runtime logs at V(5) before it
// calls a reconciler, with the controller and the object's namespace and
// name among the logger's values.
const reconcileStartedMsg = "Reconciling"

// reconcileLog counts the reconciles each controller of the suite's manager
// starts, per object. Unlike controller-runtime's reconcile_total metric it
// tells one spec's objects from the objects other specs leave behind.
type reconcileLog struct {
	mu     sync.Mutex
	counts map[reconcileKey]int
}

type reconcileKey struct {
	controller string
	object     types.NamespacedName
}

func (l *reconcileLog) count(controller string, object types.NamespacedName) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[reconcileKey{controller, object}]
}

func (l *reconcileLog) record(values []any) {
	var key reconcileKey
	for i := 0; i+1 < len(values); i += 2 {
		v, ok := values[i+1].(string)
		if !ok {
			continue
		}
		switch values[i] {
		case "controller":
			key.controller = v
		case "namespace":
			key.object.Namespace = v
		case "name":
			key.object.Name = v
		}
	}
	if key.controller == "" || key.object.Name == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts = map[reconcileKey]int{}
	}
	l.counts[key]++
}

// countingSink passes every line on to the sink it wraps and records each
// reconcile start in its reconcileLog, whatever the wrapped sink's level.
type countingSink struct {
	logr.LogSink
	log    *reconcileLog
	values []any
}

func (s countingSink) Enabled(level int) bool {
	return level == 5 || s.LogSink.Enabled(level)
}

func (s countingSink) Info(level int, msg string, keysAndValues ...any) {
	if level == 5 && msg == reconcileStartedMsg {
		s.log.record(s.values)
	}
	if s.LogSink.Enabled(level) {
		s.LogSink.Info(level, msg, keysAndValues...)
	}
}

func (s countingSink) WithValues(keysAndValues ...any) logr.LogSink {
	return countingSink{LogSink: s.LogSink.WithValues(keysAndValues...), log: s.log,
		values: append(slices.Clip(s.values), keysAndValues...)}
}

func (s countingSink) WithName(name string) logr.LogSink {
	return countingSink{LogSink: s.LogSink.WithName(name), log: s.log, values: s.values}
}
