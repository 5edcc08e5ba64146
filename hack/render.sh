#!/usr/bin/env bash
# Renders a kustomization of agentlane (config/default unless given) with the
# images set, on standard output:
#
#   KUSTOMIZE=bin/kustomize-v5.8.2 hack/render.sh IMG [WORKER_IMG [DIR]]
#
# IMG replaces the image named agentlane everywhere; WORKER_IMG (default IMG)
# then goes to the worker pods' runner container, where the tasks run. The
# images are set in throwaway overlays under bin/, so the kustomization stays
# as committed. Two overlays, because kustomize applies its images after its
# patches: one overlay would set a WORKER_IMG of repository agentlane back to
# IMG. `make deploy` and `make build-installer` both render with this.
set -euo pipefail

img=${1:?usage: hack/render.sh IMG [WORKER_IMG [DIR]]}
worker_img=${2:-$img}
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(cd "${3:-$root/config/default}" && pwd)
kustomize=${KUSTOMIZE:-kustomize}
case $kustomize in /*) ;; */*) kustomize=$PWD/$kustomize ;; esac

mkdir -p "$root/bin"
overlay=$(mktemp -d "$root/bin/render.XXXXXX")
trap 'rm -rf "$overlay"' EXIT

mkdir "$overlay/image"
printf 'resources:\n- %s\n' "$(realpath --relative-to="$overlay/image" "$dir")" >"$overlay/image/kustomization.yaml"
(cd "$overlay/image" && "$kustomize" edit set image "agentlane=$img")
printf 'resources:\n- image\n' >"$overlay/kustomization.yaml"
(cd "$overlay" && "$kustomize" edit add patch --kind Deployment --name agentlane-worker \
	--patch '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"agentlane-worker"},"spec":{"template":{"spec":{"containers":[{"name":"runner","image":"'"$worker_img"'"}]}}}}')
"$kustomize" build "$overlay"
