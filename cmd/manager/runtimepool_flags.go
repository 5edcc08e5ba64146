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

package main

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/agentlane/agentlane/internal/controller"
)

// bindRuntimePoolFlags binds the manager's bounds of RuntimePools to o.
func bindRuntimePoolFlags(fs *flag.FlagSet, o *controller.RuntimePoolOptions) {
	fs.Func("runtimepool-max-pods", fmt.Sprintf("The most warm pods the RuntimePools of one namespace keep together, the oldest pools first (default %d).", controller.DefaultRuntimePoolMaxPods), func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 {
			return fmt.Errorf("want a positive number, not %q", v)
		}
		o.MaxPodsPerNamespace = int32(n)
		return nil
	})
	fs.IntVar(&o.PerNamespace, "runtimepool-max-per-namespace", controller.DefaultRuntimePoolsPerNamespace, "The most RuntimePools a namespace runs; the newer ones keep no warm pod.")
}
