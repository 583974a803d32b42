package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/distribution/reference"
)

// writeRegistry writes the image as the storage tree that agnhost's
// fake-registry-server serves (its /var/registry), under dir:
//
//	REPO/manifests/TAG                       "sha256:HEX\n" of the index
//	REPO/manifests/sha256/HE/HEX/data        the image index, then the manifest
//	REPO/blobs/sha256/HE/HEX/data            the config and the layer
//
// REPO is the name's path without its registry host (pause for
// localhost:5000/pause:testing). The top of the tree is an image index
// naming the one linux/amd64 manifest, as the tree of the real agnhost
// image holds a multi-platform list; the server sends each manifest with
// the media type written inside it.
func writeRegistry(dir, name string, configJSON, manifestJSON, layer []byte) error {
	ref, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return fmt.Errorf("-registry: image name %q: %w", name, err)
	}
	tagged, ok := ref.(reference.Tagged)
	if !ok {
		return fmt.Errorf("-registry: image name %q has no tag", name)
	}
	if _, ok := ref.(reference.Digested); ok {
		return fmt.Errorf("-registry: image name %q has a digest", name)
	}
	manifestDesc := descriptor("application/vnd.oci.image.manifest.v1+json", manifestJSON, nil)
	manifestDesc["platform"] = map[string]string{"architecture": "amd64", "os": "linux"}
	indexJSON, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests":     []any{manifestDesc},
	})

	repo := filepath.Join(dir, filepath.FromSlash(reference.Path(ref)))
	files := map[string][]byte{
		filepath.Join(repo, "manifests", tagged.Tag()): []byte("sha256:" + hexDigest(indexJSON) + "\n"),
	}
	for _, m := range [][]byte{indexJSON, manifestJSON} {
		files[digestPath(filepath.Join(repo, "manifests"), m)] = m
	}
	for _, b := range [][]byte{configJSON, layer} {
		files[digestPath(filepath.Join(repo, "blobs"), b)] = b
	}
	for p, data := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// digestPath is where the registry tree keeps content under base:
// base/sha256/<first 2 hex digits>/<hex>/data.
func digestPath(base string, content []byte) string {
	h := hexDigest(content)
	return filepath.Join(base, "sha256", h[:2], h, "data")
}
