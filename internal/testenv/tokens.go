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

package testenv

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ServiceAccountToken creates the service account name in namespace, binds
// it there to role (a Role of the namespace or a ClusterRole, which the
// caller creates; no binding when role has no name), and returns a token
// of it for audiences (the API server's own when none) valid for an hour,
// as an agent runtime's projected token would be.
func ServiceAccountToken(ctx context.Context, c client.Client, namespace, name string, role rbacv1.RoleRef, audiences ...string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := c.Create(ctx, sa); err != nil {
		return "", fmt.Errorf("create service account %s: %w", name, err)
	}
	if role.Name != "" {
		if err := bindServiceAccount(ctx, c, sa, role); err != nil {
			return "", err
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: audiences, ExpirationSeconds: ptr.To[int64](3600)}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("request a token of %s: %w", name, err)
	}
	if tr.Status.Token == "" {
		return "", fmt.Errorf("no token for %s/%s", namespace, name)
	}
	return tr.Status.Token, nil
}

// bindServiceAccount binds sa in its namespace to role.
func bindServiceAccount(ctx context.Context, c client.Client, sa *corev1.ServiceAccount, role rbacv1.RoleRef) error {
	namespace, name := sa.Namespace, sa.Name
	role.APIGroup = rbacv1.GroupName
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-" + role.Name},
		RoleRef:    role,
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}
	if err := c.Create(ctx, binding); err != nil {
		return fmt.Errorf("bind service account %s to %s %s: %w", name, role.Kind, role.Name, err)
	}
	return nil
}
