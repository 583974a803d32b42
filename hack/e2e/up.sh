#!/usr/bin/env bash
# Starts a private containerd for the end-to-end tests, with its root,
# state, socket, runc root and CNI config all under DIR, and imports the
# locally built busybox and pause images. Writes DIR/env with the
# variables the tests read. NODEKIT_E2E_BRIDGE and NODEKIT_E2E_SUBNET
# choose the CNI bridge and its subnet (default nk-e2e0, 10.213.77.0/24),
# so two of these containerds can run side by side; the registry host
# configuration is read from DIR/certs.d (empty: every registry as
# containerd's defaults).
#
# usage: up.sh DIR
set -euo pipefail
dir=${1:?usage: up.sh DIR}
repo=$(cd "$(dirname "$0")/../.." && pwd)
bridge=${NODEKIT_E2E_BRIDGE:-nk-e2e0}
subnet=${NODEKIT_E2E_SUBNET:-10.213.77.0/24}

mkdir -p "$dir"/{root,state,runc,opt,bin,images,logs,certs.d,cni/net.d,cni/ipam}
echo "$bridge" >"$dir/bridge" # for down.sh

# Images: a static pause program and busybox-static, no registry needed.
gcc -static -O2 -o "$dir/images/pause" "$repo/hack/e2e/pause.c"
(cd "$repo" && go build -o "$dir/bin/mkimage" ./hack/mkimage)
"$dir/bin/mkimage" -name nodekit.test/pause:1 -file "$dir/images/pause=/pause" -entrypoint /pause -out "$dir/images/pause.tar"
"$dir/bin/mkimage" -name nodekit.test/busybox:1 -busybox "$(command -v busybox)" -cmd sh -out "$dir/images/busybox.tar"

cat >"$dir/cni/net.d/10-nodekit-e2e.conflist" <<CNI
{
  "cniVersion": "0.4.0",
  "name": "nodekit-e2e",
  "plugins": [{
    "type": "bridge",
    "bridge": "$bridge",
    "isGateway": true,
    "isDefaultGateway": false,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "$subnet"}]], "dataDir": "$dir/cni/ipam"}
  }]
}
CNI

cat >"$dir/config.toml" <<TOML
version = 2
root = "$dir/root"
state = "$dir/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "$dir/containerd.sock"

[ttrpc]
  address = "$dir/containerd.sock.ttrpc"

[debug]
  level = "info"

[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "nodekit.test/pause:1"
  # Without CAP_SYS_RESOURCE no process may lower its oom_score_adj, and
  # every RunPodSandbox would fail setting the pause container's -998;
  # restricted, each container's score is clamped to containerd's own.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$dir/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$dir/certs.d"
TOML

containerd --config "$dir/config.toml" >"$dir/logs/containerd.log" 2>&1 &
echo $! >"$dir/containerd.pid"

ok=
for _ in $(seq 1 100); do
	if [ -S "$dir/containerd.sock" ] && ctr -a "$dir/containerd.sock" version >/dev/null 2>&1; then
		ok=1
		break
	fi
	kill -0 "$(cat "$dir/containerd.pid")" 2>/dev/null || break
	sleep 0.1
done
if [ -z "$ok" ]; then
	echo "e2e: containerd did not start; its log:" >&2
	tail -n 30 "$dir/logs/containerd.log" >&2
	exit 1
fi
for img in pause busybox; do
	ctr -a "$dir/containerd.sock" -n k8s.io images import "$dir/images/$img.tar" >/dev/null
done

cat >"$dir/env" <<ENV
NODEKIT_E2E_ENDPOINT=unix://$dir/containerd.sock
NODEKIT_E2E_IMAGE=nodekit.test/busybox:1
NODEKIT_E2E_DIR=$dir
ENV
echo "e2e: containerd $(containerd --version | awk '{print $3}') ready on unix://$dir/containerd.sock"
