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
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// decode reads doc as the API machinery does, through the scheme's codecs.
func decode(t *testing.T, doc string) runtime.Object {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	obj, _, err := serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode([]byte(doc), nil, nil)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return obj
}

func TestUndecodablePodTemplateKeepsTheSessionReadable(t *testing.T) {
	const doc = `{"apiVersion":"agentlane.io/v1alpha1","kind":"AgentSession","metadata":{"name":"s","namespace":"ns"},
"spec":{"queueRef":{"name":"q"},"runtime":{"podTemplate":{"spec":{"containers":7}},"idleTimeout":"30m"}}}`
	s := decode(t, doc).(*AgentSession)
	rt := s.Spec.Runtime
	if rt.UndecodablePodTemplate == nil {
		t.Fatal("the undecodable podTemplate was not recorded")
	}
	if !strings.Contains(rt.UndecodablePodTemplate.Err, "cannot unmarshal number") {
		t.Errorf("Err = %q, want the decoding error", rt.UndecodablePodTemplate.Err)
	}
	if rt.IdleTimeout == nil || rt.IdleTimeout.Duration.String() != "30m0s" || s.Spec.QueueRef.Name != "q" {
		t.Errorf("the rest of the session was not decoded: %+v", s.Spec)
	}
	if len(rt.PodTemplate.Spec.Containers) != 0 {
		t.Errorf("PodTemplate = %+v, want it empty", rt.PodTemplate)
	}
	// Written back, the template is what was stored: nothing is lost.
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"podTemplate":{"spec":{"containers":7}}`) {
		t.Errorf("encoded = %s, want the stored template", out)
	}
	// A copy carries the stored template too.
	if c := s.DeepCopy(); c.Spec.Runtime.UndecodablePodTemplate == nil || string(c.Spec.Runtime.UndecodablePodTemplate.Raw) != `{"spec":{"containers":7}}` {
		t.Errorf("DeepCopy lost the stored template: %+v", c.Spec.Runtime)
	}
}

func TestUndecodableJobTemplateKeepsTheQueueReadable(t *testing.T) {
	const doc = `{"apiVersion":"agentlane.io/v1alpha1","kind":"LaneQueue","metadata":{"name":"q","namespace":"ns"},
"spec":{"lanes":[{"name":"build","priority":1,"handlerMode":"External","externalTarget":{"type":"Job","jobTemplate":{"spec":{"backoffLimit":"x"}}}},
{"name":"execute","priority":0}]}}`
	lq := decode(t, doc).(*LaneQueue)
	target := lq.Spec.Lanes[0].ExternalTarget
	if target.UndecodableJobTemplate == nil || target.JobTemplate != nil || target.Type != ExternalTargetJob {
		t.Fatalf("target = %+v, want the type decoded and the template recorded as undecodable", target)
	}
	if len(lq.Spec.Lanes) != 2 || lq.Spec.Lanes[1].Name != "execute" {
		t.Errorf("lanes = %+v", lq.Spec.Lanes)
	}
	out, err := json.Marshal(lq)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"jobTemplate":{"spec":{"backoffLimit":"x"}}`) {
		t.Errorf("encoded = %s, want the stored template", out)
	}
}

func TestGoodTemplatesDecodeAsBefore(t *testing.T) {
	const doc = `{"apiVersion":"agentlane.io/v1alpha1","kind":"AgentSession","metadata":{"name":"s"},
"spec":{"queueRef":{"name":"q"},"runtime":{"podTemplate":{"spec":{"containers":[{"name":"a","image":"i"}]}}}}}`
	s := decode(t, doc).(*AgentSession)
	if s.Spec.Runtime.UndecodablePodTemplate != nil || len(s.Spec.Runtime.PodTemplate.Spec.Containers) != 1 {
		t.Errorf("runtime = %+v", s.Spec.Runtime)
	}
	out, err := json.Marshal(s.Spec.Runtime)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"containers":[{"name":"a","image":"i","resources":{}}]`) {
		t.Errorf("encoded = %s", out)
	}
	// A field other than the template that does not decode is still an
	// error: only templates are kept aside.
	bad := `{"apiVersion":"agentlane.io/v1alpha1","kind":"AgentSession","metadata":{"name":"s"},"spec":{"runtime":{"idleTimeout":5}}}`
	scheme := runtime.NewScheme()
	_ = AddToScheme(scheme)
	if _, _, err := serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode([]byte(bad), nil, nil); err == nil {
		t.Error("a bad idleTimeout decoded")
	}
}
