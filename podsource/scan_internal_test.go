package podsource

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestScanReportsOnlyChanges: a re-read reports a change, with the pods,
// exactly when a file appeared or went or gave another pod or error; a
// file touched without a change of content, or nothing at all, is no
// change and builds no pods.
func TestScanReportsOnlyChanges(t *testing.T) {
	dir := t.TempDir()
	const web = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: a, image: busybox}]\n"
	path := filepath.Join(dir, "web.yaml")
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("web.yaml", web)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f, err := NewFile(FileConfig{Dir: dir, NodeName: "n", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	step := 0
	expect := func(what string, wantChanged bool, wantPods int) []string {
		t.Helper()
		step++
		pods, origins, changed, ok := f.scan()
		if !ok {
			t.Fatalf("step %d (%s): scan not ok", step, what)
		}
		if changed != wantChanged {
			t.Fatalf("step %d (%s): changed %v, want %v", step, what, changed, wantChanged)
		}
		if !changed {
			if pods != nil || origins != nil {
				t.Fatalf("step %d (%s): no change, yet pods %d and origins %d built", step, what, len(pods), len(origins))
			}
			return nil
		}
		if len(pods) != wantPods || len(origins) != wantPods {
			t.Fatalf("step %d (%s): %d pods, %d origins, want %d", step, what, len(pods), len(origins), wantPods)
		}
		var uids []string
		for _, p := range pods {
			uids = append(uids, string(p.UID))
			if origins[p.UID] == "" {
				t.Fatalf("step %d (%s): pod %s has no origin", step, what, p.Name)
			}
		}
		return uids
	}

	first := expect("the first read", true, 1)
	expect("nothing changed", false, 0)
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	expect("touched, same content", false, 0)
	write("web.yaml", "kind: Pod\nspec: [not, a, map\n")
	expect("made invalid", true, 0)
	expect("still invalid", false, 0)
	write("web.yaml", web)
	if again := expect("valid again", true, 1); again[0] != first[0] {
		t.Fatalf("the same content gave UID %s, then %s", first[0], again[0])
	}
	write("job.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: job}\nspec:\n  containers: [{name: a, image: busybox}]\n")
	expect("a file added", true, 2)
	if err := os.Rename(filepath.Join(dir, "job.yaml"), filepath.Join(dir, "job2.yaml")); err != nil {
		t.Fatal(err)
	}
	expect("a file renamed", true, 2)
	if err := os.Remove(filepath.Join(dir, "job2.yaml")); err != nil {
		t.Fatal(err)
	}
	expect("a file removed", true, 1)
	expect("nothing changed", false, 0)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	expect("the directory removed", true, 0)
	expect("still no directory", false, 0)
}

// BenchmarkRescanUnchanged measures the periodic re-read (every 20 s) of
// a directory of 100 manifests that did not change.
func BenchmarkRescanUnchanged(b *testing.B) {
	dir := b.TempDir()
	for i := range 100 {
		doc := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: pod-%04d}\nspec:\n  containers: [{name: main, image: busybox}]\n", i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("pod-%04d.yaml", i)), []byte(doc), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	f, err := NewFile(FileConfig{Dir: dir, NodeName: "n", Clock: clocktesting.NewFakeClock(time.Now())})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, changed, _ := f.scan(); !changed {
		b.Fatal("the first read reported no change")
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, changed, _ := f.scan(); changed {
			b.Fatal("an unchanged directory reported a change")
		}
	}
}

// TestScanSeesEditsThatKeepSizeAndModTime: an edit that keeps the file's
// size and sets its modification time back is picked up, as by the
// kubelet, which reads the files again: the status change time, which
// cannot be set back, or the inode of a file renamed into place tells the
// new version from the old.
func TestScanSeesEditsThatKeepSizeAndModTime(t *testing.T) {
	const web = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: a, image: busybox:1.36}]\n"
	const edited = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: a, image: busybox:1.37}]\n"
	for _, tc := range []struct {
		name string
		// edit writes content to path and gives it the modification time
		// mod.
		edit func(t *testing.T, path, content string, mod time.Time)
	}{
		{"rewritten in place", func(t *testing.T, path, content string, mod time.Time) {
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(path, mod, mod); err != nil {
				t.Fatal(err)
			}
		}},
		{"renamed into place", func(t *testing.T, path, content string, mod time.Time) {
			tmp := filepath.Join(filepath.Dir(path), ".web.tmp")
			if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(tmp, mod, mod); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "web.yaml")
			if err := os.WriteFile(path, []byte(web), 0o644); err != nil {
				t.Fatal(err)
			}
			before, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if ino, ctime := inodeAndCtime(before); ino == 0 && ctime == 0 {
				t.Skip("off Linux a file's version has no inode or status change time")
			}
			f, err := NewFile(FileConfig{Dir: dir, NodeName: "n", Clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
			if err != nil {
				t.Fatal(err)
			}
			pods, _, _, _ := f.scan()
			if len(pods) != 1 || pods[0].Spec.Containers[0].Image != "busybox:1.36" {
				t.Fatalf("first read: %d pods", len(pods))
			}

			// Edit until the file's version differs from the one read,
			// for a rewrite in the same tick of the kernel's clock keeps
			// the ctime.
			var after fileVersion
			for i := 0; ; i++ {
				tc.edit(t, path, edited, before.ModTime())
				info, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if info.Size() != before.Size() || !info.ModTime().Equal(before.ModTime()) {
					t.Fatalf("the edit changed the size or the modification time: %d %v, was %d %v", info.Size(), info.ModTime(), before.Size(), before.ModTime())
				}
				if after = versionOf(info); after != versionOf(before) {
					break
				}
				if i == 100000 {
					t.Fatalf("after %d edits, still the version %+v: no ctime or inode on this system", i, after)
				}
			}
			pods, _, changed, ok := f.scan()
			if !ok || !changed || len(pods) != 1 || pods[0].Spec.Containers[0].Image != "busybox:1.37" {
				t.Fatalf("after the edit: ok %v, changed %v, %d pods, want the edited pod", ok, changed, len(pods))
			}
		})
	}
}
