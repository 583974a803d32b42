#!/usr/bin/env bash
# Builds the real control plane that the kube tests run against, etcd and
# kube-apiserver, from the Go module proxy through the separate module in
# hack/kubetools (so the library's go.mod never requires k8s.io/kubernetes),
# into ${NODEKIT_TOOLS:-$HOME/.cache/nodekit/tools}. It skips a binary that is
# already there and reports the pinned version, so a second run costs only
# the two version checks. It prints the tools directory on its last line.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=${NODEKIT_TOOLS:-$HOME/.cache/nodekit/tools}
etcd_version=3.7.0
kube_version=v1.37.2
mkdir -p "$dir"

# Builds one tool package of hack/kubetools into $dir/$name, through a
# temporary file so an interrupted build never leaves a binary behind.
build() {
	local name=$1 pkg=$2 ldflags=$3 start
	start=$(date +%s)
	echo "kube: building $name from $pkg" >&2
	(cd "$repo/hack/kubetools" &&
		CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" -o "$dir/.$name.tmp" "$pkg")
	mv "$dir/.$name.tmp" "$dir/$name"
	echo "kube: built $name in $(($(date +%s) - start)) s" >&2
}

# The version checks read whole outputs into variables: a pipe into
# grep -q or head can kill the writer with SIGPIPE, which pipefail turns
# into a failure.
version_of() { "$1" --version 2>/dev/null || true; }

if [[ $'\n'"$(version_of "$dir/etcd")"$'\n' == *$'\n'"etcd Version: $etcd_version"$'\n'* ]]; then
	echo "kube: etcd $etcd_version present" >&2
else
	build etcd go.etcd.io/etcd/server/v3 ""
fi

if [[ "$(version_of "$dir/kube-apiserver")" == "Kubernetes $kube_version" ]]; then
	echo "kube: kube-apiserver $kube_version present" >&2
else
	v=k8s.io/component-base/version
	minor=${kube_version#v1.}
	minor=${minor%%.*}
	build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver \
		"-X $v.gitVersion=$kube_version -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
fi

etcd_out=$(version_of "$dir/etcd")
echo "${etcd_out%%$'\n'*}" >&2
version_of "$dir/kube-apiserver" >&2
echo "$dir"
