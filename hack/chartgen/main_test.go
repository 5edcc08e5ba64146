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
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTemplatize(t *testing.T) {
	cases := map[string]struct {
		kind, name, doc string
		want            string
		wantErr         bool
	}{
		"namespace, labels and a CEL user name": {
			kind: "ValidatingAdmissionPolicy", name: "agentlane-worker-lease",
			doc: `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  labels:
    app.kubernetes.io/part-of: agentlane
  name: agentlane-worker-lease
spec:
  variables:
  - expression: '''system:serviceaccount:agentlane-system:agentlane-worker'''
    name: workerServiceAccount
`,
			want: `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  labels:
    {{- include "agentlane.labels" . | nindent 4 }}
    app.kubernetes.io/part-of: agentlane
  name: agentlane-worker-lease
spec:
  variables:
  - expression: '''system:serviceaccount:{{ .Release.Namespace }}:agentlane-worker'''
    name: workerServiceAccount
`,
		},
		"braces of config/ stay text, labels only in metadata": {
			kind: "ConfigMap", name: "agentlane-x",
			doc: `apiVersion: v1
data:
  labels: '{{ $labels.lane }}'
kind: ConfigMap
metadata:
  labels:
    app.kubernetes.io/part-of: agentlane
  name: agentlane-x
  namespace: agentlane-system
`,
			want: `apiVersion: v1
data:
  labels: '{{ "{{" }} $labels.lane }}'
kind: ConfigMap
metadata:
  labels:
    {{- include "agentlane.labels" . | nindent 4 }}
    app.kubernetes.io/part-of: agentlane
  name: agentlane-x
  namespace: {{ .Release.Namespace }}
`,
		},
		"the session-api Service takes its clusterIP": {
			kind: "Service", name: "agentlane-session-api",
			doc: `apiVersion: v1
kind: Service
metadata:
  labels:
    app.kubernetes.io/part-of: agentlane
  name: agentlane-session-api
spec:
  ports:
  - name: session-api
`,
			want: `apiVersion: v1
kind: Service
metadata:
  labels:
    {{- include "agentlane.labels" . | nindent 4 }}
    app.kubernetes.io/part-of: agentlane
  name: agentlane-session-api
spec:
  {{- with .Values.sessionAPI.service.clusterIP }}
  clusterIP: {{ . }}
  {{- end }}
  ports:
  - name: session-api
`,
		},
		"the namespace inside a longer name": {
			kind: "ConfigMap", name: "agentlane-x",
			doc: `kind: ConfigMap
metadata:
  labels:
    a: b
  name: agentlane-system-x
`,
			wantErr: true,
		},
		"no labels": {
			kind: "ConfigMap", name: "agentlane-x",
			doc: `kind: ConfigMap
metadata:
  name: agentlane-x
spec:
  labels:
    a: b
`,
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := object{Kind: tc.kind, text: tc.doc}
			o.Metadata.Name = tc.name
			got, err := templatize(o, "agentlane-system")
			if tc.wantErr {
				if err == nil {
					t.Fatalf("templatize: no error, got\n%s", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("templatize: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("templatize (-want,+got):\n%s", diff)
			}
		})
	}
}
