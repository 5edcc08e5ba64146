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

package sessionserver

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
)

// DefaultAudience is the audience of the tokens the manager's runtime pods
// send: a token minted for agentlane is worth nothing to the API server
// itself, so a runtime never hands the Session API a credential that could
// act in the cluster.
const DefaultAudience = "agentlane"

// claimedAudiences returns the aud claim of a JWT without verifying
// anything: it only chooses which audiences the TokenReview asks for, and
// the review decides. A token that is not a JWT claims none.
func claimedAudiences(token string) []string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(parts[1]) > 8<<10 {
		return nil
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil
	}
	var claims struct {
		Aud json.RawMessage `json:"aud"`
	}
	if json.Unmarshal(payload, &claims) != nil || len(claims.Aud) == 0 {
		return nil
	}
	var one string
	if json.Unmarshal(claims.Aud, &one) == nil {
		return []string{one}
	}
	var many []string
	if json.Unmarshal(claims.Aud, &many) == nil {
		return many
	}
	return nil
}

// audiences are the audiences, besides the API server's, a token may be
// for.
func (a *KubeAuthorizer) audiences() []string {
	if len(a.Audiences) == 0 {
		return []string{DefaultAudience}
	}
	return a.Audiences
}

// reviewAudiences chooses the audiences the TokenReview of token asks for:
// agentlane's when the token claims one of them (or when tokens for the API
// server are refused), else none, which asks for the API server's own.
// Either way one review decides; a false claim only makes it fail.
func (a *KubeAuthorizer) reviewAudiences(token string) []string {
	ours := a.audiences()
	if a.RefuseAPIServerTokens || slices.ContainsFunc(claimedAudiences(token), func(aud string) bool { return slices.Contains(ours, aud) }) {
		return ours
	}
	return nil
}

// audienceMatches tells whether a review that asked for audiences came back
// for one of them; a review that asked for none matches.
func audienceMatches(asked, got []string) bool {
	return len(asked) == 0 || slices.ContainsFunc(got, func(aud string) bool { return slices.Contains(asked, aud) })
}
