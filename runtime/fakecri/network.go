package fakecri

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	goruntime "runtime"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DefaultNetNSDir is where sandboxes' network namespaces are pinned when
// Config.Network is set, the directory "ip netns" uses.
const DefaultNetNSDir = "/run/netns"

// Network sets up the networks of sandboxes off the host network, in
// real network namespaces that the Runtime creates (Config.Network):
// the hook through which a pod network such as nodekit's network
// package (CNI) is plugged in without fakecri depending on it.
// Implementations must be safe for concurrent use; the Runtime calls
// them without holding its lock.
type Network interface {
	// SetUpSandbox attaches the sandbox's namespace to the pod network
	// and returns its IPs, the first one primary. An error fails
	// RunPodSandbox.
	SetUpSandbox(ctx context.Context, sb SandboxNetwork) ([]netip.Addr, error)
	// TearDownSandbox detaches it again; it is called when the sandbox
	// is stopped (or removed without a successful stop) and must
	// succeed when called twice. An error fails StopPodSandbox or
	// RemovePodSandbox, which may then be retried.
	TearDownSandbox(ctx context.Context, sb SandboxNetwork) error
}

// SandboxNetwork is what a Network is told about a sandbox. Its slices
// and pointers belong to the Runtime: read them, do not change them.
type SandboxNetwork struct {
	// ID is the sandbox's ID.
	ID        string
	Namespace string
	Name      string
	UID       string
	// NetNS is the path of the sandbox's network namespace.
	NetNS string
	// PortMappings and DNS come from the sandbox's config.
	PortMappings []*runtimeapi.PortMapping
	DNS          *runtimeapi.DNSConfig
}

func (s *sandbox) network() SandboxNetwork {
	m := s.config.GetMetadata()
	return SandboxNetwork{
		ID: s.id, Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUid(),
		NetNS: s.netns, PortMappings: s.config.GetPortMappings(), DNS: s.config.GetDnsConfig(),
	}
}

// setUpNetwork creates the sandbox's namespace and sets it up. r.mu is
// not held; sb is not yet visible to other calls.
func (r *Runtime) setUpNetwork(ctx context.Context, sb *sandbox) error {
	if err := os.MkdirAll(r.netnsDir, 0o755); err != nil {
		return err
	}
	sb.netns = filepath.Join(r.netnsDir, "fakecri-"+sb.id[:16])
	if err := createNetNS(sb.netns); err != nil {
		sb.netns = ""
		return err
	}
	ips, err := r.network.SetUpSandbox(ctx, sb.network())
	if err == nil && len(ips) == 0 {
		err = errors.New("the network returned no IP")
	}
	if err != nil {
		// The network cleans up after its own failure; the namespace is ours.
		_ = removeNetNS(sb.netns)
		sb.netns = ""
		return err
	}
	sb.ip, sb.extraIPs = ips[0], ips[1:]
	return nil
}

// tearDownNetwork tears the sandbox's network down and removes its
// namespace, if it still has one. r.mu is not held.
func (r *Runtime) tearDownNetwork(ctx context.Context, sb *sandbox) error {
	r.mu.Lock()
	info := sb.network()
	r.mu.Unlock()
	if info.NetNS == "" {
		return nil
	}
	if err := r.network.TearDownSandbox(ctx, info); err != nil {
		return errorf(codes.Unknown, "failed to destroy network for sandbox %q: %v", sb.id, err)
	}
	if err := removeNetNS(info.NetNS); err != nil {
		return errorf(codes.Unknown, "failed to remove network namespace of sandbox %q: %v", sb.id, err)
	}
	r.mu.Lock()
	if sb.netns == info.NetNS {
		sb.netns = ""
	}
	r.mu.Unlock()
	return nil
}

// createNetNS makes a new network namespace and pins it by a bind mount
// on path, as "ip netns add" does.
func createNetNS(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("creating the network namespace file: %w", err)
	}
	_ = f.Close()
	errc := make(chan error, 1)
	go func() {
		// The thread is left locked: once in the new namespace it must
		// not run other goroutines, so it ends with this one.
		goruntime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		self := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		if err := unix.Mount(self, path, "", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("bind-mounting the network namespace on %s: %w", path, err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		_ = os.Remove(path)
		return err
	}
	return nil
}

// removeNetNS unpins and removes a namespace made by createNetNS; one
// already gone is not an error.
func removeNetNS(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmounting %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
