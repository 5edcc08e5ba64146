#!/usr/bin/env bash
# test-e2e.sh is `make test-e2e`: it brings up a three-node cluster on this
# machine (hack/cluster.sh), runs the end-to-end suite (test/cluster) against
# it, and tears it down, also when the suite fails. It needs Linux and root.
#
#   E2E_KEEP_CLUSTER=1   leave the cluster up afterwards (make cluster-down ends it)
#   E2E_REUSE_CLUSTER=1  run against the cluster that is already up
#   E2E_FLAGS=...        extra flags for go test, e.g. -ginkgo.focus=drain
#   E2E_FOCUS=regexp     run only the specs it matches (spaces allowed), e.g. "fails over"
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
log() { printf '[test-e2e] %s\n' "$*" >&2; }

if [[ "$(uname -s)" != Linux || "$(id -u)" -ne 0 ]]; then
	log "make test-e2e runs a real cluster on this machine and needs Linux and root (namespaces, mounts, cgroups, containerd)"
	exit 1
fi

cluster_dir="${AGENTLANE_CLUSTER_DIR:-/var/lib/agentlane-cluster}"
artifacts="${root}/bin/e2e"
rm -rf "${artifacts}"
mkdir -p "${artifacts}"
began=${SECONDS}
up_secs=0

if [[ -n "${E2E_REUSE_CLUSTER:-}" ]] && hack/cluster.sh status >/dev/null 2>&1; then
	log "using the cluster that is up"
else
	if hack/cluster.sh status >/dev/null 2>&1; then
		log "a cluster is already up; run 'make cluster-down' first, or set E2E_REUSE_CLUSTER=1 to use it"
		exit 1
	fi
	if [[ -z "${E2E_KEEP_CLUSTER:-}" ]]; then
		trap 'hack/cluster.sh down >/dev/null 2>&1 || true' EXIT
	fi
	start=${SECONDS}
	hack/cluster.sh up --nodes "${CLUSTER_NODES:-3}"
	up_secs=$((SECONDS - start))
fi

start=${SECONDS}
status=0
focus=()
if [[ -n "${E2E_FOCUS:-}" ]]; then
	focus=("-ginkgo.focus=${E2E_FOCUS}")
fi
AGENTLANE_E2E_KUBECONFIG="${cluster_dir}/kubeconfig" \
	AGENTLANE_E2E_ARTIFACTS="${artifacts}" \
	KUBECTL="${cluster_dir}/kubectl" \
	KUSTOMIZE="${KUSTOMIZE:?KUSTOMIZE must name the kustomize binary (make test-e2e sets it)}" \
	HELM="${HELM:?HELM must name the helm binary (make test-e2e sets it)}" \
	go test ./test/cluster/... -count=1 -timeout 45m -v ${E2E_FLAGS:-} "${focus[@]}" -args -ginkgo.v || status=$?
suite_secs=$((SECONDS - start))

down_secs=0
if [[ -z "${E2E_REUSE_CLUSTER:-}" && -z "${E2E_KEEP_CLUSTER:-}" ]]; then
	# Tear-down must leave nothing behind; it says what it left, and fails.
	start=${SECONDS}
	hack/cluster.sh down || status=1
	down_secs=$((SECONDS - start))
	trap - EXIT
fi
log "cluster up: ${up_secs}s; suite: ${suite_secs}s; tear-down: ${down_secs}s; total: $((SECONDS - began))s; artifacts in ${artifacts}"
exit "${status}"
