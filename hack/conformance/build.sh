#!/usr/bin/env bash
# Builds what the NodeConformance run needs into a cache directory
# (${NODEKIT_CONFORMANCE_CACHE:-$HOME/.cache/nodekit/conformance}), from
# the Go module proxy through this directory's own go.mod, so the
# library's go.mod never requires k8s.io/kubernetes:
#
#   bin/e2e.test                 k8s.io/kubernetes/test/e2e (go test -c)
#   bin/ginkgo                   the ginkgo CLI k8s.io/kubernetes requires
#   bin/kube-scheduler, bin/kube-controller-manager, bin/kubectl
#   bin/agnhost, bin/nnp         static test-image programs
#   images/*.tar                 OCI archives of the stand-in test images
#   bin/kubelet                  k8s.io/kubernetes/cmd/kubelet, only with
#                                NODEKIT_CONFORMANCE_KUBELET=1 (run.sh
#                                --kubelet)
#
# etcd and kube-apiserver come from hack/kube/install.sh (its cache,
# ${NODEKIT_TOOLS:-$HOME/.cache/nodekit/tools}); a build of them that
# another process has running is waited for, not repeated.
#
# Idempotent: a binary whose recorded build inputs (version, flags, the
# go.sum of this module) are unchanged is kept, so a warm run takes
# seconds. Every build runs under "nice -n 19" and the long ones with
# "-p 1" (NODEKIT_CONFORMANCE_BUILD_P to change it), as the machine is
# shared. Prints the cache directory on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${NODEKIT_CONFORMANCE_CACHE:-$HOME/.cache/nodekit/conformance}
tools=${NODEKIT_TOOLS:-$HOME/.cache/nodekit/tools}
p=${NODEKIT_CONFORMANCE_BUILD_P:-1}
kube_version=v1.37.2
mkdir -p "$cache/bin" "$cache/images" "$cache/stamps" "$cache/work"

log() { echo "conformance: $*" >&2; }

# One build of this script at a time per cache.
exec 8>"$cache/.build.lock"
if ! flock -n 8; then
	log "another build holds $cache/.build.lock; waiting for it"
	flock 8
fi

v=k8s.io/component-base/version
minor=${kube_version#v1.}
minor=${minor%%.*}
ldflags="-s -w -X $v.gitVersion=$kube_version -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
# What a binary is built from: a change of any of these rebuilds it.
inputs=$(cat "$here/go.mod" "$here/go.sum"; echo "$ldflags"; go version)
sum() { sha256sum | cut -d' ' -f1; }
input_sum=$(printf '%s' "$inputs" | sum)

# fresh NAME: the binary is there and was built from the current inputs.
fresh() { [ -x "$cache/bin/$1" ] && [ "$(cat "$cache/stamps/$1" 2>/dev/null)" = "$input_sum" ]; }

# build NAME CMD...: runs CMD (which writes $cache/bin/.NAME.tmp) and
# moves the result into place, so an interrupted build leaves nothing.
build() {
	local name=$1 start
	shift
	if fresh "$name"; then
		log "$name present"
		return
	fi
	start=$(date +%s)
	log "building $name"
	(cd "$here" && nice -n 19 "$@")
	mv "$cache/bin/.$name.tmp" "$cache/bin/$name"
	echo "$input_sum" >"$cache/stamps/$name"
	log "built $name in $(($(date +%s) - start)) s"
}

# CGO_ENABLED=0 and -trimpath as hack/kube/install.sh, so the packages
# compiled for kube-apiserver are reused from the build cache.
export CGO_ENABLED=0
build ginkgo go build -trimpath -ldflags "-s -w" -o "$cache/bin/.ginkgo.tmp" github.com/onsi/ginkgo/v2/ginkgo
# The e2e package does not pass vet, which go test would run first.
build e2e.test go test -c -vet=off -p "$p" -trimpath -ldflags "$ldflags" -o "$cache/bin/.e2e.test.tmp" k8s.io/kubernetes/test/e2e
build agnhost go build -p "$p" -trimpath -ldflags "$ldflags" -o "$cache/bin/.agnhost.tmp" k8s.io/kubernetes/test/images/agnhost
build nnp go build -trimpath -ldflags "-s -w" -o "$cache/bin/.nnp.tmp" k8s.io/kubernetes/test/images/nonewprivs
build kubectl go build -p "$p" -trimpath -ldflags "$ldflags" -o "$cache/bin/.kubectl.tmp" k8s.io/kubernetes/cmd/kubectl
build kube-scheduler go build -p "$p" -trimpath -ldflags "$ldflags" -o "$cache/bin/.kube-scheduler.tmp" k8s.io/kubernetes/cmd/kube-scheduler
build kube-controller-manager go build -p "$p" -trimpath -ldflags "$ldflags" -o "$cache/bin/.kube-controller-manager.tmp" k8s.io/kubernetes/cmd/kube-controller-manager
if [ -n "${NODEKIT_CONFORMANCE_KUBELET:-}" ]; then
	build kubelet go build -p "$p" -trimpath -ldflags "$ldflags" -o "$cache/bin/.kubelet.tmp" k8s.io/kubernetes/cmd/kubelet
fi

"$here/images.sh" "$cache"

# etcd and kube-apiserver, last: wait for a hack/kube/install.sh that is
# already running (its build would otherwise be done twice at once), then
# run it, which skips what is present.
waited=0
while pgrep -f 'hack/kube/install\.sh' >/dev/null 2>&1; do
	if [ "$waited" -eq 0 ]; then log "waiting for a running hack/kube/install.sh to finish"; fi
	waited=$((waited + 1))
	if [ "$waited" -gt 720 ]; then
		log "hack/kube/install.sh still running after an hour; giving up"
		exit 1
	fi
	sleep 5
done
NODEKIT_TOOLS=$tools nice -n 19 "$repo/hack/kube/install.sh" >/dev/null

echo "$cache"
