#!/usr/bin/env bash
# cluster.sh runs a real multi-node Kubernetes cluster on this machine, for
# agentlane's end-to-end suite (make test-e2e) and for trying agentlane on real
# kubelets without a cloud.
#
#   hack/cluster.sh up [--nodes N]   start a control plane and N nodes (default 3)
#   hack/cluster.sh down             stop everything and remove every trace
#   hack/cluster.sh kill-node NAME   end a node's processes at once (a node failure)
#   hack/cluster.sh status           say whether a cluster is up; print its KUBECONFIG
#
# Layout (see docs/cluster.md): etcd, kube-apiserver, kube-controller-manager
# and kube-scheduler run as host processes; the API server listens on a host
# bridge. Each node is a network namespace with a veth on that bridge, and its
# containerd, kubelet and kube-proxy run in that namespace under a private PID
# and mount namespace (hack/cluster/node.sh), so that killing the node's first
# process ends the whole node. Pods get addresses from a /24 per node, routed
# between nodes and from the host without NAT.
#
# It needs root (namespaces, mounts, cgroups, containerd). Binaries: the
# envtest control plane (hack/envtest-assets.sh) and the node components
# (hack/cluster-assets.sh), both built once from Go modules; containerd, runc
# and the CNI plugins come from Debian's packages and are installed when
# missing. Images: the archives of `make images` (bin/images/*.tar) are
# imported into every node.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

CLUSTER_DIR="${AGENTLANE_CLUSTER_DIR:-/var/lib/agentlane-cluster}"
IMAGES_DIR="${AGENTLANE_IMAGES_DIR:-${root}/bin/images}"
PAUSE_IMG="${PAUSE_IMG:-agentlane-pause:dev}"
# Names and addresses. The bridge carries the nodes' own addresses; pods get
# 10.244.<n>.0/24 on node n; Services get 10.96.0.0/16.
BRIDGE=agentlane0
BRIDGE_PREFIX=10.240.0
APISERVER_IP="${BRIDGE_PREFIX}.1"
POD_PREFIX=10.244
SERVICE_CIDR=10.96.0.0/16
ETCD_CLIENT_PORT=23790
ETCD_PEER_PORT=23800

log() { printf '[cluster] %s\n' "$*" >&2; }
die() { printf '[cluster] error: %s\n' "$*" >&2; exit 1; }

node_name() { echo "node-$1"; }
node_ip() { echo "${BRIDGE_PREFIX}.$((10 + $1))"; }
node_netns() { echo "agentlane-node-$1"; }
node_veth() { echo "agentlane-n$1"; }
node_index() { # node-3 -> 3
	[[ "$1" =~ ^node-([0-9]+)$ ]] || die "no such node: $1 (names are node-1, node-2, ...)"
	echo "${BASH_REMATCH[1]}"
}

need_root() {
	[[ "$(uname -s)" == Linux ]] || die "the local cluster needs Linux"
	[[ "$(id -u)" -eq 0 ]] || die "the local cluster needs root (network namespaces, mounts, cgroups and containerd); run it as root, for example: sudo $1"
}

# ensure_packages installs containerd, runc, the CNI plugins, iptables and
# conntrack from Debian's packages when one of them is missing.
ensure_packages() {
	local missing=()
	command -v containerd >/dev/null || missing+=(containerd)
	command -v runc >/dev/null || missing+=(runc)
	[[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
	command -v iptables >/dev/null || missing+=(iptables)
	command -v conntrack >/dev/null || missing+=(conntrack)
	((${#missing[@]} == 0)) && return 0
	log "installing ${missing[*]} from Debian's packages"
	command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# start NAME CMD... runs CMD as a host process in its own session, its output
# in logs/NAME.log and its pid in pids/NAME.
start() {
	local name="$1"
	shift
	setsid "$@" >"${CLUSTER_DIR}/logs/${name}.log" 2>&1 </dev/null &
	echo $! >"${CLUSTER_DIR}/pids/${name}"
}

# wait_for WHAT SECONDS CMD... retries CMD every half second.
wait_for() {
	local what="$1" secs="$2"
	shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "timed out after ${secs}s waiting for ${what}"
		sleep 0.5
	done
}

# --- PKI ----------------------------------------------------------------------

# cert NAME SUBJECT EXT signs an EC key pair NAME.{key,crt} with the cluster CA.
cert() {
	local name="$1" subj="$2" ext="$3" pki="${CLUSTER_DIR}/pki"
	openssl ecparam -name prime256v1 -genkey -noout -out "${pki}/${name}.key" 2>/dev/null
	openssl req -new -key "${pki}/${name}.key" -subj "${subj}" -out "${pki}/${name}.csr" 2>/dev/null
	printf '%s\n' "${ext}" >"${pki}/${name}.ext"
	openssl x509 -req -in "${pki}/${name}.csr" -CA "${pki}/ca.crt" -CAkey "${pki}/ca.key" -CAcreateserial \
		-days 30 -sha256 -extfile "${pki}/${name}.ext" -out "${pki}/${name}.crt" 2>/dev/null
	rm -f "${pki}/${name}.csr" "${pki}/${name}.ext"
}

client_cert() { cert "$1" "$2" "keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"; }

# kubeconfig NAME writes NAME.kubeconfig for the client certificate NAME.
kubeconfig() {
	local name="$1" pki="${CLUSTER_DIR}/pki"
	cat >"${CLUSTER_DIR}/${name}.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: agentlane
  cluster:
    server: https://${APISERVER_IP}:6443
    certificate-authority: ${pki}/ca.crt
users:
- name: ${name}
  user:
    client-certificate: ${pki}/${name}.crt
    client-key: ${pki}/${name}.key
contexts:
- name: agentlane
  context: {cluster: agentlane, user: ${name}}
current-context: agentlane
EOF
}

make_pki() {
	local nodes="$1" pki="${CLUSTER_DIR}/pki" i
	mkdir -p -m 0700 "${pki}"
	openssl ecparam -name prime256v1 -genkey -noout -out "${pki}/ca.key" 2>/dev/null
	openssl req -x509 -new -key "${pki}/ca.key" -subj "/CN=agentlane-cluster-ca" -days 30 -sha256 \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
		-out "${pki}/ca.crt" 2>/dev/null
	cert apiserver "/CN=kube-apiserver" "keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:${APISERVER_IP},IP:10.96.0.1,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	# Service-account tokens are signed with their own key.
	openssl ecparam -name prime256v1 -genkey -noout -out "${pki}/sa.key" 2>/dev/null
	openssl ec -in "${pki}/sa.key" -pubout -out "${pki}/sa.pub" 2>/dev/null
	client_cert admin "/O=system:masters/CN=agentlane-admin"
	client_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
	client_cert kube-controller-manager "/CN=system:kube-controller-manager"
	client_cert kube-scheduler "/CN=system:kube-scheduler"
	client_cert kube-proxy "/CN=system:kube-proxy"
	for name in admin kube-controller-manager kube-scheduler kube-proxy; do kubeconfig "${name}"; done
	for ((i = 1; i <= nodes; i++)); do
		client_cert "$(node_name "$i")" "/O=system:nodes/CN=system:node:$(node_name "$i")"
		kubeconfig "$(node_name "$i")"
	done
	cp "${CLUSTER_DIR}/admin.kubeconfig" "${CLUSTER_DIR}/kubeconfig"
	# The keys and the kubeconfigs that name them are root's alone.
	chmod 0700 "${pki}"
	chmod 0600 "${pki}"/*.key "${CLUSTER_DIR}"/*.kubeconfig "${CLUSTER_DIR}/kubeconfig"
}

# --- network ------------------------------------------------------------------

make_network() {
	local nodes="$1" i j ns
	ip link add "${BRIDGE}" type bridge
	ip addr add "${APISERVER_IP}/24" dev "${BRIDGE}"
	ip link set "${BRIDGE}" up
	for ((i = 1; i <= nodes; i++)); do
		ns="$(node_netns "$i")"
		ip netns add "${ns}"
		ip link add "$(node_veth "$i")" type veth peer name eth0 netns "${ns}"
		ip link set "$(node_veth "$i")" master "${BRIDGE}" up
		in_node "$i" ip addr add "$(node_ip "$i")/24" dev eth0
		in_node "$i" ip link set lo up
		in_node "$i" ip link set eth0 up
		in_node "$i" ip route add default via "${APISERVER_IP}"
		# The node routes its pods, and bridged pod traffic goes through
		# kube-proxy's rules (Services between pods of one node).
		in_node "$i" sysctl -qw net.ipv4.ip_forward=1
		in_node "$i" sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
		ip route add "${POD_PREFIX}.${i}.0/24" via "$(node_ip "$i")"
	done
	for ((i = 1; i <= nodes; i++)); do
		for ((j = 1; j <= nodes; j++)); do
			((i == j)) || in_node "$i" ip route add "${POD_PREFIX}.${j}.0/24" via "$(node_ip "$j")"
		done
	done
}

in_node() {
	local i="$1"
	shift
	nsenter --net="/run/netns/$(node_netns "$i")" "$@"
}

# --- control plane ------------------------------------------------------------

start_control_plane() {
	local envtest="$1" cluster="$2" pki="${CLUSTER_DIR}/pki"
	start etcd "${envtest}/etcd" --name agentlane --data-dir "${CLUSTER_DIR}/etcd" \
		--listen-client-urls "http://127.0.0.1:${ETCD_CLIENT_PORT}" --advertise-client-urls "http://127.0.0.1:${ETCD_CLIENT_PORT}" \
		--listen-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" --initial-advertise-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" \
		--initial-cluster "agentlane=http://127.0.0.1:${ETCD_PEER_PORT}" --unsafe-no-fsync
	start kube-apiserver "${envtest}/kube-apiserver" \
		--etcd-servers "http://127.0.0.1:${ETCD_CLIENT_PORT}" \
		--bind-address "${APISERVER_IP}" --advertise-address "${APISERVER_IP}" --secure-port 6443 \
		--service-cluster-ip-range "${SERVICE_CIDR}" \
		--client-ca-file "${pki}/ca.crt" --tls-cert-file "${pki}/apiserver.crt" --tls-private-key-file "${pki}/apiserver.key" \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "${pki}/sa.pub" --service-account-signing-key-file "${pki}/sa.key" \
		--kubelet-client-certificate "${pki}/apiserver-kubelet-client.crt" --kubelet-client-key "${pki}/apiserver-kubelet-client.key" \
		--kubelet-preferred-address-types InternalIP \
		--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
		--cert-dir "${CLUSTER_DIR}/apiserver" --profiling=false
	wait_for "the API server" 90 kctl get --raw /readyz
	start kube-controller-manager "${cluster}/kube-controller-manager" \
		--kubeconfig "${CLUSTER_DIR}/kube-controller-manager.kubeconfig" \
		--authentication-kubeconfig "${CLUSTER_DIR}/kube-controller-manager.kubeconfig" \
		--authorization-kubeconfig "${CLUSTER_DIR}/kube-controller-manager.kubeconfig" \
		--service-account-private-key-file "${pki}/sa.key" --root-ca-file "${pki}/ca.crt" \
		--cluster-signing-cert-file "${pki}/ca.crt" --cluster-signing-key-file "${pki}/ca.key" \
		--use-service-account-credentials --leader-elect=false \
		--bind-address 127.0.0.1 --secure-port 10257 --node-monitor-grace-period 20s
	start kube-scheduler "${cluster}/kube-scheduler" \
		--kubeconfig "${CLUSTER_DIR}/kube-scheduler.kubeconfig" \
		--authentication-kubeconfig "${CLUSTER_DIR}/kube-scheduler.kubeconfig" \
		--authorization-kubeconfig "${CLUSTER_DIR}/kube-scheduler.kubeconfig" \
		--leader-elect=false --bind-address 127.0.0.1 --secure-port 10259
}

kctl() { "${KUBECTL}" --kubeconfig "${CLUSTER_DIR}/kubeconfig" "$@"; }

# --- nodes --------------------------------------------------------------------

# node_config I writes node I's containerd, CNI, kubelet and kube-proxy
# configuration into nodes/node-I/.
node_config() {
	local i="$1" name dir pki="${CLUSTER_DIR}/pki"
	name="$(node_name "$i")"
	dir="${CLUSTER_DIR}/nodes/${name}"
	mkdir -p "${dir}/cni" "${dir}/kubelet" "${dir}/containerd"
	cat >"${dir}/containerd.toml" <<EOF
version = 2
root = "${dir}/containerd"
state = "/run/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "${dir}/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "${dir}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMG}"
  # runc cannot lower oom_score_adj where CAP_SYS_RESOURCE is withheld.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "/run/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${dir}/cni"
EOF
	cat >"${dir}/cni/10-agentlane.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "agentlane",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "${POD_PREFIX}.${i}.0/24"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
	cat >"${dir}/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /${name}
containerRuntimeEndpoint: unix://${dir}/containerd.sock
address: $(node_ip "$i")
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: ${pki}/ca.crt}
authorization: {mode: AlwaysAllow}
failSwapOn: false
resolvConf: /etc/resolv.conf
podCIDR: ${POD_PREFIX}.${i}.0/24
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
EOF
	cat >"${dir}/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: ${CLUSTER_DIR}/kube-proxy.kubeconfig
hostnameOverride: ${name}
mode: iptables
clusterCIDR: ${POD_PREFIX}.0.0/16
# Masquerading all Service traffic keeps replies symmetric when a pod reaches
# a Service whose endpoint sits on the same node bridge.
iptables:
  masqueradeAll: true
# The conntrack table is the host's; leave its limits alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
metricsBindAddress: 127.0.0.1:10249
EOF
}

# make_cgroup_root I creates /node-I in every cgroup v1 hierarchy: the
# kubelet's cgroupRoot, so that the nodes' kubepods trees do not collide.
make_cgroup_root() {
	local name h
	name="$(node_name "$1")"
	for h in /sys/fs/cgroup/*/; do
		[[ -f "${h}cgroup.procs" ]] || continue
		mkdir -p "${h}${name}"
		if [[ -f "${h}cpuset.cpus" ]]; then
			cat "${h}cpuset.cpus" >"${h}${name}/cpuset.cpus"
			cat "${h}cpuset.mems" >"${h}${name}/cpuset.mems"
		fi
	done
}

start_node() {
	local i="$1" cluster="$2" name
	name="$(node_name "$i")"
	node_config "$i"
	make_cgroup_root "$i"
	# The node's first process (node.sh) is PID 1 of its own PID namespace:
	# killing it, or unshare (--kill-child), ends everything on the node.
	start "${name}" nsenter --net="/run/netns/$(node_netns "$i")" \
		unshare --pid --fork --kill-child=SIGKILL --mount-proc --propagation slave \
		"${root}/hack/cluster/node.sh" "${name}" "$(node_ip "$i")" "${CLUSTER_DIR}" "${cluster}" "${IMAGES_DIR}"
}

# --- commands -----------------------------------------------------------------

cmd_up() {
	local nodes="${CLUSTER_NODES:-3}"
	while (($#)); do
		case "$1" in
		--nodes) nodes="$2"; shift 2 ;;
		--nodes=*) nodes="${1#*=}"; shift ;;
		*) die "unknown flag $1" ;;
		esac
	done
	[[ "${nodes}" =~ ^[1-9][0-9]?$ ]] || die "--nodes must be a number from 1 to 99"
	need_root "make cluster-up"
	if alive "${CLUSTER_DIR}/pids/kube-apiserver"; then
		die "a cluster is up (${CLUSTER_DIR}); run 'make cluster-down' first"
	fi
	if [[ -e "${CLUSTER_DIR}" ]] || ip link show "${BRIDGE}" >/dev/null 2>&1 || ip netns list | grep -q '^agentlane-node-'; then
		# An earlier cluster whose API server is gone (killed, or the
		# machine restarted): clear what is left of it first.
		log "removing the remains of an earlier cluster"
		cmd_down
	fi
	compgen -G "${IMAGES_DIR}/*.tar" >/dev/null || die "no image archives in ${IMAGES_DIR}; run 'make images' first"

	ensure_packages
	local envtest cluster began=${SECONDS}
	envtest="$("${root}/hack/envtest-assets.sh")"
	cluster="$("${root}/hack/cluster-assets.sh")"
	KUBECTL="${envtest}/kubectl"

	mkdir -p "${CLUSTER_DIR}/logs" "${CLUSTER_DIR}/pids"
	echo "${nodes}" >"${CLUSTER_DIR}/nodes-count"
	# From here on a failure (a failed command or a die) tears down what was
	# started.
	trap up_failed EXIT
	log "certificates"
	make_pki "${nodes}"
	log "network: bridge ${BRIDGE} (${APISERVER_IP}/24), ${nodes} node namespaces"
	make_network "${nodes}"
	log "control plane"
	start_control_plane "${envtest}" "${cluster}"
	local i
	for ((i = 1; i <= nodes; i++)); do
		log "node $(node_name "$i") at $(node_ip "$i"), pods ${POD_PREFIX}.${i}.0/24"
		start_node "$i" "${cluster}"
	done
	log "waiting for ${nodes} nodes to be Ready"
	wait_for "${nodes} Ready nodes" 180 nodes_ready "${nodes}"
	trap - EXIT
	ln -sf "${envtest}/kubectl" "${CLUSTER_DIR}/kubectl"
	log "cluster up in $((SECONDS - began))s"
	kctl get nodes -o wide >&2
	echo "export KUBECONFIG=${CLUSTER_DIR}/kubeconfig"
}

# up_failed keeps the logs of a bring-up that failed and tears down what it
# started.
up_failed() {
	local keep="${TMPDIR:-/tmp}/agentlane-cluster-logs"
	rm -rf "${keep}"
	cp -r "${CLUSTER_DIR}/logs" "${keep}" 2>/dev/null || true
	log "bring-up failed; tearing down; the logs are in ${keep}"
	cmd_down >/dev/null 2>&1 || true
}

nodes_ready() {
	local want="$1" ready
	ready="$(kctl get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c '^True$')"
	((ready == want))
}

# kill_node_processes I ends node I (its first process takes the rest with it)
# and waits until none of its processes is left.
kill_node_processes() {
	local name pidfile
	name="$(node_name "$1")"
	pidfile="${CLUSTER_DIR}/pids/${name}"
	if alive "${pidfile}"; then
		kill -KILL "$(cat "${pidfile}")" 2>/dev/null || true
	fi
	local deadline=$((SECONDS + 30))
	while [[ -n "$(pids_matching "${CLUSTER_DIR}/nodes/${name}/")" ]]; do
		((SECONDS < deadline)) || { log "processes of ${name} are still running"; break; }
		sleep 0.2
	done
}

cmd_kill_node() {
	need_root "hack/cluster.sh kill-node NAME"
	[[ $# -eq 1 ]] || die "usage: hack/cluster.sh kill-node NAME"
	local i
	i="$(node_index "$1")"
	[[ -f "${CLUSTER_DIR}/pids/$1" ]] || die "no node $1 in ${CLUSTER_DIR}"
	kill_node_processes "$i"
	log "$1 killed"
}

# remove_cgroups NAME removes the cgroup tree /NAME from every hierarchy,
# deepest first; it retries while the last processes leave.
remove_cgroups() {
	local name="$1" h tries
	for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/unified/; do
		[[ -d "${h}${name}" ]] || continue
		for tries in 1 2 3 4 5 6 7 8 9 10; do
			find "${h}${name}" -depth -type d -exec rmdir {} + 2>/dev/null || true
			[[ -d "${h}${name}" ]] || break
			sleep 0.5
		done
		[[ -d "${h}${name}" ]] && log "could not remove cgroup ${h}${name}"
	done
	return 0
}

cmd_down() {
	need_root "make cluster-down"
	local nodes=0 i name
	[[ -f "${CLUSTER_DIR}/nodes-count" ]] && nodes="$(cat "${CLUSTER_DIR}/nodes-count")"
	# Nodes that a failed run left without a count are found by namespace.
	for ns in $(ip netns list 2>/dev/null | awk '/^agentlane-node-/{print $1}'); do
		i="${ns#agentlane-node-}"
		((i > nodes)) && nodes="$i"
	done
	for ((i = 1; i <= nodes; i++)); do
		kill_node_processes "$i"
	done
	for name in kube-scheduler kube-controller-manager kube-apiserver etcd; do
		if alive "${CLUSTER_DIR}/pids/${name}"; then
			kill -TERM "$(cat "${CLUSTER_DIR}/pids/${name}")" 2>/dev/null || true
		fi
	done
	for name in kube-scheduler kube-controller-manager kube-apiserver etcd; do
		local deadline=$((SECONDS + 15))
		while alive "${CLUSTER_DIR}/pids/${name}"; do
			if ((SECONDS >= deadline)); then
				kill -KILL "$(cat "${CLUSTER_DIR}/pids/${name}")" 2>/dev/null || true
				break
			fi
			sleep 0.2
		done
	done
	for ((i = 1; i <= nodes; i++)); do
		remove_cgroups "$(node_name "$i")"
		ip netns del "$(node_netns "$i")" 2>/dev/null || true
		ip link del "$(node_veth "$i")" 2>/dev/null || true
	done
	# Deleting the bridge takes the host's routes to the pod networks with it.
	ip link del "${BRIDGE}" 2>/dev/null || true
	# Nothing is mounted under the cluster directory in the host's mount
	# namespace (the nodes mount in their own); make sure before removing it.
	if [[ -d "${CLUSTER_DIR}" ]]; then
		findmnt -rn -o TARGET | grep -F "${CLUSTER_DIR}" | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
		rm -rf "${CLUSTER_DIR}"
	fi
	leftovers
	log "cluster down"
}

# pids_matching PATTERN lists the processes whose command line holds
# PATTERN, except this script and the commands that started it (whose own
# command lines may name the cluster's directory).
pids_matching() {
	local ancestors=" " pid=$$
	while [[ "${pid}" -gt 1 ]]; do
		ancestors+="${pid} "
		pid="$(awk '{print $4}' "/proc/${pid}/stat" 2>/dev/null || echo 1)"
	done
	local p
	for p in $(pgrep -f -- "$1"); do
		[[ "${ancestors}" == *" ${p} "* ]] || echo "${p}"
	done
}

# leftovers fails, naming them, when anything of a cluster is still there.
leftovers() {
	local left=() h
	local pids
	pids="$(pids_matching "${CLUSTER_DIR}/" | paste -sd, -)"
	[[ -n "${pids}" ]] && left+=("processes: ${pids}")
	ip netns list 2>/dev/null | grep -q '^agentlane-node-' && left+=("network namespaces")
	ip link show "${BRIDGE}" >/dev/null 2>&1 && left+=("bridge ${BRIDGE}")
	ip route show | grep -q "^${POD_PREFIX}\." && left+=("routes to ${POD_PREFIX}.0.0/16")
	findmnt -rn -o TARGET | grep -qF "${CLUSTER_DIR}" && left+=("mounts under ${CLUSTER_DIR}")
	for h in /sys/fs/cgroup/*/; do
		compgen -G "${h}node-[0-9]*" >/dev/null && left+=("cgroups ${h}node-*")
	done
	[[ -e "${CLUSTER_DIR}" ]] && left+=("${CLUSTER_DIR}")
	if ((${#left[@]})); then
		log "left behind: ${left[*]}"
		return 1
	fi
}

cmd_status() {
	if [[ -f "${CLUSTER_DIR}/kubeconfig" ]] && alive "${CLUSTER_DIR}/pids/kube-apiserver"; then
		echo "export KUBECONFIG=${CLUSTER_DIR}/kubeconfig"
		return 0
	fi
	log "no cluster is up"
	return 1
}

case "${1:-}" in
up) shift; cmd_up "$@" ;;
down) shift; cmd_down "$@" ;;
kill-node) shift; cmd_kill_node "$@" ;;
status) shift; cmd_status "$@" ;;
*) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' >&2; exit 2 ;;
esac
