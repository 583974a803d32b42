package agent

import (
	"context"
	"fmt"

	"github.com/nodekit/nodekit/runtime/cri"
)

// runLogRotation rotates the logs of running containers over
// Config.RuntimeService until ctx ends, as the kubelet's container log
// manager does: every ContainerLogMonitorInterval, on
// ContainerLogMaxWorkers goroutines. It returns nil at once when rotation
// is off (ContainerLogMaxSize negative) or there is no RuntimeService.
func (a *Agent) runLogRotation(ctx context.Context) error {
	if a.cfg.ContainerLogMaxSize < 0 || a.cfg.RuntimeService == nil {
		return nil
	}
	r, err := cri.NewLogRotator(cri.LogRotatorConfig{
		Runtime:    a.cfg.RuntimeService,
		MaxSize:    a.cfg.ContainerLogMaxSize,
		MaxFiles:   a.cfg.ContainerLogMaxFiles,
		MaxWorkers: a.cfg.ContainerLogMaxWorkers,
		Period:     a.cfg.ContainerLogMonitorInterval,
		Clock:      a.cfg.Clock,
		Logger:     a.log.WithName("logs"),
		LogsDir:    a.cfg.CRI.PodLogsDir,
	})
	if err != nil {
		return fmt.Errorf("agent: container log rotation: %w", err)
	}
	return r.Run(ctx)
}
