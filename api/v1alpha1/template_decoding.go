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

package v1alpha1

import (
	"encoding/json"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// UndecodableTemplate is a pod or Job template, stored before the API
// server checked templates against their schema, that does not decode into
// its Go type. The object around it still decodes: one bad template must not
// stop the manager from reading every other object of its kind. The template
// is kept as it was stored, so that writing the object back loses nothing,
// and the manager reports the error instead of using it.
type UndecodableTemplate struct {
	// Raw is the template as stored.
	Raw []byte
	// Err says why it does not decode.
	Err string
}

// Error describes the template's problem, naming the field.
func (u *UndecodableTemplate) Error(field string) string {
	return fmt.Sprintf("%s does not decode: %s; correct or replace it", field, u.Err)
}

// UnmarshalJSON decodes a runtime whose podTemplate may not decode: it is
// then kept in UndecodablePodTemplate and PodTemplate stays empty.
func (r *SessionRuntime) UnmarshalJSON(data []byte) error {
	type plain SessionRuntime
	u, err := decodeTemplateAside(data, (*plain)(r), "podTemplate", &corev1.PodTemplateSpec{})
	r.UndecodablePodTemplate = u
	return err
}

// MarshalJSON encodes the runtime, with its podTemplate as stored when it
// does not decode.
func (r SessionRuntime) MarshalJSON() ([]byte, error) {
	type plain SessionRuntime
	return encodeStoredTemplate(plain(r), "podTemplate", r.UndecodablePodTemplate)
}

// UnmarshalJSON decodes a target whose jobTemplate may not decode: it is
// then kept in UndecodableJobTemplate and JobTemplate stays nil.
func (t *ExternalTarget) UnmarshalJSON(data []byte) error {
	type plain ExternalTarget
	u, err := decodeTemplateAside(data, (*plain)(t), "jobTemplate", &batchv1.JobTemplateSpec{})
	t.UndecodableJobTemplate = u
	return err
}

// MarshalJSON encodes the target, with its jobTemplate as stored when it
// does not decode.
func (t ExternalTarget) MarshalJSON() ([]byte, error) {
	type plain ExternalTarget
	return encodeStoredTemplate(plain(t), "jobTemplate", t.UndecodableJobTemplate)
}

// decodeTemplateAside decodes data into obj, a type without these methods.
// When that fails and the rest decodes without the template field, obj is
// the rest (its template left zero) and the template is returned as
// stored, with why it does not decode into a value like tmpl. Otherwise the
// error is not the template's and is returned.
func decodeTemplateAside[T any](data []byte, obj *T, field string, tmpl any) (*UndecodableTemplate, error) {
	err := utiljson.Unmarshal(data, obj)
	if err == nil {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if utiljson.Unmarshal(data, &fields) != nil || fields[field] == nil {
		return nil, err
	}
	raw := fields[field]
	delete(fields, field)
	rest, merr := json.Marshal(fields)
	var zero T
	*obj = zero
	if merr != nil || utiljson.Unmarshal(rest, obj) != nil {
		return nil, err // not the template's fault
	}
	return &UndecodableTemplate{Raw: raw, Err: templateError(raw, tmpl)}, nil
}

// encodeStoredTemplate encodes obj, a type without these methods, with the
// template field as stored when u says it does not decode.
func encodeStoredTemplate(obj any, field string, u *UndecodableTemplate) ([]byte, error) {
	data, err := json.Marshal(obj)
	if err != nil || u == nil {
		return data, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, err
	}
	fields[field] = u.Raw
	return json.Marshal(fields)
}

// templateError is the error decoding raw into into gives.
func templateError(raw []byte, into any) string {
	if err := utiljson.Unmarshal(raw, into); err != nil {
		return err.Error()
	}
	return "it does not decode"
}
