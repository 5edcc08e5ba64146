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

package main

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// traceFlushTimeout bounds the export of the spans still queued at exit.
const traceFlushTimeout = 5 * time.Second

// flushTraces exports the spans still queued and stops the tracer
// provider (a no-op when tracing is off).
func flushTraces(stop func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
	defer cancel()
	if err := stop(ctx); err != nil {
		ctrl.Log.WithName("tracing").Error(err, "Could not flush the traces")
	}
}
