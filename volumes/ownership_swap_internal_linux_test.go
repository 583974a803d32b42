package volumes

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/testenv"
)

// A container that swaps a directory of its emptyDir (or of a content
// volume it may write to) for a symlink to a host directory while the
// fsGroup walk runs does not get the host's files changed: the walks
// work on descriptors, not on paths resolved again.
func TestFSGroupWalkResistsASwappedSymlink(t *testing.T) {
	g := int64(4321)
	pod := &v1.Pod{Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{FSGroup: &g}}}
	walks := map[string]func(dir string){
		"managed volume": func(dir string) { _ = setOwnership(pod, dir, false, func(string, error) {}) },
		"new generation": func(dir string) { _ = applyFSGroup(pod)(dir) },
	}
	for name, walk := range walks {
		t.Run(name, func(t *testing.T) { checkSwapResisted(t, walk) })
	}
}

func checkSwapResisted(t *testing.T, walk func(dir string)) {
	testenv.Privileged.Root(t, "changing a file's group")
	outside := t.TempDir()
	keep := filepath.Join(outside, "f")
	if err := os.WriteFile(keep, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	vol := t.TempDir()
	d, aside := filepath.Join(vol, "d"), filepath.Join(vol, "aside")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "f"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(vol, "link")); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the container: d is a directory, then a symlink out
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.Rename(d, aside)
			_ = os.Rename(filepath.Join(vol, "link"), d)
			_ = os.Rename(d, filepath.Join(vol, "link"))
			_ = os.Rename(aside, d)
		}
	}()
	for range 3000 {
		walk(vol)
	}
	close(stop)
	wg.Wait()
	st, err := os.Lstat(keep)
	if err != nil {
		t.Fatal(err)
	}
	if gid := st.Sys().(*syscall.Stat_t).Gid; gid != 0 || st.Mode().Perm() != 0o600 {
		t.Fatalf("a host file behind a swapped-in symlink: group %d mode %v, want 0 and 0600", gid, st.Mode())
	}
}
