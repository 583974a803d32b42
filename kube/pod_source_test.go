package kube_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/kube"
	"github.com/nodekit/nodekit/podsource"
)

func apiPod(ns, name, uid, node string, created int) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(created) * time.Second))},
		Spec: v1.PodSpec{
			NodeName:   node,
			Containers: []v1.Container{{Name: "c", Image: "busybox"}},
		},
	}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// runSource runs a PodSource for node until the test ends and returns its
// updates.
func runSource(t *testing.T, client kubernetes.Interface, node string) <-chan podsource.Update {
	t.Helper()
	s, err := kube.NewPodSource(kube.PodSourceConfig{Client: client, NodeName: node})
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != podsource.SourceAPI {
		t.Fatalf("Name = %q, want %q", s.Name(), podsource.SourceAPI)
	}
	out := make(chan podsource.Update)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	return out
}

// nextSet waits for the next update, which must be a SET, and returns the
// namespace/name of its pods.
func nextSet(t *testing.T, updates <-chan podsource.Update) (podsource.Update, []string) {
	t.Helper()
	select {
	case u := <-updates:
		if u.Op != podsource.SET || u.Source != podsource.SourceAPI {
			t.Fatalf("update %s from %q; want SET from api", u.Op, u.Source)
		}
		var names []string
		for _, p := range u.Pods {
			names = append(names, p.Namespace+"/"+p.Name)
			if p.Annotations[podsource.AnnotationConfigSource] != podsource.SourceAPI {
				t.Errorf("pod %s/%s has no config.source=api annotation: %v", p.Namespace, p.Name, p.Annotations)
			}
		}
		return u, names
	case <-time.After(30 * time.Second):
		t.Fatal("no update within 30s")
	}
	return podsource.Update{}, nil
}

// TestPodSourceSets checks the SETs: only the node's pods, sorted by
// creation, a new one after every change, and one (empty) even when the
// node has no pods, so the Merger sees the source.
func TestPodSourceSets(t *testing.T) {
	client := fake.NewClientset(
		apiPod("b", "late", "u1", "n1", 2),
		apiPod("a", "early", "u2", "n1", 1),
		apiPod("a", "elsewhere", "u3", "n2", 0),
	)
	updates := runSource(t, client, "n1")
	_, names := nextSet(t, updates)
	if d := cmp.Diff([]string{"a/early", "b/late"}, names); d != "" {
		t.Fatalf("first SET (-want +got):\n%s", d)
	}

	ctx := context.Background()
	if _, err := client.CoreV1().Pods("c").Create(ctx, apiPod("c", "new", "u4", "n1", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, names = nextSet(t, updates)
	if d := cmp.Diff([]string{"a/early", "b/late", "c/new"}, names); d != "" {
		t.Fatalf("SET after a create (-want +got):\n%s", d)
	}
	if err := client.CoreV1().Pods("a").Delete(ctx, "early", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, names = nextSet(t, updates)
	if d := cmp.Diff([]string{"b/late", "c/new"}, names); d != "" {
		t.Fatalf("SET after a delete (-want +got):\n%s", d)
	}

	empty := runSource(t, fake.NewClientset(), "n1")
	if _, names := nextSet(t, empty); len(names) != 0 {
		t.Fatalf("SET of a node without pods = %v, want empty", names)
	}
}

// TestPodSourceThroughMerger checks the operations a podsource.Merger
// makes of the SETs: ADD, UPDATE on a label change, DELETE on a graceful
// deletion, REMOVE when the object is gone.
func TestPodSourceThroughMerger(t *testing.T) {
	client := fake.NewClientset()
	s, err := kube.NewPodSource(kube.PodSourceConfig{Client: client, NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := podsource.NewMerger(podsource.MergerConfig{Sources: []podsource.Source{s}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Merger.Run = %v", err)
		}
	}()
	next := func(want podsource.Op) *v1.Pod {
		t.Helper()
		for {
			select {
			case u := <-m.Updates():
				if len(u.Pods) == 0 {
					continue
				}
				if u.Op != want || len(u.Pods) != 1 {
					t.Fatalf("update %s with %d pods; want %s of one pod", u.Op, len(u.Pods), want)
				}
				return u.Pods[0]
			case <-time.After(30 * time.Second):
				t.Fatalf("no %s within 30s", want)
			}
		}
	}

	pods := client.CoreV1().Pods("default")
	p, err := pods.Create(ctx, apiPod("default", "web", "u1", "n1", 0), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := next(podsource.ADD); got.UID != "u1" {
		t.Fatalf("ADD of %s, want u1", got.UID)
	}
	p.Labels = map[string]string{"v": "2"}
	if p, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	next(podsource.UPDATE)
	now := metav1.NewTime(t0)
	grace := int64(30)
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	if _, err = pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := next(podsource.DELETE); got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 30 {
		t.Fatalf("DELETE with grace %v, want 30", got.DeletionGracePeriodSeconds)
	}
	if err := pods.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next(podsource.REMOVE)
}

func TestNewPodSourceValidation(t *testing.T) {
	if _, err := kube.NewPodSource(kube.PodSourceConfig{NodeName: "n1"}); err == nil {
		t.Error("no client accepted")
	}
	if _, err := kube.NewPodSource(kube.PodSourceConfig{Client: fake.NewClientset()}); err == nil {
		t.Error("no node name accepted")
	}
	if _, err := kube.NewPodSource(kube.PodSourceConfig{Client: fake.NewClientset(), NodeName: "Bad_Name"}); err == nil {
		t.Error("a bad node name accepted")
	}
}
