#!/usr/bin/env bash
# Installs what the network package's tests need from Debian's packages,
# if it is missing: the CNI plugins (bridge, host-local, portmap,
# loopback in /usr/lib/cni), ip and iptables. Idempotent; needs root.
set -euo pipefail

packages=(containernetworking-plugins iproute2 iptables)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "network: ${missing[*]} missing and not root: cannot install them" >&2
		exit 1
	fi
	echo "network: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	# A mirror that fails once is tried again, three times at most.
	for attempt in 1 2 3; do
		if apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
			break
		fi
		[ "$attempt" -lt 3 ] || { echo "network: apt-get failed three times" >&2; exit 1; }
		echo "network: apt-get failed (attempt $attempt); retrying in 10s" >&2
		sleep 10
	done
fi
for p in bridge host-local portmap loopback; do
	[ -x "/usr/lib/cni/$p" ] || { echo "network: /usr/lib/cni/$p is missing after install" >&2; exit 1; }
done
command -v ip >/dev/null || { echo "network: ip is missing after install" >&2; exit 1; }
