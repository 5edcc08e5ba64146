#!/usr/bin/env bash
# demo.sh runs agentlane's main job on an embedded control plane: it provides
# kube-apiserver and etcd (built once from Go modules), then hands over to
# hack/demo, which starts the manager and workers and applies the samples.
# Extra arguments go to hack/demo (for example --keep or --workers=5).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"

KUBEBUILDER_ASSETS="$(hack/envtest-assets.sh)"
export KUBEBUILDER_ASSETS
go run ./hack/demo "$@"
