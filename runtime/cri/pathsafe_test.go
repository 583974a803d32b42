package cri_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// A pod whose namespace, name, UID or container name would make a path
// out of the pod logs directory is refused with an error naming the
// field, even from a caller that did not validate it, and nothing is
// created outside the directory.
func TestPodPartsThatWouldLeaveTheLogsDirAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name, namespace, uid, container, want string
	}{
		{"web", "../../escape", "u1", "c", "metadata.namespace: Invalid value"},
		{"../escape", "ns", "u2", "c", "metadata.name: Invalid value"},
		{"web", "ns", "../../escape", "c", "metadata.uid: Invalid value"},
		{"web", "ns", "u4", "../../escape", `spec.containers[../../escape].name: Invalid value`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			root := t.TempDir()
			logs := filepath.Join(root, "a", "logs")
			fake, err := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}})
			if err != nil {
				t.Fatal(err)
			}
			rt, err := cri.New(cri.Config{RuntimeService: fake, ImageService: fake, PodLogsDir: logs, PodsDir: filepath.Join(root, "a", "pods")})
			if err != nil {
				t.Fatal(err)
			}
			pod := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: tc.namespace, UID: types.UID(tc.uid)},
				Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{{Name: tc.container, Image: "busybox:1.36"}}},
			}
			err = rt.SyncPod(context.Background(), pod, nil).Error()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("SyncPod() = %v, want an error saying %q", err, tc.want)
			}
			entries, _ := os.ReadDir(root)
			for _, e := range entries {
				if e.Name() != "a" {
					t.Errorf("created outside the node's directories: %s", e.Name())
				}
			}
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && strings.Contains(d.Name(), "escape") {
					t.Errorf("created: %s", p)
				}
				return nil
			})
		})
	}
}
