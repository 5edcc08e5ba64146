#!/usr/bin/env bash
# kube-build.sh: build Kubernetes binaries from the Go module proxy. Sourced by
# hack/envtest-assets.sh (the envtest control plane) and hack/cluster-assets.sh
# (the components of the local cluster).
#
#   kube_build <out-dir> <package>...    e.g. kube_build "$cache" k8s.io/kubernetes/cmd/kubelet
#
# k8s.io/kubernetes replaces its staging modules (k8s.io/api, client-go, ...)
# with local directories, so it cannot be required as it is. kube_build writes a
# scratch module that requires k8s.io/kubernetes and replaces every staging
# module with its published v0.x version, then builds static binaries stamped
# with the Kubernetes version (nodes and `kubectl version` report it).

KUBE_VERSION="${KUBE_VERSION:-1.36.3}"
STAGING_VERSION="${STAGING_VERSION:-0.${KUBE_VERSION#*.}}"

# Staging modules that k8s.io/kubernetes replaces with local directories; each
# is published with the matching v0.x version. The sample-* modules have no
# published version and are not needed by the binaries built here.
KUBE_STAGING_MODULES=(
	api apiextensions-apiserver apimachinery apiserver cli-runtime client-go
	cloud-provider cluster-bootstrap code-generator component-base
	component-helpers controller-manager cri-api cri-client cri-streaming
	csi-translation-lib dynamic-resource-allocation endpointslice externaljwt
	kms kube-aggregator kube-controller-manager kube-proxy kube-scheduler
	kubectl kubelet metrics mount-utils pod-security-admission streaming
)

kube_build() {
	local out="$1"
	shift
	local work
	work="$(mktemp -d)"
	{
		echo "module agentlane.io/kube-build"
		echo
		echo "go 1.26.0"
		echo
		echo "require k8s.io/kubernetes v${KUBE_VERSION}"
		echo
		echo "replace ("
		local m
		for m in "${KUBE_STAGING_MODULES[@]}"; do
			echo "	k8s.io/${m} => k8s.io/${m} v${STAGING_VERSION}"
		done
		echo ")"
	} >"${work}/go.mod"
	local major="${KUBE_VERSION%%.*}" minor
	minor="${KUBE_VERSION#*.}"
	minor="${minor%%.*}"
	local ldflags="-s -w"
	ldflags+=" -X k8s.io/component-base/version.gitVersion=v${KUBE_VERSION}"
	ldflags+=" -X k8s.io/component-base/version.gitMajor=${major}"
	ldflags+=" -X k8s.io/component-base/version.gitMinor=${minor}"
	ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
	local pkgs=() p
	for p in "$@"; do pkgs+=("${p}@v${KUBE_VERSION}"); done
	mkdir -p "${out}"
	(
		cd "${work}"
		GOFLAGS=-mod=mod go get "${pkgs[@]}" >&2
		# One build for all packages: their shared dependencies compile once.
		CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags="${ldflags}" -o "${out}/" "$@"
	)
	local rc=$?
	rm -rf "${work}"
	return "${rc}"
}
