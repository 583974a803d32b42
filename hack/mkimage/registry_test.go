package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRegistryTree follows a pull through the tree that -registry writes,
// as agnhost's fake-registry-server serves it: the tag file names the
// index, the index the linux/amd64 manifest, the manifest its config and
// layer; every file sits at the path of its own digest, and the image is
// the one -layout writes.
func TestRegistryTree(t *testing.T) {
	prog := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(prog, []byte("\x7fELF pause"), 0o755); err != nil {
		t.Fatal(err)
	}
	o := options{name: "localhost:5000/pause:testing", files: []string{prog + "=/pause"}, entrypoint: "/pause",
		registry: t.TempDir(), layout: t.TempDir()}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(o.registry, "pause")
	read := func(p string) []byte {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// get reads content by digest under manifests or blobs and checks
	// that it has that digest.
	get := func(kind, digest string) []byte {
		t.Helper()
		h, ok := strings.CutPrefix(digest, "sha256:")
		if !ok || len(h) != 64 {
			t.Fatalf("digest %q", digest)
		}
		b := read(filepath.Join(repo, kind, "sha256", h[:2], h, "data"))
		if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != h {
			t.Fatalf("%s %s holds content of another digest", kind, digest)
		}
		return b
	}
	type desc struct {
		MediaType string
		Digest    string
		Size      int
		Platform  map[string]string
	}

	tag := string(read(filepath.Join(repo, "manifests", "testing")))
	var index struct {
		MediaType string
		Manifests []desc
	}
	if err := json.Unmarshal(get("manifests", strings.TrimSpace(tag)), &index); err != nil {
		t.Fatal(err)
	}
	if index.MediaType != "application/vnd.oci.image.index.v1+json" || len(index.Manifests) != 1 {
		t.Fatalf("index: %+v", index)
	}
	m := index.Manifests[0]
	if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.Platform["os"] != "linux" || m.Platform["architecture"] != "amd64" {
		t.Fatalf("index entry: %+v, want an OCI manifest for linux/amd64", m)
	}
	manifestJSON := get("manifests", m.Digest)
	if len(manifestJSON) != m.Size {
		t.Errorf("manifest size %d, index says %d", len(manifestJSON), m.Size)
	}
	var manifest struct {
		MediaType string
		Config    desc
		Layers    []desc
	}
	if err := json.Unmarshal(manifestJSON, &manifest); err != nil {
		t.Fatal(err)
	}
	if manifest.MediaType != "application/vnd.oci.image.manifest.v1+json" || len(manifest.Layers) != 1 {
		t.Fatalf("manifest: %+v", manifest)
	}
	for _, d := range append(manifest.Layers, manifest.Config) {
		if b := get("blobs", d.Digest); len(b) != d.Size {
			t.Errorf("blob %s: %d bytes, manifest says %d", d.Digest, len(b), d.Size)
		}
	}

	var layoutIndex struct{ Manifests []desc }
	if err := json.Unmarshal(read(filepath.Join(o.layout, "index.json")), &layoutIndex); err != nil {
		t.Fatal(err)
	}
	if got := layoutIndex.Manifests[0].Digest; got != m.Digest {
		t.Errorf("the registry serves manifest %s, the layout holds %s", m.Digest, got)
	}
	if !bytes.HasSuffix([]byte(tag), []byte("\n")) {
		t.Errorf("tag file %q: want the digest on a line", tag)
	}
}

func TestRegistryNeedsTag(t *testing.T) {
	for _, name := range []string{"localhost:5000/pause", "localhost:5000/pause@sha256:" + strings.Repeat("0", 64)} {
		err := run(options{name: name, registry: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "-registry") {
			t.Errorf("%s: %v, want an error", name, err)
		}
	}
}
