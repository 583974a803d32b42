package beneath

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree makes a volume directory and an outside one, with symlinks from
// the volume to the outside and within the volume.
func tree(t *testing.T) (vol, outside string) {
	t.Helper()
	root := t.TempDir()
	vol, outside = filepath.Join(root, "vol"), filepath.Join(root, "outside")
	for _, d := range []string{vol, outside, filepath.Join(vol, "real/dir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(vol, "real/file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"abs":      outside,                       // absolute, outside
		"rel":      "../outside",                  // relative, outside
		"deep":     "real/../../outside",          // relative, outside through a directory
		"dangling": filepath.Join(outside, "new"), // points at what does not exist yet
		"inside":   "real/dir",                    // stays inside
		"real/up":  "..",                          // inside: the volume itself
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(vol, name)); err != nil {
			t.Fatal(err)
		}
	}
	return vol, outside
}

// listing returns every path under dir.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		out = append(out, strings.TrimPrefix(p, dir))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMkdirAll(t *testing.T) {
	for _, mode := range []struct {
		name       string
		useOpenat2 bool
	}{{"openat2", true}, {"O_NOFOLLOW walk", false}} {
		t.Run(mode.name, func(t *testing.T) {
			for _, tc := range []struct {
				sub  string
				want string // path under the volume, or "" for ErrEscapes
				// strict: the O_NOFOLLOW walk refuses every symlink.
				strictWant string
			}{
				{sub: "a/b/c", want: "a/b/c", strictWant: "a/b/c"},
				{sub: "real/dir", want: "real/dir", strictWant: "real/dir"},
				{sub: "real/file", want: "real/file", strictWant: "real/file"},
				{sub: "./real//dir/", want: "real/dir", strictWant: "real/dir"},
				{sub: "inside", want: "real/dir"},
				{sub: "inside/made", want: "real/dir/made"},
				{sub: "real/up/real/dir", want: "real/dir"},
				{sub: "abs"},
				{sub: "abs/made"},
				{sub: "rel/made/deeper"},
				{sub: "deep/made"},
				{sub: "dangling"},
				{sub: "dangling/made"},
			} {
				vol, outside := tree(t)
				got, err := mkdirAll(vol, tc.sub, 0o750, mode.useOpenat2)
				want := tc.want
				if !mode.useOpenat2 {
					want = tc.strictWant
				}
				if want == "" {
					if !errors.Is(err, ErrEscapes) {
						t.Errorf("%s: %q, %v; want ErrEscapes", tc.sub, got, err)
					}
				} else if err != nil || got != filepath.Join(vol, want) {
					t.Errorf("%s: %q, %v; want %s", tc.sub, got, err, filepath.Join(vol, want))
				}
				if l := listing(t, outside); len(l) != 1 {
					t.Errorf("%s: created outside the volume: %q", tc.sub, l)
				}
			}
		})
	}
}

func TestMkdirAllRejectsAbsoluteAndDotDot(t *testing.T) {
	vol, outside := tree(t)
	for _, sub := range []string{"/etc", "../outside/x", "a/../../outside"} {
		if _, err := MkdirAll(vol, sub, 0o750); err == nil {
			t.Errorf("%s: no error", sub)
		}
	}
	if l := listing(t, outside); len(l) != 1 {
		t.Errorf("created outside the volume: %q", l)
	}
	if _, err := os.Stat(filepath.Join(vol, "a")); !os.IsNotExist(err) {
		t.Errorf("a rejected path created a directory: %v", err)
	}
}

func TestMkdirAllGivesCreatedDirectoriesTheWholeMode(t *testing.T) {
	// The umask (022 at least under go test) must not take bits, and the
	// setgid and sticky bits are kept, as the kubelet gives a subPath
	// the mode of its volume; directories that exist are left alone.
	perm := 0o777 | os.ModeSetgid | os.ModeSticky
	for _, mode := range []struct {
		name       string
		useOpenat2 bool
	}{{"openat2", true}, {"O_NOFOLLOW walk", false}} {
		t.Run(mode.name, func(t *testing.T) {
			vol, _ := tree(t)
			if _, err := mkdirAll(vol, "real/made/deeper", perm, mode.useOpenat2); err != nil {
				t.Fatal(err)
			}
			for p, want := range map[string]os.FileMode{
				"real":             os.ModeDir | 0o755,
				"real/made":        os.ModeDir | perm,
				"real/made/deeper": os.ModeDir | perm,
			} {
				st, err := os.Stat(filepath.Join(vol, p))
				if err != nil {
					t.Fatal(err)
				}
				if st.Mode() != want {
					t.Errorf("%s: mode %v, want %v", p, st.Mode(), want)
				}
			}
		})
	}
}
