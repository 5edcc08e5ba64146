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
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

const (
	// inboxConfigMapPrefix starts the name of every inbox ConfigMap.
	inboxConfigMapPrefix = "agentlane-inbox-"
	// inboxKey is the data key of the inbox record.
	inboxKey = "inbox.json"
	// MaxInboxBytes bounds one session's inbox record, well within the
	// 1 MiB the API server allows an object.
	MaxInboxBytes = 512 << 10
)

// InboxStore keeps one record per session of what the session's inbox
// holds (its queued messages and /queue override), so that a restarted
// manager finds it again. The record is opaque to the store.
type InboxStore interface {
	// SaveInbox replaces the session's record; an empty one clears it. A
	// record over MaxInboxBytes is refused.
	SaveInbox(ctx context.Context, session types.NamespacedName, record []byte) error
	// LoadInbox returns the session's record, nil when it has none.
	LoadInbox(ctx context.Context, session types.NamespacedName) ([]byte, error)
}

var _ InboxStore = &ConfigMaps{}

// InboxConfigMapName is the name of the ConfigMap that holds the inbox
// record of the session named session: agentlane-inbox-<session>,
// shortened with a hash of the session's name if too long.
func InboxConfigMapName(session string) string {
	return objectName(inboxConfigMapPrefix, session)
}

// SaveInbox implements InboxStore: the record is kept in the ConfigMap
// InboxConfigMapName, controlled by the AgentSession like its checkpoints.
func (s *ConfigMaps) SaveInbox(ctx context.Context, session types.NamespacedName, record []byte) error {
	if len(record) > MaxInboxBytes {
		return fmt.Errorf("the inbox record of session %s is %d bytes, over %d: %w", session, len(record), MaxInboxBytes, ErrTooLarge)
	}
	owner, err := s.session(ctx, session)
	if err != nil {
		return err
	}
	key := types.NamespacedName{Namespace: session.Namespace, Name: InboxConfigMapName(session.Name)}
	err = retry.OnError(conflictBackoff, retriable, func() error {
		cm := &corev1.ConfigMap{}
		err := s.Reader.Get(ctx, key, cm)
		if apierrors.IsNotFound(err) {
			if len(record) == 0 {
				return nil
			}
			cm = newConfigMap(key, owner)
			cm.Data[inboxKey] = string(record)
			return s.Client.Create(ctx, cm)
		}
		if err != nil {
			return err
		}
		if err := adopt(cm, owner); err != nil {
			return err
		}
		if cm.Data[inboxKey] == string(record) {
			return nil
		}
		cm.Data = map[string]string{inboxKey: string(record)}
		return s.Client.Update(ctx, cm)
	})
	if err != nil {
		return fmt.Errorf("save the inbox of session %s in ConfigMap %s: %w", session, key, err)
	}
	return nil
}

// LoadInbox implements InboxStore.
func (s *ConfigMaps) LoadInbox(ctx context.Context, session types.NamespacedName) ([]byte, error) {
	owner, err := s.session(ctx, session)
	if err != nil {
		return nil, err
	}
	key := types.NamespacedName{Namespace: session.Namespace, Name: InboxConfigMapName(session.Name)}
	cm := &corev1.ConfigMap{}
	if err := s.Reader.Get(ctx, key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read ConfigMap %s: %w", key, err)
	}
	if !metav1.IsControlledBy(cm, owner) || cm.Data[inboxKey] == "" {
		return nil, nil // left by an earlier session of that name, or cleared
	}
	return []byte(cm.Data[inboxKey]), nil
}
