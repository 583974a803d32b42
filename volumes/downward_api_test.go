package volumes_test

import (
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/volumes"
)

var allocatable = v1.ResourceList{
	v1.ResourceCPU:              resource.MustParse("4"),
	v1.ResourceMemory:           resource.MustParse("8Gi"),
	v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
}

func downwardPlugin(t *testing.T) (*volumes.DownwardAPI, *fakeMounterT) {
	t.Helper()
	fm := fakeMounter()
	p := volumes.NewDownwardAPI(volumes.PluginConfig{Mounter: fm, Allocatable: allocatable, Clock: clocktesting.NewFakePassiveClock(testTime)})
	return p, fm
}

func downwardVolume(name string, items ...v1.DownwardAPIVolumeFile) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: items}}}
}

func fieldItem(path, fieldPath string) v1.DownwardAPIVolumeFile {
	return v1.DownwardAPIVolumeFile{Path: path, FieldRef: &v1.ObjectFieldSelector{FieldPath: fieldPath}}
}

func resourceItem(path, container, res, divisor string) v1.DownwardAPIVolumeFile {
	ref := &v1.ResourceFieldSelector{ContainerName: container, Resource: res}
	if divisor != "" {
		ref.Divisor = resource.MustParse(divisor)
	}
	return v1.DownwardAPIVolumeFile{Path: path, ResourceFieldRef: ref}
}

func TestDownwardAPIFields(t *testing.T) {
	p, fm := downwardPlugin(t)
	pod := testPod(downwardVolume("info",
		fieldItem("name", "metadata.name"),
		fieldItem("namespace", "metadata.namespace"),
		fieldItem("uid", "metadata.uid"),
		fieldItem("labels", "metadata.labels"),
		fieldItem("annotations", "metadata.annotations"),
		fieldItem("tier", "metadata.labels['tier']"),
		fieldItem("sub/note", "metadata.annotations['example.com/note']"),
		v1.DownwardAPIVolumeFile{Path: "private", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}, Mode: ptr.To[int32](0o600)},
	))
	pod.Labels = map[string]string{"tier": "front", "app": "web"}
	pod.Annotations = map[string]string{"example.com/note": "say \"hi\"\nbye", "b": ""}
	if p.Name() != "kubernetes.io/downward-api" || !p.CanSupport(&pod.Spec.Volumes[0]) {
		t.Errorf("Name %q, CanSupport %v", p.Name(), p.CanSupport(&pod.Spec.Volumes[0]))
	}
	dir := mustSetUp(t, p, pod)
	if !isMounted(t, fm, dir) {
		t.Errorf("%s is not on a tmpfs", dir)
	}
	checkContent(t, dir, map[string]string{
		"name":        "web",
		"namespace":   "ns",
		"uid":         "uid-1",
		"labels":      "app=\"web\"\ntier=\"front\"",
		"annotations": "b=\"\"\nexample.com/note=\"say \\\"hi\\\"\\nbye\"",
		"tier":        "front",
		"sub/note":    "say \"hi\"\nbye",
		"private":     "web",
	})
	checkModes(t, dir, map[string]os.FileMode{"name": 0o644, "private": 0o600})

	// A label change shows through the ..data swap.
	pod.Labels["tier"] = "back"
	if _, err := update(p, pod, dir, true); err != nil {
		t.Fatal(err)
	}
	if got := readVolume(t, dir); got["tier"] != "back" || got["labels"] != "app=\"web\"\ntier=\"back\"" {
		t.Errorf("after a label change: tier %q, labels %q", got["tier"], got["labels"])
	}
}

func TestDownwardAPIResources(t *testing.T) {
	p, _ := downwardPlugin(t)
	pod := testPod(downwardVolume("res",
		resourceItem("cpu_limit", "app", "limits.cpu", ""),
		resourceItem("cpu_limit_m", "app", "limits.cpu", "1m"),
		resourceItem("cpu_request", "app", "requests.cpu", "1m"),
		resourceItem("mem_limit", "app", "limits.memory", "1Mi"),
		resourceItem("mem_request", "app", "requests.memory", "1Mi"),
		resourceItem("storage_limit", "app", "limits.ephemeral-storage", "1Gi"),
		resourceItem("sidecar_mem", "init", "limits.memory", ""),
		resourceItem("hugepages", "app", "limits.hugepages-2Mi", "1Mi"),
	))
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Limits: v1.ResourceList{
			v1.ResourceMemory:                resource.MustParse("300Mi"),
			v1.ResourceName("hugepages-2Mi"): resource.MustParse("4Mi"),
		},
		Requests: v1.ResourceList{
			v1.ResourceCPU:    resource.MustParse("250m"),
			v1.ResourceMemory: resource.MustParse("1500Ki"), // rounds up to 2Mi
		},
	}
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("0")}, // zero: allocatable
	}}}
	dir := mustSetUp(t, p, pod)
	checkContent(t, dir, map[string]string{
		"cpu_limit":     "4",    // no limit: allocatable
		"cpu_limit_m":   "4000", // in millicores
		"cpu_request":   "250",
		"mem_limit":     "300",
		"mem_request":   "2",
		"storage_limit": "100",
		"sidecar_mem":   "8589934592",
		"hugepages":     "4",
	})
}

func TestDownwardAPIBadItems(t *testing.T) {
	for _, tc := range []struct {
		name string
		item v1.DownwardAPIVolumeFile
		want string
	}{
		{"unsupported field", fieldItem("x", "spec.nodeName"), "items[0].fieldRef.fieldPath"},
		{"bad subscript", fieldItem("x", "metadata.labels['bad key!']"), "items[0].fieldRef.fieldPath"},
		{"subscript of name", fieldItem("x", "metadata.name['x']"), "does not take a subscript"},
		{"no container", resourceItem("x", "", "limits.cpu", ""), "containerName is required"},
		{"unknown container", resourceItem("x", "nope", "limits.cpu", ""), `no container "nope"`},
		{"unknown resource", resourceItem("x", "app", "limits.gpu", ""), `"limits.gpu"`},
		{"neither", v1.DownwardAPIVolumeFile{Path: "x"}, "one of fieldRef and resourceFieldRef"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := downwardPlugin(t)
			_, err := setUp(t, p, testPod(downwardVolume("info", tc.item)))
			checkErr(t, err, nil, "spec.volumes[info].downwardAPI", tc.want)
		})
	}
}

func TestDownwardAPIUnsafePaths(t *testing.T) {
	p, _ := downwardPlugin(t)
	checkUnsafe(t, p, func(paths []string) *v1.Pod {
		var items []v1.DownwardAPIVolumeFile
		for _, path := range paths {
			items = append(items, fieldItem(path, "metadata.name"))
		}
		return testPod(downwardVolume("info", items...))
	})
}

func TestDownwardAPIPlantedSymlink(t *testing.T) {
	p, _ := downwardPlugin(t)
	pod := testPod(downwardVolume("info", fieldItem("a", "metadata.labels")))
	checkPlantedLink(t, p, pod, func() { pod.Labels = map[string]string{"new": "label"} })
}
