#!/usr/bin/env bash
# envtest-assets.sh provides the envtest control plane (kube-apiserver, etcd and
# kubectl) by building it from Go modules, because prebuilt envtest archives
# cannot be downloaded where agentlane is developed.
#
#   hack/envtest-assets.sh            build if missing, then print the assets dir
#   hack/envtest-assets.sh --check    exit 0 when the binaries are already built
#
# The binaries are built once per version into a cache outside the work tree
# ($AGENTLANE_CACHE, default ~/.cache/agentlane) so fresh clones and CI runs on
# the same machine reuse them, and linked into bin/k8s/<version>-<os>-<arch>/.
# Progress goes to stderr; stdout carries only the assets path so callers can
# write KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh).
set -euo pipefail

ETCD_VERSION="${ETCD_VERSION:-3.6.8}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/lib/kube-build.sh
source "${root}/hack/lib/kube-build.sh"
goos="$(go env GOOS)"
goarch="$(go env GOARCH)"
tag="${KUBE_VERSION}-etcd${ETCD_VERSION}-${goos}-${goarch}"
cache="${AGENTLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentlane}/envtest/${tag}"
dest="${root}/bin/k8s/${KUBE_VERSION}-${goos}-${goarch}"

log() { printf '[envtest-assets] %s\n' "$*" >&2; }

built() {
	[[ -x "${cache}/kube-apiserver" && -x "${cache}/etcd" && -x "${cache}/kubectl" ]]
}

link_into_tree() {
	mkdir -p "${dest}"
	for b in kube-apiserver etcd kubectl; do
		ln -sf "${cache}/${b}" "${dest}/${b}"
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

if built; then
	link_into_tree
	echo "${dest}"
	exit 0
fi

mkdir -p "${cache}"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

start=$(date +%s)
log "building kube-apiserver and kubectl v${KUBE_VERSION} from k8s.io/kubernetes (first time only; about 6-8 minutes on 2 cores)"
kube_build "${cache}" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl
log "kube-apiserver and kubectl built in $(( $(date +%s) - start ))s"

start=$(date +%s)
log "building etcd v${ETCD_VERSION} from go.etcd.io/etcd/server/v3"
mkdir -p "${work}/etcd"
cat >"${work}/etcd/go.mod" <<MOD
module agentlane.io/envtest-etcd

go 1.26.0

require go.etcd.io/etcd/server/v3 v${ETCD_VERSION}
MOD
(
	cd "${work}/etcd"
	GOFLAGS=-mod=mod go get "go.etcd.io/etcd/server/v3@v${ETCD_VERSION}" >&2
	CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags=-s -o "${cache}/etcd" go.etcd.io/etcd/server/v3
)
log "etcd built in $(( $(date +%s) - start ))s"

link_into_tree
log "control plane ready in ${dest}"
echo "${dest}"
