package criclient

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// The conversions below turn CRI messages into nodekit's runtime types.
// They check what the runtime answered: a missing ID or metadata block or
// an unknown state is an error naming the object and wrapping
// runtime.ErrInvalidResponse, never a panic. Labels and annotations are
// copied, not interpreted: what they mean (the kubelet's container hash
// and restart count among them) is the caller's business, so Hash and
// RestartCount are left zero. typ is the runtime's name, the type part of
// the container IDs.

func invalid(kind, id, format string, args ...any) error {
	return fmt.Errorf("cri: %s %s: %s: %w", kind, id, fmt.Sprintf(format, args...), runtime.ErrInvalidResponse)
}

func containerState(s runtimeapi.ContainerState) (runtime.ContainerState, bool) {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return runtime.ContainerStateCreated, true
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return runtime.ContainerStateRunning, true
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return runtime.ContainerStateExited, true
	case runtimeapi.ContainerState_CONTAINER_UNKNOWN:
		return runtime.ContainerStateUnknown, true
	}
	return "", false
}

func sandboxState(s runtimeapi.PodSandboxState) (runtime.SandboxState, bool) {
	switch s {
	case runtimeapi.PodSandboxState_SANDBOX_READY:
		return runtime.SandboxStateReady, true
	case runtimeapi.PodSandboxState_SANDBOX_NOTREADY:
		return runtime.SandboxStateNotReady, true
	}
	return "", false
}

func nsMode(m runtimeapi.NamespaceMode) runtime.NamespaceMode {
	switch m {
	case runtimeapi.NamespaceMode_NODE:
		return runtime.NamespaceModeNode
	case runtimeapi.NamespaceMode_CONTAINER:
		return runtime.NamespaceModeContainer
	}
	return runtime.NamespaceModePod
}

func unixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// FromSandbox converts a sandbox from ListPodSandbox into the
// runtime.Container that stands for it in a runtime.Pod: running while
// the sandbox is ready, exited otherwise.
func FromSandbox(typ string, s *runtimeapi.PodSandbox) (*runtime.Container, error) {
	if s.GetId() == "" {
		return nil, invalid("sandbox", "?", "no ID")
	}
	if s.GetMetadata() == nil {
		return nil, invalid("sandbox", s.GetId(), "no metadata")
	}
	st, ok := sandboxState(s.GetState())
	if !ok {
		return nil, invalid("sandbox", s.GetId(), "unknown state %d", s.GetState())
	}
	cs := runtime.ContainerStateExited
	if st == runtime.SandboxStateReady {
		cs = runtime.ContainerStateRunning
	}
	return &runtime.Container{
		ID:        runtime.ContainerID{Type: typ, ID: s.GetId()},
		Name:      s.GetMetadata().GetName(),
		State:     cs,
		CreatedAt: unixNano(s.GetCreatedAt()),
	}, nil
}

// FromContainer converts a container from ListContainers. Hash is left
// zero.
func FromContainer(typ string, c *runtimeapi.Container) (*runtime.Container, error) {
	if c.GetId() == "" {
		return nil, invalid("container", "?", "no ID")
	}
	if c.GetMetadata() == nil {
		return nil, invalid("container", c.GetId(), "no metadata")
	}
	st, ok := containerState(c.GetState())
	if !ok {
		return nil, invalid("container", c.GetId(), "unknown state %d", c.GetState())
	}
	return &runtime.Container{
		ID:        runtime.ContainerID{Type: typ, ID: c.GetId()},
		Name:      c.GetMetadata().GetName(),
		Image:     c.GetImage().GetImage(),
		ImageRef:  c.GetImageRef(),
		State:     st,
		CreatedAt: unixNano(c.GetCreatedAt()),
	}, nil
}

// FromSandboxStatus converts the status of PodSandboxStatus; IPs holds
// the primary IP, then the additional ones.
func FromSandboxStatus(s *runtimeapi.PodSandboxStatus) (*runtime.SandboxStatus, error) {
	if s.GetId() == "" {
		return nil, invalid("sandbox", "?", "status has no ID")
	}
	m := s.GetMetadata()
	if m == nil {
		return nil, invalid("sandbox", s.GetId(), "status has no metadata")
	}
	st, ok := sandboxState(s.GetState())
	if !ok {
		return nil, invalid("sandbox", s.GetId(), "unknown state %d", s.GetState())
	}
	out := &runtime.SandboxStatus{
		ID:          s.GetId(),
		Name:        m.GetName(),
		Namespace:   m.GetNamespace(),
		UID:         types.UID(m.GetUid()),
		Attempt:     m.GetAttempt(),
		State:       st,
		CreatedAt:   unixNano(s.GetCreatedAt()),
		NetworkMode: nsMode(s.GetLinux().GetNamespaces().GetOptions().GetNetwork()),
		Labels:      s.GetLabels(),
		Annotations: s.GetAnnotations(),
	}
	if ip := s.GetNetwork().GetIp(); ip != "" {
		out.IPs = append(out.IPs, ip)
	}
	for _, ip := range s.GetNetwork().GetAdditionalIps() {
		if ip.GetIp() != "" {
			out.IPs = append(out.IPs, ip.GetIp())
		}
	}
	return out, nil
}

// FromContainerStatus converts the status of ContainerStatus, for the
// container of the sandbox sandboxID (which ContainerStatus does not
// report). Hash and RestartCount are left zero.
func FromContainerStatus(typ string, s *runtimeapi.ContainerStatus, sandboxID string) (*runtime.ContainerStatus, error) {
	if s.GetId() == "" {
		return nil, invalid("container", "?", "status has no ID")
	}
	if s.GetMetadata() == nil {
		return nil, invalid("container", s.GetId(), "status has no metadata")
	}
	st, ok := containerState(s.GetState())
	if !ok {
		return nil, invalid("container", s.GetId(), "unknown state %d", s.GetState())
	}
	return &runtime.ContainerStatus{
		ID:          runtime.ContainerID{Type: typ, ID: s.GetId()},
		Name:        s.GetMetadata().GetName(),
		SandboxID:   sandboxID,
		State:       st,
		CreatedAt:   unixNano(s.GetCreatedAt()),
		StartedAt:   unixNano(s.GetStartedAt()),
		FinishedAt:  unixNano(s.GetFinishedAt()),
		ExitCode:    int(s.GetExitCode()),
		Image:       s.GetImage().GetImage(),
		ImageRef:    s.GetImageRef(),
		ImageID:     s.GetImageId(),
		Reason:      s.GetReason(),
		Message:     s.GetMessage(),
		LogPath:     s.GetLogPath(),
		Labels:      s.GetLabels(),
		Annotations: s.GetAnnotations(),
		Resources:   FromContainerResources(s.GetResources()),
		User:        fromContainerUser(s.GetUser()),
	}, nil
}

// FromContainerResources converts the Linux resources a runtime reports
// for a container, as the kubelet reads them: the CPU limit from the CFS
// quota and period (a quota of -1 is no limit), the CPU request from the
// CPU shares (rounded up to a milli-CPU; fewer than 2 shares stand for
// none), and the memory limit. A value that comes out zero or negative is
// left nil; nil when the runtime reports none of the three (or no Linux
// resources).
func FromContainerResources(r *runtimeapi.ContainerResources) *runtime.ContainerResources {
	l := r.GetLinux()
	if l == nil {
		return nil
	}
	var out runtime.ContainerResources
	if m := podutil.QuotaToMilliCPU(l.GetCpuQuota(), l.GetCpuPeriod()); m > 0 {
		out.CPULimit = resource.NewMilliQuantity(m, resource.DecimalSI)
	}
	if m := podutil.SharesToMilliCPU(l.GetCpuShares()); m > 0 {
		out.CPURequest = resource.NewMilliQuantity(m, resource.DecimalSI)
	}
	if b := l.GetMemoryLimitInBytes(); b > 0 {
		out.MemoryLimit = resource.NewQuantity(b, resource.BinarySI)
	}
	if out.CPULimit == nil && out.CPURequest == nil && out.MemoryLimit == nil {
		return nil
	}
	return &out
}

// fromContainerUser converts the identity a runtime reports for a
// container's process; nil when it reports none. A report without a
// Linux identity is an empty ContainerUser, as the kubelet keeps it.
func fromContainerUser(u *runtimeapi.ContainerUser) *runtime.ContainerUser {
	if u == nil {
		return nil
	}
	out := &runtime.ContainerUser{}
	if l := u.GetLinux(); l != nil {
		out.Linux = &runtime.LinuxContainerUser{UID: l.GetUid(), GID: l.GetGid(), SupplementalGroups: l.GetSupplementalGroups()}
	}
	return out
}
