package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// layerEntries builds an image into a layout directory and returns the
// entries of its one layer, by name.
func layerEntries(t *testing.T, o options) map[string]*tar.Header {
	t.Helper()
	o.layout = t.TempDir()
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	read := func(rel string) []byte {
		b, err := os.ReadFile(filepath.Join(o.layout, rel))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var index struct{ Manifests []struct{ Digest string } }
	var manifest struct{ Layers []struct{ Digest string } }
	if err := json.Unmarshal(read("index.json"), &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v", err)
	}
	blob := func(digest string) string {
		return filepath.Join("blobs", "sha256", strings.TrimPrefix(digest, "sha256:"))
	}
	if err := json.Unmarshal(read(blob(index.Manifests[0].Digest)), &manifest); err != nil || len(manifest.Layers) != 1 {
		t.Fatalf("manifest: %v", err)
	}
	f, err := os.Open(filepath.Join(o.layout, blob(manifest.Layers[0].Digest)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tar.Header{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = h
	}
}

func TestSymlink(t *testing.T) {
	prog := filepath.Join(t.TempDir(), "agnhost")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := layerEntries(t, options{name: "example.test/agnhost:1", files: []string{prog + "=/agnhost"},
		symlinks: []string{"/agnhost-2=agnhost", "/opt/tools/run=/agnhost"}})
	for name, target := range map[string]string{"agnhost-2": "agnhost", "opt/tools/run": "/agnhost"} {
		h := got[name]
		if h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != target {
			t.Errorf("%s: %+v, want a symlink to %s", name, h, target)
		}
	}
	if h := got["opt/tools/"]; h == nil || h.Typeflag != tar.TypeDir {
		t.Errorf("the link's parent directory is missing: %+v", h)
	}
	if h := got["agnhost"]; h == nil || h.Typeflag != tar.TypeReg {
		t.Errorf("agnhost: %+v, want the file", h)
	}
}

func TestSymlinkNeedsDestAndTarget(t *testing.T) {
	for _, bad := range []string{"agnhost-2=agnhost", "/agnhost-2", "/agnhost-2="} {
		err := run(options{name: "example.test/x:1", layout: t.TempDir(), symlinks: []string{bad}})
		if err == nil || !strings.Contains(err.Error(), "want /DEST=TARGET") {
			t.Errorf("-symlink %q: %v, want an error", bad, err)
		}
	}
}
