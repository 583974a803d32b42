#!/usr/bin/env bash
# Stops the private containerd of up.sh and removes everything it left:
# containers (through runc), shims, the daemon (by PID), mounts under DIR,
# the CNI bridge, and DIR itself. Safe to run when nothing is up.
#
# usage: down.sh DIR
set -uo pipefail
dir=${1:?usage: down.sh DIR}
[ -d "$dir" ] || exit 0
bridge=$(cat "$dir/bridge" 2>/dev/null || echo nk-e2e0) # as up.sh chose it

# Containers first, so no process outlives the run.
if [ -d "$dir/runc/k8s.io" ]; then
	for id in $(runc --root "$dir/runc/k8s.io" list -q 2>/dev/null); do
		runc --root "$dir/runc/k8s.io" delete --force "$id" >/dev/null 2>&1 || true
	done
fi
# Shims started by this containerd carry its socket in their arguments.
for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $dir/containerd.sock" 2>/dev/null); do
	kill -9 "$pid" 2>/dev/null || true
done
if [ -f "$dir/containerd.pid" ]; then
	pid=$(cat "$dir/containerd.pid")
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null
		for _ in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$dir/containerd.pid"
fi
# Mounts (rootfs overlays, shm, network namespaces) under DIR, deepest first.
awk -v d="$dir" '$2 == d || index($2, d "/") == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do
	umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
done
ip link delete "$bridge" >/dev/null 2>&1 || true
rm -rf "$dir"
