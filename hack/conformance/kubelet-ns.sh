#!/usr/bin/env bash
# Runs the upstream kubelet for "run.sh --kubelet" so that it leaves the
# host's kernel settings as they were. run.sh starts it as
#
#   unshare -m --propagation unchanged kubelet-ns.sh DIR KUBELET ARGS...
#
# In that mount namespace every mount keeps its propagation, so the
# volumes the kubelet mounts under its root directory (which run.sh makes
# a shared mount) reach containerd and the containers, as they would on a
# node; only /proc is made private, and over each sysctl the kubelet sets at start-up
# (setupKernelTunables: vm.overcommit_memory, vm.panic_on_oom,
# kernel.panic, kernel.panic_on_oops, kernel.keys.root_maxkeys and
# root_maxbytes) a copy of the file in DIR is bound, which the kubelet
# reads and writes instead of the kernel's. Then it execs the kubelet,
# so the PID run.sh records is the kubelet's.
set -euo pipefail
dir=${1:?usage: kubelet-ns.sh DIR KUBELET ARGS...}
shift
[ $# -gt 0 ] || { echo "kubelet-ns.sh: no kubelet command" >&2; exit 2; }
# First, before any bind below: a bind made while /proc is still shared
# with the host's would propagate to the host.
mount --make-rprivate /proc
mkdir -p "$dir"
for f in vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops \
	kernel/keys/root_maxkeys kernel/keys/root_maxbytes; do
	copy=$dir/${f//\//.}
	cat "/proc/sys/$f" >"$copy"
	mount --bind "$copy" "/proc/sys/$f"
done
exec "$@"
