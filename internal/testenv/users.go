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
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// User creates user on env's control plane with the roles of roleFile (one
// or more YAML documents, as `make manifests` writes them) bound to it: a
// ClusterRole cluster-wide, a Role in roleNamespace (Roles are left out
// when roleNamespace is empty). It writes a kubeconfig
// that authenticates as user into dir and returns its path. This is how the
// multi-process suites run agentlane's binaries with the permissions they
// are installed with, not as an administrator.
func User(ctx context.Context, env *envtest.Environment, c client.Client, dir, user, roleFile, roleNamespace string) (string, error) {
	data, err := os.ReadFile(roleFile)
	if err != nil {
		return "", fmt.Errorf("read %s (run `make manifests`): %w", roleFile, err)
	}
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return "", fmt.Errorf("read %s: %w", roleFile, err)
		}
		if err := bindRole(ctx, c, doc, meta.Kind, user, roleNamespace, subjects); err != nil {
			return "", fmt.Errorf("%s of %s: %w", meta.Kind, roleFile, err)
		}
	}
	u, err := env.ControlPlane.AddUser(envtest.User{Name: user}, nil)
	if err != nil {
		return "", err
	}
	kubeconfig, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, user+".kubeconfig")
	return path, os.WriteFile(path, kubeconfig, 0o600)
}

// bindRole creates the role of doc, of the given kind, and binds subjects to
// it; documents of other kinds are left alone.
func bindRole(ctx context.Context, c client.Client, doc []byte, kind, user, namespace string, subjects []rbacv1.Subject) error {
	switch kind {
	case "ClusterRole":
		role := &rbacv1.ClusterRole{}
		if err := yaml.Unmarshal(doc, role); err != nil {
			return err
		}
		if err := c.Create(ctx, role); err != nil {
			return err
		}
		return c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role.Name},
			Subjects: subjects})
	case "Role":
		if namespace == "" {
			return nil
		}
		role := &rbacv1.Role{}
		if err := yaml.Unmarshal(doc, role); err != nil {
			return err
		}
		role.Namespace = namespace // what kustomize's namespace transformer does on install
		if err := c.Create(ctx, role); err != nil {
			return err
		}
		return c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role.Name},
			Subjects: subjects})
	}
	return nil
}
