#!/usr/bin/env bash
# cluster-assets.sh provides the Kubernetes components of the local cluster
# (hack/cluster-up.sh) that the envtest control plane does not have:
# kube-scheduler, kube-controller-manager, kubelet and kube-proxy. Like
# hack/envtest-assets.sh it builds them once from Go modules into a cache
# outside the work tree ($AGENTLANE_CACHE, default ~/.cache/agentlane) and
# prints the directory holding them.
#
#   hack/cluster-assets.sh            build if missing, then print the dir
#   hack/cluster-assets.sh --check    exit 0 when they are already built
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/lib/kube-build.sh
source "${root}/hack/lib/kube-build.sh"

goos="$(go env GOOS)"
goarch="$(go env GOARCH)"
cache="${AGENTLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentlane}/cluster/${KUBE_VERSION}-${goos}-${goarch}"
components=(kube-scheduler kube-controller-manager kubelet kube-proxy)

log() { printf '[cluster-assets] %s\n' "$*" >&2; }

built() {
	local c
	for c in "${components[@]}"; do
		[[ -x "${cache}/${c}" ]] || return 1
	done
}

if [[ "${1:-}" == "--check" ]]; then
	built
	exit $?
fi

# One build at a time: a second caller waits for the first and uses its result.
mkdir -p "$(dirname "${cache}")"
exec 9>"${cache}.lock"
flock 9

if ! built; then
	start=$(date +%s)
	log "building ${components[*]} v${KUBE_VERSION} from k8s.io/kubernetes (first time only; about 8 minutes on 2 cores)"
	pkgs=()
	for c in "${components[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/${c}"); done
	kube_build "${cache}.partial" "${pkgs[@]}"
	rm -rf "${cache}"
	mv "${cache}.partial" "${cache}"
	log "built in $(( $(date +%s) - start ))s"
fi
echo "${cache}"
