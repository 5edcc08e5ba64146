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

package sessionstore

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
)

// Bounds of a ConfigMaps store.
const (
	// DefaultMaxRuns is how many runs keep a checkpoint by default.
	DefaultMaxRuns = 16
	// DefaultMaxBytes bounds a session's checkpoints by default: the keys
	// and values of the ConfigMap's data, which the API server caps at
	// 1 MiB; 64 KiB are left for the rest of the object.
	DefaultMaxBytes = 1<<20 - 64<<10

	// configMapPrefix starts the name of every checkpoint ConfigMap.
	configMapPrefix = "agentlane-checkpoint-"
	// runKeyPrefix starts the data key of each run's checkpoint.
	runKeyPrefix = "run."
)

// conflictBackoff spaces the retries of a save that lost a race with
// another save of the session.
var conflictBackoff = wait.Backoff{Steps: 12, Duration: 10 * time.Millisecond, Factor: 1.5, Jitter: 0.5, Cap: time.Second}

// ConfigMaps stores each session's checkpoints in one ConfigMap of the
// session's namespace, named by ConfigMapName, labelled agentlane.io/session
// and controlled by the AgentSession, so that it is deleted with it. Each run
// keeps its latest checkpoint under the data key run.<runId>, as JSON with
// the save's sequence number; the highest number is the session's latest.
//
// At most MaxRuns runs keep a checkpoint (fewer if the session's
// spec.retention.maxRuns is lower) and the data stays under MaxBytes:
// a save evicts the runs saved least recently until both hold, and refuses
// with ErrTooLarge a checkpoint that cannot fit on its own. Saves read the
// ConfigMap and update it at that resourceVersion, retrying on conflict, so
// that concurrent saves of a session never lose one another's checkpoint.
type ConfigMaps struct {
	// Client creates and updates the ConfigMaps and reads AgentSessions.
	Client client.Client
	// Reader reads the ConfigMaps. It should read around the manager's
	// cache (manager.GetAPIReader()): saves need the latest resourceVersion,
	// and a cache would hold every session's checkpoints in memory.
	Reader client.Reader
	// MaxRuns bounds the runs that keep a checkpoint; DefaultMaxRuns when 0.
	MaxRuns int
	// MaxBytes bounds the ConfigMap's data; DefaultMaxBytes when 0.
	MaxBytes int
	// Clock dates checkpoints saved without a time; the real clock when nil.
	Clock clock.PassiveClock
}

var _ Store = &ConfigMaps{}

// NewConfigMaps returns a ConfigMaps store with the default bounds that
// writes with c and reads ConfigMaps with r.
func NewConfigMaps(c client.Client, r client.Reader) *ConfigMaps {
	return &ConfigMaps{Client: c, Reader: r}
}

// ConfigMapName is the name of the ConfigMap that holds the checkpoints of
// the session named session: agentlane-checkpoint-<session>, shortened with
// a hash of the session's name if that is too long for an object name.
func ConfigMapName(session string) string {
	return objectName(configMapPrefix, session)
}

// objectName is prefix+session, shortened with a hash of the session's
// name if that is too long for an object name.
func objectName(prefix, session string) string {
	name := prefix + session
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(session))
	suffix := "-" + hex.EncodeToString(sum[:8])
	return strings.TrimRight(name[:validation.DNS1123SubdomainMaxLength-len(suffix)], "-.") + suffix
}

// Location is how a checkpoint of runID stored in the ConfigMap named name
// is shown: configmap/<name>#<run>.
func Location(name, runID string) string {
	return "configmap/" + name + "#" + runID
}

func (s *ConfigMaps) limits() (maxRuns, maxBytes int) {
	maxRuns, maxBytes = s.MaxRuns, s.MaxBytes
	if maxRuns <= 0 {
		maxRuns = DefaultMaxRuns
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return maxRuns, maxBytes
}

func (s *ConfigMaps) now() time.Time {
	if s.Clock == nil {
		return clock.RealClock{}.Now()
	}
	return s.Clock.Now()
}

// Save implements Store.
func (s *ConfigMaps) Save(ctx context.Context, session types.NamespacedName, cp Checkpoint) (Saved, error) {
	cp, err := prepare(cp, s.now())
	if err != nil {
		return Saved{}, err
	}
	owner, err := s.session(ctx, session)
	if err != nil {
		return Saved{}, err
	}
	maxRuns, maxBytes := s.limits()
	if r := owner.Spec.Retention; r != nil && r.MaxRuns != nil {
		maxRuns = min(maxRuns, int(*r.MaxRuns))
	}
	key := types.NamespacedName{Namespace: session.Namespace, Name: ConfigMapName(session.Name)}
	var evicted []string
	err = retry.OnError(conflictBackoff, retriable, func() error {
		cm := &corev1.ConfigMap{}
		err := s.Reader.Get(ctx, key, cm)
		if apierrors.IsNotFound(err) {
			cm = newConfigMap(key, owner)
			if evicted, err = put(cm.Data, cp, maxRuns, maxBytes); err != nil {
				return err
			}
			return s.Client.Create(ctx, cm)
		}
		if err != nil {
			return err
		}
		if err := adopt(cm, owner); err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		if evicted, err = put(cm.Data, cp, maxRuns, maxBytes); err != nil {
			return err
		}
		return s.Client.Update(ctx, cm)
	})
	if err != nil {
		return Saved{}, fmt.Errorf("save the checkpoint of run %s in ConfigMap %s: %w", cp.RunID, key, err)
	}
	return Saved{Checkpoint: cp, Location: Location(key.Name, cp.RunID), Evicted: evicted}, nil
}

// Load implements Store.
func (s *ConfigMaps) Load(ctx context.Context, session types.NamespacedName, runID string) (Checkpoint, error) {
	if runID != "" {
		if err := ValidateRunID(runID); err != nil {
			return Checkpoint{}, err
		}
	}
	owner, err := s.session(ctx, session)
	if err != nil {
		return Checkpoint{}, err
	}
	key := types.NamespacedName{Namespace: session.Namespace, Name: ConfigMapName(session.Name)}
	cm := &corev1.ConfigMap{}
	if err := s.Reader.Get(ctx, key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return Checkpoint{}, noCheckpoint(session, runID)
		}
		return Checkpoint{}, fmt.Errorf("read ConfigMap %s: %w", key, err)
	}
	if !metav1.IsControlledBy(cm, owner) {
		// Left by an earlier session of that name: not this session's.
		return Checkpoint{}, noCheckpoint(session, runID)
	}
	return get(cm.Data, session, runID)
}

// session reads the AgentSession the checkpoints belong to.
func (s *ConfigMaps) session(ctx context.Context, key types.NamespacedName) (*agentlanev1alpha1.AgentSession, error) {
	sess := &agentlanev1alpha1.AgentSession{}
	if err := s.Client.Get(ctx, key, sess); err != nil {
		return nil, fmt.Errorf("read AgentSession %s: %w", key, err)
	}
	return sess, nil
}

// retriable tells the errors of a save that lost a race: another save
// updated or created the ConfigMap first.
func retriable(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
}

// newConfigMap is an empty checkpoint ConfigMap controlled by owner.
func newConfigMap(key types.NamespacedName, owner *agentlanev1alpha1.AgentSession) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace,
			Name:      key.Name,
			Labels:    map[string]string{agentlanev1alpha1.SessionLabel: owner.Name},
			OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(owner, agentlanev1alpha1.GroupVersion.WithKind("AgentSession")),
			},
		},
		Data: map[string]string{},
	}
}

// adopt makes sure cm holds owner's checkpoints. A ConfigMap left by an
// earlier AgentSession of the same name (the garbage collector has not
// deleted it yet) is taken over and emptied; one that no AgentSession
// controls is not agentlane's, and is left alone.
func adopt(cm *corev1.ConfigMap, owner *agentlanev1alpha1.AgentSession) error {
	if metav1.IsControlledBy(cm, owner) {
		return nil
	}
	ref := metav1.GetControllerOfNoCopy(cm)
	if ref == nil || ref.Kind != "AgentSession" || ref.Name != owner.Name {
		return fmt.Errorf("ConfigMap %s/%s exists and is not controlled by AgentSession %s; delete or rename it",
			cm.Namespace, cm.Name, owner.Name)
	}
	fresh := newConfigMap(types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}, owner)
	cm.OwnerReferences, cm.Data = fresh.OwnerReferences, fresh.Data
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[agentlanev1alpha1.SessionLabel] = owner.Name
	return nil
}

// record is the value of a run's data key.
type record struct {
	// Seq orders the saves of a session: the highest is the latest.
	Seq        int64      `json:"seq"`
	Checkpoint Checkpoint `json:"checkpoint"`
}

// stored is what put and get need of a data key without decoding its
// checkpoint.
type stored struct {
	key, runID string
	seq        int64
	size       int
}

// runKey is the data key of runID's checkpoint.
func runKey(runID string) string { return runKeyPrefix + runID }

// runs lists the run keys of data, least recently saved first. A value that
// does not decode sorts first, so that it is evicted first.
func runs(data map[string]string) []stored {
	var out []stored
	for k, v := range data {
		runID, ok := strings.CutPrefix(k, runKeyPrefix)
		if !ok {
			continue
		}
		var head struct {
			Seq int64 `json:"seq"`
		}
		if json.Unmarshal([]byte(v), &head) != nil {
			head.Seq = -1
		}
		out = append(out, stored{key: k, runID: runID, seq: head.Seq, size: len(k) + len(v)})
	}
	slices.SortFunc(out, func(a, b stored) int {
		return cmp.Or(cmp.Compare(a.seq, b.seq), strings.Compare(a.key, b.key))
	})
	return out
}

// dataSize is what the API server counts against a ConfigMap's limit.
func dataSize(data map[string]string) int {
	n := 0
	for k, v := range data {
		n += len(k) + len(v)
	}
	return n
}

// put stores cp in data as the latest checkpoint and evicts the runs saved
// least recently until at most maxRuns runs are kept and data is at most
// maxBytes. It returns the evicted runs; data is unchanged on error.
func put(data map[string]string, cp Checkpoint, maxRuns, maxBytes int) (evicted []string, err error) {
	key := runKey(cp.RunID)
	var seq int64
	others := runs(data)
	for _, r := range others {
		seq = max(seq, r.seq)
	}
	others = slices.DeleteFunc(others, func(r stored) bool { return r.key == key })
	value, err := json.Marshal(record{Seq: seq + 1, Checkpoint: cp})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	size := len(key) + len(value)
	if size > maxBytes {
		return nil, fmt.Errorf("%w: the checkpoint of run %s takes %d bytes, the store holds at most %d per session",
			ErrTooLarge, cp.RunID, size, maxBytes)
	}
	total := dataSize(data) + size
	if old, ok := data[key]; ok {
		total -= len(key) + len(old)
	}
	count := len(others) + 1
	drop := 0
	for drop < len(others) && (count > maxRuns || total > maxBytes) {
		total -= others[drop].size
		count--
		drop++
	}
	if total > maxBytes {
		// Only keys that are not checkpoints are left to make room.
		return nil, fmt.Errorf("%w: the checkpoint of run %s takes %d bytes and other data of the ConfigMap leaves %d of the store's %d",
			ErrTooLarge, cp.RunID, size, maxBytes-(total-size), maxBytes)
	}
	for _, r := range others[:drop] {
		delete(data, r.key)
		evicted = append(evicted, r.runID)
	}
	data[key] = string(value)
	return evicted, nil
}

// get returns runID's checkpoint from data, or the latest when runID is "".
func get(data map[string]string, session types.NamespacedName, runID string) (Checkpoint, error) {
	key := runKey(runID)
	if runID == "" {
		all := runs(data)
		if len(all) == 0 {
			return Checkpoint{}, noCheckpoint(session, "")
		}
		key = all[len(all)-1].key
	}
	value, ok := data[key]
	if !ok {
		return Checkpoint{}, noCheckpoint(session, runID)
	}
	var rec record
	if err := json.Unmarshal([]byte(value), &rec); err != nil {
		return Checkpoint{}, fmt.Errorf("the checkpoint under %s of session %s is not valid: %w", key, session, err)
	}
	cp := rec.Checkpoint
	if cp.SchemaVersion > CurrentSchemaVersion {
		return Checkpoint{}, schemaTooNew(cp.RunID, cp.SchemaVersion)
	}
	return cp, nil
}
