package volumes_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/mount-utils"

	"github.com/nodekit/nodekit/volumes"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	fm := mount.NewFakeMounter(nil)
	m, err := volumes.New(volumes.Config{PodsDir: filepath.Join(t.TempDir(), "pods"), Mounter: fm, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	bad := hostPathVol("host", "/a/../b", v1.HostPathUnset)
	pod := podWith("web", []v1.Volume{emptyDir("a"), emptyDir("b"), bad}, mountOf("a"), mountOf("b"), mountOf("host"))
	m.AddPod(pod)
	if err := m.WaitForAttachAndMount(ctx, pod); err == nil {
		t.Fatal("want the hostPath with .. to fail")
	}
	for i := 0; ; i++ {
		_, errA := m.HostPath(pod, "a")
		_, errB := m.HostPath(pod, "b")
		if errA == nil && errB == nil {
			break
		}
		if i == 5000 {
			t.Fatal("the emptyDirs were not set up in time")
		}
		time.Sleep(time.Millisecond)
	}
	want := `
# HELP volume_manager_total_volumes Number of volumes in Volume Manager
# TYPE volume_manager_total_volumes gauge
volume_manager_total_volumes{plugin_name="kubernetes.io/downward-api",state="actual_state_of_world"} 0
volume_manager_total_volumes{plugin_name="kubernetes.io/downward-api",state="desired_state_of_world"} 0
volume_manager_total_volumes{plugin_name="kubernetes.io/empty-dir",state="actual_state_of_world"} 2
volume_manager_total_volumes{plugin_name="kubernetes.io/empty-dir",state="desired_state_of_world"} 2
volume_manager_total_volumes{plugin_name="kubernetes.io/host-path",state="actual_state_of_world"} 0
volume_manager_total_volumes{plugin_name="kubernetes.io/host-path",state="desired_state_of_world"} 1
volume_manager_total_volumes{plugin_name="kubernetes.io/projected",state="actual_state_of_world"} 0
volume_manager_total_volumes{plugin_name="kubernetes.io/projected",state="desired_state_of_world"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "volume_manager_total_volumes"); err != nil {
		t.Fatal(err)
	}
	mounts, err := testutil.GatherAndCount(reg, "storage_operation_duration_seconds")
	if err != nil || mounts != 2 {
		t.Fatalf("storage_operation_duration_seconds series: %d, %v; want 2 (empty-dir success, host-path fail-unknown)", mounts, err)
	}
}
