package podsource

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// HTTPConfig configures a URL source.
type HTTPConfig struct {
	// URL serves a Pod or a PodList, YAML or JSON. Required.
	URL string
	// Header is sent with every request.
	Header http.Header
	// NodeName suffixes pod names and feeds the UIDs. Required.
	NodeName string
	// Period is the poll interval. Default 20s.
	Period time.Duration
	// Client does the requests. Default: a client with a 10s timeout.
	Client *http.Client
	// MaxBodyBytes refuses a larger body, before reading it when the
	// response states its length. Default DefaultMaxManifestBytes (10 MiB).
	MaxBodyBytes int64
	Clock        clock.WithTicker
	Logger       logr.Logger
	Events       EventFunc
}

// HTTP polls a URL for pod manifests and sends a SET whenever the set
// changes. A failed fetch keeps the last pods; an invalid pod in a list
// is left out with an event naming it and the field.
type HTTP struct {
	cfg HTTPConfig
}

// NewHTTP returns a URL source.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	if cfg.URL == "" {
		return nil, errors.New("podsource: HTTPConfig.URL is required")
	}
	if cfg.NodeName == "" {
		return nil, errors.New("podsource: HTTPConfig.NodeName is required")
	}
	if cfg.Period <= 0 {
		cfg.Period = 20 * time.Second
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxManifestBytes
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	if cfg.Events == nil {
		cfg.Events = func(*v1.Pod, string, string, string) {}
	}
	return &HTTP{cfg: cfg}, nil
}

// Name implements Source.
func (h *HTTP) Name() string { return SourceHTTP }

// Run implements Source. A body the same, byte for byte, as the one last
// read is not parsed again, as in the kubelet: it holds the same pods, and
// its invalid items were reported already. Any other body is sent whole
// (SET); the Merger finds what changed.
func (h *HTTP) Run(ctx context.Context, out chan<- Update) error {
	tick := h.cfg.Clock.NewTicker(h.cfg.Period)
	defer tick.Stop()
	var last *[sha256.Size]byte // the last body read
	for {
		if data, err := h.get(ctx); err != nil {
			if ctx.Err() == nil {
				h.cfg.Logger.Error(err, "fetching pod manifests", "url", h.cfg.URL)
			}
		} else if sum := sha256.Sum256(data); last == nil || sum != *last {
			last = &sum
			pods, origins, err := h.parse(data)
			if err != nil {
				h.cfg.Logger.Error(err, "parsing pod manifests", "url", h.cfg.URL)
			} else {
				select {
				case out <- Update{Op: SET, Pods: pods, Source: SourceHTTP, Origins: origins}:
				case <-ctx.Done():
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
		}
	}
}

// get fetches the body.
func (h *HTTP) get(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.cfg.URL, nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range h.cfg.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := h.cfg.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP status %d", h.cfg.URL, resp.StatusCode)
	}
	if resp.ContentLength > h.cfg.MaxBodyBytes {
		err := fmt.Errorf("the body has %d bytes, more than the limit of %d", resp.ContentLength, h.cfg.MaxBodyBytes)
		h.cfg.Events(nil, v1.EventTypeWarning, "FailedToLoadManifest", fmt.Sprintf("manifest %s: %v", h.cfg.URL, err))
		return nil, fmt.Errorf("%s: %w", h.cfg.URL, err)
	}
	data, err := readBounded(resp.Body, h.cfg.MaxBodyBytes)
	if err != nil {
		err = fmt.Errorf("reading the body: %w", err)
		h.cfg.Events(nil, v1.EventTypeWarning, "FailedToLoadManifest", fmt.Sprintf("manifest %s: %v", h.cfg.URL, err))
		return nil, fmt.Errorf("%s: %w", h.cfg.URL, err)
	}
	return data, nil
}

// parse decodes the body into static pods, leaving out the invalid ones
// with an event.
func (h *HTTP) parse(data []byte) ([]*v1.Pod, map[types.UID]string, error) {
	decoded, err := decode(data, true)
	if err != nil {
		h.cfg.Events(nil, v1.EventTypeWarning, "FailedToLoadManifest", fmt.Sprintf("manifest %s: %v", h.cfg.URL, err))
		return nil, nil, fmt.Errorf("%s: %w", h.cfg.URL, err)
	}
	seen := h.cfg.Clock.Now()
	var pods []*v1.Pod
	origins := map[types.UID]string{}
	for i, pod := range decoded {
		// The UID depends on the URL and the pod, not on its place in the
		// list: reordering a list restarts nothing.
		if err := makeStatic(pod, SourceHTTP, h.cfg.URL, h.cfg.NodeName, seen); err != nil {
			h.cfg.Logger.Error(err, "skipping an invalid pod", "url", h.cfg.URL, "item", i)
			h.cfg.Events(nil, v1.EventTypeWarning, "FailedToLoadManifest", fmt.Sprintf("manifest %s item %d: %v", h.cfg.URL, i, err))
			continue
		}
		pods = append(pods, pod)
		origins[pod.UID] = fmt.Sprintf("%s item %d", h.cfg.URL, i)
	}
	return pods, origins, nil
}
