package cri

import (
	"strconv"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/criclient"
)

// fromContainerStatus converts a container status, reading the kubelet's
// hash and restart count from its annotations.
func fromContainerStatus(typ string, s *runtimeapi.ContainerStatus, sandboxID string) (*runtime.ContainerStatus, error) {
	out, err := criclient.FromContainerStatus(typ, s, sandboxID)
	if err != nil {
		return nil, err
	}
	a := s.GetAnnotations()
	out.Hash = parseHash(a)
	out.RestartCount, _ = strconv.Atoi(a[AnnotationRestartCount])
	return out, nil
}

func parseHash(a map[string]string) uint64 {
	h, _ := strconv.ParseUint(a[AnnotationContainerHash], 16, 64)
	return h
}

func sandboxName(cfg *runtimeapi.PodSandboxConfig) string {
	m := cfg.GetMetadata()
	return m.GetNamespace() + "/" + m.GetName()
}
