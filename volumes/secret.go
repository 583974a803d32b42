package volumes

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// SecretPluginName is the name of the secret plugin.
const SecretPluginName = "kubernetes.io/secret"

// Secret shows a secret's keys as files, written with an
// AtomicWriter on a tmpfs mounted on the volume directory so that they
// never reach the disk. It is safe for concurrent use.
type Secret struct {
	objects ObjectGetter
	mem     memoryDir
	clock   clock.PassiveClock
}

var _ Plugin = (*Secret)(nil)

// NewSecret returns the secret plugin reading secrets from cfg.Objects
// and mounting tmpfs with cfg.Mounter (nil: the host's mounter); with
// cfg.NoTmpfs the files stay on the disk. cfg.Clock names the
// generations of the volume's files (nil: the real clock). The error
// says cfg.Objects is nil, the only way it fails.
func NewSecret(cfg PluginConfig) (*Secret, error) {
	if cfg.Objects == nil {
		return nil, errors.New("volumes: NewSecret: PluginConfig.Objects is required")
	}
	return &Secret{objects: cfg.Objects, mem: memoryDir{mounter: cfg.mounter()}, clock: cfg.clock()}, nil
}

// Name is "kubernetes.io/secret".
func (p *Secret) Name() string { return SecretPluginName }

// CanSupport reports whether v is a secret volume.
func (p *Secret) CanSupport(v *v1.Volume) bool { return v.Secret != nil }

// Attributes: managed, read-only, refreshed.
func (p *Secret) Attributes(*v1.Volume) Attributes { return contentAttributes() }

// SetUp mounts the tmpfs if it is not mounted yet and writes the secret's
// keys (or its items) into req.Dir, leaving the files as they are when
// nothing changed. The secret is fetched first, so a missing one leaves
// nothing mounted; it is an error wrapping runtime.ErrNotFound unless
// the source is optional, when the volume is empty. A first SetUp that
// fails unmounts what it mounted.
func (p *Secret) SetUp(ctx context.Context, req *Request) (string, error) {
	src := req.Volume.Secret
	if src == nil {
		return "", fmt.Errorf("volumes: volume %q is not a secret volume", req.Volume.Name)
	}
	field := volumeField(req.Volume, "secret")
	opt := optional(src.Optional)
	s, err := getSecret(ctx, p.objects, req, src.SecretName, opt)
	if err != nil {
		return "", err
	}
	defMode, err := fileMode(src.DefaultMode, DefaultContentMode)
	if err != nil {
		return "", fmt.Errorf("%s.defaultMode: %w", field, err)
	}
	pl := newPayload()
	if err := pl.addKeys(field, secretData(s), src.Items, defMode, opt); err != nil {
		return "", err
	}
	if err := writeInMemory(p.mem, req, p.clock, pl); err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return req.Dir, nil
}

// TearDown unmounts the tmpfs, then removes dir.
func (p *Secret) TearDown(_ context.Context, dir string) error {
	return p.mem.tearDown(dir)
}

// writeInMemory mounts the tmpfs when needed and writes the payload,
// undoing its own mount when the write fails.
func writeInMemory(mem memoryDir, req *Request, clk clock.PassiveClock, pl *payload) error {
	mounted, err := mem.setUp(req.Dir)
	if err != nil {
		return err
	}
	if err := writeContent(req.Dir, clk, req.Pod, pl); err != nil {
		if mounted {
			_ = mem.tearDown(req.Dir)
		}
		return err
	}
	return nil
}
