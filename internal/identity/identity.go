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

// Package identity converts an AgentSession's or ExternalTask's identity
// labels (api/v1alpha1.Identity) to the forms the lane scheduler and the
// Session API carry, so that every path that moves them (commands, tasks,
// events, checkpoints) converts them the same way.
package identity

import (
	agentlanev1alpha1 "github.com/agentlane/agentlane/api/v1alpha1"
	"github.com/agentlane/agentlane/internal/lanequeue"
	"github.com/agentlane/agentlane/pkg/sessionapi"
)

// Scheduler is a session's or task's identity labels as the
// scheduler carries them; nil is no identity.
func Scheduler(id *agentlanev1alpha1.Identity) lanequeue.Identity {
	if id == nil {
		return lanequeue.Identity{}
	}
	return lanequeue.Identity{TenantID: id.TenantID, Principal: id.Principal,
		AgentTemplateID: id.AgentTemplateID, CorrelationID: id.CorrelationID}
}

// Wire is a session's or task's identity labels as the Session API
// shows them; nil is no identity.
func Wire(id *agentlanev1alpha1.Identity) sessionapi.Identity {
	if id == nil {
		return sessionapi.Identity{}
	}
	return sessionapi.Identity{TenantID: id.TenantID, Principal: id.Principal,
		AgentTemplateID: id.AgentTemplateID, CorrelationID: id.CorrelationID}
}
