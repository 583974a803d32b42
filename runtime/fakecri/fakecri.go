package fakecri

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"k8s.io/cri-streaming/pkg/streaming"
	"net/netip"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Exit codes as a Linux runtime reports them.
const (
	exitCodeSIGKILL = 137
	exitCodeSIGTERM = 143
	// exitCodeStartError and reasonStartError are what containerd records
	// for a container whose start failed.
	exitCodeStartError = 128
	reasonStartError   = "StartError"
)

// The runtime's identity as reported by Version.
const (
	RuntimeName       = "fakecri"
	RuntimeVersion    = "0.1.0"
	RuntimeAPIVersion = "v1"
)

// Runtime is an in-memory CRI runtime. It implements
// k8s.io/cri-api/pkg/apis.RuntimeService and ImageManagerService; Serve
// exposes it over gRPC. The zero value is not usable; call New.
//
// All methods are safe for concurrent use.
type Runtime struct {
	clock    clock.WithDelayedExecution
	podCIDR  netip.Prefix
	registry map[string]bool
	events   *broadcaster
	network  Network // nil: IPs from podCIDR
	netnsDir string
	// pending counts timer callbacks that found mu taken and wait for
	// it on a goroutine of their own; Close waits for them.
	pending sync.WaitGroup

	// mu guards everything below.
	mu         sync.Mutex
	sandboxes  map[string]*sandbox
	containers map[string]*container
	// names reserves sandbox and container names (as containerd's name
	// index does) until the object is removed: name → ID.
	names      map[string]string
	images     map[string]*image // by ID
	pulls      map[string]PullBehavior
	usedIPs    map[netip.Addr]bool
	nextIP     netip.Addr
	conditions []*runtimeapi.RuntimeCondition
	injected   map[string][]error
	calls      []string
	runtimeCfg *runtimeapi.RuntimeConfig
	scripts    []script
	disks      *Disks           // nil: not scripted
	firing     time.Time        // set while a timer callback runs
	lastStamp  int64            // the latest creation stamp handed out
	streaming  streaming.Server // set from NewStreamingServer to the end of its Run
}

var (
	_ criapi.RuntimeService      = (*Runtime)(nil)
	_ criapi.ImageManagerService = (*Runtime)(nil)
)

// New returns an empty runtime with the images of cfg.Images already
// present. It starts no goroutine.
func New(cfg Config) (*Runtime, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &Runtime{
		clock:      cfg.Clock,
		podCIDR:    cfg.podCIDR,
		network:    cfg.Network,
		netnsDir:   cfg.NetNSDir,
		events:     newBroadcaster(),
		sandboxes:  map[string]*sandbox{},
		containers: map[string]*container{},
		names:      map[string]string{},
		images:     map[string]*image{},
		pulls:      map[string]PullBehavior{},
		usedIPs:    map[netip.Addr]bool{},
		injected:   map[string][]error{},
		conditions: []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.RuntimeReady, Status: true},
			{Type: runtimeapi.NetworkReady, Status: true},
		},
	}
	r.nextIP = r.podCIDR.Addr().Next()
	if cfg.Registry != nil {
		r.registry = map[string]bool{}
		for _, ref := range cfg.Registry {
			n, err := normalizeImage(ref)
			if err != nil {
				return nil, fmt.Errorf("fakecri: Config.Registry: %w", err)
			}
			r.registry[n] = true
		}
	}
	for _, ref := range cfg.Images {
		if _, err := r.addImage(ref); err != nil {
			return nil, fmt.Errorf("fakecri: Config.Images: %w", err)
		}
	}
	return r, nil
}

// newID returns a random 64-hex-digit ID, as containerd makes them.
func newID() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// errorf returns a gRPC status error, the form every CRI implementation
// returns, so that in-process and remote callers see the same codes.
func errorf(c codes.Code, format string, args ...any) error {
	return status.Errorf(c, format, args...)
}

// enter records a call and returns an injected error, if one is queued.
func (r *Runtime) enter(method string) error {
	r.calls = append(r.calls, method)
	if q := r.injected[method]; len(q) > 0 {
		r.injected[method] = q[1:]
		return q[0]
	}
	return nil
}

// InjectError makes the next call of the named CRI method (such as
// "StartContainer") fail with err; calling it again queues more errors.
// Use a gRPC status error (status.Error) to choose the code remote callers
// see.
func (r *Runtime) InjectError(method string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.injected[method] = append(r.injected[method], err)
}

// Calls returns the CRI methods called so far, in order. The slice is a
// copy.
func (r *Runtime) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// ResetCalls forgets the recorded calls.
func (r *Runtime) ResetCalls() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = nil
}

// SetCondition sets a runtime condition reported by Status, such as
// NetworkReady false with a reason.
func (r *Runtime) SetCondition(typ string, ok bool, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conditions {
		if c.Type == typ {
			c.Status, c.Reason, c.Message = ok, reason, message
			return
		}
	}
	r.conditions = append(r.conditions, &runtimeapi.RuntimeCondition{Type: typ, Status: ok, Reason: reason, Message: message})
}

// Version implements RuntimeService.
func (r *Runtime) Version(_ context.Context, _ string) (*runtimeapi.VersionResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("Version"); err != nil {
		return nil, err
	}
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0",
		RuntimeName:       RuntimeName,
		RuntimeVersion:    RuntimeVersion,
		RuntimeApiVersion: RuntimeAPIVersion,
	}, nil
}

// Status implements RuntimeService.
func (r *Runtime) Status(_ context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("Status"); err != nil {
		return nil, err
	}
	resp := &runtimeapi.StatusResponse{
		Status: &runtimeapi.RuntimeStatus{},
		RuntimeHandlers: []*runtimeapi.RuntimeHandler{{
			Name:     "",
			Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true, UserNamespaces: true},
		}},
		Features: &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true},
	}
	for _, c := range r.conditions {
		resp.Status.Conditions = append(resp.Status.Conditions, &runtimeapi.RuntimeCondition{
			Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message,
		})
	}
	if verbose {
		resp.Info = map[string]string{"config": fmt.Sprintf(`{"podCIDR":%q}`, r.podCIDR)}
	}
	return resp, nil
}

// RuntimeConfig implements RuntimeService: the cgroup driver is cgroupfs.
func (r *Runtime) RuntimeConfig(_ context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("RuntimeConfig"); err != nil {
		return nil, err
	}
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS}}, nil
}

// UpdateRuntimeConfig implements RuntimeService; the pod CIDR is recorded
// and otherwise ignored.
func (r *Runtime) UpdateRuntimeConfig(_ context.Context, cfg *runtimeapi.RuntimeConfig) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("UpdateRuntimeConfig"); err != nil {
		return err
	}
	r.runtimeCfg = cfg
	return nil
}

// Close ends every GetContainerEvents stream, and waits for the timer
// callbacks under way (scripted exits). The runtime keeps its state and
// stays usable.
func (r *Runtime) Close(_ context.Context) error {
	r.events.closeAll()
	r.pending.Wait()
	return nil
}

// lookup finds an object by full ID or unique ID prefix, as containerd
// does.
func lookup[T any](m map[string]*T, id, kind string) (*T, string, error) {
	if id == "" {
		return nil, "", errorf(codes.InvalidArgument, "%s ID must not be empty", kind)
	}
	if v, ok := m[id]; ok {
		return v, id, nil
	}
	var found *T
	var fid string
	for k, v := range m {
		if strings.HasPrefix(k, id) {
			if found != nil {
				return nil, "", errorf(codes.InvalidArgument, "%s ID %q is ambiguous", kind, id)
			}
			found, fid = v, k
		}
	}
	if found == nil {
		return nil, "", errorf(codes.NotFound, "an error occurred when try to find %s %q: not found", kind, id)
	}
	return found, fid, nil
}

func matchLabels(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// now returns the current time. The caller holds r.mu. Inside a timer
// callback the time is the timer's own firing time: a fake clock runs
// AfterFunc callbacks while holding its lock, so they must not read it.
// createStamp returns a creation time in nanoseconds that is later than
// every earlier one, as a real runtime's are, even when a fake clock has
// not moved. The caller holds r.mu.
func (r *Runtime) createStamp() int64 {
	n := r.now().UnixNano()
	if n <= r.lastStamp {
		n = r.lastStamp + 1
	}
	r.lastStamp = n
	return n
}

func (r *Runtime) now() time.Time {
	if !r.firing.IsZero() {
		return r.firing
	}
	return r.clock.Now()
}
