#!/usr/bin/env bash
# node.sh is the first process of one node of the local cluster
# (hack/cluster.sh): PID 1 of the node's PID namespace, inside the node's
# network namespace, with a private mount namespace. It starts containerd,
# imports the image archives, then runs the kubelet and kube-proxy until one
# of them exits or the node is killed.
#
#   node.sh NAME NODE_IP CLUSTER_DIR BIN_DIR IMAGES_DIR
set -euo pipefail

name="$1" node_ip="$2" cluster_dir="$3" bin="$4" images="$5"
dir="${cluster_dir}/nodes/${name}"

# Paths that containerd, the CNI plugins and the kubelet hard-code stay
# private to this node: tmpfs over each, dropped with the mount namespace.
for d in /run/containerd /run/netns /var/lib/cni /var/log/containers /var/log/pods; do
	mkdir -p "${d}"
	mount -t tmpfs -o mode=0755 tmpfs "${d}"
done

containerd --config "${dir}/containerd.toml" >"${cluster_dir}/logs/${name}-containerd.log" 2>&1 &
for _ in $(seq 1 100); do
	[[ -S "${dir}/containerd.sock" ]] && ctr --address "${dir}/containerd.sock" version >/dev/null 2>&1 && break
	sleep 0.1
done
for archive in "${images}"/*.tar; do
	ctr --address "${dir}/containerd.sock" -n k8s.io images import "${archive}" >>"${cluster_dir}/logs/${name}-images.log" 2>&1
done

"${bin}/kubelet" --config "${dir}/kubelet.yaml" --kubeconfig "${cluster_dir}/${name}.kubeconfig" \
	--root-dir "${dir}/kubelet" --hostname-override "${name}" --node-ip "${node_ip}" \
	>"${cluster_dir}/logs/${name}-kubelet.log" 2>&1 &
"${bin}/kube-proxy" --config "${dir}/kube-proxy.yaml" \
	>"${cluster_dir}/logs/${name}-kube-proxy.log" 2>&1 &

# As PID 1 this shell also reaps the orphans the node's processes leave.
wait -n
echo "a process of ${name} exited; the node stops" >&2
exit 1
