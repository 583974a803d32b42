package agent_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

// resourceString renders resource requirements as "requests cpu=150m
// memory=64Mi; limits ...", "nil" for none.
func resourceString(r *v1.ResourceRequirements) string {
	if r == nil {
		return "nil"
	}
	return "requests " + resourceListString(r.Requests) + "; limits " + resourceListString(r.Limits)
}

func resourceListString(l v1.ResourceList) string {
	if len(l) == 0 {
		return "{}"
	}
	var parts []string
	for name, q := range l {
		parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// A pod's status reports the resources of the pod and of its containers
// and the user its containers run as, end to end: runtime/cri gives the
// spec's resources and identity to the runtime, fakecri reports them back
// in CRI terms (shares, quota, memory limit; UID, GID, groups), and the
// status turns them into the API's.
func TestPodStatusReportsResourcesAndUser(t *testing.T) {
	dir := manifestDir(t)
	doc := `apiVersion: v1
kind: Pod
metadata: {name: sized}
spec:
  restartPolicy: Always
  terminationGracePeriodSeconds: 5
  securityContext: {runAsUser: 1000, runAsGroup: 3000, supplementalGroups: [4000]}
  resources:
    requests: {cpu: 500m, memory: 256Mi}
    limits: {cpu: "1", memory: 512Mi}
  initContainers:
  - name: setup
    image: busybox:1.36
    env: [{name: FAKECRI_EXIT_CODE, value: "0"}]
    resources: {requests: {cpu: 50m}}
  containers:
  - name: main
    image: busybox:1.36
    resources:
      requests: {cpu: 150m, memory: 64Mi}
      limits: {cpu: 250m, memory: 128Mi}
`
	if err := os.WriteFile(filepath.Join(dir, "sized.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	r := start(t, newFake(t), dir)
	eventuallyShowing(t, "sized runs", func() bool {
		p := r.pod("sized")
		return p != nil && p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	}, func() string { return fmt.Sprintf("%+v", r.pod("sized")) })
	st := r.pod("sized").Status

	user := &v1.ContainerUser{Linux: &v1.LinuxContainerUser{UID: 1000, GID: 3000, SupplementalGroups: []int64{3000, 4000}}}
	for _, tc := range []struct {
		cs                  v1.ContainerStatus
		resources, allocate string
	}{
		// Running: CPU from the shares and quota the runtime reports,
		// memory from its limit.
		{st.ContainerStatuses[0], "requests cpu=150m memory=64Mi; limits cpu=250m memory=128Mi", "cpu=150m memory=64Mi"},
		// Completed: the spec's.
		{st.InitContainerStatuses[0], "requests cpu=50m; limits {}", "cpu=50m"},
	} {
		if got := resourceString(tc.cs.Resources); got != tc.resources {
			t.Errorf("%s: resources %s, want %s", tc.cs.Name, got, tc.resources)
		}
		if got := resourceListString(tc.cs.AllocatedResources); got != tc.allocate {
			t.Errorf("%s: allocatedResources %s, want %s", tc.cs.Name, got, tc.allocate)
		}
		if diff := cmp.Diff(user, tc.cs.User); diff != "" {
			t.Errorf("%s: user (-want +got):\n%s", tc.cs.Name, diff)
		}
	}
	if got, want := resourceString(st.Resources), "requests cpu=500m memory=256Mi; limits cpu=1 memory=512Mi"; got != want {
		t.Errorf("pod resources %s, want %s", got, want)
	}
	if got, want := resourceListString(st.AllocatedResources), "cpu=500m memory=256Mi"; got != want {
		t.Errorf("pod allocatedResources %s, want %s", got, want)
	}
}
