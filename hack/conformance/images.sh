#!/usr/bin/env bash
# Builds the stand-ins of the test images the NodeConformance specs run, as
# OCI archives under CACHE/images, named exactly as the specs ask for
# them (nothing can be pulled here). They are made by hack/mkimage from
# Debian's busybox-static and a few host programs:
#
#   pause:3.10.2                 the static pause program of hack/e2e
#   e2e-test-images/busybox      busybox, every applet also under /bin
#   e2e-test-images/agnhost      busybox + static agnhost at /agnhost (its
#                                entrypoint) and the link /agnhost-2 to it,
#                                bash (also at /bin/bash, where the specs
#                                run it) and curl with their libraries,
#                                /uploads, the image's user 1000,
#                                agnhost's /localhost.crt and
#                                /localhost.key (netexec --tls-cert-file),
#                                and /var/registry: the pause image above
#                                as pause:testing, in the tree that
#                                fake-registry-server serves
#   e2e-test-images/nginx        busybox httpd on :80 serving /usr/share/nginx/html
#   e2e-test-images/nonroot      busybox with USER 1234
#   e2e-test-images/nonewprivs   busybox + the setuid nnp program
#   e2e-test-images/glibc-dns-testing  busybox + the host's dash, hostname and glibc
#
# The images with glibc programs (agnhost, glibc-dns-testing) have an
# /etc/nsswitch.conf that looks hosts up in files, then DNS.
#
# CACHE/images/list holds "NAME FILE" per image; CACHE/images/inputs.sha256
# the digest of the inputs they were built from and the archives' sizes
# and times: while it matches, the archives are kept.
#
# usage: images.sh CACHE   (CACHE/bin/agnhost and CACHE/bin/nnp must exist)
set -euo pipefail
cache=${1:?usage: images.sh CACHE}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=$cache/images
mkdir -p "$out"

busybox=$(command -v busybox) || { echo "conformance: busybox (Debian's busybox-static) is missing; run hack/e2e/install.sh" >&2; exit 1; }
# The agnhost image's TLS key pair (the one its Dockerfile adds), from the
# k8s.io/kubernetes module this directory's go.mod requires.
porter=$(cd "$here" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/images/agnhost/porter
[ -f "$porter/localhost.crt" ] && [ -f "$porter/localhost.key" ] || { echo "conformance: $porter has no localhost.crt and localhost.key" >&2; exit 1; }
e2e=registry.k8s.io/e2e-test-images

# The inputs every archive depends on (every file of hack/mkimage, its
# tests too); when their content changes (another checkout's images.sh, a
# new agnhost), the images are built again. Times would not tell: a
# checkout's older images.sh is not newer than archives another one built.
inputs=("$here/images.sh" "$repo"/hack/mkimage/*.go "$repo/hack/e2e/pause.c" "$cache/bin/agnhost" "$cache/bin/nnp" "$busybox" "$porter/localhost.crt" "$porter/localhost.key")
digest=$(cat "${inputs[@]}" | sha256sum | cut -d' ' -f1)
names=(
	"registry.k8s.io/pause:3.10.2 pause.tar"
	"$e2e/busybox:1.37.0-2 busybox.tar"
	"$e2e/agnhost:2.66.1 agnhost-2.66.1.tar"
	"$e2e/agnhost:2.55 agnhost-2.55.tar"
	"$e2e/nginx:1.27.0-2 nginx-1.27.0-2.tar"
	"$e2e/nginx:1.28.0-2 nginx-1.28.0-2.tar"
	"$e2e/nonroot:1.5 nonroot.tar"
	"$e2e/nonewprivs:1.4 nonewprivs.tar"
	"$e2e/glibc-dns-testing:2.1.1 glibc-dns-testing.tar"
)
# stamp is the inputs' digest and each archive's size and time: archives
# that another script wrote since (an older checkout's) do not match it.
stamp() {
	echo "$digest"
	for n in "${names[@]}"; do
		stat -c '%n %s %Y' "$out/${n#* }" 2>/dev/null || echo "${n#* } missing"
	done
}
uptodate=1
[ "$(cat "$out/inputs.sha256" 2>/dev/null)" = "$(stamp)" ] || uptodate=
if [ -n "$uptodate" ]; then
	echo "conformance: images present" >&2
	printf '%s\n' "${names[@]}" >"$out/list"
	exit 0
fi

start=$(date +%s)
(cd "$repo" && nice -n 19 go build -o "$cache/bin/mkimage" ./hack/mkimage)
nice -n 19 gcc -static -O2 -o "$out/pause" "$repo/hack/e2e/pause.c"
mk() { nice -n 19 "$cache/bin/mkimage" "$@"; }

# withlibs PROG...: -file arguments for each host program at its own path
# and for the shared libraries it loads (the dynamic loader included).
withlibs() {
	local prog lib
	for prog in "$@"; do
		echo "-file" "$prog=$prog"
		for lib in $(ldd "$prog" 2>/dev/null | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i}'); do
			echo "-file" "$lib=$lib"
		done
	done | sort -u | tr '\n' ' '
}

bb=(-busybox "$busybox" -bin-links)
mk -name registry.k8s.io/pause:3.10.2 -file "$out/pause=/pause" -entrypoint /pause -out "$out/pause.tar"
mk -name "$e2e/busybox:1.37.0-2" "${bb[@]}" -cmd sh -out "$out/busybox.tar"

# The glibc programs look names up in /etc/hosts first, as on Debian: with
# no nsswitch.conf glibc would ask DNS first (the node's resolver).
printf 'hosts: files dns\n' >"$out/nsswitch.conf"
nss=(-file "$out/nsswitch.conf=/etc/nsswitch.conf" -mode /etc/nsswitch.conf=644)

# The Serial image pull specs run agnhost's fake-registry-server (on the
# node's network at localhost:5000, as user 5123) and pull pause:testing
# from it, which the real agnhost image keeps under /var/registry (the
# pause image of registry.k8s.io). The stand-in's tree holds the pause
# image above; every file is readable by any user.
rm -rf "$out/registry"
mk -name localhost:5000/pause:testing -file "$out/pause=/pause" -entrypoint /pause -registry "$out/registry"
registry=()
while IFS= read -r f; do
	registry+=(-file "$out/registry/$f=/var/registry/$f" -mode "/var/registry/$f=644")
done < <(cd "$out/registry" && find . -type f -printf '%P\n' | LC_ALL=C sort)

# shellcheck disable=SC2207 # word splitting of "-file SRC=DEST" pairs is wanted
agnhost_extra=($(withlibs "$(command -v bash)" "$(command -v curl)") "${nss[@]}")
for tag in 2.66.1 2.55; do
	mk -name "$e2e/agnhost:$tag" "${bb[@]}" -file "$cache/bin/agnhost=/agnhost" -symlink /agnhost-2=agnhost "${agnhost_extra[@]}" \
		-file "$(command -v bash)=/bin/bash" \
		-file "$porter/localhost.crt=/localhost.crt" -file "$porter/localhost.key=/localhost.key" \
		-mode /localhost.crt=644 -mode /localhost.key=644 \
		-dir /uploads -mode /uploads=777 "${registry[@]}" \
		-passwd "user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh" \
		-group "user-defined-in-image:x:1000:" -group "group-defined-in-image:x:50000:user-defined-in-image" \
		-entrypoint /agnhost -cmd pause -out "$out/agnhost-$tag.tar"
done

printf '<html><body>nginx stand-in</body></html>\n' >"$out/index.html"
for tag in 1.27.0-2 1.28.0-2; do
	mk -name "$e2e/nginx:$tag" "${bb[@]}" -file "$out/index.html=/usr/share/nginx/html/index.html" \
		-mode /usr/share/nginx/html/index.html=644 \
		-cmd "httpd -f -p 80 -h /usr/share/nginx/html" -out "$out/nginx-$tag.tar"
done

mk -name "$e2e/nonroot:1.5" "${bb[@]}" -user 1234 -cmd sh -out "$out/nonroot.tar"
mk -name "$e2e/nonewprivs:1.4" "${bb[@]}" -file "$cache/bin/nnp=/usr/local/bin/nnp" \
	-mode /usr/local/bin/nnp=4755 -cmd nnp -out "$out/nonewprivs.tar"

# shellcheck disable=SC2207
dns_extra=($(withlibs /bin/dash /bin/hostname))
mk -name "$e2e/glibc-dns-testing:2.1.1" "${bb[@]}" "${dns_extra[@]}" "${nss[@]}" -file /bin/dash=/bin/sh \
	-cmd sh -out "$out/glibc-dns-testing.tar"

printf '%s\n' "${names[@]}" >"$out/list"
stamp >"$out/inputs.sha256"
echo "conformance: built ${#names[@]} images in $(($(date +%s) - start)) s" >&2
