#!/usr/bin/env bash
# Runs the end-to-end tests: installs what they need, starts a private
# containerd, runs ./e2e/... against it and the crictl checks against
# fakecri, with the kube tools examples/node against it and a real API
# server, and tears everything down, also when the tests fail.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
dir=${NODEKIT_E2E_DIR:-/tmp/nodekit-e2e}
crictl_version=v1.37.0

# Runs on one directory take turns: each begins by tearing down what is
# left there (down.sh), which would pull containerd from under another.
exec 9>"$dir.lock"
flock 9

hack/e2e/install.sh
# With the kube tools (NODEKIT_KUBE_TOOLS, or NODEKIT_E2E_KUBE=1, which
# "make test" sets, to get them from hack/kube/install.sh: version checks
# when they are built, a build when not) examples/node also runs as a node
# of a real API server on this containerd. Resolved before containerd
# starts, so a cold build never holds it.
if [ -z "${NODEKIT_KUBE_TOOLS:-}" ] && [ -n "${NODEKIT_E2E_KUBE:-}" ]; then
	NODEKIT_KUBE_TOOLS=$(hack/kube/install.sh)
	export NODEKIT_KUBE_TOOLS
fi
hack/e2e/down.sh "$dir"
trap 'hack/e2e/down.sh "$dir"' EXIT
hack/e2e/up.sh "$dir"

# crictl, to check that fakecri serves what CRI tools expect.
# (go install leaves crictl's own version string unset; the module
# version recorded in the binary tells which one it is.)
if ! go version -m .bin/crictl 2>/dev/null | grep -q "sigs.k8s.io/cri-tools[[:space:]]*$crictl_version"; then
	echo "e2e: building crictl $crictl_version"
	GOBIN="$repo/.bin" go install "sigs.k8s.io/cri-tools/cmd/crictl@$crictl_version"
fi

set -a
# shellcheck disable=SC1091
. "$dir/env"
NODEKIT_CRICTL="$repo/.bin/crictl"
# A variable the tests need but the set-up did not provide fails them
# instead of skipping them.
NODEKIT_E2E_REQUIRED=1
set +a
go test -race -count=1 ${E2E_FLAGS:-} ./e2e/...
if [ -n "${NODEKIT_KUBE_TOOLS:-}" ]; then
	go test -race -count=1 ${E2E_FLAGS:-} -run '^TestRunOnContainerd$' ./examples/node/
else
	echo "e2e: NODEKIT_KUBE_TOOLS is not set: examples/node on containerd not run"
fi
