package criclient_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/criclient"
)

func TestConversionsRefuseMalformedAnswers(t *testing.T) {
	meta := &runtimeapi.ContainerMetadata{Name: "c"}
	sbMeta := &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u"}
	for _, tc := range []struct {
		name string
		conv func() error
		want string
	}{
		{"sandbox without ID", func() error {
			_, err := criclient.FromSandbox("t", &runtimeapi.PodSandbox{Metadata: sbMeta})
			return err
		}, "sandbox ?: no ID"},
		{"sandbox without metadata", func() error { _, err := criclient.FromSandbox("t", &runtimeapi.PodSandbox{Id: "s1"}); return err }, "sandbox s1: no metadata"},
		{"sandbox in an unknown state", func() error {
			_, err := criclient.FromSandbox("t", &runtimeapi.PodSandbox{Id: "s1", Metadata: sbMeta, State: 7})
			return err
		}, "sandbox s1: unknown state 7"},
		{"container without metadata", func() error { _, err := criclient.FromContainer("t", &runtimeapi.Container{Id: "c1"}); return err }, "container c1: no metadata"},
		{"container in an unknown state", func() error {
			_, err := criclient.FromContainer("t", &runtimeapi.Container{Id: "c1", Metadata: meta, State: 42})
			return err
		}, "container c1: unknown state 42"},
		{"sandbox status without metadata", func() error {
			_, err := criclient.FromSandboxStatus(&runtimeapi.PodSandboxStatus{Id: "s1"})
			return err
		}, "sandbox s1: status has no metadata"},
		{"container status without ID", func() error {
			_, err := criclient.FromContainerStatus("t", &runtimeapi.ContainerStatus{Metadata: meta}, "s1")
			return err
		}, "container ?: status has no ID"},
		{"nil container status", func() error { _, err := criclient.FromContainerStatus("t", nil, "s1"); return err }, "container ?: status has no ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.conv()
			if !errors.Is(err, runtime.ErrInvalidResponse) || !strings.Contains(fmt.Sprint(err), tc.want) {
				t.Errorf("error %v, want ErrInvalidResponse saying %q", err, tc.want)
			}
		})
	}
}

func TestFromContainerStatusCopiesWithoutInterpreting(t *testing.T) {
	created := time.Unix(100, 0)
	a := map[string]string{"io.kubernetes.container.hash": "ff", "io.kubernetes.container.restartCount": "3"}
	got, err := criclient.FromContainerStatus("containerd", &runtimeapi.ContainerStatus{
		Id: "c1", Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, State: runtimeapi.ContainerState_CONTAINER_EXITED,
		CreatedAt: created.UnixNano(), ExitCode: 2, Reason: "Error", Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		Labels: map[string]string{"l": "v"}, Annotations: a,
	}, "s1")
	if err != nil {
		t.Fatal(err)
	}
	want := &runtime.ContainerStatus{
		ID: runtime.ContainerID{Type: "containerd", ID: "c1"}, Name: "app", SandboxID: "s1", State: runtime.ContainerStateExited,
		CreatedAt: created, ExitCode: 2, Reason: "Error", Image: "busybox:1.36", Labels: map[string]string{"l": "v"}, Annotations: a,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

func TestFromSandboxStatusIPs(t *testing.T) {
	got, err := criclient.FromSandboxStatus(&runtimeapi.PodSandboxStatus{
		Id: "s1", Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u", Attempt: 2},
		State:   runtimeapi.PodSandboxState_SANDBOX_READY,
		Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.1", AdditionalIps: []*runtimeapi.PodIP{{Ip: ""}, {Ip: "fd00::1"}}},
		Linux:   &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"10.0.0.1", "fd00::1"}, got.IPs); diff != "" || got.NetworkMode != runtime.NamespaceModeNode || got.Attempt != 2 || got.UID != "u" {
		t.Errorf("status %+v, want the primary IP first, host network, attempt 2 (IPs -want +got:\n%s)", got, diff)
	}
}

func TestWrap(t *testing.T) {
	if criclient.Wrap("Version", "", nil) != nil {
		t.Error("Wrap of nil is not nil")
	}
	nf := criclient.Wrap("ContainerStatus", "c1", status.Error(codes.NotFound, "gone"))
	if !errors.Is(nf, runtime.ErrNotFound) || !criclient.IsNotFound(nf) || nf.Error() != "cri: ContainerStatus c1: not found: gone" {
		t.Errorf("Wrap of a NotFound status: %v", nf)
	}
	if again := criclient.Wrap("Other", "x", nf); again != nf {
		t.Errorf("Wrap of an *Error: %v, want it unchanged", again)
	}
	if !criclient.IsNotFound(status.Error(codes.NotFound, "gone")) || criclient.IsNotFound(errors.New("x")) {
		t.Error("IsNotFound misclassifies plain errors")
	}
	ctxErr := criclient.Wrap("ListContainers", "", context.DeadlineExceeded)
	if !errors.Is(ctxErr, runtime.ErrDeadlineExceeded) || status.Code(ctxErr) != codes.DeadlineExceeded {
		t.Errorf("Wrap of a context error: %v, want code DeadlineExceeded", ctxErr)
	}
	plain := criclient.Wrap("PullImage", "img", errors.New("disk full"))
	var ce *criclient.Error
	if errors.As(plain, &ce) || !strings.Contains(plain.Error(), "PullImage img") {
		t.Errorf("Wrap of an error without a status: %v, want it named but not an *Error", plain)
	}
}

// A container status carries the resources the runtime reports, in the
// kubelet's units (CPU limit from quota and period, CPU request from the
// shares rounded up, memory limit in bytes), and the process's user.
func TestContainerStatusResourcesAndUser(t *testing.T) {
	meta := &runtimeapi.ContainerMetadata{Name: "c"}
	for _, tc := range []struct {
		name string
		res  *runtimeapi.ContainerResources
		want string // "cpuRequest cpuLimit memoryLimit", "-" for nil; "nil" for no resources
	}{
		{"none reported", nil, "nil"},
		{"no Linux resources", &runtimeapi.ContainerResources{Windows: &runtimeapi.WindowsContainerResources{CpuShares: 10}}, "nil"},
		{"all zero", &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{}}, "nil"},
		{"request, limit and memory", &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{
			CpuShares: 512, CpuPeriod: 100000, CpuQuota: 150000, MemoryLimitInBytes: 128 << 20}}, "500m 1500m 128Mi"},
		{"shares rounded up", &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{CpuShares: 102}}, "100m - -"},
		{"the least shares", &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{CpuShares: 2}}, "2m - -"},
		{"below the least shares", &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{CpuShares: 1}}, "nil"},
		{"unlimited quota", &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{CpuShares: 1024, CpuPeriod: 100000, CpuQuota: -1}}, "1 - -"},
		{"quota without a period", &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{CpuQuota: 50000}}, "nil"},
		{"the least quota", &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 1000}}, "- 10m -"},
		{"quota below a milli-CPU", &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 99}}, "nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := criclient.FromContainerStatus("t", &runtimeapi.ContainerStatus{Id: "c1", Metadata: meta, Resources: tc.res}, "s1")
			if err != nil {
				t.Fatal(err)
			}
			if got := resourcesString(st.Resources); got != tc.want {
				t.Errorf("resources %s, want %s", got, tc.want)
			}
		})
	}

	st, err := criclient.FromContainerStatus("t", &runtimeapi.ContainerStatus{Id: "c1", Metadata: meta,
		User: &runtimeapi.ContainerUser{Linux: &runtimeapi.LinuxContainerUser{Uid: 1000, Gid: 3000, SupplementalGroups: []int64{3000, 4000}}}}, "s1")
	if err != nil {
		t.Fatal(err)
	}
	want := &runtime.ContainerUser{Linux: &runtime.LinuxContainerUser{UID: 1000, GID: 3000, SupplementalGroups: []int64{3000, 4000}}}
	if diff := cmp.Diff(want, st.User); diff != "" {
		t.Errorf("user (-want +got):\n%s", diff)
	}
	st, err = criclient.FromContainerStatus("t", &runtimeapi.ContainerStatus{Id: "c1", Metadata: meta, User: &runtimeapi.ContainerUser{}}, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if st.User == nil || st.User.Linux != nil {
		t.Errorf("user %+v for a report without a Linux identity, want an empty user", st.User)
	}
	st, err = criclient.FromContainerStatus("t", &runtimeapi.ContainerStatus{Id: "c1", Metadata: meta}, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if st.User != nil {
		t.Errorf("user %+v when the runtime reports none, want nil", st.User)
	}
}

func resourcesString(r *runtime.ContainerResources) string {
	if r == nil {
		return "nil"
	}
	var parts []string
	for _, q := range []*resource.Quantity{r.CPURequest, r.CPULimit, r.MemoryLimit} {
		if q == nil {
			parts = append(parts, "-")
			continue
		}
		parts = append(parts, q.String())
	}
	return strings.Join(parts, " ")
}
