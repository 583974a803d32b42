#!/usr/bin/env bash
# Installs what the end-to-end tests need from Debian's packages, if it is
# missing. Idempotent; needs root.
set -euo pipefail

packages=(containerd runc busybox-static containernetworking-plugins iptables iproute2 gcc libc6-dev)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "e2e: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	# A mirror that fails once is tried again, three times at most.
	for attempt in 1 2 3; do
		if apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
			break
		fi
		[ "$attempt" -lt 3 ] || { echo "e2e: apt-get failed three times" >&2; exit 1; }
		echo "e2e: apt-get failed (attempt $attempt); retrying in 10s" >&2
		sleep 10
	done
fi
# Debian's package may start a system containerd where an init system
# runs; the tests use their own on a private socket and leave it alone.
for bin in containerd containerd-shim-runc-v2 ctr runc busybox gcc; do
	command -v "$bin" >/dev/null || { echo "e2e: $bin is missing after install" >&2; exit 1; }
done
