package volumes_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/volumes"
)

// A configMap volume written from an in-memory configMap, read back
// through its visible names, and updated through the ..data swap.
func Example_configMap() {
	podDir, err := os.MkdirTemp("", "pod")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(podDir)

	objects := &volumes.Objects{}
	objects.SetConfigMap(&v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-config"},
		Data:       map[string]string{"greeting": "hello", "color": "blue"},
	})
	plugin, err := volumes.NewConfigMap(volumes.PluginConfig{Objects: objects})
	if err != nil {
		fmt.Println(err)
		return
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "1234"},
		Spec: v1.PodSpec{Volumes: []v1.Volume{{
			Name: "config",
			VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "web-config"},
				Items:                []v1.KeyToPath{{Key: "greeting", Path: "conf/greeting.txt"}},
			}},
		}}},
	}
	dir := volumes.VolumeDir(podDir, plugin.Name(), "config")
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		fmt.Println(err)
		return
	}
	req := &volumes.Request{Pod: pod, Volume: &pod.Spec.Volumes[0], Dir: dir}
	if _, err := plugin.SetUp(context.Background(), req); err != nil {
		fmt.Println(err)
		return
	}
	show := func() {
		b, err := os.ReadFile(filepath.Join(dir, "conf/greeting.txt"))
		if err != nil {
			fmt.Println(err)
			return
		}
		link, _ := os.Readlink(filepath.Join(dir, "conf"))
		fmt.Printf("conf -> %s, conf/greeting.txt: %s\n", link, b)
	}
	show()

	objects.SetConfigMap(&v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-config"},
		Data:       map[string]string{"greeting": "bonjour"},
	})
	req.Update = true
	if _, err := plugin.SetUp(context.Background(), req); err != nil {
		fmt.Println(err)
		return
	}
	show()
	// Output:
	// conf -> ..data/conf, conf/greeting.txt: hello
	// conf -> ..data/conf, conf/greeting.txt: bonjour
}
