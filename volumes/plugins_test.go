package volumes_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/volumes"
)

// With NoTmpfs, the content plugins write their files to the disk and
// never call the Mounter, and a Memory emptyDir fails to set up with an
// error saying so, whatever Mounter is given.
func TestPluginConfigNoTmpfs(t *testing.T) {
	objs := objectsWith(cm("cfg", map[string]string{"k": "v"}))
	objs.SetSecret(secret("creds", map[string]string{"user": "admin"}))
	fm := fakeMounter()
	cfg := volumes.PluginConfig{Mounter: fm, Objects: objs, NoTmpfs: true}
	sec, err := volumes.NewSecret(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		p    volumes.Plugin
		vol  v1.Volume
		want map[string]string
	}{
		{sec, secretVolume("s", v1.SecretVolumeSource{SecretName: "creds"}), map[string]string{"user": "admin"}},
		{volumes.NewDownwardAPI(cfg), downwardVolume("d", fieldItem("name", "metadata.name")), map[string]string{"name": "web"}},
		{volumes.NewProjected(cfg), projectedVolume("p", v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}), map[string]string{"k": "v"}},
	}
	for _, c := range cases {
		t.Run(c.p.Name(), func(t *testing.T) {
			dir := mustSetUp(t, c.p, testPod(c.vol))
			checkContent(t, dir, c.want)
			if err := c.p.TearDown(context.Background(), dir); err != nil || exists(dir) {
				t.Errorf("TearDown: %v, left the directory: %v", err, exists(dir))
			}
		})
	}
	pod, v := memoryPod("4Mi", "")
	_, err = volumes.NewEmptyDir(cfg).SetUp(context.Background(), &volumes.Request{Pod: pod, Volume: v, Dir: filepath.Join(t.TempDir(), "mem")})
	if err == nil || !strings.Contains(err.Error(), "NoTmpfs") {
		t.Errorf("a Memory emptyDir with NoTmpfs: %v, want an error naming NoTmpfs", err)
	}
	if log := fm.GetLog(); len(log) != 0 {
		t.Errorf("the Mounter was used despite NoTmpfs: %v", log)
	}
}

// One PluginConfig builds every built-in, and those that mount do so
// through its Mounter.
func TestPluginConfigMounterUsedByEveryMountingPlugin(t *testing.T) {
	objs := &volumes.Objects{}
	objs.SetSecret(secret("creds", map[string]string{"user": "admin"}))
	fm := fakeMounter()
	cfg := volumes.PluginConfig{Mounter: fm, Objects: objs}
	sec, err := volumes.NewSecret(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mem, _ := memoryPod("4Mi", "")
	cases := []struct {
		p   volumes.Plugin
		pod *v1.Pod
	}{
		{volumes.NewEmptyDir(cfg), mem},
		{sec, testPod(secretVolume("s", v1.SecretVolumeSource{SecretName: "creds"}))},
		{volumes.NewDownwardAPI(cfg), testPod(downwardVolume("d", fieldItem("name", "metadata.name")))},
		{volumes.NewProjected(cfg), testPod(projectedVolume("p", v1.VolumeProjection{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{fieldItem("name", "metadata.name")}}}))},
	}
	for _, c := range cases {
		t.Run(c.p.Name(), func(t *testing.T) {
			dir := mustSetUp(t, c.p, c.pod)
			if !isMounted(t, fm, dir) {
				t.Errorf("%s is not mounted through PluginConfig.Mounter", dir)
			}
		})
	}
}

// The plugins that read API objects refuse a PluginConfig without
// Objects, naming the field; the projected plugin accepts it and fails
// only a volume that shows a configMap or secret.
func TestPluginConfigWithoutObjects(t *testing.T) {
	cfg := volumes.PluginConfig{NoTmpfs: true}
	if _, err := volumes.NewConfigMap(cfg); err == nil || !strings.Contains(err.Error(), "PluginConfig.Objects is required") {
		t.Errorf("NewConfigMap without Objects: %v", err)
	}
	if _, err := volumes.NewSecret(cfg); err == nil || !strings.Contains(err.Error(), "PluginConfig.Objects is required") {
		t.Errorf("NewSecret without Objects: %v", err)
	}
	p := volumes.NewProjected(cfg)
	_, err := setUp(t, p, testPod(projectedVolume("p", v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}})))
	checkErr(t, err, nil, "sources[0].configMap", "no ObjectGetter")
}
