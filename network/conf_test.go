package network_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodekit/nodekit/network"
)

func TestLoadConfTakesTheFirstUsableFileInLexicalOrder(t *testing.T) {
	e := newScriptEnv(t)
	writeFile(t, filepath.Join(e.conf, "00-broken.conflist"), `{"cniVersion":"1.0.0","name":`, 0o644)
	writeFile(t, filepath.Join(e.conf, "05-empty.conflist"), `{"cniVersion":"1.0.0","name":"empty","plugins":[]}`, 0o644)
	writeFile(t, filepath.Join(e.conf, "07-notype.conf"), `{"cniVersion":"1.0.0","name":"notype"}`, 0o644)
	writeFile(t, filepath.Join(e.conf, "09-missing.conflist"), `{"cniVersion":"1.0.0","name":"missing","plugins":[{"type":"nk-absent"}]}`, 0o644)
	writeFile(t, filepath.Join(e.conf, "20-single.conf"), `{"cniVersion":"1.0.0","name":"single","type":"nk-record"}`, 0o644)
	writeFile(t, filepath.Join(e.conf, "30-later.conflist"), recordConflist, 0o644)
	writeFile(t, filepath.Join(e.conf, "README"), "not a configuration", 0o644)
	c, err := network.LoadConf(e.conf, []string{e.bin})
	if err != nil {
		t.Fatal(err)
	}
	if c.File != filepath.Join(e.conf, "20-single.conf") || c.Name != "single" || !cmp.Equal(c.Plugins, []string{"nk-record"}) {
		t.Errorf("LoadConf = %s %q %v, want 20-single.conf, a single-plugin .conf made a list", c.File, c.Name, c.Plugins)
	}
	if len(c.Skipped) != 4 {
		t.Fatalf("Skipped = %q, want the four files before it", c.Skipped)
	}
	for i, want := range []string{"00-broken.conflist: ", "05-empty.conflist: ", `07-notype.conf: `, `09-missing.conflist: plugin "nk-absent" not found`} {
		if !strings.HasPrefix(c.Skipped[i], want) {
			t.Errorf("Skipped[%d] = %q, want it to start with %q", i, c.Skipped[i], want)
		}
	}
}

func TestBrokenConfigIsAClearError(t *testing.T) {
	e := newScriptEnv(t)
	writeFile(t, filepath.Join(e.conf, "10-broken.conflist"), `{"cniVersion": "1.0.0", "name": "x", "plugins": [`, 0o644)
	_, err := e.new(t, 0).SetUp(t.Context(), pod, "/var/run/netns/x", network.Options{})
	if !errors.Is(err, network.ErrNoConfig) {
		t.Fatalf("SetUp = %v, want ErrNoConfig", err)
	}
	for _, s := range []string{`"ns1/web"`, e.conf, "10-broken.conflist: error parsing configuration list"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
	if err := e.new(t, 0).Status(); !errors.Is(err, network.ErrNoConfig) {
		t.Errorf("Status = %v, want ErrNoConfig", err)
	}
	empty := t.TempDir()
	if _, err := network.LoadConf(filepath.Join(empty, "none"), nil); !errors.Is(err, network.ErrNoConfig) || !strings.Contains(err.Error(), "no *.conflist") {
		t.Errorf("LoadConf of a missing dir = %v, want ErrNoConfig saying there is no file", err)
	}
}

func TestConfigChangesAreSeenWithoutRestart(t *testing.T) {
	e := newScriptEnv(t)
	n := e.new(t, 0)
	if err := n.Status(); !errors.Is(err, network.ErrNoConfig) {
		t.Fatalf("Status with no file = %v, want ErrNoConfig", err)
	}
	f := filepath.Join(e.conf, "10-a.conflist")
	writeFile(t, f, `{"cniVersion":"1.0.0","name":"aaa","plugins":[{"type":"nk-record"}]}`, 0o644)
	if c, err := n.Conf(); err != nil || c.Name != "aaa" {
		t.Fatalf("Conf = %v, %v; want the new file", c, err)
	}
	// Edited in place, same size, later mtime.
	writeFile(t, f, `{"cniVersion":"1.0.0","name":"bbb","plugins":[{"type":"nk-record"}]}`, 0o644)
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(f, later, later); err != nil {
		t.Fatal(err)
	}
	if c, err := n.Conf(); err != nil || c.Name != "bbb" {
		t.Fatalf("Conf after an edit = %v, %v; want the edited network", c, err)
	}
	// A lexically earlier file takes over.
	writeFile(t, filepath.Join(e.conf, "05-first.conf"), `{"cniVersion":"1.0.0","name":"first","type":"nk-record"}`, 0o644)
	if c, err := n.Conf(); err != nil || c.Name != "first" {
		t.Fatalf("Conf after adding 05-first.conf = %v, %v; want it", c, err)
	}
	// A missing plugin installed later makes its file usable.
	writeFile(t, filepath.Join(e.conf, "01-late.conflist"), `{"cniVersion":"1.0.0","name":"late","plugins":[{"type":"nk-late"}]}`, 0o644)
	if c, err := n.Conf(); err != nil || c.Name != "first" {
		t.Fatalf("Conf = %v, %v; want 05-first.conf while nk-late is missing", c, err)
	}
	writeFile(t, filepath.Join(e.bin, "nk-late"), recordPlugin, 0o755)
	if c, err := n.Conf(); err != nil || c.Name != "late" {
		t.Fatalf("Conf = %v, %v; want 01-late.conflist once its plugin is there", c, err)
	}
}
