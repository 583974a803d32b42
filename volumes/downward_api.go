package volumes

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/podutil"
)

// DownwardAPIPluginName is the name of the downwardAPI plugin.
const DownwardAPIPluginName = "kubernetes.io/downward-api"

// DownwardAPI shows fields of the pod (fieldRef) and resources of
// its containers (resourceFieldRef) as files, written with an
// AtomicWriter on a tmpfs mounted on the volume directory, as the
// kubelet does. It is safe for concurrent use.
type DownwardAPI struct {
	mem         memoryDir
	allocatable v1.ResourceList
	clock       clock.PassiveClock
}

var _ Plugin = (*DownwardAPI)(nil)

// NewDownwardAPI returns the downwardAPI plugin. cfg.Allocatable is the
// node's allocatable resources: a resourceFieldRef to a container's cpu,
// memory or ephemeral-storage limit that the container does not set
// shows the node's allocatable amount, as in the kubelet (nil shows 0);
// it is copied. cfg.Mounter mounts the tmpfs (nil: the host's mounter;
// with cfg.NoTmpfs the files stay on the disk); cfg.Clock names the
// generations of the files (nil: the real clock). Objects and Tokens
// are not used.
func NewDownwardAPI(cfg PluginConfig) *DownwardAPI {
	return &DownwardAPI{mem: memoryDir{mounter: cfg.mounter()}, allocatable: cfg.Allocatable.DeepCopy(), clock: cfg.clock()}
}

// Name is "kubernetes.io/downward-api".
func (p *DownwardAPI) Name() string { return DownwardAPIPluginName }

// CanSupport reports whether v is a downwardAPI volume.
func (p *DownwardAPI) CanSupport(v *v1.Volume) bool { return v.DownwardAPI != nil }

// Attributes: managed, read-only, refreshed (labels and annotations
// change while the pod runs).
func (p *DownwardAPI) Attributes(*v1.Volume) Attributes { return contentAttributes() }

// SetUp writes the items of the volume into req.Dir from req.Pod,
// leaving the files as they are when nothing changed. An unsupported
// field path or resource is an error naming the item.
func (p *DownwardAPI) SetUp(_ context.Context, req *Request) (string, error) {
	src := req.Volume.DownwardAPI
	if src == nil {
		return "", fmt.Errorf("volumes: volume %q is not a downwardAPI volume", req.Volume.Name)
	}
	field := volumeField(req.Volume, "downwardAPI")
	defMode, err := fileMode(src.DefaultMode, DefaultContentMode)
	if err != nil {
		return "", fmt.Errorf("%s.defaultMode: %w", field, err)
	}
	pl := newPayload()
	if err := pl.addDownwardAPI(field, src.Items, req.Pod, p.allocatable, defMode); err != nil {
		return "", err
	}
	if err := writeInMemory(p.mem, req, p.clock, pl); err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return req.Dir, nil
}

// TearDown unmounts the tmpfs, then removes dir.
func (p *DownwardAPI) TearDown(_ context.Context, dir string) error {
	return p.mem.tearDown(dir)
}

// addDownwardAPI adds the files of downwardAPI items.
func (p *payload) addDownwardAPI(field string, items []v1.DownwardAPIVolumeFile, pod *v1.Pod, allocatable v1.ResourceList, defMode os.FileMode) error {
	for i, it := range items {
		f := fmt.Sprintf("%s.items[%d]", field, i)
		mode, err := fileMode(it.Mode, defMode)
		if err != nil {
			return fmt.Errorf("%s.mode: %w", f, err)
		}
		var value string
		switch {
		case it.FieldRef != nil && it.ResourceFieldRef != nil:
			return fmt.Errorf("%s: fieldRef and resourceFieldRef are both set", f)
		case it.FieldRef != nil:
			if value, err = podFieldValue(pod, it.FieldRef.FieldPath); err != nil {
				return fmt.Errorf("%s.fieldRef.fieldPath: %w", f, err)
			}
		case it.ResourceFieldRef != nil:
			if value, err = resourceFieldValue(pod, it.ResourceFieldRef, allocatable); err != nil {
				return fmt.Errorf("%s.resourceFieldRef: %w", f, err)
			}
		default:
			return fmt.Errorf("%s: one of fieldRef and resourceFieldRef is required", f)
		}
		if err := p.add(itemField(field, i), it.Path, []byte(value), mode); err != nil {
			return err
		}
	}
	return nil
}

// podFieldValue is the value of a downwardAPI volume's fieldRef: the
// pod's name, namespace, uid, one label or annotation, or all labels or
// annotations as the kubelet formats them (formatMap).
func podFieldValue(pod *v1.Pod, fieldPath string) (string, error) {
	if base, key, ok := subscripted(fieldPath); ok {
		switch base {
		case "metadata.labels":
			if errs := validation.IsQualifiedName(key); len(errs) > 0 {
				return "", fmt.Errorf("invalid key %q in %q: %s", key, fieldPath, strings.Join(errs, "; "))
			}
			return pod.Labels[key], nil
		case "metadata.annotations":
			if errs := validation.IsQualifiedName(strings.ToLower(key)); len(errs) > 0 {
				return "", fmt.Errorf("invalid key %q in %q: %s", key, fieldPath, strings.Join(errs, "; "))
			}
			return pod.Annotations[key], nil
		}
		return "", fmt.Errorf("%q does not take a subscript", fieldPath)
	}
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q (a volume supports metadata.name, metadata.namespace, metadata.uid, metadata.labels and metadata.annotations)", fieldPath)
}

// subscripted splits "base['key']".
func subscripted(fieldPath string) (base, key string, ok bool) {
	rest, ok := strings.CutSuffix(fieldPath, "']")
	if !ok {
		return "", "", false
	}
	base, key, ok = strings.Cut(rest, "['")
	if !ok || base == "" {
		return "", "", false
	}
	return base, key, true
}

// formatMap writes a map as the kubelet shows labels and annotations: one
// key="value" line per key in key order, the value quoted as Go quotes
// strings, no final newline.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	n := 0
	for k, v := range m {
		keys = append(keys, k)
		n += len(k) + len(v) + 4
	}
	sort.Strings(keys)
	b := make([]byte, 0, n)
	for i, k := range keys {
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, k...)
		b = append(b, '=')
		b = strconv.AppendQuote(b, m[k])
	}
	return string(b)
}

// resourceFieldValue is the value of a resourceFieldRef, which in a
// volume must name its container: podutil.ResourceFieldValue, the
// kubelet's (a cpu, memory or ephemeral-storage limit the container does
// not set, or sets to zero, is the pod's, else the node's allocatable
// amount).
func resourceFieldValue(pod *v1.Pod, ref *v1.ResourceFieldSelector, allocatable v1.ResourceList) (string, error) {
	if ref.ContainerName == "" {
		return "", fmt.Errorf("containerName is required in a volume")
	}
	c := podContainer(pod, ref.ContainerName)
	if c == nil {
		return "", fmt.Errorf("containerName: the pod has no container %q", ref.ContainerName)
	}
	v, err := podutil.ResourceFieldValue(pod, c, ref, allocatable)
	if err != nil {
		return "", fmt.Errorf("resource: %w", err)
	}
	return v, nil
}

// podContainer finds a container or init container by name, as the
// kubelet looks for a resourceFieldRef's container.
func podContainer(pod *v1.Pod, name string) *v1.Container {
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}
