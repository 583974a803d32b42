// Command mkimage builds a single-layer OCI image archive without a
// registry or a container engine, for the end-to-end tests:
//
//	mkimage -name nodekit.test/busybox:1 -busybox /bin/busybox -out busybox.tar
//	mkimage -name nodekit.test/pause:1 -file pause=/pause -entrypoint /pause -out pause.tar
//	mkimage -name example.test/nnp:1 -busybox /bin/busybox -bin-links \
//		-file nnp=/usr/local/bin/nnp -mode /usr/local/bin/nnp=4755 \
//		-dir /uploads -user 1234 -passwd user:x:1000:1000::/:/bin/sh -out nnp.tar
//
// -file creates the parent directories of its destination; -bin-links
// also links every busybox applet under /bin, as the busybox images of
// Docker Hub have them; -symlink /DEST=TARGET adds a symbolic link (the
// agnhost image's /agnhost-2 -> agnhost).
//
// The archive is an OCI image layout in a tar file, importable with
// "ctr -n k8s.io images import"; with -layout DIR it writes the layout as
// a directory instead; with -registry DIR it writes the storage tree of
// agnhost's fake-registry-server (its /var/registry), to be served from
// an image built with -file:
//
//	mkimage -name localhost:5000/pause:testing -file pause=/pause -entrypoint /pause -registry reg
//
// Owners and times are fixed, so the same inputs give the same image
// digest.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

var epoch = time.Unix(0, 0).UTC()

type entry struct {
	name     string // without leading slash
	mode     int64
	typ      byte
	data     []byte
	linkname string
}

type fileFlags []string

func (f *fileFlags) String() string     { return strings.Join(*f, ",") }
func (f *fileFlags) Set(v string) error { *f = append(*f, v); return nil }

func main() {
	var (
		name       = flag.String("name", "", "image name, such as nodekit.test/busybox:1 (required)")
		out        = flag.String("out", "", "write an OCI archive (tar) to this file")
		layout     = flag.String("layout", "", "write an OCI layout directory here")
		registry   = flag.String("registry", "", "write the storage tree of agnhost's fake-registry-server here")
		busybox    = flag.String("busybox", "", "path of a static busybox to install with all its applets")
		entrypoint = flag.String("entrypoint", "", "image entrypoint, space separated")
		cmd        = flag.String("cmd", "", "image command, space separated")
		binLinks   = flag.Bool("bin-links", false, "with -busybox, also link every applet under /bin")
		user       = flag.String("user", "", "the image's user (USER), such as 1234 or 1000:1000")
		workdir    = flag.String("workdir", "", "the image's working directory")
		files      fileFlags
		dirs       fileFlags
		modes      fileFlags
		passwd     fileFlags
		group      fileFlags
		symlinks   fileFlags
	)
	flag.Var(&files, "file", "SRC=/DEST: add a host file to the image (repeatable)")
	flag.Var(&dirs, "dir", "/DEST: add an empty directory, mode 0755 (repeatable)")
	flag.Var(&modes, "mode", "/DEST=OCTAL: set the mode of a file or directory of the image, such as 4755 (repeatable)")
	flag.Var(&passwd, "passwd", "a line to add to /etc/passwd (repeatable)")
	flag.Var(&group, "group", "a line to add to /etc/group (repeatable)")
	flag.Var(&symlinks, "symlink", "/DEST=TARGET: add a symbolic link to TARGET (repeatable)")
	flag.Parse()
	if *name == "" || (*out == "" && *layout == "" && *registry == "") {
		fmt.Fprintln(os.Stderr, "mkimage: -name and one of -out, -layout or -registry are required")
		os.Exit(2)
	}
	o := options{name: *name, out: *out, layout: *layout, registry: *registry, busybox: *busybox, binLinks: *binLinks,
		entrypoint: *entrypoint, cmd: *cmd, user: *user, workdir: *workdir,
		files: files, dirs: dirs, modes: modes, passwd: passwd, group: group, symlinks: symlinks}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	name, out, layout, registry    string
	busybox                        string
	binLinks                       bool
	entrypoint, cmd, user, workdir string
	files, dirs, modes             []string
	passwd, group                  []string
	symlinks                       []string
}

func run(o options) error {
	name, out, layout, busybox, entrypoint, cmd := o.name, o.out, o.layout, o.busybox, o.entrypoint, o.cmd
	entries := map[string]entry{}
	dir := func(p string, mode int64) {
		entries[p] = entry{name: p + "/", mode: mode, typ: tar.TypeDir}
	}
	// parents adds the missing parent directories of p.
	parents := func(p string) {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := entries[d]; !ok {
				dir(d, 0o755)
			}
		}
	}
	for _, d := range []string{"bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "root", "var", "proc", "sys", "dev", "run"} {
		dir(d, 0o755)
	}
	dir("tmp", 0o1777)
	lines := func(base string, extra []string) []byte {
		return []byte(base + strings.Join(append(extra, ""), "\n"))
	}
	entries["etc/passwd"] = entry{name: "etc/passwd", mode: 0o644, typ: tar.TypeReg,
		data: lines("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n", o.passwd)}
	entries["etc/group"] = entry{name: "etc/group", mode: 0o644, typ: tar.TypeReg,
		data: lines("root:x:0:\nnogroup:x:65534:\n", o.group)}
	if busybox != "" {
		data, err := os.ReadFile(busybox)
		if err != nil {
			return err
		}
		entries["bin/busybox"] = entry{name: "bin/busybox", mode: 0o755, typ: tar.TypeReg, data: data}
		list, err := exec.Command(busybox, "--list-full").Output()
		if err != nil {
			return fmt.Errorf("%s --list-full: %w", busybox, err)
		}
		for _, p := range strings.Fields(string(list)) {
			if p == "bin/busybox" {
				continue
			}
			parents(p)
			entries[p] = entry{name: p, mode: 0o777, typ: tar.TypeSymlink, linkname: "/bin/busybox"}
			if b := "bin/" + path.Base(p); o.binLinks && b != "bin/busybox" {
				if _, ok := entries[b]; !ok {
					entries[b] = entry{name: b, mode: 0o777, typ: tar.TypeSymlink, linkname: "/bin/busybox"}
				}
			}
		}
	}
	for _, d := range o.dirs {
		if !strings.HasPrefix(d, "/") {
			return fmt.Errorf("-dir %q: want /DEST", d)
		}
		p := strings.TrimSuffix(strings.TrimPrefix(d, "/"), "/")
		parents(p)
		dir(p, 0o755)
	}
	for _, f := range o.files {
		src, dest, ok := strings.Cut(f, "=")
		if !ok || !strings.HasPrefix(dest, "/") {
			return fmt.Errorf("-file %q: want SRC=/DEST", f)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		p := strings.TrimPrefix(dest, "/")
		parents(p)
		entries[p] = entry{name: p, mode: 0o755, typ: tar.TypeReg, data: data}
	}
	for _, l := range o.symlinks {
		dest, target, ok := strings.Cut(l, "=")
		if !ok || !strings.HasPrefix(dest, "/") || target == "" {
			return fmt.Errorf("-symlink %q: want /DEST=TARGET", l)
		}
		p := strings.TrimSuffix(strings.TrimPrefix(dest, "/"), "/")
		parents(p)
		entries[p] = entry{name: p, mode: 0o777, typ: tar.TypeSymlink, linkname: target}
	}
	for _, m := range o.modes {
		dest, octal, ok := strings.Cut(m, "=")
		mode, err := strconv.ParseInt(octal, 8, 64)
		if !ok || err != nil || !strings.HasPrefix(dest, "/") {
			return fmt.Errorf("-mode %q: want /DEST=OCTAL", m)
		}
		p := strings.TrimSuffix(strings.TrimPrefix(dest, "/"), "/")
		e, ok := entries[p]
		if !ok {
			return fmt.Errorf("-mode %q: the image has no %s", m, dest)
		}
		e.mode = mode
		entries[p] = e
	}

	layer, diffID, err := buildLayer(entries)
	if err != nil {
		return err
	}
	runConfig := map[string]any{
		"Env":        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		"Entrypoint": fields(entrypoint),
		"Cmd":        fields(cmd),
	}
	if o.user != "" {
		runConfig["User"] = o.user
	}
	if o.workdir != "" {
		runConfig["WorkingDir"] = o.workdir
	}
	imgConfig := map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config":       runConfig,
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	}
	configJSON, _ := json.Marshal(imgConfig)
	manifest := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor("application/vnd.oci.image.config.v1+json", configJSON, nil),
		"layers":        []any{descriptor("application/vnd.oci.image.layer.v1.tar+gzip", layer, nil)},
	}
	manifestJSON, _ := json.Marshal(manifest)
	tag := name[strings.LastIndex(name, ":")+1:]
	index := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []any{descriptor("application/vnd.oci.image.manifest.v1+json", manifestJSON, map[string]string{
			"io.containerd.image.name":          name,
			"org.opencontainers.image.ref.name": tag,
		})},
	}
	indexJSON, _ := json.Marshal(index)

	files2 := map[string][]byte{
		"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`),
		"index.json": indexJSON,
	}
	for _, blob := range [][]byte{configJSON, manifestJSON, layer} {
		files2["blobs/sha256/"+hexDigest(blob)] = blob
	}
	if o.registry != "" {
		if err := writeRegistry(o.registry, name, configJSON, manifestJSON, layer); err != nil {
			return err
		}
	}
	if layout != "" {
		for p, data := range files2 {
			full := filepath.Join(layout, p)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(full, data, 0o644); err != nil {
				return err
			}
		}
	}
	if out != "" {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, d := range []string{"blobs/", "blobs/sha256/"} {
			if err := tw.WriteHeader(&tar.Header{Name: d, Mode: 0o755, Typeflag: tar.TypeDir, ModTime: epoch}); err != nil {
				return err
			}
		}
		for _, p := range slices.Sorted(maps.Keys(files2)) {
			if err := tw.WriteHeader(&tar.Header{Name: p, Mode: 0o644, Size: int64(len(files2[p])), Typeflag: tar.TypeReg, ModTime: epoch}); err != nil {
				return err
			}
			if _, err := tw.Write(files2[p]); err != nil {
				return err
			}
		}
		if err := tw.Close(); err != nil {
			return err
		}
		if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// buildLayer returns the gzipped layer and the digest of its uncompressed
// form (the diff ID).
func buildLayer(entries map[string]entry) ([]byte, string, error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, k := range slices.Sorted(maps.Keys(entries)) {
		e := entries[k]
		h := &tar.Header{Name: e.name, Mode: e.mode, Typeflag: e.typ, Linkname: e.linkname, ModTime: epoch, Uid: 0, Gid: 0, Format: tar.FormatPAX}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, "", err
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, "", err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.ModTime = epoch
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return gz.Bytes(), "sha256:" + hexDigest(raw.Bytes()), nil
}

func descriptor(mediaType string, data []byte, annotations map[string]string) map[string]any {
	d := map[string]any{"mediaType": mediaType, "digest": "sha256:" + hexDigest(data), "size": len(data)}
	if annotations != nil {
		d["annotations"] = annotations
	}
	return d
}

func hexDigest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func fields(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Fields(s)
}
