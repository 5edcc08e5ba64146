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

// Environment variables the operator sets in every container of a session's
// runtime pod (AgentSession spec.runtime.podTemplate). They are the whole
// contract between the operator and a runtime it starts: where the Session
// API is, which session the pod runs, and where to resume from.
const (
	// EnvSessionAPIURL is the base URL of the Session API.
	EnvSessionAPIURL = "AGENTLANE_SESSION_API_URL"
	// EnvSessionAPITokenFile is the file of a service-account token for the
	// Session API's audience (agentlane), renewed by the kubelet; send it as
	// the bearer token (WithTokenFile).
	EnvSessionAPITokenFile = "AGENTLANE_SESSION_API_TOKEN_FILE"
	// EnvSessionAPICAFile is the file of the CA bundle that signed the
	// Session API's certificate; trust it for EnvSessionAPIURL
	// (WithCAFile). Unset when the API's certificate chains to a public CA
	// or the API serves plain HTTP.
	EnvSessionAPICAFile = "AGENTLANE_SESSION_API_CA_FILE"
	// EnvNamespace and EnvSession name the AgentSession.
	EnvNamespace = "AGENTLANE_NAMESPACE"
	EnvSession   = "AGENTLANE_SESSION"
	// The session's identity labels, each set when not empty.
	EnvTenantID        = "AGENTLANE_TENANT_ID"
	EnvPrincipal       = "AGENTLANE_PRINCIPAL"
	EnvAgentTemplateID = "AGENTLANE_AGENT_TEMPLATE_ID"
	EnvCorrelationID   = "AGENTLANE_CORRELATION_ID"
	// EnvResumeRunID names the run of the session's last checkpoint; it is
	// set only in a pod created after the session saved one, which should
	// resume from the session's latest checkpoint rather than start fresh.
	EnvResumeRunID = "AGENTLANE_RESUME_RUN_ID"
	// EnvCheckpointLocation is where that checkpoint is stored in the
	// session store.
	EnvCheckpointLocation = "AGENTLANE_CHECKPOINT_LOCATION"
	// EnvPodName and EnvNodeName are the pod's own name and its node, from
	// the downward API. A runtime compares EnvPodName with the pod a
	// PassivationRequested event names (PassivationRequest.Pod), so that the
	// request that moved the session off its previous pod is not taken for
	// one of its own.
	EnvPodName  = "AGENTLANE_POD_NAME"
	EnvNodeName = "AGENTLANE_NODE_NAME"
	// EnvWarmPool names the RuntimePool of a warm runtime pod: a pod built
	// ahead of any session, without EnvSession and the session's identity
	// and checkpoint. Such a pod learns the session that adopts it from the
	// Session API (Client.AwaitAssignment) and acts for no session before.
	EnvWarmPool = "AGENTLANE_WARM_POOL"
)
