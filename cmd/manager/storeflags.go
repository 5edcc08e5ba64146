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
	"flag"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/agentlane/agentlane/internal/sessionserver"
	"github.com/agentlane/agentlane/internal/sessionstore"
)

// storeOptions are the bounds of the session store and of the inbox.
type storeOptions struct {
	maxCheckpointBytes int
	writeRate          float64
	writeBurst         int
	keySecret          string
}

// addStoreFlags registers the flags of what a tenant's messages and
// checkpoints make the manager hold and write.
func (o *options) addStoreFlags() {
	b := &o.api.StoreBounds
	flag.IntVar(&o.store.maxCheckpointBytes, "session-store-max-checkpoint-bytes", sessionstore.DefaultMaxCheckpointBytes, "The largest checkpoint one save may store, in bytes; larger ones get 413 TooLarge.")
	flag.Float64Var(&o.store.writeRate, "session-store-namespace-write-rate", sessionstore.DefaultNamespaceWriteRate, "Bytes per second the session store may write to the API server for one namespace's sessions (checkpoints and inbox records together); past it and --session-store-namespace-write-burst a save gets 429 RateLimited and an inbox record waits. Negative disables the bound.")
	flag.IntVar(&o.store.writeBurst, "session-store-namespace-write-burst", sessionstore.DefaultNamespaceWriteBurst, "Bytes the session store may write at once for one namespace above --session-store-namespace-write-rate.")
	flag.StringVar(&o.store.keySecret, "session-store-key-secret", sessionstore.DefaultKeySecret, "Secret, in the manager's namespace ($POD_NAMESPACE), that keeps the key signing the inbox records the manager stores; created when missing. Out of a cluster the key is kept in memory.")
	flag.Float64Var(&b.CheckpointRate, "session-api-checkpoint-rate", sessionserver.DefaultCheckpointRate, "Checkpoint saves per second one session may sustain; over it 429 RateLimited. Negative disables the bound.")
	flag.IntVar(&b.CheckpointBurst, "session-api-checkpoint-burst", sessionserver.DefaultCheckpointBurst, "Checkpoint saves one session may make at once.")
	flag.Float64Var(&b.NamespaceCheckpointRate, "session-api-namespace-checkpoint-rate", sessionserver.DefaultNamespaceCheckpointRate, "Checkpoint saves per second the sessions of one namespace may sustain together; over it 429 RateLimited. Negative disables the bound.")
	flag.IntVar(&b.NamespaceCheckpointBurst, "session-api-namespace-checkpoint-burst", sessionserver.DefaultNamespaceCheckpointBurst, "Checkpoint saves the sessions of one namespace may make at once.")
	flag.DurationVar(&b.InboxWriteInterval, "session-api-inbox-write-interval", sessionserver.DefaultInboxWriteInterval, "Least time between two writes of one session's inbox record; the changes made meanwhile are written together. 0 writes each change before its post is answered, as long as --session-store-namespace-write-rate allows.")
	flag.IntVar(&b.MaxMessageBytes, "session-api-max-message-bytes", sessionserver.DefaultMaxMessageBytes, "The largest message text the Session API accepts, in bytes; larger ones get 413 TooLarge.")
	flag.Float64Var(&b.PendingNamespaceShare, "session-api-pending-namespace-share", sessionserver.DefaultPendingNamespaceShare, "Fraction, in (0, 1], of --session-api-max-pending-bytes that the pending commands of one namespace's sessions may hold together; over it 429 QueueFull while other namespaces keep the rest.")
}

// newStore is the ConfigMaps session store with the flags' bounds.
func (o *options) newStore(mgr ctrl.Manager) *sessionstore.ConfigMaps {
	// Checkpoints are read around the cache: see sessionstore.ConfigMaps.
	s := sessionstore.NewConfigMaps(mgr.GetClient(), mgr.GetAPIReader())
	s.MaxCheckpointBytes = o.store.maxCheckpointBytes
	s.Budget = sessionstore.NewWriteBudget(o.store.writeRate, o.store.writeBurst, nil)
	if ns := managerNamespace(); ns != "" && o.store.keySecret != "" {
		s.Keys = &sessionstore.SecretKey{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(),
			Secret: types.NamespacedName{Namespace: ns, Name: o.store.keySecret}}
	}
	return s
}
