package fakecri

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type sandbox struct {
	id        string
	config    *runtimeapi.PodSandboxConfig
	handler   string
	state     runtimeapi.PodSandboxState
	createdAt int64
	ip        netip.Addr // invalid on the host network
	extraIPs  []netip.Addr
	// netns is the pinned network namespace while the sandbox has one
	// (Config.Network), "" otherwise.
	netns     string
	resources *runtimeapi.LinuxContainerResources
	// containers of this sandbox, by ID.
	containers map[string]*container
	// sorted is containers in ID order.
	sorted []*container
}

func (s *sandbox) name() string {
	m := s.config.GetMetadata()
	return fmt.Sprintf("%s_%s_%s_%d", m.GetName(), m.GetNamespace(), m.GetUid(), m.GetAttempt())
}

func (s *sandbox) hostNetwork() bool {
	return s.config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
}

func (s *sandbox) status() *runtimeapi.PodSandboxStatus {
	st := &runtimeapi.PodSandboxStatus{
		Id:        s.id,
		Metadata:  s.config.GetMetadata(),
		State:     s.state,
		CreatedAt: s.createdAt,
		Network:   &runtimeapi.PodSandboxNetworkStatus{},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
			Options: s.config.GetLinux().GetSecurityContext().GetNamespaceOptions(),
		}},
		Labels:         maps.Clone(s.config.GetLabels()),
		Annotations:    maps.Clone(s.config.GetAnnotations()),
		RuntimeHandler: s.handler,
	}
	if s.ip.IsValid() {
		st.Network.Ip = s.ip.String()
	}
	for _, ip := range s.extraIPs {
		st.Network.AdditionalIps = append(st.Network.AdditionalIps, &runtimeapi.PodIP{Ip: ip.String()})
	}

	return st
}

// RunPodSandbox implements RuntimeService. A sandbox that is not on the
// host network gets an IP from Config.PodCIDR, or a network namespace
// set up by Config.Network.
func (r *Runtime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	r.mu.Lock()
	sb, err := r.newSandboxLocked(config, handler)
	if err != nil || r.network == nil || sb.hostNetwork() {
		defer r.mu.Unlock()
		if err != nil {
			return "", err
		}
		r.addSandboxLocked(sb)
		return sb.id, nil
	}
	// The name stays reserved while the network is set up without the
	// lock; the sandbox is not visible yet.
	r.names[sb.name()] = sb.id
	r.mu.Unlock()
	nerr := r.setUpNetwork(ctx, sb)
	r.mu.Lock()
	defer r.mu.Unlock()
	if nerr != nil {
		delete(r.names, sb.name())
		return "", errorf(codes.Unknown, "failed to setup network for sandbox %q: %v", sb.name(), nerr)
	}
	r.addSandboxLocked(sb)
	return sb.id, nil
}

// newSandboxLocked checks a sandbox request and returns the sandbox, with
// an IP from podCIDR when it is not on the host network and no Network
// is configured. r.mu is held.
func (r *Runtime) newSandboxLocked(config *runtimeapi.PodSandboxConfig, handler string) (*sandbox, error) {
	if err := r.enter("RunPodSandbox"); err != nil {
		return nil, err
	}
	m := config.GetMetadata()
	if m == nil {
		return nil, errorf(codes.Unknown, "sandbox config must include metadata")
	}
	sb := &sandbox{
		id:         newID(),
		config:     config,
		handler:    handler,
		state:      runtimeapi.PodSandboxState_SANDBOX_READY,
		createdAt:  r.createStamp(),
		containers: map[string]*container{},
	}
	name := sb.name()
	if owner, taken := r.names[name]; taken {
		return nil, errorf(codes.Unknown, "failed to reserve sandbox name %q: name %q is reserved for %q", name, name, owner)
	}
	if handler != "" {
		return nil, errorf(codes.Unknown, "failed to get sandbox runtime: no runtime for %q is configured", handler)
	}
	if !sb.hostNetwork() && r.network == nil {
		ip, err := r.allocateIP()
		if err != nil {
			return nil, err
		}
		sb.ip = ip
	}
	return sb, nil
}

// addSandboxLocked makes sb visible. r.mu is held.
func (r *Runtime) addSandboxLocked(sb *sandbox) {
	name := sb.name()
	r.sandboxes[sb.id] = sb
	r.names[name] = sb.id
	r.emit(sb.id, sb, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	r.emit(sb.id, sb, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
}

func (r *Runtime) allocateIP() (netip.Addr, error) {
	start := r.nextIP
	for {
		ip := r.nextIP
		r.nextIP = ip.Next()
		if !r.podCIDR.Contains(r.nextIP) {
			r.nextIP = r.podCIDR.Addr().Next()
		}
		if !r.usedIPs[ip] && r.podCIDR.Contains(ip) && ip != r.podCIDR.Addr() {
			r.usedIPs[ip] = true
			return ip, nil
		}
		if r.nextIP == start {
			return netip.Addr{}, errorf(codes.ResourceExhausted, "no free IP address in %s", r.podCIDR)
		}
	}
}

// StopPodSandbox implements RuntimeService. Every container of the sandbox
// is killed; the sandbox keeps its IP until it is removed. With
// Config.Network its network is torn down and its namespace removed, as
// containerd does. Stopping a sandbox that does not exist fails with
// NotFound, as in containerd.
func (r *Runtime) StopPodSandbox(ctx context.Context, id string) error {
	r.mu.Lock()
	if err := r.enter("StopPodSandbox"); err != nil {
		r.mu.Unlock()
		return err
	}
	sb, _, err := lookup(r.sandboxes, id, "sandbox")
	if err != nil {
		r.mu.Unlock()
		return err
	}
	r.stopSandboxLocked(sb)
	r.mu.Unlock()
	if r.network != nil {
		return r.tearDownNetwork(ctx, sb)
	}
	return nil
}

func (r *Runtime) stopSandboxLocked(sb *sandbox) {
	for _, c := range r.sandboxContainersLocked(sb.id) {
		r.exitLocked(c, exitCodeSIGKILL, "")
	}
	if sb.state == runtimeapi.PodSandboxState_SANDBOX_READY {
		sb.state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		r.emit(sb.id, sb, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	}
}

// RemovePodSandbox implements RuntimeService: it stops the sandbox if
// needed and removes it with all its containers. Removing a sandbox that
// does not exist succeeds.
func (r *Runtime) RemovePodSandbox(ctx context.Context, id string) error {
	r.mu.Lock()
	if err := r.enter("RemovePodSandbox"); err != nil {
		r.mu.Unlock()
		return err
	}
	sb, _, err := lookup(r.sandboxes, id, "sandbox")
	if err != nil {
		r.mu.Unlock()
		if isNotFound(err) {
			return nil
		}
		return err
	}
	r.stopSandboxLocked(sb)
	r.mu.Unlock()
	if r.network != nil {
		if err := r.tearDownNetwork(ctx, sb); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sandboxes[sb.id] != sb {
		return nil // removed meanwhile
	}
	for _, c := range slices.Clone(r.sandboxContainersLocked(sb.id)) {
		r.removeContainerLocked(c)
	}
	delete(r.sandboxes, sb.id)
	delete(r.names, sb.name())
	if sb.ip.IsValid() {
		delete(r.usedIPs, sb.ip)
	}
	r.emit(sb.id, sb, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	return nil
}

// PodSandboxStatus implements RuntimeService.
func (r *Runtime) PodSandboxStatus(_ context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("PodSandboxStatus"); err != nil {
		return nil, err
	}
	sb, _, err := lookup(r.sandboxes, id, "sandbox")
	if err != nil {
		return nil, err
	}
	resp := &runtimeapi.PodSandboxStatusResponse{
		Status:             sb.status(),
		Timestamp:          r.now().UnixNano(),
		ContainersStatuses: r.containerStatusesLocked(sb.id),
	}
	if verbose {
		info, _ := json.Marshal(map[string]any{"sandboxID": sb.id, "runtimeHandler": sb.handler, "config": sb.config, "netns": sb.netns})
		resp.Info = map[string]string{"info": string(info)}
	}
	return resp, nil
}

func (r *Runtime) containerStatusesLocked(sandboxID string) []*runtimeapi.ContainerStatus {
	var out []*runtimeapi.ContainerStatus
	for _, c := range r.sandboxContainersLocked(sandboxID) {
		out = append(out, c.status())
	}
	return out
}

// sandboxContainersLocked returns the sandbox's containers in ID order.
// The slice is the sandbox's own, changed in place when a container is
// added or removed; callers must not keep it across such a change.
func (r *Runtime) sandboxContainersLocked(sandboxID string) []*container {
	if sb := r.sandboxes[sandboxID]; sb != nil {
		return sb.sorted
	}
	return nil
}

func (s *sandbox) addSorted(c *container) {
	i, _ := slices.BinarySearchFunc(s.sorted, c.id, func(x *container, id string) int { return strings.Compare(x.id, id) })
	s.sorted = slices.Insert(s.sorted, i, c)
}

func (s *sandbox) removeSorted(c *container) {
	if i, ok := slices.BinarySearchFunc(s.sorted, c.id, func(x *container, id string) int { return strings.Compare(x.id, id) }); ok {
		s.sorted = slices.Delete(s.sorted, i, i+1)
	}
}

// ListPodSandbox implements RuntimeService. Filters match by ID (or a
// unique prefix of it), state and labels.
func (r *Runtime) ListPodSandbox(_ context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("ListPodSandbox"); err != nil {
		return nil, err
	}
	var out []*runtimeapi.PodSandbox
	for _, id := range slices.Sorted(maps.Keys(r.sandboxes)) {
		sb := r.sandboxes[id]
		if f != nil {
			if f.GetId() != "" && !hasPrefix(sb.id, f.GetId()) {
				continue
			}
			if f.GetState() != nil && f.GetState().GetState() != sb.state {
				continue
			}
			if !matchLabels(f.GetLabelSelector(), sb.config.GetLabels()) {
				continue
			}
		}
		out = append(out, &runtimeapi.PodSandbox{
			Id:             sb.id,
			Metadata:       sb.config.GetMetadata(),
			State:          sb.state,
			CreatedAt:      sb.createdAt,
			Labels:         maps.Clone(sb.config.GetLabels()),
			Annotations:    maps.Clone(sb.config.GetAnnotations()),
			RuntimeHandler: sb.handler,
		})
	}
	return out, nil
}

// UpdatePodSandboxResources implements RuntimeService; the resources are
// recorded.
func (r *Runtime) UpdatePodSandboxResources(_ context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("UpdatePodSandboxResources"); err != nil {
		return nil, err
	}
	sb, _, err := lookup(r.sandboxes, req.GetPodSandboxId(), "sandbox")
	if err != nil {
		return nil, err
	}
	sb.resources = req.GetResources()
	return &runtimeapi.UpdatePodSandboxResourcesResponse{}, nil
}

// CheckpointPod implements RuntimeService: Unimplemented.
func (r *Runtime) CheckpointPod(context.Context, *runtimeapi.CheckpointPodRequest) error {
	return errorf(codes.Unimplemented, "fakecri does not checkpoint pods")
}

// RestorePod implements RuntimeService: Unimplemented.
func (r *Runtime) RestorePod(context.Context, *runtimeapi.RestorePodRequest) (*runtimeapi.RestorePodResponse, error) {
	return nil, errorf(codes.Unimplemented, "fakecri does not restore pods")
}

func hasPrefix(id, prefix string) bool { return len(id) >= len(prefix) && id[:len(prefix)] == prefix }
