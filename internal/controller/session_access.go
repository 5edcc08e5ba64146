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
	"bytes"
	"context"
	"fmt"
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// How a runtime pod reaches the Session API: a projected volume holds a
// service-account token for the Session API's audience (worth nothing to
// the API server) and the CA that signed the API's certificate, from a
// ConfigMap the manager keeps in the session's namespace.
const (
	// SessionAPICAConfigMap is the ConfigMap, in each namespace with runtime
	// pods, whose key ca.crt is the Session API's CA bundle.
	SessionAPICAConfigMap = "agentlane-session-api-ca"
	// SessionAPICAKey is the ConfigMap's key.
	SessionAPICAKey = "ca.crt"
	// SessionAPIVolume is the projected volume's name in the pod.
	SessionAPIVolume = "agentlane-session-api"
	// SessionAPIMountPath is where every container finds the token and CA.
	SessionAPIMountPath = "/var/run/secrets/agentlane.io/session-api"
	// EnvSessionAPITokenFile and EnvSessionAPICAFile name the two files.
	EnvSessionAPITokenFile = sessionapi.EnvSessionAPITokenFile
	EnvSessionAPICAFile    = sessionapi.EnvSessionAPICAFile
	// tokenFile is the token's file name in the volume.
	tokenFile = "token"
	// tokenLifetime is the projected token's lifetime; the kubelet renews it
	// at 80% of it.
	tokenLifetime int64 = 3600
)

// sessionAPIAccess is how runtime pods reach the Session API: its URL
// and the audience of their projected token.
type sessionAPIAccess struct {
	URL      string
	Audience string
}

// mount adds the Session API's token and CA to the pod: the projected
// volume, its mount in every container and the variables that name the
// files. The pod's own service-account token is not mounted
// unless the template asks for it (automountServiceAccountToken: true), so
// the runtime holds no credential the API server accepts.
func (a sessionAPIAccess) mount(pod *corev1.Pod, ca []byte) []corev1.EnvVar {
	var sources []corev1.VolumeProjection
	var env []corev1.EnvVar
	if a.Audience != "" {
		sources = append(sources, corev1.VolumeProjection{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: a.Audience, ExpirationSeconds: ptr.To(tokenLifetime), Path: tokenFile}})
		env = append(env, corev1.EnvVar{Name: EnvSessionAPITokenFile, Value: path.Join(SessionAPIMountPath, tokenFile)})
		if pod.Spec.AutomountServiceAccountToken == nil {
			pod.Spec.AutomountServiceAccountToken = ptr.To(false)
		}
	}
	if len(ca) > 0 {
		sources = append(sources, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: SessionAPICAConfigMap},
			Items:                []corev1.KeyToPath{{Key: SessionAPICAKey, Path: SessionAPICAKey}}}})
		env = append(env, corev1.EnvVar{Name: EnvSessionAPICAFile, Value: path.Join(SessionAPIMountPath, SessionAPICAKey)})
	}
	if len(sources) == 0 || slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == SessionAPIVolume }) {
		return nil
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: SessionAPIVolume,
		VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: sources}}})
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == SessionAPIMountPath }) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: SessionAPIVolume, MountPath: SessionAPIMountPath, ReadOnly: true})
		}
	}
	return env
}

// sessionAPICA returns the CA bundle runtime pods trust, nil when the
// Session API has none to hand out.
func (r *AgentSessionReconciler) sessionAPICA() []byte {
	if r.SessionAPICA == nil {
		return nil
	}
	return r.SessionAPICA()
}

// ensureCAConfigMap writes the CA bundle into the namespace's
// SessionAPICAConfigMap when it is missing or holds another one. The
// ConfigMap is read around the cache, so the manager keeps no watch on
// every ConfigMap.
func (r *AgentSessionReconciler) ensureCAConfigMap(ctx context.Context, namespace string, ca []byte) error {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	return ensureCAConfigMap(ctx, reader, r.Client, namespace, ca)
}

// ensureCAConfigMap writes ca into namespace's SessionAPICAConfigMap,
// read with reader, when it is missing or holds another bundle.
func ensureCAConfigMap(ctx context.Context, reader client.Reader, c client.Client, namespace string, ca []byte) error {
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: namespace, Name: SessionAPICAConfigMap}
	err := reader.Get(ctx, key, cm)
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: SessionAPICAConfigMap,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "agentlane"}},
			Data: map[string]string{SessionAPICAKey: string(ca)},
		}
		if err := c.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create ConfigMap %s: %w", key, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read ConfigMap %s: %w", key, err)
	}
	if bytes.Equal([]byte(cm.Data[SessionAPICAKey]), ca) {
		return nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[SessionAPICAKey] = string(ca)
	if err := c.Update(ctx, cm); err != nil {
		return fmt.Errorf("update ConfigMap %s: %w", key, err)
	}
	return nil
}
