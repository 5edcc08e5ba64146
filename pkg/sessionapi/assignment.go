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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Assignment is the session a warm runtime pod was adopted by: GET
// /v1/namespaces/{namespace}/runtime/assignment. It carries what the
// environment of a session's own runtime pod carries (EnvSession, the
// identity, EnvResumeRunID and EnvCheckpointLocation), which a warm pod,
// built before any session chose it, lacks.
type Assignment struct {
	Namespace       string `json:"namespace"`
	Session         string `json:"session"`
	TenantID        string `json:"tenantId,omitempty"`
	Principal       string `json:"principal,omitempty"`
	AgentTemplateID string `json:"agentTemplateId,omitempty"`
	CorrelationID   string `json:"correlationId,omitempty"`
	// ResumeRunID names the run of the session's last checkpoint: set when
	// the session saved one, and the runtime resumes from it rather than
	// start fresh (as EnvResumeRunID).
	ResumeRunID string `json:"resumeRunId,omitempty"`
	// CheckpointLocation is where that checkpoint is stored.
	CheckpointLocation string `json:"checkpointLocation,omitempty"`
}

// MaxAssignmentWait is the longest wait the assignment route honours; a
// longer one is cut to it.
const MaxAssignmentWait = 60 * time.Second

// GetAssignment asks once which session adopted the calling pod, a warm
// runtime pod of namespace, waiting up to wait (at most MaxAssignmentWait)
// for it to be adopted. It returns nil and no error when the pod is not
// adopted yet. The client's token must be the pod's own projected token
// (EnvSessionAPITokenFile): the server finds the pod by it.
func (c *Client) GetAssignment(ctx context.Context, namespace string, wait time.Duration) (*Assignment, error) {
	var query url.Values
	if wait > 0 {
		query = url.Values{"wait": {min(wait, MaxAssignmentWait).String()}}
	}
	path := "/" + Version + "/namespaces/" + url.PathEscape(namespace) + "/runtime/assignment"
	req, err := c.newRequest(ctx, http.MethodGet, path, query, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.send(req) //nolint:bodyclose // closed by the deferred drainClose
	if err != nil {
		return nil, err
	}
	defer drainClose(resp.Body)
	if resp.StatusCode == http.StatusNoContent {
		return nil, nil
	}
	var a Assignment
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return nil, fmt.Errorf("sessionapi: GET %s: decoding the reply: %w", path, err)
	}
	return &a, nil
}

// AwaitAssignment waits until a session adopts the calling pod, a warm
// runtime pod of namespace, and returns the assignment: it repeats long
// polls of GetAssignment, waits out a 429 or 503 answer's Retry-After (1s
// when it gives none), and returns any other error, such as Forbidden for a
// pod that is no warm pod or a session the pod's service account may not
// use. It ends with ctx.
func (c *Client) AwaitAssignment(ctx context.Context, namespace string) (*Assignment, error) {
	for {
		a, err := c.GetAssignment(ctx, namespace, MaxAssignmentWait)
		if a != nil {
			return a, nil
		}
		if err == nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		var apiErr *Error
		if !errors.As(err, &apiErr) || (apiErr.Status != http.StatusTooManyRequests && apiErr.Status != http.StatusServiceUnavailable) {
			return nil, err
		}
		wait := apiErr.RetryAfter
		if wait <= 0 {
			wait = time.Second
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}
