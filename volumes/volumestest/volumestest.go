// Package volumestest helps test code built on package volumes: Plugin,
// a scriptable fake volume plugin that records its calls, and
// TestPlugin, a conformance check that any volumes.Plugin should pass.
package volumestest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/volumes"
)

// Plugin is a fake volume plugin. SetUp makes the volume's directory
// (0750) and returns it; it fails while failures are scripted (Fail),
// and blocks while held (Hold) until released or its ctx ends. TearDown
// removes the directory. It records every call. The zero value is not
// usable: use New. Safe for concurrent use.
type Plugin struct {
	name    string
	support func(*v1.Volume) bool
	attrs   volumes.Attributes

	mu       sync.Mutex
	fails    []error
	hold     chan struct{}
	setUps   []volumes.Request
	tornDown []string
}

var _ volumes.Plugin = (*Plugin)(nil)

// New returns a fake plugin named name that supports the volumes for
// which support returns true, with the attributes attrs.
func New(name string, support func(*v1.Volume) bool, attrs volumes.Attributes) *Plugin {
	return &Plugin{name: name, support: support, attrs: attrs}
}

// Fail makes the next len(errs) SetUp calls fail with errs, in order.
func (p *Plugin) Fail(errs ...error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fails = append(p.fails, errs...)
}

// Hold makes SetUp block until the returned func is called.
func (p *Plugin) Hold() (release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := make(chan struct{})
	p.hold = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			if p.hold == ch {
				p.hold = nil
			}
			p.mu.Unlock()
			close(ch)
		})
	}
}

// SetUps returns a copy of the SetUp requests so far.
func (p *Plugin) SetUps() []volumes.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.setUps)
}

// TornDown returns the directories TearDown was called with so far.
func (p *Plugin) TornDown() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.tornDown)
}

// Name implements volumes.Plugin.
func (p *Plugin) Name() string { return p.name }

// CanSupport implements volumes.Plugin.
func (p *Plugin) CanSupport(v *v1.Volume) bool { return p.support(v) }

// Attributes implements volumes.Plugin.
func (p *Plugin) Attributes(*v1.Volume) volumes.Attributes { return p.attrs }

// SetUp implements volumes.Plugin.
func (p *Plugin) SetUp(ctx context.Context, req *volumes.Request) (string, error) {
	p.mu.Lock()
	p.setUps = append(p.setUps, *req)
	hold := p.hold
	var err error
	if len(p.fails) > 0 {
		err, p.fails = p.fails[0], p.fails[1:]
	}
	p.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(req.Dir, 0o750); err != nil {
		return "", err
	}
	return req.Dir, nil
}

// TearDown implements volumes.Plugin.
func (p *Plugin) TearDown(_ context.Context, dir string) error {
	p.mu.Lock()
	p.tornDown = append(p.tornDown, dir)
	p.mu.Unlock()
	return os.RemoveAll(dir)
}

// TestPlugin checks that p behaves as volumes.Plugin says, for the
// volume v of pod (which must name it in its spec.volumes and be
// supported by p), in a temporary directory: SetUp makes the volume
// ready and returns a path that exists; a second SetUp (Update set)
// returns the same path and keeps what was written there; and, for a
// plugin whose path is its directory (every plugin but hostPath's kind),
// TearDown removes the directory without following a symlink out of it,
// and returns nil for a directory that is gone. The caller's content may
// be read-only: a write that fails is not an error of the plugin.
func TestPlugin(t *testing.T, p volumes.Plugin, pod *v1.Pod, v *v1.Volume) {
	t.Helper()
	ctx := context.Background()
	if !p.CanSupport(v) {
		t.Fatalf("%s does not support the volume %q", p.Name(), v.Name)
	}
	podDir := filepath.Join(t.TempDir(), string(pod.UID))
	dir := volumes.VolumeDir(podDir, p.Name(), v.Name)
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		t.Fatal(err)
	}
	path, err := p.SetUp(ctx, &volumes.Request{Pod: pod, Volume: v, Dir: dir})
	if err != nil {
		t.Fatalf("SetUp: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("SetUp returned %q, which does not exist: %v", path, err)
	}
	owned := path == dir
	var marker string
	if owned {
		marker = filepath.Join(dir, ".volumestest")
		if err := os.WriteFile(marker, []byte("x"), 0o600); err != nil {
			marker = ""
		}
	}
	again, err := p.SetUp(ctx, &volumes.Request{Pod: pod, Volume: v, Dir: dir, Update: true})
	if err != nil {
		t.Fatalf("SetUp with Update: %v", err)
	}
	if again != path {
		t.Fatalf("SetUp with Update returned %q, the first SetUp %q", again, path)
	}
	if marker != "" {
		if _, err := os.Stat(marker); err != nil && !p.Attributes(v).Refresh {
			t.Fatalf("SetUp with Update lost what the volume held: %v", err)
		}
	}
	if !owned {
		return
	}
	outside := t.TempDir()
	kept := filepath.Join(outside, "kept")
	if err := os.WriteFile(kept, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// A container could leave a symlink in a writable volume.
	_ = os.Symlink(outside, filepath.Join(dir, ".volumestest-link"))
	if err := p.TearDown(ctx, dir); err != nil {
		t.Fatalf("TearDown: %v", err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("TearDown left %s: %v", dir, err)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Fatalf("TearDown followed a symlink out of the volume: %v", err)
	}
	if err := p.TearDown(ctx, dir); err != nil {
		t.Fatalf("TearDown of a directory that is gone: %v", err)
	}
}
