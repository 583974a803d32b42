package volumestest_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/mount-utils"

	"github.com/nodekit/nodekit/volumes"
	"github.com/nodekit/nodekit/volumes/volumestest"
)

func pod(v v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"},
		Spec: v1.PodSpec{
			Volumes:    []v1.Volume{v},
			Containers: []v1.Container{{Name: "c", VolumeMounts: []v1.VolumeMount{{Name: v.Name, MountPath: "/v"}}}},
		},
	}
}

func TestBuiltInPluginsConform(t *testing.T) {
	typ := v1.HostPathDirectory
	for _, tc := range []struct {
		p volumes.Plugin
		v v1.Volume
	}{
		{volumes.NewEmptyDir(volumes.PluginConfig{Mounter: mount.NewFakeMounter(nil)}), v1.Volume{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
		{volumes.NewEmptyDir(volumes.PluginConfig{Mounter: mount.NewFakeMounter(nil)}), v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}},
		{volumes.NewHostPath(), v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: t.TempDir(), Type: &typ}}}},
		{volumestest.New("example.com/fake", func(*v1.Volume) bool { return true }, volumes.Attributes{}), v1.Volume{Name: "f"}},
	} {
		t.Run(tc.p.Name()+"/"+tc.v.Name, func(t *testing.T) {
			p := pod(tc.v)
			volumestest.TestPlugin(t, tc.p, p, &p.Spec.Volumes[0])
		})
	}
}

func TestFakeFailsAndHolds(t *testing.T) {
	f := volumestest.New("example.com/fake", func(*v1.Volume) bool { return true }, volumes.Attributes{})
	p := pod(v1.Volume{Name: "f"})
	req := &volumes.Request{Pod: p, Volume: &p.Spec.Volumes[0], Dir: filepath.Join(t.TempDir(), "f")}
	boom := errors.New("boom")
	f.Fail(boom)
	if _, err := f.SetUp(context.Background(), req); !errors.Is(err, boom) {
		t.Fatalf("scripted failure: %v", err)
	}
	release := f.Hold()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.SetUp(ctx, req); !errors.Is(err, context.Canceled) {
		t.Fatalf("held SetUp with an ended ctx: %v", err)
	}
	release()
	if got, err := f.SetUp(context.Background(), req); err != nil || got != req.Dir {
		t.Fatalf("released SetUp = %q, %v", got, err)
	}
	if n := len(f.SetUps()); n != 3 {
		t.Fatalf("%d SetUp calls recorded, want 3", n)
	}
}
