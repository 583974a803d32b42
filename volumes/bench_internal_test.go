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

// benchPods returns n pods with an emptyDir and a configMap volume
// each, and the plugins to set them up with the configMap in memory.
func benchPods(n int, mounter mount.Interface) ([]*v1.Pod, []Plugin) {
	objects := &Objects{}
	objects.SetConfigMap(&v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"},
		Data:       map[string]string{"level": "info", "app.yaml": "replicas: 3\nport: 8080\n"},
	})
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%d", i))},
			Spec: v1.PodSpec{
				Volumes: []v1.Volume{
					{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
					{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}}}},
				},
				Containers: []v1.Container{{Name: "c", VolumeMounts: []v1.VolumeMount{{Name: "cache", MountPath: "/cache"}, {Name: "config", MountPath: "/etc/app"}}}},
			},
		}
	}
	return pods, DefaultPlugins(PluginConfig{Mounter: mounter, Objects: objects})
}

// BenchmarkReconcileIdle is one reconciler pass over 1000 pods whose
// emptyDir and configMap volumes are all set up, when nothing changed.
func BenchmarkReconcileIdle(b *testing.B) {
	fm := mount.NewFakeMounter(nil)
	pods, plugins := benchPods(1000, fm)
	m, err := New(Config{PodsDir: filepath.Join(b.TempDir(), "pods"), Mounter: fm, Plugins: plugins, Clock: clocktesting.NewFakeClock(time.Unix(0, 0))})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, p := range pods {
		m.AddPod(p)
	}
	m.reconcile(ctx)
	m.ops.Wait()
	m.reconcile(ctx) // the completions marked the pods dirty
	for _, p := range pods {
		for _, v := range []string{"cache", "config"} {
			if _, err := m.HostPath(p, v); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		m.reconcile(ctx)
	}
}

// BenchmarkSetUpTearDown sets up and tears down 1000 pods with an
// emptyDir and a configMap each, on disk, through the public API and Run.
func BenchmarkSetUpTearDown(b *testing.B) {
	fm := mount.NewFakeMounter(nil)
	pods, plugins := benchPods(1000, fm)
	b.ReportAllocs()
	for b.Loop() {
		m, err := New(Config{PodsDir: filepath.Join(b.TempDir(), "pods"), Mounter: fm, Plugins: plugins})
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
	fm := mount.NewFakeMounter(nil)
	pods, plugins := benchPods(1000, fm)
	m, err := New(Config{PodsDir: filepath.Join(b.TempDir(), "pods"), Mounter: fm, Plugins: plugins, Clock: clocktesting.NewFakeClock(time.Unix(0, 0))})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, p := range pods {
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
