package volumes_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/volumes"
)

var testTime = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// snapshot describes every entry under dir: type, mode and content (or
// link target), so a test can tell that nothing there changed.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		desc := info.Mode().String()
		switch {
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + string(b)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		}
		out[strings.TrimPrefix(p, dir)] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readVolume reads every visible file of a volume directory through its
// visible names, as a container would.
func readVolume(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		top := filepath.Join(dir, e.Name())
		if fi, err := os.Stat(top); err != nil {
			t.Fatal(err)
		} else if fi.IsDir() {
			top += "/"
		}
		err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[strings.TrimSuffix(strings.TrimPrefix(p, dir+"/"), "/")] = string(b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// generations lists the generation directories of a volume directory.
func generations(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") && e.Name() != "..data" {
			out = append(out, e.Name())
		}
	}
	return out
}

func modeOf(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func link(t *testing.T, p string) string {
	t.Helper()
	target, err := os.Readlink(p)
	if err != nil {
		t.Fatal(err)
	}
	return target
}

func TestAtomicWriterLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	w := volumes.NewAtomicWriter(dir, clocktesting.NewFakePassiveClock(testTime))
	changed, err := w.Write(map[string]volumes.FileProjection{
		"a":         {Data: []byte("one"), Mode: 0o600},
		"dir/sub/b": {Data: []byte("two"), Mode: 0o644},
	}, nil)
	if err != nil || !changed {
		t.Fatalf("Write = %v, %v; want true, nil", changed, err)
	}
	gen := link(t, filepath.Join(dir, "..data"))
	if !regexp.MustCompile(`^\.\.2026_03_04_05_06_07\.[0-9]+$`).MatchString(gen) {
		t.Errorf("..data -> %q, want a generation named after the clock", gen)
	}
	if got := generations(t, dir); !cmp.Equal(got, []string{gen}) {
		t.Errorf("generations = %v, want [%s]", got, gen)
	}
	if got := link(t, filepath.Join(dir, "a")); got != "..data/a" {
		t.Errorf("a -> %q, want ..data/a", got)
	}
	if got := link(t, filepath.Join(dir, "dir")); got != "..data/dir" {
		t.Errorf("dir -> %q, want ..data/dir", got)
	}
	want := map[string]string{"a": "one", "dir/sub/b": "two"}
	if diff := cmp.Diff(want, readVolume(t, dir)); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
	if m := modeOf(t, filepath.Join(dir, "a")); m != 0o600 {
		t.Errorf("mode of a = %v, want 0600", m)
	}
	if m := modeOf(t, filepath.Join(dir, "dir/sub/b")); m != 0o644 {
		t.Errorf("mode of dir/sub/b = %v, want 0644", m)
	}
}

func TestAtomicWriterUpdate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	clk := clocktesting.NewFakePassiveClock(testTime)
	w := volumes.NewAtomicWriter(dir, clk)
	if _, err := w.Write(map[string]volumes.FileProjection{
		"a":     {Data: []byte("one"), Mode: 0o644},
		"dir/b": {Data: []byte("two"), Mode: 0o644},
	}, nil); err != nil {
		t.Fatal(err)
	}
	first := link(t, filepath.Join(dir, "..data"))
	clk.SetTime(testTime.Add(time.Minute))
	changed, err := w.Write(map[string]volumes.FileProjection{
		"a": {Data: []byte("ONE"), Mode: 0o400},
		"c": {Data: []byte("three"), Mode: 0o644},
	}, nil)
	if err != nil || !changed {
		t.Fatalf("Write = %v, %v; want true, nil", changed, err)
	}
	second := link(t, filepath.Join(dir, "..data"))
	if second == first || !strings.HasPrefix(second, "..2026_03_04_05_07_07.") {
		t.Errorf("..data -> %q after the update, want a new generation (was %q)", second, first)
	}
	if got := generations(t, dir); !cmp.Equal(got, []string{second}) {
		t.Errorf("generations = %v, want only [%s]: the old one removed", got, second)
	}
	want := map[string]string{"a": "ONE", "c": "three"}
	if diff := cmp.Diff(want, readVolume(t, dir)); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
	if _, err := os.Lstat(filepath.Join(dir, "dir")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("visible dir of a removed key: Lstat = %v, want not exist", err)
	}
	if m := modeOf(t, filepath.Join(dir, "a")); m != 0o400 {
		t.Errorf("mode of a = %v, want 0400", m)
	}
}

func TestAtomicWriterUnchangedContentIsNotRewritten(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	clk := clocktesting.NewFakePassiveClock(testTime)
	w := volumes.NewAtomicWriter(dir, clk)
	pl := map[string]volumes.FileProjection{"a": {Data: []byte("one"), Mode: 0o644}, "d/b": {Data: nil, Mode: 0o644}}
	if _, err := w.Write(pl, nil); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	clk.SetTime(testTime.Add(time.Hour))
	prepared := false
	changed, err := w.Write(pl, func(string) error { prepared = true; return nil })
	if err != nil || changed {
		t.Fatalf("Write = %v, %v; want false, nil", changed, err)
	}
	if prepared {
		t.Error("prepare was called for unchanged content")
	}
	if diff := cmp.Diff(before, snapshot(t, dir)); diff != "" {
		t.Errorf("directory changed (-before +after):\n%s", diff)
	}
}

func TestAtomicWriterPrepareRunsBeforeTheSwitch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	w := volumes.NewAtomicWriter(dir, clocktesting.NewFakePassiveClock(testTime))
	if _, err := w.Write(map[string]volumes.FileProjection{"a": {Data: []byte("one"), Mode: 0o644}}, nil); err != nil {
		t.Fatal(err)
	}
	var seen string
	_, err := w.Write(map[string]volumes.FileProjection{"a": {Data: []byte("two"), Mode: 0o644}}, func(gen string) error {
		b, err := os.ReadFile(filepath.Join(gen, "a"))
		if err != nil {
			return err
		}
		visible, err := os.ReadFile(filepath.Join(dir, "a"))
		seen = string(b) + "/" + string(visible)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != "two/one" {
		t.Errorf("prepare saw new/visible = %q, want two/one", seen)
	}
	// A failing prepare leaves the previous generation.
	_, err = w.Write(map[string]volumes.FileProjection{"a": {Data: []byte("three"), Mode: 0o644}}, func(string) error {
		return errors.New("no")
	})
	if err == nil {
		t.Fatal("Write with a failing prepare succeeded")
	}
	if got := readVolume(t, dir); got["a"] != "two" {
		t.Errorf("a = %q after a failed write, want two", got["a"])
	}
	if n := len(generations(t, dir)); n != 1 {
		t.Errorf("%d generations after a failed write, want 1", n)
	}
}

// escapeSetup makes a volume directory with content and a sibling
// directory "outside" holding a file, and returns both.
func escapeSetup(t *testing.T) (vol, outside string) {
	t.Helper()
	root := t.TempDir()
	vol, outside = filepath.Join(root, "vol"), filepath.Join(root, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "file"), []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	return vol, outside
}

func TestAtomicWriterRefusesUnsafePaths(t *testing.T) {
	for _, tc := range []struct {
		name  string
		paths []string
		want  string // in the error
	}{
		{"dot-dot", []string{"../outside/file"}, `"../outside/file"`},
		{"dot-dot inside", []string{"a/../../outside/x"}, `"a/../../outside/x"`},
		{"absolute", []string{"/tmp/x"}, `"/tmp/x"`},
		{"reserved data link", []string{"..data"}, `"..data"`},
		{"reserved prefix", []string{"..2026_01_01_00_00_00.1/x"}, `"..2026_01_01_00_00_00.1/x"`},
		{"volume itself", []string{"./"}, `"./"`},
		{"empty", []string{""}, "empty"},
		{"same path", []string{"a", "./a"}, `"./a" and "a" collide`},
		{"file is a directory of another", []string{"a", "a/b"}, `"a/b" collides with "a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vol, outside := escapeSetup(t)
			w := volumes.NewAtomicWriter(vol, nil)
			if _, err := w.Write(map[string]volumes.FileProjection{"keep": {Data: []byte("k"), Mode: 0o644}}, nil); err != nil {
				t.Fatal(err)
			}
			beforeVol, beforeOut := snapshot(t, vol), snapshot(t, outside)
			pl := map[string]volumes.FileProjection{}
			for _, p := range tc.paths {
				pl[p] = volumes.FileProjection{Data: []byte("evil"), Mode: 0o644}
			}
			_, err := w.Write(pl, nil)
			if !errors.Is(err, volumes.ErrUnsafePath) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Write = %v, want an ErrUnsafePath naming %s", err, tc.want)
			}
			if diff := cmp.Diff(beforeVol, snapshot(t, vol)); diff != "" {
				t.Errorf("volume changed (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(beforeOut, snapshot(t, outside)); diff != "" {
				t.Errorf("outside changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestAtomicWriterRefusesPlantedSymlinks(t *testing.T) {
	for _, tc := range []struct {
		name string
		// plant changes the volume directory after a first write of
		// "a/x" and "b".
		plant func(t *testing.T, vol, outside string)
		want  string // in the error
	}{
		{
			name: "visible directory to outside",
			plant: func(t *testing.T, vol, outside string) {
				mustReplaceLink(t, outside, filepath.Join(vol, "a"))
			},
			want: filepath.Join("vol", "a") + " points at",
		},
		{
			name: "visible file to outside file",
			plant: func(t *testing.T, vol, outside string) {
				mustReplaceLink(t, filepath.Join(outside, "file"), filepath.Join(vol, "b"))
			},
			want: filepath.Join("vol", "b") + " points at",
		},
		{
			name: "data link to outside",
			plant: func(t *testing.T, vol, outside string) {
				mustReplaceLink(t, outside, filepath.Join(vol, "..data"))
			},
			want: filepath.Join("vol", "..data"),
		},
		{
			name: "data link relative out",
			plant: func(t *testing.T, vol, outside string) {
				mustReplaceLink(t, "../outside", filepath.Join(vol, "..data"))
			},
			want: filepath.Join("vol", "..data"),
		},
		{
			name: "generation is a link to outside",
			plant: func(t *testing.T, vol, outside string) {
				gen := link(t, filepath.Join(vol, "..data"))
				if err := os.RemoveAll(filepath.Join(vol, gen)); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(outside, filepath.Join(vol, gen)); err != nil {
					t.Fatal(err)
				}
			},
			want: "is not a directory",
		},
		{
			name: "directory in the generation to outside",
			plant: func(t *testing.T, vol, outside string) {
				gen := link(t, filepath.Join(vol, "..data"))
				if err := os.RemoveAll(filepath.Join(vol, gen, "a")); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(outside, filepath.Join(vol, gen, "a")); err != nil {
					t.Fatal(err)
				}
			},
			want: "/a is a symlink",
		},
		{
			name: "file in the generation to outside",
			plant: func(t *testing.T, vol, outside string) {
				gen := link(t, filepath.Join(vol, "..data"))
				mustReplaceLink(t, filepath.Join(outside, "file"), filepath.Join(vol, gen, "b"))
			},
			want: "/b is a symlink",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vol, outside := escapeSetup(t)
			w := volumes.NewAtomicWriter(vol, nil)
			if _, err := w.Write(map[string]volumes.FileProjection{
				"a/x": {Data: []byte("x"), Mode: 0o644},
				"b":   {Data: []byte("b"), Mode: 0o644},
			}, nil); err != nil {
				t.Fatal(err)
			}
			tc.plant(t, vol, outside)
			beforeOut := snapshot(t, outside)
			_, err := w.Write(map[string]volumes.FileProjection{
				"a/x": {Data: []byte("evil"), Mode: 0o777},
				"a/y": {Data: []byte("evil"), Mode: 0o777},
				"b":   {Data: []byte("evil"), Mode: 0o777},
			}, nil)
			if !errors.Is(err, volumes.ErrUnsafePath) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Write = %v, want an ErrUnsafePath naming %q", err, tc.want)
			}
			if diff := cmp.Diff(beforeOut, snapshot(t, outside)); diff != "" {
				t.Errorf("outside changed (-before +after):\n%s", diff)
			}
		})
	}
}

// A leftover "..data_tmp" pointing outside is replaced, never followed.
func TestAtomicWriterLeftoverTempLink(t *testing.T) {
	vol, outside := escapeSetup(t)
	w := volumes.NewAtomicWriter(vol, nil)
	if _, err := w.Write(map[string]volumes.FileProjection{"a": {Data: []byte("1"), Mode: 0o644}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(vol, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	beforeOut := snapshot(t, outside)
	if _, err := w.Write(map[string]volumes.FileProjection{"a": {Data: []byte("2"), Mode: 0o644}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := readVolume(t, vol)["a"]; got != "2" {
		t.Errorf("a = %q, want 2", got)
	}
	if diff := cmp.Diff(beforeOut, snapshot(t, outside)); diff != "" {
		t.Errorf("outside changed (-before +after):\n%s", diff)
	}
}

func mustReplaceLink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// A reader that resolves "..data" once sees one whole generation, and a
// reader of visible names always finds every file complete, while the
// writer replaces the content again and again.
func TestAtomicWriterConcurrentReader(t *testing.T) {
	const (
		updates = 200
		keys    = 8
		size    = 4096
	)
	dir := filepath.Join(t.TempDir(), "vol")
	w := volumes.NewAtomicWriter(dir, nil)
	gen := func(n int) map[string]volumes.FileProjection {
		pl := map[string]volumes.FileProjection{}
		body := strings.Repeat(fmt.Sprintf("%08d", n), size/8)
		for k := range keys {
			pl[fmt.Sprintf("d%d/k%d", k%2, k)] = volumes.FileProjection{Data: []byte(body), Mode: 0o644}
		}
		return pl
	}
	if _, err := w.Write(gen(0), nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	errc := make(chan error, 1)
	reads := 0
	go func() {
		defer close(errc)
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := readSnapshot(dir, keys, size); err != nil {
				errc <- err
				return
			}
			reads++
		}
	}()
	for n := 1; n <= updates; n++ {
		if _, err := w.Write(gen(n), nil); err != nil {
			close(done)
			t.Fatal(err)
		}
	}
	close(done)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if reads == 0 {
		t.Fatal("the reader never read")
	}
	if n := len(generations(t, dir)); n != 1 {
		t.Errorf("%d generations left, want 1", n)
	}
}

// readSnapshot reads the volume twice over: every key through its visible
// name (each must be whole), and every key through one resolution of
// "..data" (all must be of one generation). A generation removed under
// either reader is not an error: it reads again.
func readSnapshot(dir string, keys, size int) error {
	whole := func(b []byte) (string, error) {
		if len(b) != size || strings.Count(string(b), string(b[:8])) != size/8 {
			return "", fmt.Errorf("read a half-written file of %d bytes", len(b))
		}
		return string(b[:8]), nil
	}
	for k := range keys {
		// A visible name resolves through "..data": a reader that
		// resolved it just before a switch may find the old generation
		// removed before it reaches the file, as with the kubelet's
		// writer. It reads again; the name itself must never be missing.
		var b []byte
		var err error
		for range 100 {
			b, err = os.ReadFile(filepath.Join(dir, fmt.Sprintf("d%d/k%d", k%2, k)))
			if !errors.Is(err, fs.ErrNotExist) {
				break
			}
			if _, lerr := os.Lstat(filepath.Join(dir, fmt.Sprintf("d%d", k%2))); lerr != nil {
				return fmt.Errorf("visible name: %w", lerr)
			}
		}
		if err != nil {
			return fmt.Errorf("visible file: %w", err)
		}
		if _, err := whole(b); err != nil {
			return err
		}
	}
	for range 100 {
		gen, err := os.Readlink(filepath.Join(dir, "..data"))
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		gone := false
		for k := range keys {
			b, err := os.ReadFile(filepath.Join(dir, gen, fmt.Sprintf("d%d/k%d", k%2, k)))
			if errors.Is(err, fs.ErrNotExist) {
				gone = true
				break
			}
			if err != nil {
				return err
			}
			g, err := whole(b)
			if err != nil {
				return err
			}
			seen[g] = true
		}
		if gone {
			continue
		}
		if len(seen) != 1 {
			ids := make([]string, 0, len(seen))
			for g := range seen {
				ids = append(ids, g)
			}
			sort.Strings(ids)
			return fmt.Errorf("one generation held files of generations %v", ids)
		}
		return nil
	}
	return errors.New("every generation read was removed under the reader")
}
