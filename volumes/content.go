package volumes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"

	v1 "k8s.io/api/core/v1"
	mount "k8s.io/mount-utils"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/runtime"
)

// DefaultContentMode is the mode of content files when the volume sets no
// defaultMode, as the API server defaults it.
const DefaultContentMode os.FileMode = 0o644

// contentAttributes are the attributes of every content volume.
func contentAttributes() Attributes { return Attributes{Managed: true, ReadOnly: true, Refresh: true} }

// payload collects the files of a content volume, remembering which field
// each path came from so that errors name it.
type payload struct {
	files  map[string]FileProjection
	fields map[string]fieldName // cleaned path -> field
}

func newPayload() *payload {
	return &payload{files: map[string]FileProjection{}, fields: map[string]fieldName{}}
}

// fieldName names the field a path came from; it is formatted only for
// an error.
type fieldName struct {
	base  string // "spec.volumes[v].configMap"
	index int    // the item's index, or -1
	kind  string // with key: "configMap", "secret"
	key   string // the object's key when every key is shown
}

func pathField(base string) fieldName { return fieldName{base: base, index: -1} }

func itemField(base string, i int) fieldName { return fieldName{base: base, index: i} }

func (f fieldName) String() string {
	switch {
	case f.key != "":
		return fmt.Sprintf("%s %s key %q", f.base, f.kind, f.key)
	case f.index >= 0:
		return fmt.Sprintf("%s.items[%d].path", f.base, f.index)
	}
	return f.base + ".path"
}

// add adds a file, checking its path; field names where the path came from.
func (p *payload) add(field fieldName, rel string, data []byte, mode os.FileMode) error {
	if err := ValidatePath(rel); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	c := path.Clean(rel)
	if other, ok := p.fields[c]; ok {
		return fmt.Errorf("%s: path %q collides with the one of %s: %w", field, rel, other, ErrUnsafePath)
	}
	p.fields[c] = field
	p.files[c] = FileProjection{Data: data, Mode: mode}
	return nil
}

// fileMode checks a mode field (0 to 0777) and returns it, or def when
// it is not set.
func fileMode(m *int32, def os.FileMode) (os.FileMode, error) {
	if m == nil {
		return def, nil
	}
	if *m < 0 || *m > 0o777 {
		return 0, fmt.Errorf("mode %#o must be between 0 and 0777", *m)
	}
	return os.FileMode(*m), nil
}

func optional(b *bool) bool { return b != nil && *b }

// keyedData is the data of a configMap or secret, with a way to name
// where each key came from.
type keyedData struct {
	kind string // "configMap", "secret"
	name string
	data map[string][]byte
}

// configMapData merges Data and BinaryData; a key in both is refused.
func configMapData(field string, cm *v1.ConfigMap) (keyedData, error) {
	d := keyedData{kind: "configMap", name: cm.Name, data: make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))}
	for k, v := range cm.Data {
		d.data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		if _, ok := d.data[k]; ok {
			return d, fmt.Errorf("%s: configMap %s/%s has key %q in both data and binaryData: %w", field, cm.Namespace, cm.Name, k, ErrUnsafePath)
		}
		d.data[k] = v
	}
	return d, nil
}

func secretData(s *v1.Secret) keyedData {
	return keyedData{kind: "secret", name: s.Name, data: s.Data}
}

// addKeys adds the files of a configMap or secret source: every key under
// its own name when items is empty, or each item's key at its path. A key
// missing from the object is an error unless the source is optional.
func (p *payload) addKeys(field string, d keyedData, items []v1.KeyToPath, defMode os.FileMode, opt bool) error {
	if len(items) == 0 {
		keys := make([]string, 0, len(d.data))
		for k := range d.data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := p.add(fieldName{base: field, kind: d.kind, key: k}, k, d.data[k], defMode); err != nil {
				return err
			}
		}
		return nil
	}
	for i, it := range items {
		data, ok := d.data[it.Key]
		if !ok {
			if opt {
				continue
			}
			return fmt.Errorf("%s.items[%d].key: %s %q has no key %q", field, i, d.kind, d.name, it.Key)
		}
		mode, err := fileMode(it.Mode, defMode)
		if err != nil {
			return fmt.Errorf("%s.items[%d].mode: %w", field, i, err)
		}
		if err := p.add(itemField(field, i), it.Path, data, mode); err != nil {
			return err
		}
	}
	return nil
}

// notFoundError is the kubelet's error for a missing object a volume
// needs, `configmap "settings" not found`; it wraps the getter's error
// (and so runtime.ErrNotFound).
type notFoundError struct {
	kind, name string
	err        error
}

func (e *notFoundError) Error() string { return fmt.Sprintf("%s %q not found", e.kind, e.name) }

func (e *notFoundError) Unwrap() []error { return []error{runtime.ErrNotFound, e.err} }

// getConfigMap fetches a configMap a volume refers to; a missing optional
// one is an empty configMap.
func getConfigMap(ctx context.Context, g ObjectGetter, req *Request, name string, opt bool) (*v1.ConfigMap, error) {
	cm, err := g.GetConfigMap(ctx, req.Pod.Namespace, name)
	switch {
	case err == nil:
		return cm, nil
	case errors.Is(err, runtime.ErrNotFound) && opt:
		cm := &v1.ConfigMap{}
		cm.Namespace, cm.Name = req.Pod.Namespace, name
		return cm, nil
	case errors.Is(err, runtime.ErrNotFound):
		return nil, &notFoundError{"configmap", name, err}
	}
	return nil, fmt.Errorf("get configmap %q: %w", name, err)
}

// getSecret is getConfigMap for secrets.
func getSecret(ctx context.Context, g ObjectGetter, req *Request, name string, opt bool) (*v1.Secret, error) {
	s, err := g.GetSecret(ctx, req.Pod.Namespace, name)
	switch {
	case err == nil:
		return s, nil
	case errors.Is(err, runtime.ErrNotFound) && opt:
		s := &v1.Secret{}
		s.Namespace, s.Name = req.Pod.Namespace, name
		return s, nil
	case errors.Is(err, runtime.ErrNotFound):
		return nil, &notFoundError{"secret", name, err}
	}
	return nil, fmt.Errorf("get secret %q: %w", name, err)
}

// volumeField is the field path of a volume source ("spec.volumes[cfg].configMap").
func volumeField(v *v1.Volume, source string) string {
	return fmt.Sprintf("spec.volumes[%s].%s", v.Name, source)
}

// applyFSGroup gives a new generation the pod's fsGroup before it is
// switched in, as the kubelet does, so that a container running as
// another user can read every file the moment it appears: each entry
// gets the group, files group read and directories group read and
// search plus setgid. It never follows a symlink (see chownTree), and
// fails on the first entry it cannot change.
func applyFSGroup(pod *v1.Pod) func(string) error {
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.FSGroup == nil {
		return nil
	}
	gid := int(*sc.FSGroup)
	add := func(_ fs.FileMode, isDir bool) fs.FileMode {
		if isDir {
			return groupRO | groupExec | fs.ModeSetgid
		}
		return groupRO
	}
	return func(genDir string) error {
		var first error
		err := chownTree(genDir, gid, add, func(p string, err error) {
			if first == nil {
				first = &fs.PathError{Op: "fsGroup", Path: p, Err: err}
			}
		})
		if err == nil {
			err = first
		}
		if err != nil {
			return fmt.Errorf("volumes: fsGroup %d: %w", gid, err)
		}
		return nil
	}
}

// writeContent writes a content volume's files into dir.
func writeContent(dir string, clk clock.PassiveClock, pod *v1.Pod, p *payload) error {
	_, err := NewAtomicWriter(dir, clk).Write(p.files, applyFSGroup(pod))
	return err
}

// memoryDir keeps a content volume on a tmpfs mounted on its directory,
// as the kubelet keeps secrets, downwardAPI and projected volumes; with
// no mounter the files stay on the disk.
type memoryDir struct {
	mounter mount.Interface
}

// setUp creates dir and mounts a tmpfs on it unless one is mounted
// already; mounted says this call mounted it.
func (m memoryDir) setUp(dir string) (mounted bool, err error) {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return false, fmt.Errorf("volumes: %w", err)
	}
	if m.mounter == nil {
		return false, nil
	}
	notMnt, err := m.mounter.IsLikelyNotMountPoint(dir)
	if err != nil {
		return false, fmt.Errorf("volumes: mount check of %s: %w", dir, err)
	}
	if !notMnt {
		return false, nil
	}
	if err := m.mounter.MountSensitiveWithoutSystemd("tmpfs", dir, "tmpfs", nil, nil); err != nil {
		return false, fmt.Errorf("volumes: mount tmpfs on %s: %w", dir, err)
	}
	// The root of a new tmpfs is world-writable (1777).
	if err := os.Chmod(dir, 0o755); err != nil {
		_ = m.mounter.Unmount(dir)
		return false, fmt.Errorf("volumes: %w", err)
	}
	return true, nil
}

// maxUnmounts bounds the unmounts of one directory (mounts may stack).
const maxUnmounts = 8

// tearDown unmounts what is mounted on dir, then removes dir and what is
// beneath it; a missing dir is not an error.
func (m memoryDir) tearDown(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	if fi.IsDir() && m.mounter != nil {
		for i := 0; ; i++ {
			notMnt, err := m.mounter.IsLikelyNotMountPoint(dir)
			if err != nil {
				return fmt.Errorf("volumes: mount check of %s: %w", dir, err)
			}
			if notMnt {
				break
			}
			if i == maxUnmounts {
				return fmt.Errorf("volumes: %s is still a mount point after %d unmounts", dir, maxUnmounts)
			}
			if err := m.mounter.Unmount(dir); err != nil {
				return fmt.Errorf("volumes: unmount %s: %w", dir, err)
			}
		}
	}
	return removeDir(dir)
}

// removeDir removes dir and what is beneath it, following no symlink and
// crossing no mount point (see removeAll), so nothing outside dir is
// touched.
func removeDir(dir string) error {
	if err := removeAll(dir); err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	return nil
}
