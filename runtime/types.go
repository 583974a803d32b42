package runtime

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// ContainerID is a runtime-qualified container ID, printed as
// "type://id" (for example "containerd://0123abcd") in pod statuses.
type ContainerID struct {
	// Type names the runtime, as reported by the runtime's Version call.
	Type string
	// ID is the runtime's own ID for the container.
	ID string
}

// String returns "type://id", or "" for the zero ID.
func (c ContainerID) String() string {
	if c.ID == "" {
		return ""
	}
	return c.Type + "://" + c.ID
}

// IsEmpty reports whether the ID is unset.
func (c ContainerID) IsEmpty() bool { return c.ID == "" }

// ParseContainerID parses "type://id".
func ParseContainerID(s string) (ContainerID, error) {
	typ, id, ok := strings.Cut(s, "://")
	if !ok || typ == "" || id == "" {
		return ContainerID{}, fmt.Errorf("runtime: invalid container ID %q: want type://id: %w", s, ErrInvalidArgument)
	}
	return ContainerID{Type: typ, ID: id}, nil
}

// ContainerState is the lifecycle state of a container as the runtime sees
// it.
type ContainerState string

// Container states. They map one to one onto the CRI container states.
const (
	ContainerStateCreated ContainerState = "created"
	ContainerStateRunning ContainerState = "running"
	ContainerStateExited  ContainerState = "exited"
	// ContainerStateUnknown is a container the runtime cannot account for,
	// for example one whose task disappeared; the kubelet kills and
	// replaces such containers.
	ContainerStateUnknown ContainerState = "unknown"
)

// SandboxState is the state of a pod sandbox.
type SandboxState string

// Sandbox states. They map onto the CRI sandbox states.
const (
	SandboxStateReady    SandboxState = "ready"
	SandboxStateNotReady SandboxState = "notready"
)

// NamespaceMode is how a sandbox shares a Linux namespace with the node.
type NamespaceMode string

// Namespace modes.
const (
	NamespaceModePod       NamespaceMode = "pod"
	NamespaceModeContainer NamespaceMode = "container"
	NamespaceModeNode      NamespaceMode = "node"
)

// Pod is the list-level view of one pod in the runtime: its sandboxes and
// containers, grouped by the pod UID they carry.
type Pod struct {
	ID        types.UID
	Name      string
	Namespace string
	// CreatedAt is the creation time of the newest sandbox.
	CreatedAt  time.Time
	Sandboxes  []*Container
	Containers []*Container
}

// FullName returns "namespace/name".
func (p *Pod) FullName() string { return p.Namespace + "/" + p.Name }

// Clone returns a copy of p that shares no memory with it but strings,
// as a caller of PodVisitor.VisitPods makes of a pod it keeps.
func (p *Pod) Clone() *Pod {
	cp := *p
	cp.Sandboxes, cp.Containers = cloneContainers(p.Sandboxes), cloneContainers(p.Containers)
	return &cp
}

func cloneContainers(list []*Container) []*Container {
	if list == nil {
		return nil
	}
	block := make([]Container, len(list))
	out := make([]*Container, len(list))
	for i, c := range list {
		block[i] = *c
		out[i] = &block[i]
	}
	return out
}

// FindContainer returns the newest container with the given name, or nil.
func (p *Pod) FindContainer(name string) *Container {
	var found *Container
	for _, c := range p.Containers {
		if c.Name == name && (found == nil || c.CreatedAt.After(found.CreatedAt)) {
			found = c
		}
	}
	return found
}

// Container is the list-level view of one container (or sandbox).
type Container struct {
	ID    ContainerID
	Name  string
	Image string
	// ImageRef is the image's ID or digest as the runtime resolved it.
	ImageRef string
	// Hash is the hash of the container spec the container was created
	// from, as recorded by the agent that created it; 0 if unknown.
	Hash      uint64
	State     ContainerState
	CreatedAt time.Time
}

// PodStatus is the detailed observation of one pod at one instant.
type PodStatus struct {
	ID        types.UID
	Name      string
	Namespace string
	// IPs are the pod's IP addresses, primary first, taken from the newest
	// ready sandbox.
	IPs []string
	// SandboxStatuses lists all sandboxes of the pod, newest first.
	SandboxStatuses []*SandboxStatus
	// ContainerStatuses lists all containers of the pod, newest first.
	ContainerStatuses []*ContainerStatus
	// Timestamp is when the observation began.
	Timestamp time.Time
}

// FindContainerStatus returns the newest status of the named container, or
// nil.
func (s *PodStatus) FindContainerStatus(name string) *ContainerStatus {
	for _, c := range s.ContainerStatuses {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// ContainerStatusesByName returns all statuses of the named container,
// newest first.
func (s *PodStatus) ContainerStatusesByName(name string) []*ContainerStatus {
	var out []*ContainerStatus
	for _, c := range s.ContainerStatuses {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// RunningPod returns what of the observed pod may still run, for
// Runtime.KillPod: containers in the running or unknown state, and the
// ready sandboxes (every sandbox when allSandboxes, so that a dead
// sandbox's resources are released too). Empty is true when nothing is
// left to stop.
func (s *PodStatus) RunningPod(allSandboxes bool) (p *Pod, empty bool) {
	p = &Pod{ID: s.ID, Name: s.Name, Namespace: s.Namespace}
	for _, c := range s.ContainerStatuses {
		if c.State == ContainerStateRunning || c.State == ContainerStateUnknown {
			p.Containers = append(p.Containers, &Container{ID: c.ID, Name: c.Name, State: c.State, Hash: c.Hash, CreatedAt: c.CreatedAt})
		}
	}
	for _, sb := range s.SandboxStatuses {
		if allSandboxes || sb.State == SandboxStateReady {
			state := ContainerStateExited
			if sb.State == SandboxStateReady {
				state = ContainerStateRunning
			}
			p.Sandboxes = append(p.Sandboxes, &Container{ID: ContainerID{ID: sb.ID}, Name: sb.Name, State: state, CreatedAt: sb.CreatedAt})
		}
	}
	return p, len(p.Containers)+len(p.Sandboxes) == 0
}

// MayRun reports whether anything of the observed pod may still run: what
// RunningPod would return, without building it.
func (s *PodStatus) MayRun() bool {
	for _, c := range s.ContainerStatuses {
		if c.State == ContainerStateRunning || c.State == ContainerStateUnknown {
			return true
		}
	}
	for _, sb := range s.SandboxStatuses {
		if sb.State == SandboxStateReady {
			return true
		}
	}
	return false
}

// ReadySandbox returns the newest sandbox if it is ready, or nil.
func (s *PodStatus) ReadySandbox() *SandboxStatus {
	if len(s.SandboxStatuses) == 0 || s.SandboxStatuses[0].State != SandboxStateReady {
		return nil
	}
	return s.SandboxStatuses[0]
}

// SandboxStatus describes one pod sandbox.
type SandboxStatus struct {
	ID        string
	Name      string
	Namespace string
	UID       types.UID
	// Attempt counts sandboxes created for the pod, from 0.
	Attempt   uint32
	State     SandboxState
	CreatedAt time.Time
	// IPs are the sandbox's addresses, primary first; empty on the host
	// network.
	IPs []string
	// NetworkMode is NamespaceModeNode for a host-network sandbox.
	NetworkMode NamespaceMode
	Labels      map[string]string
	Annotations map[string]string
}

// ContainerStatus describes one container.
type ContainerStatus struct {
	ID   ContainerID
	Name string
	// SandboxID is the ID of the sandbox the container runs in.
	SandboxID string
	State     ContainerState
	// CreatedAt, StartedAt and FinishedAt are zero when the container has
	// not reached that point.
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	// ExitCode is meaningful only in ContainerStateExited.
	ExitCode int
	// Image is the image the container was created from; ImageRef is the
	// image's ID or digest as resolved by the runtime; ImageID its ID.
	Image    string
	ImageRef string
	ImageID  string
	// Hash is the hash of the spec the container was created from.
	Hash uint64
	// RestartCount is the container's restart count as recorded when it
	// was created.
	RestartCount int
	// Reason and Message explain the state: "Completed", "Error",
	// "OOMKilled", "StartError" (runtime reasons), or the termination
	// message the container wrote.
	Reason  string
	Message string
	// LogPath is the absolute path of the container's log file, if any.
	LogPath     string
	Labels      map[string]string
	Annotations map[string]string
	// Resources are the CPU and memory settings the runtime reports the
	// container runs with; nil when it reports none.
	Resources *ContainerResources
	// User is the identity the runtime reports the container's process
	// runs as; nil when it reports none.
	User *ContainerUser
}

// ContainerResources are a container's CPU and memory settings as a
// runtime applied them, in the API's units. A nil field is one the
// runtime did not report (or reported as unset).
type ContainerResources struct {
	// CPURequest is the CPU the container's CPU shares stand for.
	CPURequest *resource.Quantity
	// CPULimit is the CPU its CFS quota and period allow.
	CPULimit *resource.Quantity
	// MemoryLimit is its memory limit in bytes.
	MemoryLimit *resource.Quantity
	// MemoryRequest is the memory request it was started or last resized
	// with, which no cgroup setting shows: a runtime that records it (as
	// runtime/cri does for the containers it starts) reports it.
	MemoryRequest *resource.Quantity
}

// ContainerUser is the identity a container's process runs as.
type ContainerUser struct {
	// Linux is the Linux identity; nil on other systems.
	Linux *LinuxContainerUser
}

// LinuxContainerUser is a Linux process identity: its user ID, primary
// group ID and supplementary group IDs.
type LinuxContainerUser struct {
	UID                int64
	GID                int64
	SupplementalGroups []int64
}

// Status is a runtime's own health.
type Status struct {
	Conditions []Condition
}

// Condition is one runtime health condition, such as RuntimeReady or
// NetworkReady.
type Condition struct {
	Type    string
	Status  bool
	Reason  string
	Message string
}

// The conditions every CRI runtime reports.
const (
	RuntimeReady = "RuntimeReady"
	NetworkReady = "NetworkReady"
)

// Condition returns the condition of the given type, or nil.
func (s *Status) Condition(typ string) *Condition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == typ {
			return &s.Conditions[i]
		}
	}
	return nil
}

// Ready reports whether the RuntimeReady and NetworkReady conditions are
// both true. A runtime that reports no NetworkReady condition is taken to
// leave networking to the agent, and only RuntimeReady counts.
func (s *Status) Ready() error {
	rt := s.Condition(RuntimeReady)
	if rt == nil || !rt.Status {
		return notReady(RuntimeReady, rt)
	}
	if n := s.Condition(NetworkReady); n != nil && !n.Status {
		return notReady(NetworkReady, n)
	}
	return nil
}

func notReady(typ string, c *Condition) error {
	if c == nil {
		return fmt.Errorf("runtime: %s condition is missing: %w", typ, ErrUnavailable)
	}
	return fmt.Errorf("runtime: %s is false: %s: %s: %w", typ, c.Reason, c.Message, ErrUnavailable)
}

// ProbeResult is the latest outcome of a container's liveness, readiness
// or startup probe. It is the one type the probes that produce results and
// the runtimes that act on them share: probes.Result and cri.ProbeResult
// are aliases of it.
type ProbeResult int8

// Probe outcomes. ProbeUnknown is what a probe reports before it has
// decided, and what is reported for a container without a result.
const (
	ProbeUnknown ProbeResult = iota
	ProbeSuccess
	ProbeFailure
	// ProbeWarning is a verdict a prober may give for one run: the probe
	// passed, but with something worth a warning (an HTTP probe that was
	// redirected to another host). It counts as ProbeSuccess and is never
	// reported as a container's result.
	ProbeWarning
)

// String returns "unknown", "success", "failure" or "warning".
func (r ProbeResult) String() string {
	switch r {
	case ProbeUnknown:
		return "unknown"
	case ProbeSuccess:
		return "success"
	case ProbeFailure:
		return "failure"
	case ProbeWarning:
		return "warning"
	}
	return fmt.Sprintf("ProbeResult(%d)", int8(r))
}
