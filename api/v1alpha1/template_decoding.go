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
	err := utiljson.Unmarshal(data, (*plain)(r))
	if err == nil {
		r.UndecodablePodTemplate = nil
		return nil
	}
	var loose struct {
		plain
		PodTemplate json.RawMessage `json:"podTemplate"`
	}
	if utiljson.Unmarshal(data, &loose) != nil || loose.PodTemplate == nil {
		return err // not the template's fault
	}
	*r = SessionRuntime(loose.plain)
	r.UndecodablePodTemplate = &UndecodableTemplate{Raw: loose.PodTemplate, Err: templateError(loose.PodTemplate, &r.PodTemplate)}
	r.PodTemplate = SessionRuntime{}.PodTemplate
	return nil
}

// MarshalJSON encodes the runtime, with its podTemplate as stored when it
// does not decode.
func (r SessionRuntime) MarshalJSON() ([]byte, error) {
	type plain SessionRuntime
	if r.UndecodablePodTemplate == nil {
		return json.Marshal(plain(r))
	}
	return json.Marshal(struct {
		plain
		PodTemplate json.RawMessage `json:"podTemplate"`
	}{plain(r), r.UndecodablePodTemplate.Raw})
}

// UnmarshalJSON decodes a target whose jobTemplate may not decode: it is
// then kept in UndecodableJobTemplate and JobTemplate stays nil.
func (t *ExternalTarget) UnmarshalJSON(data []byte) error {
	type plain ExternalTarget
	err := utiljson.Unmarshal(data, (*plain)(t))
	if err == nil {
		t.UndecodableJobTemplate = nil
		return nil
	}
	var loose struct {
		plain
		JobTemplate json.RawMessage `json:"jobTemplate"`
	}
	if utiljson.Unmarshal(data, &loose) != nil || loose.JobTemplate == nil {
		return err
	}
	*t = ExternalTarget(loose.plain)
	t.UndecodableJobTemplate = &UndecodableTemplate{Raw: loose.JobTemplate, Err: templateError(loose.JobTemplate, &t.JobTemplate)}
	t.JobTemplate = nil
	return nil
}

// MarshalJSON encodes the target, with its jobTemplate as stored when it
// does not decode.
func (t ExternalTarget) MarshalJSON() ([]byte, error) {
	type plain ExternalTarget
	if t.UndecodableJobTemplate == nil {
		return json.Marshal(plain(t))
	}
	return json.Marshal(struct {
		plain
		JobTemplate json.RawMessage `json:"jobTemplate"`
	}{plain(t), t.UndecodableJobTemplate.Raw})
}

// templateError is the error decoding raw into into gives.
func templateError(raw []byte, into any) string {
	if err := utiljson.Unmarshal(raw, into); err != nil {
		return err.Error()
	}
	return "it does not decode"
}
