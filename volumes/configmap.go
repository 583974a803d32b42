package volumes

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// ConfigMapPluginName is the name of the configMap plugin.
const ConfigMapPluginName = "kubernetes.io/configmap"

// ConfigMap shows a configMap's keys as files, written with an
// AtomicWriter on the disk (the kubelet keeps configMaps on the disk
// too). It is safe for concurrent use.
type ConfigMap struct {
	objects ObjectGetter
	clock   clock.PassiveClock
}

var _ Plugin = (*ConfigMap)(nil)

// NewConfigMap returns the configMap plugin reading configMaps from
// cfg.Objects; cfg.Clock names the generations of the volume's files
// (nil: the real clock). It mounts nothing: Mounter and NoTmpfs are not
// used. The error says cfg.Objects is nil, the only way it fails.
func NewConfigMap(cfg PluginConfig) (*ConfigMap, error) {
	if cfg.Objects == nil {
		return nil, errors.New("volumes: NewConfigMap: PluginConfig.Objects is required")
	}
	return &ConfigMap{objects: cfg.Objects, clock: cfg.clock()}, nil
}

// Name is "kubernetes.io/configmap".
func (p *ConfigMap) Name() string { return ConfigMapPluginName }

// CanSupport reports whether v is a configMap volume.
func (p *ConfigMap) CanSupport(v *v1.Volume) bool { return v.ConfigMap != nil }

// Attributes: managed, read-only, refreshed.
func (p *ConfigMap) Attributes(*v1.Volume) Attributes { return contentAttributes() }

// SetUp writes the configMap's keys (or its items) into req.Dir, leaving
// the files as they are when nothing changed. A missing configMap is an
// error wrapping runtime.ErrNotFound unless the source is optional, when
// the volume is empty; so is an item whose key the configMap lacks.
func (p *ConfigMap) SetUp(ctx context.Context, req *Request) (string, error) {
	src := req.Volume.ConfigMap
	if src == nil {
		return "", fmt.Errorf("volumes: volume %q is not a configMap volume", req.Volume.Name)
	}
	field := volumeField(req.Volume, "configMap")
	opt := optional(src.Optional)
	cm, err := getConfigMap(ctx, p.objects, req, src.Name, opt)
	if err != nil {
		return "", err
	}
	defMode, err := fileMode(src.DefaultMode, DefaultContentMode)
	if err != nil {
		return "", fmt.Errorf("%s.defaultMode: %w", field, err)
	}
	data, err := configMapData(field, cm)
	if err != nil {
		return "", err
	}
	pl := newPayload()
	if err := pl.addKeys(field, data, src.Items, defMode, opt); err != nil {
		return "", err
	}
	if err := writeContent(req.Dir, p.clock, req.Pod, pl); err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return req.Dir, nil
}

// TearDown removes dir and what is beneath it.
func (p *ConfigMap) TearDown(_ context.Context, dir string) error {
	return removeDir(dir)
}
