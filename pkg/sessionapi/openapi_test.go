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

package sessionapi

import (
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// oaSchema is the part of an OpenAPI schema these tests read.
type oaSchema struct {
	Ref        string              `json:"$ref"`
	Required   []string            `json:"required"`
	Properties map[string]oaSchema `json:"properties"`
	AllOf      []oaSchema          `json:"allOf"`
	Enum       []string            `json:"enum"`
}

type oaOperation struct {
	Security *[]map[string][]string `json:"security"`
}

type oaPathItem struct {
	Get    *oaOperation `json:"get"`
	Put    *oaOperation `json:"put"`
	Post   *oaOperation `json:"post"`
	Delete *oaOperation `json:"delete"`
	Patch  *oaOperation `json:"patch"`
}

func (p oaPathItem) operations() map[string]*oaOperation {
	ops := map[string]*oaOperation{"GET": p.Get, "PUT": p.Put, "POST": p.Post, "DELETE": p.Delete, "PATCH": p.Patch}
	maps.DeleteFunc(ops, func(_ string, op *oaOperation) bool { return op == nil })
	return ops
}

type oaDocument struct {
	OpenAPI    string                `json:"openapi"`
	Security   []map[string][]string `json:"security"`
	Paths      map[string]oaPathItem `json:"paths"`
	Components struct {
		Schemas map[string]oaSchema `json:"schemas"`
	} `json:"components"`
}

func loadOpenAPI(t *testing.T) *oaDocument {
	t.Helper()
	var doc oaDocument
	if err := yaml.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi %q, want 3.0.3", doc.OpenAPI)
	}
	return &doc
}

func TestOpenAPIRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	const s = "/v1/namespaces/{namespace}/sessions/{session}"
	want := []string{
		"GET /healthz",
		"GET /openapi.yaml",
		"POST " + s + "/commands",
		"GET " + s + "/commands/{id}",
		"POST " + s + "/commands/{id}/result",
		"POST " + s + "/messages",
		"POST " + s + "/runs/{runId}/finish",
		"POST " + s + "/cancel",
		"GET " + s + "/events",
		"GET " + s + "/stats",
		"GET " + s + "/external",
		"GET " + s + "/deadletters",
		"GET " + s + "/budget",
		"POST " + s + "/budget/check",
		"POST " + s + "/budget/record",
		"PUT " + s + "/checkpoints",
		"GET " + s + "/checkpoints/latest",
		"GET " + s + "/checkpoints/{runId}",
	}
	var got []string
	for path, item := range doc.Paths {
		for method, op := range item.operations() {
			got = append(got, method+" "+path)
			public := path == "/healthz" || path == "/openapi.yaml"
			if open := op.Security != nil && len(*op.Security) == 0; open != public {
				t.Errorf("%s %s: without security %v, want %v", method, path, open, public)
			}
		}
	}
	sort.Strings(want)
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("routes (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]map[string][]string{{"bearerAuth": {}}}, doc.Security); diff != "" {
		t.Errorf("security (-want,+got):\n%s", diff)
	}
}

// TestOpenAPISchemasMirrorTypes checks that each schema has the JSON fields
// of its Go type, and requires exactly those always present in the JSON.
func TestOpenAPISchemasMirrorTypes(t *testing.T) {
	doc := loadOpenAPI(t)
	for _, v := range []any{
		Identity{}, SubmitRequest{}, Grant{}, Result{}, Command{}, ReportRequest{}, Message{},
		QueueOptions{}, PostResult{}, CancelRequest{}, CancelResult{}, Percentiles{}, LaneStats{},
		SessionCounts{}, Stats{}, ExternalTask{}, ExternalTaskList{}, DeadLetter{}, DeadLetterList{},
		Usage{}, Consumed{}, BudgetCheckRequest{}, BudgetCheck{}, TokenLimits{}, CostLimits{}, BudgetStatus{},
		Event{}, Error{}, Checkpoint{}, CheckpointSaved{},
	} {
		typ := reflect.TypeOf(v)
		t.Run(typ.Name(), func(t *testing.T) {
			s, ok := doc.Components.Schemas[typ.Name()]
			if !ok {
				t.Fatal("no schema")
			}
			wantFields, wantRequired := jsonFields(typ)
			gotFields, gotRequired := doc.flatten(t, s)
			if diff := cmp.Diff(wantFields, gotFields); diff != "" {
				t.Errorf("properties (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(wantRequired, gotRequired); diff != "" {
				t.Errorf("required (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestOpenAPIErrorCodes(t *testing.T) {
	doc := loadOpenAPI(t)
	want := []string{
		CodeUnauthenticated, CodeForbidden, CodeSessionNotFound, CodeCommandNotFound, CodeNotFound,
		CodeMethodNotAllowed, CodeInvalidRequest, CodeUnknownLane, CodeInvalidDirective,
		CodeDuplicateCommand, CodeStaleAttempt, CodeNotRunning, CodeInterrupted, CodeFutureEventID, CodeBudgetExhausted, CodeTooLarge, CodeRateLimited, CodeQueueFull, CodeSessionNotReady,
		CodeInternal, CodeNoStore, CodeCheckpointNotFound, CodeSchemaTooNew,
	}
	got := doc.Components.Schemas["Error"].Properties["code"].Enum
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Error.code enum (-want,+got):\n%s", diff)
	}
}

// flatten returns the sorted property names and required names of s,
// following allOf and $ref.
func (d *oaDocument) flatten(t *testing.T, s oaSchema) (props, required []string) {
	t.Helper()
	if s.Ref != "" {
		name := strings.TrimPrefix(s.Ref, "#/components/schemas/")
		ref, ok := d.Components.Schemas[name]
		if !ok {
			t.Fatalf("dangling $ref %s", s.Ref)
		}
		return d.flatten(t, ref)
	}
	for name := range s.Properties {
		props = append(props, name)
	}
	required = append(required, s.Required...)
	for _, sub := range s.AllOf {
		p, r := d.flatten(t, sub)
		props = append(props, p...)
		required = append(required, r...)
	}
	slices.Sort(props)
	slices.Sort(required)
	return props, required
}

// jsonFields returns the sorted JSON names of typ's fields and those that
// encoding/json always writes.
func jsonFields(typ reflect.Type) (fields, always []string) {
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ff, fa := jsonFields(f.Type)
			fields, always = append(fields, ff...), append(always, fa...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields = append(fields, name)
		optional := slices.Contains(strings.Split(opts, ","), "omitzero") ||
			(slices.Contains(strings.Split(opts, ","), "omitempty") && f.Type.Kind() != reflect.Struct)
		if !optional {
			always = append(always, name)
		}
	}
	slices.Sort(fields)
	slices.Sort(always)
	return fields, always
}
