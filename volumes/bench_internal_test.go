package volumes

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/mount-utils"
	clocktesting "k8s.io/utils/clock/testing"
)

func benchPods(n int) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%d", i))},
			Spec: v1.PodSpec{
				Volumes:    []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
				Containers: []v1.Container{{Name: "c", VolumeMounts: []v1.VolumeMount{{Name: "cache", MountPath: "/cache"}}}},
			},
		}
	}
	return pods
}

// BenchmarkReconcileIdle is one reconciler pass over 1000 pods whose
// emptyDir volumes are all set up, when nothing changed.
func BenchmarkReconcileIdle(b *testing.B) {
	fm := mount.NewFakeMounter(nil)
	m, err := New(Config{PodsDir: filepath.Join(b.TempDir(), "pods"), Mounter: fm, Clock: clocktesting.NewFakeClock(time.Unix(0, 0))})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	pods := benchPods(1000)
	for _, p := range pods {
		m.AddPod(p)
	}
	m.reconcile(ctx)
	m.ops.Wait()
	m.reconcile(ctx) // the completions marked the pods dirty
	for _, p := range pods {
		if _, err := m.HostPath(p, "cache"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		m.reconcile(ctx)
	}
}

// BenchmarkSetUpTearDown sets up and tears down 1000 pods with an
// emptyDir each, on disk, through the public API and Run.
func BenchmarkSetUpTearDown(b *testing.B) {
	pods := benchPods(1000)
	b.ReportAllocs()
	for b.Loop() {
		m, err := New(Config{PodsDir: filepath.Join(b.TempDir(), "pods"), Mounter: mount.NewFakeMounter(nil)})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		for _, p := range pods {
			m.AddPod(p)
		}
		for _, p := range pods {
			if err := m.WaitForAttachAndMount(ctx, p); err != nil {
				b.Fatal(err)
			}
		}
		for _, p := range pods {
			m.RemovePod(p.UID)
		}
		for _, p := range pods {
			if err := m.WaitForUnmount(ctx, p.UID); err != nil {
				b.Fatal(err)
			}
		}
		cancel()
		<-done
	}
}

// BenchmarkCleanupOrphansIdle is one orphan scan of a pods directory
// holding 1000 pods, all known or kept: what each housekeeping costs.
func BenchmarkCleanupOrphansIdle(b *testing.B) {
	m, err := New(Config{PodsDir: filepath.Join(b.TempDir(), "pods"), Mounter: mount.NewFakeMounter(nil), Clock: clocktesting.NewFakeClock(time.Unix(0, 0))})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, p := range benchPods(1000) {
		m.AddPod(p)
	}
	m.reconcile(ctx)
	m.ops.Wait()
	keep := func(types.UID) bool { return true }
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := m.CleanupOrphans(keep); err != nil {
			b.Fatal(err)
		}
	}
}
