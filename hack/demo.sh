#!/usr/bin/env bash
# demo.sh is the main job of agentlane on an embedded control plane: it will
# start kube-apiserver and etcd, the manager, several workers standing in for
# pods on different nodes, apply the samples and drive scripted sessions.
#
# Today it provides the control plane and checks that the binaries build; the
# scripted sessions arrive with the operator and the Session API.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"

assets="$(hack/envtest-assets.sh)"
echo "envtest control plane: ${assets}"
"${assets}/kube-apiserver" --version
"${assets}/etcd" --version | head -1
echo "manager and worker binaries: ${root}/bin/manager ${root}/bin/worker"
echo
echo "The end-to-end demo (scripted agent sessions through the lanes, External"
echo "work on worker processes) is coming with the operator and the Session API."
echo "Until then, 'make test' exercises the CRDs on this control plane."
