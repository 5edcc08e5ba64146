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
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// outageClient answers every status patch with 503 until the fake clock
// reaches upAt, then accepts it, counting the patches and when each came.
type outageClient struct {
	mu    sync.Mutex
	clock *testingclock.FakeClock
	upAt  time.Time
	tries int
}

func (o *outageClient) patch(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tries++
	if o.clock.Now().Before(o.upAt) {
		return apierrors.NewServiceUnavailable("the API server is down")
	}
	return nil
}

// runPatch calls patchStatus against an API server that is down for outage,
// stepping the fake clock whenever the write waits, and returns how long
// the write kept trying by the fake clock, how many tries reached the API
// server, and the write's error.
func runPatch(t *testing.T, outage time.Duration) (time.Duration, int, error) {
	t.Helper()
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(start)
	oc := &outageClient{clock: clk, upAt: start.Add(outage)}
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: oc.patch}).Build()
	a := &attempts{client: c, clock: clk, log: logr.Discard()}
	task := &agentlanev1alpha1.ExternalTask{}
	task.Namespace, task.Name = "ns", "t"
	done := make(chan error, 1)
	go func() { done <- a.patchStatus(context.Background(), task, writeComplete, []byte(`[]`)) }()
	for {
		select {
		case err := <-done:
			oc.mu.Lock()
			tries := oc.tries
			oc.mu.Unlock()
			return clk.Since(start), tries, err
		default:
		}
		if clk.HasWaiters() {
			clk.Step(100 * time.Millisecond)
		} else {
			time.Sleep(time.Millisecond) // let the write reach its next wait
		}
	}
}

// TestPatchStatusRetriesForWriteTimeout proves the retry window of a status
// write: a result survives an API server outage of 25s (the old backoff gave
// up after about 6.5s, when its Cap ended its Steps), and a write gives up
// once writeTimeout has passed on the worker's clock, not before.
func TestPatchStatusRetriesForWriteTimeout(t *testing.T) {
	took, n, err := runPatch(t, 25*time.Second)
	if err != nil {
		t.Fatalf("a write through a 25s outage failed after %s and %d tries: %v", took, n, err)
	}
	if took < 25*time.Second {
		t.Errorf("the write succeeded after %s, before the outage ended", took)
	}

	took, n, err = runPatch(t, time.Hour)
	if err == nil {
		t.Fatal("a write during an outage longer than writeTimeout succeeded")
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsServiceUnavailable(err) {
		t.Errorf("the error of a write that gave up does not carry the last failure: %v", err)
	}
	if took < writeTimeout || took > writeTimeout+time.Second {
		t.Errorf("the write gave up after %s of retries (%d tries), want %s", took, n, writeTimeout)
	}
	// 200ms doubling to the 5s cap: 200+400+800+1600+3200ms, then every
	// 5s (with up to 10% jitter) until 30s: at least 9 tries.
	if n < 9 {
		t.Errorf("%d tries in %s, want at least 9", n, took)
	}
}
