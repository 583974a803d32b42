package cri

import (
	"errors"
	"path/filepath"

	"github.com/go-logr/logr"
	criapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/utils/clock"
)

// DefaultPodLogsDir is where pod logs go, as with the kubelet.
const DefaultPodLogsDir = "/var/log/pods"

// Config configures a Runtime.
type Config struct {
	// RuntimeService and ImageService are the CRI services to drive:
	// a *Client from Dial, a *fakecri.Runtime, or any other
	// implementation. Both are required.
	RuntimeService criapi.RuntimeService
	ImageService   criapi.ImageManagerService
	// PodLogsDir is the root of the pod log directories
	// (<root>/<namespace>_<name>_<uid>/<container>/<restart>.log).
	// Default DefaultPodLogsDir. It must be absolute.
	PodLogsDir string
	// RuntimeHandler is the CRI runtime handler for sandboxes
	// ("" is the runtime's default).
	RuntimeHandler string
	// Clock stamps observations. Default: the real clock.
	Clock clock.PassiveClock
	// Logger receives V(0) state changes and V(2) routine steps. Default:
	// discard.
	Logger logr.Logger
}

func (c *Config) defaults() error {
	if c.RuntimeService == nil {
		return errors.New("cri: Config.RuntimeService is required")
	}
	if c.ImageService == nil {
		return errors.New("cri: Config.ImageService is required")
	}
	if c.PodLogsDir == "" {
		c.PodLogsDir = DefaultPodLogsDir
	}
	if !filepath.IsAbs(c.PodLogsDir) {
		return errors.New("cri: Config.PodLogsDir must be an absolute path")
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger.GetSink() == nil {
		c.Logger = logr.Discard()
	}
	return nil
}
