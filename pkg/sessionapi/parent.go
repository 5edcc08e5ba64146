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

import "context"

type parentKey struct{}

// WithParent returns ctx naming the command id as the parent of the
// commands submitted with it (SubmitRequest.ParentID). Run and
// RunWithUsage hand their function such a context.
func WithParent(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, parentKey{}, id)
}

// ParentFrom returns the command WithParent put in ctx, or "".
func ParentFrom(ctx context.Context) string {
	id, _ := ctx.Value(parentKey{}).(string)
	return id
}
