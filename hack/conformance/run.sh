#!/usr/bin/env bash
# Runs the upstream Kubernetes NodeConformance specs (k8s.io/kubernetes
# v1.37.2, test/e2e) against a nodekit node: examples/node started as the
# kubelet would be, on a one-node cluster on loopback.
#
#   1. builds the tools and test images (build.sh; cached, seconds when warm)
#   2. starts etcd, kube-apiserver, kube-scheduler and
#      kube-controller-manager on 127.0.0.1, a private containerd
#      (hack/e2e/up.sh) with the test images imported, and examples/node
#      as node "localhost" with a KubeletConfiguration and a kubeconfig;
#      waits (bounded) for the Node to be Ready
#   3. runs the specs with ginkgo in parallel, bounded by --timeout
#      (with --kubelet the upstream kubelet in its place)
#   4. writes RESULTS/specs.tsv (spec, area, status, first failure line)
#      and RESULTS/summary.md (counts per area, failures), copies the
#      components' logs to RESULTS/logs, and stops everything it started,
#      also on failure or interrupt
#
# usage: run.sh [--focus REGEX] [--subset] [--slow] [--all] [--procs N]
#               [--timeout MINUTES] [--results DIR] [--build-only]
#               [--require-pass] [--kubelet]
#
#   --focus REGEX    only the specs whose full text matches REGEX
#   --subset         only the SUBSET below (about 20 specs, a few minutes)
#   --slow           the Slow and Serial NodeConformance specs instead of
#                    the fast ones (ginkgo runs the Serial ones last,
#                    alone); still none Disruptive or Flaky
#   --all            the fast, Slow and Serial specs together
#   --procs N        ginkgo processes (default 16: most specs wait on pods,
#                    a failing one up to 5 min, so processes are cheap)
#   --timeout M      the whole suite's bound in minutes (default 60)
#   --results DIR    where the results go (default: a new directory under
#                    CACHE/results, also linked as CACHE/results/latest)
#   --build-only     build, then stop
#   --require-pass   exit 1 unless every selected spec ran and passed
#                    (make test runs the subset so)
#   --kubelet        run the upstream kubelet v1.37.2 (built by build.sh)
#                    as the node instead of examples/node, with the same
#                    flags (but --node-ip) and KubeletConfiguration (plus
#                    two keys, see below), to tell a nodekit
#                    failure from one of this machine or the stand-in
#                    images; see kubelet-ns.sh for what keeps it from
#                    changing the host
#
# Environment: NODEKIT_CONFORMANCE_CACHE (the build cache, default
# ~/.cache/nodekit/conformance), NODEKIT_CONFORMANCE_DIR (scratch, default
# /tmp/nodekit-conformance), NODEKIT_CONFORMANCE_NICE (niceness of
# everything it runs, default 19), NODEKIT_CONFORMANCE_BRIDGE and
# NODEKIT_CONFORMANCE_SUBNET (the pods' CNI bridge, default nk-conf0 and
# 10.213.99.0/24; with another scratch directory they let two runs share
# a machine, though specs that bind host ports may then collide). Needs root (containerd, mounts), Go,
# openssl, curl and the Debian packages of hack/e2e/install.sh.
#
# It exits 0 when the suite ran, whatever the specs' results (they are
# the report), unless --require-pass; non-zero when the cluster could not
# be set up.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
scratch=$(realpath -m -- "${NODEKIT_CONFORMANCE_DIR:-/tmp/nodekit-conformance}")
# /proc/mounts, which the clean-up matches against it, escapes blanks and
# backslashes: such a path would leave mounts unmatched under rm -rf.
case $scratch in
/ | *[[:space:]\\]*) echo "conformance: unusable scratch directory '$scratch'" >&2; exit 2 ;;
esac
niceness=${NODEKIT_CONFORMANCE_NICE:-19}
bridge=${NODEKIT_CONFORMANCE_BRIDGE:-nk-conf0}
# The node's pod cgroups (<root>/kubepods/...): the run's own, as its
# bridge is, and removed with it.
cgroup_root=/nodekit-conformance-$bridge
subnet=${NODEKIT_CONFORMANCE_SUBNET:-10.213.99.0/24}
label_filter='NodeConformance && !Slow && !Serial && !Disruptive && !Flaky'
node_name=localhost

# SUBSET: 20 fast specs over pod lifecycle, probes, volumes, logs, exec
# and security context, for a quick check; "make test" runs them with
# --require-pass (make conformance-subset).
# Each entry is a regular expression matched against the spec's text.
SUBSET=(
	'Pods should get a host IP'
	'Pods should be submitted and removed'
	'Pods should be updated'
	'Pods should contain environment variables for services'
	'Pods should support remote command execution over websockets'
	'Pods should support retrieving logs from the container over websockets'
	'\] InitContainer should invoke init containers on a RestartNever pod'
	'\] InitContainer should not start app containers if init containers fail on a RestartAlways pod'
	'\[sig-node\] Container Lifecycle Hook when create a pod with lifecycle hook should execute poststart exec hook properly'
	'Container Runtime blackbox test on terminated container should report termination message from file when pod succeeds'
	'Probing container should be restarted with a exec "cat /tmp/health" liveness probe'
	'Probing container with readiness probe should not be ready before initial delay and never restart'
	'Probing container should have monotonically increasing restart count'
	'EmptyDir volumes should support \(root,0644,default\)'
	'\] ConfigMap should be consumable from pods in volume \['
	'\] Secrets should be consumable from pods in volume \['
	'Downward API volume should provide podname only'
	'\] Projected configMap should be consumable from pods in volume \['
	'Kubelet when scheduling a busybox command in a pod should print the output to logs'
	'Security Context When creating a container with runAsUser should run the container with uid 65534'
)

focus=
procs=16
timeout_min=60
results=
build_only=
require_pass=
kubelet=
while [ $# -gt 0 ]; do
	case $1 in
	--focus) focus=${2:?--focus needs a REGEX}; shift 2 ;;
	--subset) focus=$(IFS='|'; echo "${SUBSET[*]}"); shift ;;
	--slow) label_filter='NodeConformance && (Slow || Serial) && !Disruptive && !Flaky'; shift ;;
	--all) label_filter='NodeConformance && !Disruptive && !Flaky'; shift ;;
	--procs) procs=${2:?--procs needs N}; shift 2 ;;
	--timeout) timeout_min=${2:?--timeout needs MINUTES}; shift 2 ;;
	--results) results=${2:?--results needs DIR}; shift 2 ;;
	--build-only) build_only=1; shift ;;
	--require-pass) require_pass=1; shift ;;
	--kubelet) kubelet=1; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
	*) echo "conformance: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
[[ $procs =~ ^[1-9][0-9]*$ ]] || { echo "conformance: --procs $procs is not a positive number" >&2; exit 2; }
[[ $timeout_min =~ ^[1-9][0-9]*$ ]] || { echo "conformance: --timeout $timeout_min is not a number of minutes" >&2; exit 2; }

log() { echo "conformance: $(date -u +%H:%M:%S) $*" >&2; }
n() { nice -n "$niceness" "$@"; }

# 1. Build.
"$repo/hack/e2e/install.sh"
build_start=$(date +%s)
cache=$(NODEKIT_CONFORMANCE_KUBELET=$kubelet "$here/build.sh" | tail -n 1)
tools=${NODEKIT_TOOLS:-$HOME/.cache/nodekit/tools}
log "tools ready in $(($(date +%s) - build_start)) s: $cache/bin, $tools"
[ -z "$build_only" ] || exit 0

if [ -z "$results" ]; then
	results=$cache/results/$(date -u +%Y%m%dT%H%M%SZ)
	mkdir -p "$results"
	ln -sfn "$results" "$cache/results/latest"
fi
mkdir -p "$results"
results=$(cd "$results" && pwd)

# remove_cgroups removes the node's cgroups, left empty once containerd
# and its containers are gone, deepest first, in every hierarchy.
remove_cgroups() {
	local h
	for h in /sys/fs/cgroup /sys/fs/cgroup/*; do
		[ -d "$h$cgroup_root" ] || continue
		find "$h$cgroup_root" -depth -type d -exec rmdir {} + 2>/dev/null || true
	done
}

# mounts_under lists what is mounted under the scratch directory.
mounts_under() { awk -v d="$scratch" 'index($2, d "/") == 1 {print $2}' /proc/mounts; }

# unmount_scratch unmounts what is mounted under the scratch directory
# (the node's volumes, hostPath subPaths among them), deepest first.
unmount_scratch() {
	mounts_under | sort -r | while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
}

# remove_scratch removes the scratch directory, unless something is still
# mounted under it: rm -rf would then delete what that mount shows (a
# hostPath volume shows the host's own files).
remove_scratch() {
	local left
	left=$(mounts_under)
	if [ -n "$left" ]; then
		log "not removing $scratch: still mounted under it: $left"
		return 1
	fi
	rm -rf "$scratch"
}

# The upstream kubelet (--kubelet) writes where no flag moves it: links
# to its pods' logs in /var/log/containers, and its device plugin socket
# and checkpoint in /var/lib/kubelet/device-plugins. The directories it
# would create are listed in $scratch/host-created before it starts (so
# that the next run cleans up after one that was killed); afterwards its
# links into the scratch directory and its two files are removed, and
# the directories of the list, if empty.
clean_kubelet_host() {
	if [ -d /var/log/containers ]; then
		find /var/log/containers -maxdepth 1 -type l -lname "$scratch/*" -delete 2>/dev/null || true
	fi
	[ -f "$scratch/host-created" ] || return 0
	rm -f /var/lib/kubelet/device-plugins/kubelet.sock /var/lib/kubelet/device-plugins/kubelet_internal_checkpoint
	tac "$scratch/host-created" | while read -r d; do
		rmdir "$d" 2>/dev/null || true
	done
	rm -f "$scratch/host-created"
}

# Everything started is recorded in $scratch/pids and stopped by the
# trap, newest first; then containerd and its containers by
# hack/e2e/down.sh (the node leaves its pods running, as the kubelet).
stop_all() {
	local rc=$? pid
	trap - EXIT INT TERM
	log "stopping everything started"
	# The suite: timeout leads a process group of its own with ginkgo and
	# the e2e.test processes; ginkgo is given a moment to clean up.
	if [ -f "$scratch/suite.pid" ]; then
		pid=$(cat "$scratch/suite.pid")
		if kill -TERM -- "-$pid" 2>/dev/null; then
			for _ in $(seq 1 150); do
				kill -0 -- "-$pid" 2>/dev/null || break
				sleep 0.2
			done
			kill -KILL -- "-$pid" 2>/dev/null || true
		fi
	fi
	if [ -f "$scratch/pids" ]; then
		for pid in $(tac "$scratch/pids"); do
			kill "$pid" 2>/dev/null || true
		done
		for pid in $(tac "$scratch/pids"); do
			for _ in $(seq 1 50); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.2
			done
			kill -9 "$pid" 2>/dev/null || true
		done
	fi
	mkdir -p "$results/logs"
	cp "$scratch"/logs/*.log "$results/logs/" 2>/dev/null || true
	cp "$scratch/containerd/logs/containerd.log" "$results/logs/" 2>/dev/null || true
	"$repo/hack/e2e/down.sh" "$scratch/containerd" || true
	remove_cgroups
	clean_kubelet_host
	unmount_scratch
	remove_scratch || rc=1
	log "results in $results"
	exit "$rc"
}

# A previous run that was killed may have left its scratch directory and
# processes: those whose arguments name the scratch directory.
if [ -f "$scratch/pids" ]; then
	for pid in $(cat "$scratch/pids"); do
		if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$scratch/"; then
			kill -9 "$pid" 2>/dev/null || true
		fi
	done
fi
"$repo/hack/e2e/down.sh" "$scratch/containerd" || true
remove_cgroups
clean_kubelet_host
unmount_scratch
remove_scratch
mkdir -p "$scratch"/{logs,pki,etcd,apiserver,node,bin}
trap stop_all EXIT INT TERM

# start NAME CMD...: runs CMD niced in the background, logging to
# $scratch/logs/NAME.log, and records its PID.
start() {
	local name=$1
	shift
	# nice execs the command, so $! is the command's own PID.
	nice -n "$niceness" "$@" >"$scratch/logs/$name.log" 2>&1 &
	echo $! >>"$scratch/pids"
	log "started $name (pid $!)"
}

# wait_for WHAT SECONDS CMD...: polls CMD every half second, at most
# SECONDS; on timeout shows the logs and fails.
wait_for() {
	local what=$1 secs=$2 i
	shift 2
	for ((i = 0; i < secs * 2; i++)); do
		if "$@" >/dev/null 2>&1; then
			log "$what"
			return 0
		fi
		sleep 0.5
	done
	log "timed out after ${secs}s waiting for: $what"
	tail -n 20 "$scratch"/logs/*.log >&2 || true
	return 1
}

# Free loopback ports, chosen at random so that parallel runs do not meet.
used=" "
# They are taken below the kernel's ephemeral range: a port in it may
# become the local port of some outgoing connection (the API server's to
# etcd) between this check and the listen.
ephemeral_low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
port_low=10000
[ "$ephemeral_low" -gt $((port_low + 1000)) ] || port_low=1024
free_port() {
	local p
	for _ in $(seq 1 200); do
		p=$((port_low + RANDOM % (ephemeral_low - port_low)))
		[[ $used == *" $p "* ]] && continue
		if [ -z "$(ss -Htln "sport = :$p")" ]; then
			used+="$p "
			printf -v "$1" '%s' "$p"
			return 0
		fi
	done
	echo "conformance: no free port found" >&2
	return 1
}
free_port etcd_port
free_port etcd_peer_port
free_port api_port
free_port sched_port
free_port cm_port
free_port node_port

# Keys and certificates: the service-account key pair; a CA that signs
# the API server's client certificate for the node and the node's
# serving certificate (the API server does not verify the latter, as it
# is started without --kubelet-certificate-authority).
pki=$scratch/pki
(
	cd "$pki"
	openssl genrsa -out sa.key 2048
	openssl rsa -in sa.key -pubout -out sa.pub
	openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=nodekit-conformance-ca"
	openssl req -newkey rsa:2048 -nodes -keyout apiserver-kubelet-client.key -out apiserver-kubelet-client.csr \
		-subj "/O=system:masters/CN=kube-apiserver-kubelet-client"
	openssl x509 -req -in apiserver-kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
		-out apiserver-kubelet-client.crt
	openssl req -newkey rsa:2048 -nodes -keyout node.key -out node.csr -subj "/CN=$node_name"
	printf 'subjectAltName=DNS:%s,IP:127.0.0.1\n' "$node_name" >node.ext
	openssl x509 -req -in node.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile node.ext -out node.crt
) >"$scratch/logs/pki.log" 2>&1
admin_token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
node_token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
cat >"$pki/tokens.csv" <<EOF
$admin_token,admin,admin,"system:masters"
$node_token,system:node:$node_name,node-$node_name,"system:nodes"
EOF
chmod 600 "$pki/tokens.csv"

# kubeconfig FILE TOKEN: a kubeconfig for the API server with TOKEN.
kubeconfig() {
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority: $scratch/apiserver/apiserver.crt
users:
- name: user
  user:
    token: $2
contexts:
- name: local
  context: {cluster: local, user: user}
current-context: local
EOF
}
kubeconfig "$scratch/admin.kubeconfig" "$admin_token"
kubeconfig "$scratch/node.kubeconfig" "$node_token"
kubectl() { n "$cache/bin/kubectl" --kubeconfig "$scratch/admin.kubeconfig" "$@"; }

# 2. The cluster.
start etcd "$tools/etcd" --name nk --data-dir "$scratch/etcd" \
	--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
	--listen-peer-urls "http://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
	--initial-cluster "nk=http://127.0.0.1:$etcd_peer_port" --log-level warn
wait_for "etcd healthy on 127.0.0.1:$etcd_port" 60 curl -sf "http://127.0.0.1:$etcd_port/health"

start kube-apiserver "$tools/kube-apiserver" \
	--etcd-servers "http://127.0.0.1:$etcd_port" \
	--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --endpoint-reconciler-type none \
	--secure-port "$api_port" --cert-dir "$scratch/apiserver" \
	--service-account-issuer "https://127.0.0.1:$api_port" \
	--service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
	--token-auth-file "$pki/tokens.csv" --client-ca-file "$pki/ca.crt" \
	--authorization-mode Node,RBAC \
	--enable-admission-plugins NodeRestriction --disable-admission-plugins ServiceAccount \
	--service-cluster-ip-range 10.0.0.0/24 --allow-privileged=true \
	--kubelet-preferred-address-types Hostname \
	--kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" --kubelet-client-key "$pki/apiserver-kubelet-client.key"
wait_for "kube-apiserver ready on 127.0.0.1:$api_port" 120 \
	curl -sfk -H "Authorization: Bearer $admin_token" "https://127.0.0.1:$api_port/readyz"

start kube-scheduler "$cache/bin/kube-scheduler" --kubeconfig "$scratch/admin.kubeconfig" \
	--leader-elect=false --bind-address 127.0.0.1 --secure-port "$sched_port" --cert-dir "$scratch/scheduler"
start kube-controller-manager "$cache/bin/kube-controller-manager" --kubeconfig "$scratch/admin.kubeconfig" \
	--leader-elect=false --bind-address 127.0.0.1 --secure-port "$cm_port" --cert-dir "$scratch/controller-manager" \
	--service-account-private-key-file "$pki/sa.key" --root-ca-file "$scratch/apiserver/apiserver.crt" \
	--use-service-account-credentials=false \
	--cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key"
wait_for "the controller manager made the default service account" 120 kubectl get serviceaccount default -n default

# containerd, by the repo's own script, on a bridge of its own; every
# image registry is sent to a closed loopback port (no pull leaves the
# machine), the test images are imported under their exact names.
NODEKIT_E2E_BRIDGE=$bridge NODEKIT_E2E_SUBNET=$subnet n "$repo/hack/e2e/up.sh" "$scratch/containerd" >&2
mkdir -p "$scratch/containerd/certs.d/_default"
cat >"$scratch/containerd/certs.d/_default/hosts.toml" <<'EOF'
# No registry is reachable from the test machine: every pull fails at once
# on a closed loopback port instead of leaving the machine.
server = "http://127.0.0.1:1"

[host."http://127.0.0.1:1"]
  capabilities = ["pull", "resolve"]
EOF
# The one registry the specs bring: agnhost's fake-registry-server, which
# the image pull specs run on the node's network at localhost:5000, over
# plain HTTP.
mkdir -p "$scratch/containerd/certs.d/localhost:5000"
cat >"$scratch/containerd/certs.d/localhost:5000/hosts.toml" <<'EOF'
server = "http://localhost:5000"

[host."http://localhost:5000"]
  capabilities = ["pull", "resolve"]
EOF
while read -r name file; do
	n ctr -a "$scratch/containerd/containerd.sock" -n k8s.io images import "$cache/images/$file" >/dev/null
	log "imported $name"
done <"$cache/images/list"

# The node: examples/node, built from this tree, started as the kubelet
# (or, with --kubelet, the kubelet itself).
if [ -n "$kubelet" ]; then
	node_desc="the upstream kubelet v1.37.2"
else
	(cd "$repo" && n go build -o "$scratch/bin/node" ./examples/node)
	# The commit the node was built from (the report names it; the tree
	# may move on while the suite runs), "+changes" for uncommitted ones.
	node_commit=$(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
	[ -z "$(cd "$repo" && git status --porcelain --untracked-files=no 2>/dev/null)" ] || node_commit+="+changes"
	node_desc="nodekit's examples/node ($node_commit)"
fi
cat >"$scratch/node/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $node_port
readOnlyPort: 0
tlsCertFile: $pki/node.crt
tlsPrivateKeyFile: $pki/node.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: $pki/ca.crt
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
cgroupRoot: $cgroup_root
containerRuntimeEndpoint: unix://$scratch/containerd/containerd.sock
podLogsDir: $scratch/node/pod-logs
clusterDomain: cluster.local
failSwapOn: false
nodeStatusUpdateFrequency: 10s
EOF
node_args=(--config "$scratch/node/config.yaml" --kubeconfig "$scratch/node.kubeconfig"
	--root-dir "$scratch/node/root" --hostname-override "$node_name"
	--container-runtime-endpoint "unix://$scratch/containerd/containerd.sock" --v 2)
if [ -n "$kubelet" ]; then
	# The kubelet refuses a loopback --node-ip (the Node then has no
	# address at all, not even its Hostname, and the API server cannot
	# reach it): without the flag it takes the host's default address.
	# What the kubelet needs beyond the node's configuration, on this
	# machine: to run on cgroup v1 at all (it refuses by default since
	# v1.35), and to leave the host's iptables alone (its chains are for
	# other components; the node makes none either).
	cat >>"$scratch/node/config.yaml" <<EOF
failCgroupV1: false
makeIPTablesUtilChains: false
EOF
	# Another kubelet on this host (or another --kubelet run) owns the
	# device plugin directory; this one would take its socket over.
	if [ -n "$(ls -A /var/lib/kubelet/device-plugins 2>/dev/null)" ]; then
		log "/var/lib/kubelet/device-plugins is in use (another kubelet?); --kubelet needs it empty"
		exit 1
	fi
	for d in /var/lib/kubelet /var/lib/kubelet/device-plugins /var/log/containers; do
		[ -e "$d" ] || echo "$d" >>"$scratch/host-created"
	done
	# The kubelet refuses a cgroupRoot missing from any hierarchy (the
	# node makes it); cpuset's is given its parent's CPUs and memory nodes.
	if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
		mkdir -p "/sys/fs/cgroup$cgroup_root"
	else
		for h in /sys/fs/cgroup/*/; do
			[ -d "$h" ] && [ ! -L "${h%/}" ] || continue
			mkdir -p "${h%/}$cgroup_root"
		done
	fi
	if [ -f /sys/fs/cgroup/cpuset/cpuset.cpus ]; then
		cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset$cgroup_root/cpuset.cpus"
		cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset$cgroup_root/cpuset.mems"
	fi
	# The volumes the kubelet mounts in its own mount namespace reach
	# containerd's through the root directory made a shared mount here
	# (the host's mounts may all be private, as on this machine), in a
	# peer group of its own (made private first: a bind of a shared /
	# would join /'s group and show the volumes everywhere).
	mkdir -p "$scratch/node/root"
	mount --bind "$scratch/node/root" "$scratch/node/root"
	mount --make-private "$scratch/node/root"
	mount --make-shared "$scratch/node/root"
	start node unshare -m --propagation unchanged "$here/kubelet-ns.sh" "$scratch/node/sysctl" \
		"$cache/bin/kubelet" "${node_args[@]}"
else
	start node "$scratch/bin/node" "${node_args[@]}" --node-ip 127.0.0.1
fi
node_ready() {
	[ "$(kubectl get node "$node_name" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_for "node $node_name Ready" 180 node_ready
kubectl get node "$node_name" -o wide >&2

# 3. The suite.
log "running the specs: label filter '$label_filter'${focus:+, focus '$focus'}; $procs processes, at most $timeout_min min"
ginkgo_args=(--procs "$procs" --label-filter "$label_filter" --timeout "${timeout_min}m" --no-color --silence-skips
	--output-dir "$results" --json-report report.json --junit-report junit.xml)
[ -z "$focus" ] || ginkgo_args+=(--focus "$focus")
mkdir -p "$results/e2e"
suite_start=$(date +%s)
# In the background and waited for, so that an interrupt reaches the trap
# at once; timeout (its own process group) bounds ginkgo if it hangs.
(cd "$results" && exec nice -n "$niceness" timeout --kill-after 60 $((timeout_min * 60 + 300)) \
	"$cache/bin/ginkgo" "${ginkgo_args[@]}" "$cache/bin/e2e.test" -- \
	--provider local --kubeconfig "$scratch/admin.kubeconfig" --kubectl-path "$cache/bin/kubectl" \
	--node-schedulable-timeout 2m --system-pods-startup-timeout 1m --minStartupPods 0 \
	--allowed-not-ready-nodes 0 --dump-logs-on-failure=false --report-dir "$results/e2e") \
	>"$results/ginkgo.log" 2>&1 &
echo $! >"$scratch/suite.pid"
set +e
wait "$(cat "$scratch/suite.pid")"
suite_rc=$?
set -e
rm -f "$scratch/suite.pid"
suite_secs=$(($(date +%s) - suite_start))
log "suite finished in $suite_secs s (ginkgo exit $suite_rc); log in $results/ginkgo.log"

# 4. The report.
{
	echo "# NodeConformance on $node_desc"
	echo
	echo "Label filter \`$label_filter\`${focus:+, focus \`$focus\`}; $procs ginkgo processes; suite $suite_secs s (ginkgo exit $suite_rc)."
	echo
} >"$results/header.md"
if [ -f "$results/report.json" ]; then
	(cd "$here" && n go run ./report -json "$results/report.json" -label-filter "$label_filter" \
		${focus:+-focus "$focus"} -out "$results")
	cat "$results/header.md" "$results/summary.md" >"$results/summary.md.tmp" && mv "$results/summary.md.tmp" "$results/summary.md"
else
	log "ginkgo wrote no report; see $results/ginkgo.log"
	tail -n 30 "$results/ginkgo.log" >&2
	exit 1
fi
if [ -n "$require_pass" ]; then
	# Every selected spec must have passed: none failed, skipped or left
	# unrun (a suite cut short by --timeout leaves specs unrun).
	bad=$(awk -F'\t' 'NR > 1 && $2 != "passed" { print $2 ": " $3 }' "$results/specs.tsv")
	ran=$(awk -F'\t' 'NR > 1 && $2 == "passed"' "$results/specs.tsv" | wc -l)
	if [ -n "$bad" ] || [ "$ran" -eq 0 ]; then
		log "--require-pass: $ran passed; not passed:"
		echo "${bad:-(no spec ran)}" >&2
		exit 1
	fi
	log "--require-pass: all $ran selected specs passed"
fi
