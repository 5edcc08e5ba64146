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

// Command openapi-json prints the Session API's OpenAPI document
// (pkg/sessionapi/openapi.yaml) as JSON, for tools without a YAML parser
// such as the Python client's tests.
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/agentlane/agentlane/pkg/sessionapi"
)

func main() {
	js, err := yaml.YAMLToJSON(sessionapi.OpenAPI)
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapi.yaml:", err)
		os.Exit(1)
	}
	if _, err := os.Stdout.Write(append(js, '\n')); err != nil {
		os.Exit(1)
	}
}
