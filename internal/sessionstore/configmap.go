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
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	// DefaultMaxBytes bounds the checkpoints of one session together by
	// default.
	DefaultMaxBytes = 1<<20 - 64<<10
	// DefaultMaxCheckpointBytes bounds one checkpoint, as encoded, by
	// default: what one save may write.
	DefaultMaxCheckpointBytes = 256 << 10
	// maxObjectData is what one ConfigMap's data may hold: the API server
	// caps an object at 1 MiB, and 64 KiB are left for the rest of it.
	maxObjectData = 1<<20 - 64<<10

	// slotPrefix starts the name of every checkpoint slot ConfigMap.
	slotPrefix = "agentlane-ckpt-"
	// configMapPrefix starts the name of the single checkpoint ConfigMap
	// of the earlier format, still read (never written).
	configMapPrefix = "agentlane-checkpoint-"
	// runKeyPrefix starts the data key of each run's checkpoint in the
	// earlier format.
	runKeyPrefix = "run."
	// checkpointKey is the data key of a slot's checkpoint.
	checkpointKey = "checkpoint.json"

	// StoreLabel tells what an agentlane ConfigMap holds:
	// StoreCheckpoint or StoreInbox.
	StoreLabel      = "agentlane.io/store"
	StoreCheckpoint = "checkpoint"
	StoreInbox      = "inbox"
	// SeqAnnotation is a slot's save sequence number, assigned by the
	// store: the highest is the session's latest checkpoint.
	SeqAnnotation = "agentlane.io/checkpoint-seq"
	// RunAnnotation is the run whose checkpoint a slot holds; a slot
	// without one is free.
	RunAnnotation = "agentlane.io/checkpoint-run"
	// SizeAnnotation is the size of a slot's checkpoint in bytes.
	SizeAnnotation = "agentlane.io/checkpoint-bytes"
)

// conflictBackoff spaces the retries of a save that lost a race with
// another save of the session.
var conflictBackoff = wait.Backoff{Steps: 12, Duration: 10 * time.Millisecond, Factor: 1.5, Jitter: 0.5, Cap: time.Second}

// ConfigMaps stores each run's latest checkpoint in a ConfigMap of its own
// (a slot) in the session's namespace, named SlotName(session, i) for i in
// [0, MaxRuns), labelled agentlane.io/session and agentlane.io/store=checkpoint
// and controlled by the AgentSession, so that it is deleted with it. The
// slot's annotations name its run, its size and the save's sequence number,
// which the store assigns (one more than the session's highest): the
// highest is the session's latest checkpoint. A save lists the session's
// slots by label, metadata only, and writes one slot: its run's, else a
// free one, else the least recently saved run's (evicting it). Slots of
// other runs evicted to keep MaxBytes are emptied, never deleted. So a save
// writes O(its checkpoint), whatever else the session stores, and the
// manager needs no right to delete ConfigMaps.
//
// At most MaxRuns runs keep a checkpoint (fewer if the session's
// spec.retention.maxRuns is lower), their checkpoints stay under MaxBytes
// together, and one checkpoint over MaxCheckpointBytes is refused with
// ErrTooLarge. Writes are fenced on resourceVersion and retried on
// conflict. Every object written first takes its size from Budget, when
// set; a save the budget refuses returns a RateLimitedError.
//
// Sessions that saved with the earlier format, every run under one
// ConfigMap named ConfigMapName(session), are still read: a run (or the
// latest) not found in a slot is looked up there.
type ConfigMaps struct {
	// Client creates and updates the ConfigMaps and reads AgentSessions.
	Client client.Client
	// Reader reads the ConfigMaps. It should read around the manager's
	// cache (manager.GetAPIReader()): saves need the latest resourceVersion,
	// and a cache would hold every session's checkpoints in memory.
	Reader client.Reader
	// MaxRuns bounds the runs that keep a checkpoint; DefaultMaxRuns when 0.
	MaxRuns int
	// MaxBytes bounds a session's checkpoints together; DefaultMaxBytes
	// when 0.
	MaxBytes int
	// MaxCheckpointBytes bounds one checkpoint; DefaultMaxCheckpointBytes
	// when 0.
	MaxCheckpointBytes int
	// Budget bounds the bytes written per namespace; no bound when nil.
	Budget *WriteBudget
	// Keys signs and verifies inbox records; see InboxStore. Records are
	// neither signed nor kept without it.
	Keys RecordKey
	// Clock dates checkpoints; the real clock when nil.
	Clock clock.PassiveClock

	// rewrite holds the sessions whose next inbox save writes every part.
	rewriteMu sync.Mutex
	rewrite   map[types.NamespacedName]bool
}

var _ Store = &ConfigMaps{}

// NewConfigMaps returns a ConfigMaps store with the default bounds that
// writes with c and reads ConfigMaps with r.
func NewConfigMaps(c client.Client, r client.Reader) *ConfigMaps {
	return &ConfigMaps{Client: c, Reader: r}
}

// ConfigMapName is the name of the ConfigMap of the earlier format that
// holds every checkpoint of the session named session:
// agentlane-checkpoint-<session>, shortened with a hash of the session's
// name if that is too long for an object name.
func ConfigMapName(session string) string {
	return objectName(configMapPrefix, session, "")
}

// SlotName is the name of the session's checkpoint slot i:
// agentlane-ckpt-<session>-<i>, the session's name shortened with a hash if
// that is too long for an object name.
func SlotName(session string, i int) string {
	return objectName(slotPrefix, session, "-"+strconv.Itoa(i))
}

// objectName is prefix+session+suffix, session shortened with a hash of it
// if that is too long for an object name.
func objectName(prefix, session, suffix string) string {
	name := prefix + session + suffix
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(session))
	hash := "-" + hex.EncodeToString(sum[:8])
	keep := validation.DNS1123SubdomainMaxLength - len(hash) - len(suffix)
	return strings.TrimRight(name[:keep], "-.") + hash + suffix
}

// Location is how a checkpoint of runID stored in the ConfigMap named name
// is shown: configmap/<name>#<run>.
func Location(name, runID string) string {
	return "configmap/" + name + "#" + runID
}

// MaxCheckpoint is the most bytes one checkpoint takes as encoded.
func (s *ConfigMaps) MaxCheckpoint() int {
	_, _, maxOne := s.limits()
	return maxOne
}

func (s *ConfigMaps) limits() (maxRuns, maxBytes, maxOne int) {
	maxRuns, maxBytes, maxOne = s.MaxRuns, s.MaxBytes, s.MaxCheckpointBytes
	if maxRuns <= 0 {
		maxRuns = DefaultMaxRuns
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if maxOne <= 0 {
		maxOne = DefaultMaxCheckpointBytes
	}
	return maxRuns, maxBytes, min(maxOne, maxBytes, maxObjectData)
}

func (s *ConfigMaps) now() time.Time {
	if s.Clock == nil {
		return clock.RealClock{}.Now()
	}
	return s.Clock.Now()
}

// slot is what a save needs of one of a session's slot ConfigMaps, from its
// metadata.
type slot struct {
	index int
	meta  metav1.ObjectMeta
	// runID is empty for a free slot.
	runID string
	seq   int64
	size  int
	// foreign: an earlier session of the same name left it.
	foreign bool
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
	maxRuns, maxBytes, maxOne := s.limits()
	if r := owner.Spec.Retention; r != nil && r.MaxRuns != nil {
		maxRuns = max(1, min(maxRuns, int(*r.MaxRuns)))
	}
	value, err := json.Marshal(cp)
	if err != nil {
		return Saved{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(value) > maxOne {
		return Saved{}, fmt.Errorf("%w: the checkpoint of run %s takes %d bytes, the store holds at most %d per checkpoint",
			ErrTooLarge, cp.RunID, len(value), maxOne)
	}
	var (
		name    string
		evicted []string
	)
	err = retry.OnError(conflictBackoff, retriable, func() error {
		slots, err := s.slots(ctx, session, owner)
		if err != nil {
			return err
		}
		target, clear := plan(slots, cp.RunID, len(value), maxRuns, maxBytes)
		var seq int64
		for _, sl := range slots {
			seq = max(seq, sl.seq)
		}
		cm := slotConfigMap(session, target, owner)
		cm.Annotations[RunAnnotation] = cp.RunID
		cm.Annotations[SeqAnnotation] = strconv.FormatInt(seq+1, 10)
		cm.Annotations[SizeAnnotation] = strconv.Itoa(len(value))
		cm.Data = map[string]string{checkpointKey: string(value)}
		if err := s.write(ctx, cm, target.meta.ResourceVersion == ""); err != nil {
			return err
		}
		name, evicted = cm.Name, nil
		if target.runID != "" && target.runID != cp.RunID {
			evicted = append(evicted, target.runID)
		}
		for _, sl := range clear {
			free := slotConfigMap(session, sl, owner)
			// A slot another save rewrote meanwhile holds a newer run: it
			// stays, and the next save evicts again if need be.
			if err := s.write(ctx, free, false); err != nil && !apierrors.IsConflict(err) {
				return err
			}
			evicted = append(evicted, sl.runID)
		}
		return nil
	})
	if err != nil {
		return Saved{}, fmt.Errorf("save the checkpoint of run %s of session %s: %w", cp.RunID, session, err)
	}
	return Saved{Checkpoint: cp, Location: Location(name, cp.RunID), Evicted: evicted}, nil
}

// plan picks the slot a checkpoint of runID and size is written to and the
// slots to empty so that at most maxRuns runs and maxBytes are kept. The
// target is the run's own slot, else a free one (or a new index), else the
// least recently saved run's; the others are evicted least recently saved
// first. slots is sorted by index.
func plan(slots []slot, runID string, size, maxRuns, maxBytes int) (target slot, clear []slot) {
	byAge := slices.Clone(slots)
	slices.SortFunc(byAge, func(a, b slot) int {
		return cmp.Or(cmp.Compare(a.seq, b.seq), cmp.Compare(a.index, b.index))
	})
	found := false
	if i := slices.IndexFunc(slots, func(sl slot) bool { return sl.runID == runID && !sl.foreign }); i >= 0 {
		target, found = slots[i], true
	}
	if !found {
		// A free slot below maxRuns, or the first index not in use.
		used := map[int]bool{}
		for _, sl := range slots {
			used[sl.index] = true
			if !found && sl.index < maxRuns && (sl.runID == "" || sl.foreign) {
				target, found = sl, true
			}
		}
		for i := 0; !found && i < maxRuns; i++ {
			if !used[i] {
				target, found = slot{index: i}, true
			}
		}
	}
	if !found {
		for _, sl := range byAge {
			if sl.index < maxRuns {
				target = sl
				break
			}
		}
	}
	count, total := 1, size
	var others []slot
	for _, sl := range byAge {
		if sl.index == target.index || sl.runID == "" || sl.foreign {
			continue
		}
		others = append(others, sl)
		count++
		total += sl.size
	}
	for _, sl := range others {
		if count <= maxRuns && total <= maxBytes && sl.index < maxRuns {
			break
		}
		clear = append(clear, sl)
		count--
		total -= sl.size
	}
	return target, clear
}

// slots lists the session's slots, sorted by index, from their metadata.
func (s *ConfigMaps) slots(ctx context.Context, session types.NamespacedName, owner *agentlanev1alpha1.AgentSession) ([]slot, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := s.Reader.List(ctx, list, client.InNamespace(session.Namespace),
		client.MatchingLabels{agentlanev1alpha1.SessionLabel: session.Name, StoreLabel: StoreCheckpoint}); err != nil {
		return nil, fmt.Errorf("list the checkpoint slots of session %s: %w", session, err)
	}
	var out []slot
	for i := range list.Items {
		m := list.Items[i].ObjectMeta
		index := -1
		for j := range max(DefaultMaxRuns, s.MaxRuns) {
			if m.Name == SlotName(session.Name, j) {
				index = j
				break
			}
		}
		if index < 0 {
			continue // labelled so, but not named as a slot of the session
		}
		sl := slot{index: index, meta: m}
		if !metav1.IsControlledBy(&list.Items[i], owner) {
			ref := metav1.GetControllerOfNoCopy(&list.Items[i])
			if ref == nil || ref.Kind != "AgentSession" || ref.Name != owner.Name {
				continue // not agentlane's: Save refuses to write over it
			}
			sl.foreign = true
		} else {
			sl.runID = m.Annotations[RunAnnotation]
			sl.seq, _ = strconv.ParseInt(m.Annotations[SeqAnnotation], 10, 64)
			sl.size, _ = strconv.Atoi(m.Annotations[SizeAnnotation])
		}
		out = append(out, sl)
	}
	slices.SortFunc(out, func(a, b slot) int { return cmp.Compare(a.index, b.index) })
	return out, nil
}

// slotConfigMap is the empty slot sl of session, controlled by owner, at
// sl's resourceVersion.
func slotConfigMap(session types.NamespacedName, sl slot, owner *agentlanev1alpha1.AgentSession) *corev1.ConfigMap {
	cm := newConfigMap(types.NamespacedName{Namespace: session.Namespace, Name: SlotName(session.Name, sl.index)}, owner)
	cm.ResourceVersion = sl.meta.ResourceVersion
	cm.Labels[StoreLabel] = StoreCheckpoint
	cm.Annotations = map[string]string{}
	return cm
}

// write creates or updates cm after taking its size from the budget. A
// ConfigMap of that name that is not agentlane's is refused.
func (s *ConfigMaps) write(ctx context.Context, cm *corev1.ConfigMap, create bool) error {
	data, err := json.Marshal(cm)
	if err != nil {
		return err
	}
	if err := s.Budget.Take(cm.Namespace, len(data)); err != nil {
		return err
	}
	if !create {
		return s.Client.Update(ctx, cm)
	}
	err = s.Client.Create(ctx, cm)
	if apierrors.IsAlreadyExists(err) {
		there := &corev1.ConfigMap{}
		if gerr := s.Reader.Get(ctx, client.ObjectKeyFromObject(cm), there); gerr == nil && metav1.GetControllerOfNoCopy(there) == nil {
			return fmt.Errorf("ConfigMap %s/%s exists and is not controlled by an AgentSession; delete or rename it", cm.Namespace, cm.Name)
		}
	}
	return err
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
	slots, err := s.slots(ctx, session, owner)
	if err != nil {
		return Checkpoint{}, err
	}
	var found *slot
	for i, sl := range slots {
		if sl.runID == "" || sl.foreign || (runID != "" && sl.runID != runID) {
			continue
		}
		if found == nil || sl.seq > found.seq {
			found = &slots[i]
		}
	}
	if found == nil {
		return s.loadLegacy(ctx, session, owner, runID)
	}
	key := types.NamespacedName{Namespace: session.Namespace, Name: found.meta.Name}
	cm := &corev1.ConfigMap{}
	if err := s.Reader.Get(ctx, key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return Checkpoint{}, noCheckpoint(session, runID)
		}
		return Checkpoint{}, fmt.Errorf("read ConfigMap %s: %w", key, err)
	}
	if !metav1.IsControlledBy(cm, owner) || cm.Annotations[RunAnnotation] != found.runID {
		// Rewritten by another save since it was listed.
		return Checkpoint{}, fmt.Errorf("%w: the checkpoint of run %s was replaced while it was read; read again", ErrNoCheckpoint, found.runID)
	}
	var cp Checkpoint
	if err := json.Unmarshal([]byte(cm.Data[checkpointKey]), &cp); err != nil {
		return Checkpoint{}, fmt.Errorf("the checkpoint in %s of session %s is not valid: %w", key, session, err)
	}
	if cp.SchemaVersion > CurrentSchemaVersion {
		return Checkpoint{}, schemaTooNew(cp.RunID, cp.SchemaVersion)
	}
	return cp, nil
}

// loadLegacy reads runID's checkpoint, or the latest, from the session's
// ConfigMap of the earlier format.
func (s *ConfigMaps) loadLegacy(ctx context.Context, session types.NamespacedName, owner *agentlanev1alpha1.AgentSession, runID string) (Checkpoint, error) {
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
	var limited *RateLimitedError
	if errors.As(err, &limited) {
		return false
	}
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
}

// newConfigMap is an empty ConfigMap controlled by owner.
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

// adopt makes sure cm belongs to owner. A ConfigMap left by an earlier
// AgentSession of the same name (the garbage collector has not deleted it
// yet) is taken over and emptied; one that no AgentSession of that name
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

// record is the value of a run's data key in the earlier format.
type record struct {
	// Seq orders the saves of a session: the highest is the latest.
	Seq        int64      `json:"seq"`
	Checkpoint Checkpoint `json:"checkpoint"`
}

// stored is what get needs of a data key of the earlier format without
// decoding its checkpoint.
type stored struct {
	key, runID string
	seq        int64
}

// runKey is the data key of runID's checkpoint in the earlier format.
func runKey(runID string) string { return runKeyPrefix + runID }

// runs lists the run keys of data, least recently saved first.
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
		out = append(out, stored{key: k, runID: runID, seq: head.Seq})
	}
	slices.SortFunc(out, func(a, b stored) int {
		return cmp.Or(cmp.Compare(a.seq, b.seq), strings.Compare(a.key, b.key))
	})
	return out
}

// get returns runID's checkpoint from data of the earlier format, or the
// latest when runID is "".
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
