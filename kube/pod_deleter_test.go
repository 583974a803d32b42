package kube_test

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/kube"
	"github.com/nodekit/nodekit/podsource"
)

// A gracefully deleted pod's object goes only once the API server holds
// its final, terminal status, as the kubelet's status manager deletes it;
// until then PodTerminated fails, and the agent calls it again.
func TestPodDeleterWaitsForTheFinalStatus(t *testing.T) {
	now := metav1.Now()
	api := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1", DeletionTimestamp: &now},
		Status: v1.PodStatus{Phase: v1.PodRunning}}
	client := fake.NewClientset(api)
	d, err := kube.NewPodDeleter(kube.PodDeleterConfig{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	node := api.DeepCopy()
	node.Annotations = map[string]string{podsource.AnnotationConfigSource: podsource.SourceAPI}
	ctx := context.Background()
	if err := d.PodTerminated(ctx, node); !errors.Is(err, kube.ErrFinalStatusPending) {
		t.Fatalf("PodTerminated with the API's phase Running = %v, want ErrFinalStatusPending", err)
	}
	if _, err := client.CoreV1().Pods("ns").Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatalf("the pod went before its final status: %v", err)
	}
	api.Status.Phase = v1.PodFailed
	if _, err := client.CoreV1().Pods("ns").UpdateStatus(ctx, api, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := d.PodTerminated(ctx, node); err != nil {
		t.Fatalf("PodTerminated once the API holds Failed = %v", err)
	}
	if _, err := client.CoreV1().Pods("ns").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the pod is still there: %v", err)
	}
	if d.Deleted() != 1 {
		t.Errorf("Deleted() = %d, want 1", d.Deleted())
	}
}
