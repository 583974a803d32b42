package volumes_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/volumes"
)

func benchConfigMap(b *testing.B) (*volumes.ConfigMap, *v1.Pod) {
	data := map[string]string{}
	for i := range 10 {
		data[fmt.Sprintf("key-%d.conf", i)] = strings.Repeat("x", 1024)
	}
	objs := &volumes.Objects{}
	objs.SetConfigMap(cm("bench", data))
	p, err := volumes.NewConfigMap(volumes.PluginConfig{Objects: objs})
	if err != nil {
		b.Fatal(err)
	}
	return p, testPod(configMapVolume("cfg", v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "bench"}}))
}

// BenchmarkConfigMapSetUp: a configMap of 10 keys of 1 KiB, written the
// first time, and set up again unchanged (an Update with the same
// content, which reads and compares but writes nothing).
func BenchmarkConfigMapSetUp(b *testing.B) {
	b.Run("first", func(b *testing.B) {
		p, pod := benchConfigMap(b)
		root := b.TempDir()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			dir := filepath.Join(root, fmt.Sprint(i))
			if _, err := update(p, pod, dir, false); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := os.RemoveAll(dir); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		p, pod := benchConfigMap(b)
		dir := filepath.Join(b.TempDir(), "cfg")
		if _, err := update(p, pod, dir, false); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.SetUp(context.Background(), &volumes.Request{Pod: pod, Volume: &pod.Spec.Volumes[0], Dir: dir, Update: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
