#!/usr/bin/env bash
# Runs the end-to-end tests: installs what they need, starts a private
# containerd, runs ./e2e/... against it and the crictl checks against
# fakecri, and tears everything down, also when the tests fail.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
dir=${NODEKIT_E2E_DIR:-/tmp/nodekit-e2e}
crictl_version=v1.37.0

hack/e2e/install.sh
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
