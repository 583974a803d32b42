package volumes

import (
	"context"
	"fmt"
	"os"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// ProjectedPluginName is the name of the projected plugin.
const ProjectedPluginName = "kubernetes.io/projected"

// DefaultTokenExpirationSeconds is the lifetime asked for a projected
// serviceAccountToken that sets none, as the API server defaults it.
const DefaultTokenExpirationSeconds = 3600

// Projected shows configMaps, secrets, downward-API fields and
// service-account tokens together in one directory, written with an
// AtomicWriter on a tmpfs mounted on the volume directory, as the
// kubelet does. Tokens are cached and asked for again at 80% of their
// lifetime or after 24 hours (see TokenGetter). clusterTrustBundle and
// podCertificate sources are refused with an error. It is safe for
// concurrent use.
type Projected struct {
	objects     ObjectGetter
	tokens      *tokenCache
	mem         memoryDir
	allocatable v1.ResourceList
	clock       clock.PassiveClock
}

var _ Plugin = (*Projected)(nil)

// NewProjected returns the projected plugin: configMaps and secrets
// come from cfg.Objects (nil: a configMap or secret source fails to set
// up), tokens from cfg.Tokens (nil: a serviceAccountToken source fails
// to set up), the tmpfs is mounted with cfg.Mounter (nil: the host's
// mounter; with cfg.NoTmpfs the files stay on the disk),
// cfg.Allocatable is the node's allocatable resources for downwardAPI
// resourceFieldRefs (see NewDownwardAPI), and cfg.Clock tells token
// lifetimes and names the generations of the files (nil: the real
// clock).
func NewProjected(cfg PluginConfig) *Projected {
	objects := cfg.Objects
	if objects == nil {
		objects = noObjects{}
	}
	clk := cfg.clock()
	p := &Projected{objects: objects, mem: memoryDir{mounter: cfg.mounter()}, allocatable: cfg.Allocatable.DeepCopy(), clock: clk}
	if cfg.Tokens != nil {
		p.tokens = newTokenCache(cfg.Tokens, clk)
	}
	return p
}

// Name is "kubernetes.io/projected".
func (p *Projected) Name() string { return ProjectedPluginName }

// CanSupport reports whether v is a projected volume.
func (p *Projected) CanSupport(v *v1.Volume) bool { return v.Projected != nil }

// Attributes: managed, read-only, refreshed.
func (p *Projected) Attributes(*v1.Volume) Attributes { return contentAttributes() }

// SetUp gathers the files of every source and writes them into req.Dir,
// leaving the files as they are when nothing changed. The sources are
// gathered before anything is mounted; the first source that fails
// fails SetUp with an error naming it (a missing non-optional configMap
// or secret wraps runtime.ErrNotFound). Two sources that write the same
// path are refused.
func (p *Projected) SetUp(ctx context.Context, req *Request) (string, error) {
	src := req.Volume.Projected
	if src == nil {
		return "", fmt.Errorf("volumes: volume %q is not a projected volume", req.Volume.Name)
	}
	field := volumeField(req.Volume, "projected")
	defMode, err := fileMode(src.DefaultMode, DefaultContentMode)
	if err != nil {
		return "", fmt.Errorf("%s.defaultMode: %w", field, err)
	}
	pl := newPayload()
	for i := range src.Sources {
		if err := p.addSource(ctx, pl, req, fmt.Sprintf("%s.sources[%d]", field, i), &src.Sources[i], defMode); err != nil {
			return "", err
		}
	}
	if err := writeInMemory(p.mem, req, p.clock, pl); err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return req.Dir, nil
}

func (p *Projected) addSource(ctx context.Context, pl *payload, req *Request, field string, s *v1.VolumeProjection, defMode os.FileMode) error {
	switch {
	case s.ConfigMap != nil:
		field += ".configMap"
		opt := optional(s.ConfigMap.Optional)
		cm, err := getConfigMap(ctx, p.objects, req, s.ConfigMap.Name, opt)
		if err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		data, err := configMapData(field, cm)
		if err != nil {
			return err
		}
		return pl.addKeys(field, data, s.ConfigMap.Items, defMode, opt)
	case s.Secret != nil:
		field += ".secret"
		opt := optional(s.Secret.Optional)
		sec, err := getSecret(ctx, p.objects, req, s.Secret.Name, opt)
		if err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		return pl.addKeys(field, secretData(sec), s.Secret.Items, defMode, opt)
	case s.DownwardAPI != nil:
		return pl.addDownwardAPI(field+".downwardAPI", s.DownwardAPI.Items, req.Pod, p.allocatable, defMode)
	case s.ServiceAccountToken != nil:
		return p.addToken(ctx, pl, req, field+".serviceAccountToken", s.ServiceAccountToken, defMode)
	case s.ClusterTrustBundle != nil:
		return fmt.Errorf("%s.clusterTrustBundle: clusterTrustBundle projections are not supported", field)
	case s.PodCertificate != nil:
		return fmt.Errorf("%s.podCertificate: podCertificate projections are not supported", field)
	}
	return fmt.Errorf("%s: no source is set", field)
}

// addToken adds a service-account token for the pod's service account,
// bound to the pod. Its mode is 0600 when the pod has an fsGroup (the
// group then gets read), as in the kubelet, else the default mode.
func (p *Projected) addToken(ctx context.Context, pl *payload, req *Request, field string, s *v1.ServiceAccountTokenProjection, defMode os.FileMode) error {
	if p.tokens == nil {
		return fmt.Errorf("%s: no TokenGetter is configured", field)
	}
	exp := int64(DefaultTokenExpirationSeconds)
	if s.ExpirationSeconds != nil {
		exp = *s.ExpirationSeconds
	}
	var auds []string
	if s.Audience != "" {
		auds = []string{s.Audience}
	}
	sa := req.Pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr, err := p.tokens.get(ctx, req.Pod.Namespace, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         auds,
			ExpirationSeconds: &exp,
			BoundObjectRef: &authenticationv1.BoundObjectReference{
				APIVersion: "v1",
				Kind:       "Pod",
				Name:       req.Pod.Name,
				UID:        req.Pod.UID,
			},
		},
	})
	if err != nil {
		return fmt.Errorf("%s: token of service account %s/%s: %w", field, req.Pod.Namespace, sa, err)
	}
	mode := defMode
	if sc := req.Pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		mode = 0o600
	}
	return pl.add(pathField(field), s.Path, []byte(tr.Status.Token), mode)
}

// TearDown unmounts the tmpfs, then removes dir.
func (p *Projected) TearDown(_ context.Context, dir string) error {
	return p.mem.tearDown(dir)
}
