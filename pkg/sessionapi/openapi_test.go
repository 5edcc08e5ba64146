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
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// oaSchema is the part of an OpenAPI schema these tests read.
type oaSchema struct {
	Ref         string              `json:"$ref"`
	Description string              `json:"description"`
	Type        string              `json:"type"`
	Format      string              `json:"format"`
	Items       *oaSchema           `json:"items"`
	Required    []string            `json:"required"`
	Properties  map[string]oaSchema `json:"properties"`
	AllOf       []oaSchema          `json:"allOf"`
	Enum        []string            `json:"enum"`
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
		"POST " + s + "/lanes/{lane}/clear",
		"PUT " + s + "/lanes/{lane}/handler",
		"GET " + s + "/events",
		"GET " + s + "/stats",
		"GET " + s + "/external",
		"POST " + s + "/external/{id}/complete",
		"POST " + s + "/external/{id}/heartbeat",
		"POST " + s + "/commands/{id}/extend",
		"GET " + s + "/deadletters",
		"GET " + s + "/budget",
		"POST " + s + "/budget/check",
		"POST " + s + "/budget/record",
		"PUT " + s + "/checkpoints",
		"GET " + s + "/checkpoints/latest",
		"GET " + s + "/checkpoints/{runId}",
		"POST " + s + "/delegations",
		"GET " + s + "/delegations",
		"GET " + s + "/delegations/{id}",
		"GET /v1/namespaces/{namespace}/runtime/assignment",
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
		SessionCounts{}, Stats{}, ExternalTask{}, ExternalTaskList{}, Completion{}, CompletionResult{}, Heartbeat{}, HeartbeatResult{}, Extend{}, Extension{}, LaneHandler{}, DeadLetter{}, DeadLetterList{},
		Usage{}, Consumed{}, BudgetCheckRequest{}, BudgetCheck{}, TokenLimits{}, CostLimits{}, BudgetStatus{},
		Event{}, BudgetThreshold{}, PassivationRequest{}, PeerInvocation{}, SessionRef{},
		Error{}, Checkpoint{}, CheckpointSaved{},
		RunOutcome{}, DelegationRequest{}, Delegation{}, DelegationList{}, Assignment{},
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

// TestOpenAPIEventTypes checks that each property of the Event schema, and
// of the schemas it refers to, has the JSON type of its Go field: a generated
// client decodes a stream frame into the same shape as sessionapi.Event.
func TestOpenAPIEventTypes(t *testing.T) {
	doc := loadOpenAPI(t)
	pending := []reflect.Type{reflect.TypeFor[Event]()}
	done := map[reflect.Type]bool{}
	for len(pending) > 0 {
		typ := pending[0]
		pending = pending[1:]
		if done[typ] {
			continue
		}
		done[typ] = true
		schema, ok := doc.Components.Schemas[typ.Name()]
		if !ok {
			t.Errorf("no schema %s", typ.Name())
			continue
		}
		for name, f := range jsonFieldTypes(typ) {
			prop, ok := schema.Properties[name]
			if !ok {
				continue // TestOpenAPISchemasMirrorTypes reports it
			}
			if want, got := goKind(f), doc.kind(prop); want != got {
				t.Errorf("%s.%s: schema is %s, the Go field is %s", typ.Name(), name, got, want)
			}
			if nested := packageStruct(f); nested != nil {
				pending = append(pending, nested)
			}
		}
	}
	for _, nested := range []any{Identity{}, Message{}, BudgetThreshold{}, PassivationRequest{}, PeerInvocation{}} {
		if !done[reflect.TypeOf(nested)] {
			t.Errorf("%T was not checked: the walk from Event is broken", nested)
		}
	}
}

// jsonFieldTypes maps the JSON names of typ's fields to their Go types.
func jsonFieldTypes(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// packageStruct returns the struct type of this package that typ is, or
// points to, or lists; nil if none.
func packageStruct(typ reflect.Type) reflect.Type {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		typ = typ.Elem()
	}
	if typ.Kind() == reflect.Struct && typ.PkgPath() == reflect.TypeFor[Event]().PkgPath() {
		return typ
	}
	return nil
}

// goKind names the JSON shape encoding/json gives typ, in the words of
// (*oaDocument).kind.
func goKind(typ reflect.Type) string {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch {
	case typ == reflect.TypeFor[time.Time]():
		return "string(date-time)"
	case typ == reflect.TypeFor[metav1.Duration]():
		return "#Duration"
	case packageStruct(typ) == typ:
		return "#" + typ.Name()
	}
	switch typ.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice:
		return "array of " + goKind(typ.Elem())
	case reflect.Map:
		return "object"
	}
	return typ.String()
}

// kind names the JSON shape schema s describes: "#Name" for a reference
// (also one wrapped in a single allOf), "array of ..." for an array,
// else its type, with a date-time format noted.
func (d *oaDocument) kind(s oaSchema) string {
	switch {
	case s.Ref != "":
		return "#" + strings.TrimPrefix(s.Ref, "#/components/schemas/")
	case len(s.AllOf) == 1:
		return d.kind(s.AllOf[0])
	case s.Type == "array" && s.Items != nil:
		return "array of " + d.kind(*s.Items)
	case s.Format == "date-time":
		return s.Type + "(date-time)"
	}
	return s.Type
}

// TestOpenAPIErrorCodes checks that every Code* constant of this package
// is in the Error schema's code enum and in its description (which gives
// each code's HTTP status), and that the enum holds nothing else. The
// constants are read from the package source, so a new code that the
// document misses fails here.
func TestOpenAPIErrorCodes(t *testing.T) {
	doc := loadOpenAPI(t)
	want := errorCodeConstants(t)
	if len(want) < 20 {
		t.Fatalf("found only %d Code* constants in the package source: %v", len(want), want)
	}
	errSchema := doc.Components.Schemas["Error"]
	got := slices.Sorted(slices.Values(errSchema.Properties["code"].Enum))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Error.code enum against the Code* constants (-want,+got):\n%s", diff)
	}
	for _, code := range want {
		if !regexp.MustCompile(`\b` + code + `\b`).MatchString(errSchema.Description) {
			t.Errorf("the Error schema's description does not give the HTTP status of %s", code)
		}
	}
}

// errorCodeConstants returns the sorted values of the package's exported
// string constants named Code*, read from its non-test source files.
func errorCodeConstants(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !strings.HasPrefix(id.Name, "Code") || !id.IsExported() || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Errorf("%s: constant %s is not a string literal", fset.Position(id.Pos()), id.Name)
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					codes = append(codes, v)
				}
			}
		}
	}
	slices.Sort(codes)
	return codes
}

// openAPIMethods are the operation keys of an OpenAPI 3.0 path item.
var openAPIMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// TestOpenAPILint checks the structural rules a client generator relies on:
// every $ref resolves, every operation has a unique operationId, every path
// template parameter is declared as a required path parameter (and no
// undeclared one is), servers name the Session API's address with a host
// variable, and the event stream's 200 response carries the Event schema.
func TestOpenAPILint(t *testing.T) {
	js, err := yaml.YAMLToJSON(OpenAPI)
	if err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}

	t.Run("refs resolve", func(t *testing.T) {
		var refs int
		walkRefs(doc, "#", func(at, ref string) {
			refs++
			if _, err := resolvePointer(doc, ref); err != nil {
				t.Errorf("%s: $ref %q: %v", at, ref, err)
			}
		})
		if refs == 0 {
			t.Error("no $ref found: the walk is broken")
		}
	})

	t.Run("operations", func(t *testing.T) {
		paths, _ := doc["paths"].(map[string]any)
		if len(paths) == 0 {
			t.Fatal("no paths")
		}
		seen := map[string]string{}
		placeholder := regexp.MustCompile(`\{([^}]+)\}`)
		for path, v := range paths {
			item := v.(map[string]any)
			var inTemplate []string
			for _, m := range placeholder.FindAllStringSubmatch(path, -1) {
				inTemplate = append(inTemplate, m[1])
			}
			slices.Sort(inTemplate)
			for _, method := range openAPIMethods {
				op, ok := item[method].(map[string]any)
				if !ok {
					continue
				}
				where := strings.ToUpper(method) + " " + path
				id, _ := op["operationId"].(string)
				switch {
				case id == "":
					t.Errorf("%s: no operationId", where)
				case seen[id] != "":
					t.Errorf("%s: operationId %q is also %s's", where, id, seen[id])
				default:
					seen[id] = where
				}
				// Operation parameters override path-item ones of the same
				// name and location.
				params := map[string]map[string]any{}
				for _, list := range []any{item["parameters"], op["parameters"]} {
					for _, p := range asList(list) {
						resolved, err := resolveParameter(doc, p)
						if err != nil {
							t.Errorf("%s: parameter: %v", where, err)
							continue
						}
						params[fmt.Sprint(resolved["in"], "/", resolved["name"])] = resolved
					}
				}
				var declared []string
				for _, p := range params {
					if p["in"] != "path" {
						continue
					}
					name := fmt.Sprint(p["name"])
					declared = append(declared, name)
					if p["required"] != true {
						t.Errorf("%s: path parameter %s is not required: true", where, name)
					}
				}
				slices.Sort(declared)
				if diff := cmp.Diff(inTemplate, declared); diff != "" {
					t.Errorf("%s: path parameters, template (-) against declared (+):\n%s", where, diff)
				}
				if responses, _ := op["responses"].(map[string]any); len(responses) == 0 {
					t.Errorf("%s: no responses", where)
				}
			}
		}
		if len(seen) == 0 {
			t.Error("no operations found")
		}
	})

	t.Run("servers", func(t *testing.T) {
		servers := asList(doc["servers"])
		if len(servers) == 0 {
			t.Fatal("no servers entry: generated clients have no base URL")
		}
		first, _ := servers[0].(map[string]any)
		if first["url"] != "https://{host}:8443" {
			t.Errorf("servers[0].url %v, want https://{host}:8443", first["url"])
		}
		for i, v := range servers {
			s, _ := v.(map[string]any)
			url, _ := s["url"].(string)
			vars, _ := s["variables"].(map[string]any)
			for _, m := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(url, -1) {
				variable, _ := vars[m[1]].(map[string]any)
				if def, _ := variable["default"].(string); def == "" {
					t.Errorf("servers[%d]: variable %s of %s has no default", i, m[1], url)
				}
			}
		}
	})

	t.Run("event stream carries Event", func(t *testing.T) {
		const ptr = "#/paths/~1v1~1namespaces~1{namespace}~1sessions~1{session}~1events/get/responses/200/content/text~1event-stream/schema"
		schema, err := resolvePointer(doc, ptr)
		if err != nil {
			t.Fatalf("%s: %v", ptr, err)
		}
		ref, _ := schema.(map[string]any)["$ref"].(string)
		if ref != "#/components/schemas/Event" {
			t.Errorf("the events 200 response's text/event-stream schema is %v, want a $ref to #/components/schemas/Event", schema)
		}
	})
}

// walkRefs calls f with the location and value of every $ref under v.
func walkRefs(v any, at string, f func(at, ref string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			if k == "$ref" {
				if ref, ok := sub.(string); ok {
					f(at, ref)
				}
				continue
			}
			walkRefs(sub, at+"/"+escapePointer(k), f)
		}
	case []any:
		for i, sub := range v {
			walkRefs(sub, fmt.Sprintf("%s/%d", at, i), f)
		}
	}
}

// resolvePointer follows a local JSON Pointer reference ("#/a/b") in doc.
func resolvePointer(doc map[string]any, ref string) (any, error) {
	rest, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, fmt.Errorf("not a local reference")
	}
	var cur any = doc
	if rest == "" {
		return cur, nil
	}
	for _, tok := range strings.Split(strings.TrimPrefix(rest, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return nil, fmt.Errorf("no %q", tok)
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, fmt.Errorf("no index %q", tok)
			}
			cur = c[i]
		default:
			return nil, fmt.Errorf("%q: not an object or array", tok)
		}
	}
	return cur, nil
}

// resolveParameter returns the parameter object p is, or refers to.
func resolveParameter(doc map[string]any, p any) (map[string]any, error) {
	m, _ := p.(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		target, err := resolvePointer(doc, ref)
		if err != nil {
			return nil, fmt.Errorf("$ref %q: %w", ref, err)
		}
		m, _ = target.(map[string]any)
	}
	if m == nil || m["name"] == nil || m["in"] == nil {
		return nil, fmt.Errorf("%v has no name or in", p)
	}
	return m, nil
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
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
