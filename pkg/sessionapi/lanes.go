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
	"net/http"
	"net/url"
)

// CodeDraining refuses a submission while the session's LaneQueue drains
// (spec.drain) before a restart or an upgrade.
const CodeDraining = "Draining" // 503: the session's queue is draining; see Retry-After

// ClearLane cancels the session's commands in one lane that have not
// started, queued or waiting for a retry, and returns how many it cancelled.
// Its running commands keep running. They end Cancelled with an error that
// says the lane was cleared. POST .../lanes/{lane}/clear.
func (s *SessionClient) ClearLane(ctx context.Context, lane string) (int, error) {
	var res CancelResult
	if err := s.do(ctx, http.MethodPost, "/lanes/"+url.PathEscape(lane)+"/clear", nil, nil, &res); err != nil {
		return 0, err
	}
	return res.Cancelled, nil
}
