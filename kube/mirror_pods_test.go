package kube

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsource"
)

// staticPod is a static pod of node n1 as a podsource.File gives it.
func staticPod(name, hash, image string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "kube-system", Name: name + "-n1", UID: types.UID(hash),
			Labels: map[string]string{"app": name},
			Annotations: map[string]string{
				podsource.AnnotationConfigHash:   hash,
				podsource.AnnotationConfigSource: podsource.SourceFile,
			},
		},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: image}}},
	}
}

type mirrorFixture struct {
	client *fake.Clientset
	m      *MirrorPods
}

func newMirrorFixture(t *testing.T) *mirrorFixture {
	t.Helper()
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}})
	uids := 0
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if p, ok := a.(k8stesting.CreateAction).GetObject().(*v1.Pod); ok {
			uids++
			p.UID = types.UID("mirror-" + string(rune('0'+uids)))
		}
		return false, nil, nil
	})
	m, err := NewMirrorPods(MirrorPodsConfig{Client: client, NodeName: "n1", Clock: clocktesting.NewFakeClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	return &mirrorFixture{client: client, m: m}
}

// apiMirrors lists the mirror pods in the fake API server and reports
// them to the MirrorPods, as the PodSource does.
func (f *mirrorFixture) apiMirrors(t *testing.T) map[string]*v1.Pod {
	t.Helper()
	list, err := f.client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pods []*v1.Pod
	out := map[string]*v1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		if isMirror(p) {
			pods = append(pods, p)
			out[p.Name] = p
		}
	}
	f.m.observeMirrors(pods)
	return out
}

func (f *mirrorFixture) sync(t *testing.T) map[string]*v1.Pod {
	t.Helper()
	f.m.sync(context.Background())
	return f.apiMirrors(t)
}

// TestMirrorPodsLifecycle checks that a static pod gets a mirror pod
// owned by the Node, that a changed static pod gets a new one, that a
// deleted mirror pod comes back, and that a removed static pod loses it.
func TestMirrorPodsLifecycle(t *testing.T) {
	f := newMirrorFixture(t)
	f.m.observeStatic(podsource.SourceFile, podsource.Update{Op: podsource.SET, Pods: []*v1.Pod{staticPod("etcd", "h1", "etcd:1")}})
	f.m.sync(context.Background())
	if n := len(f.client.Actions()); n != 0 {
		t.Fatalf("%d calls before the PodSource listed the mirror pods; want none", n)
	}
	f.apiMirrors(t)
	mirrors := f.sync(t)
	got := mirrors["etcd-n1"]
	if got == nil {
		t.Fatalf("no mirror pod; API has %v", mirrors)
	}
	if got.Annotations[podsource.AnnotationConfigMirror] != "h1" || got.Spec.Containers[0].Image != "etcd:1" || got.Labels["app"] != "etcd" {
		t.Fatalf("mirror pod = %+v %+v; want config.mirror h1, image etcd:1, the static pod's labels", got.ObjectMeta, got.Spec)
	}
	owners := got.OwnerReferences
	if len(owners) != 1 || owners[0].Kind != "Node" || owners[0].Name != "n1" || owners[0].UID != "node-uid" || owners[0].Controller == nil || !*owners[0].Controller || owners[0].BlockOwnerDeletion != nil {
		t.Fatalf("owner references = %+v; want the Node n1 (node-uid) as controller", owners)
	}
	firstUID := got.UID

	// In step: nothing to do.
	before := len(f.client.Actions())
	f.sync(t)
	if n := len(f.client.Actions()) - before; n != 1 { // the fixture's own list
		t.Fatalf("a second pass made %d calls; want none", n-1)
	}

	// The manifest changes: the old mirror pod goes, a new one comes.
	f.m.observeStatic(podsource.SourceFile, podsource.Update{Op: podsource.SET, Pods: []*v1.Pod{staticPod("etcd", "h2", "etcd:2")}})
	mirrors = f.sync(t)
	got = mirrors["etcd-n1"]
	if got == nil || got.UID == firstUID || got.Annotations[podsource.AnnotationConfigMirror] != "h2" || got.Spec.Containers[0].Image != "etcd:2" {
		t.Fatalf("after the manifest changed, mirror pod = %+v; want a new one with hash h2", got)
	}

	// Someone deletes it: it comes back.
	if err := f.client.CoreV1().Pods("kube-system").Delete(context.Background(), "etcd-n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.apiMirrors(t)
	if mirrors = f.sync(t); mirrors["etcd-n1"] == nil {
		t.Fatal("a deleted mirror pod was not created again")
	}

	// The static pod goes: so does its mirror pod.
	f.m.observeStatic(podsource.SourceFile, podsource.Update{Op: podsource.SET})
	if mirrors = f.sync(t); len(mirrors) != 0 {
		t.Fatalf("mirror pods left after the static pod went: %v", mirrors)
	}
	if f.m.Created() != 3 || f.m.Deleted() != 2 {
		t.Fatalf("created %d, deleted %d; want 3, 2", f.m.Created(), f.m.Deleted())
	}
}

// TestMirrorPodsBeingDeleted checks that a mirror pod with a
// deletionTimestamp is replaced, and that API pods are never mirrored.
func TestMirrorPodsBeingDeleted(t *testing.T) {
	f := newMirrorFixture(t)
	now := metav1.NewTime(t0)
	old := staticPod("etcd", "h1", "etcd:1")
	old.UID = "old-mirror"
	old.Annotations[podsource.AnnotationConfigMirror] = "h1"
	old.DeletionTimestamp = &now
	if err := f.client.Tracker().Add(old); err != nil {
		t.Fatal(err)
	}
	api := staticPod("web", "h9", "web:1")
	api.Annotations[podsource.AnnotationConfigSource] = podsource.SourceAPI
	f.m.observeStatic(podsource.SourceFile, podsource.Update{Op: podsource.ADD, Pods: []*v1.Pod{staticPod("etcd", "h1", "etcd:1"), api}})
	f.apiMirrors(t)
	mirrors := f.sync(t)
	if len(mirrors) != 1 || mirrors["etcd-n1"] == nil || mirrors["etcd-n1"].UID == "old-mirror" || mirrors["etcd-n1"].DeletionTimestamp != nil {
		t.Fatalf("mirror pods = %v; want only a new etcd-n1", mirrors)
	}
}

// TestMirrorPodsSourceAndRun checks the wiring: the wrapped source passes
// its updates on unchanged, the PodSource reports the mirror pods and
// leaves them out of its SETs, and Run creates the mirror pod.
func TestMirrorPodsSourceAndRun(t *testing.T) {
	f := newMirrorFixture(t)
	// A mirror pod of a static pod that is gone, and a pod to run.
	orphan := staticPod("old", "h0", "old:1")
	orphan.Annotations[podsource.AnnotationConfigMirror] = "h0"
	if err := f.client.Tracker().Add(orphan); err != nil {
		t.Fatal(err)
	}
	web := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u1"}, Spec: v1.PodSpec{NodeName: "n1"}}
	if err := f.client.Tracker().Add(web); err != nil {
		t.Fatal(err)
	}
	static := make(chan podsource.Update, 1)
	static <- podsource.Update{Op: podsource.SET, Pods: []*v1.Pod{staticPod("etcd", "h1", "etcd:1")}}
	src := f.m.Source(chanSource{static})
	if src.Name() != podsource.SourceFile {
		t.Fatalf("Name = %q", src.Name())
	}
	api, err := NewPodSource(PodSourceConfig{Client: f.client, NodeName: "n1", MirrorPods: f.m})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	fromFile, fromAPI := make(chan podsource.Update), make(chan podsource.Update, 100)
	done := make(chan error, 3)
	go func() { done <- src.Run(ctx, fromFile) }()
	go func() { done <- api.Run(ctx, fromAPI) }()
	go func() { done <- f.m.Run(ctx) }()
	defer func() {
		cancel()
		for range 3 {
			if err := <-done; err != nil {
				t.Errorf("Run = %v", err)
			}
		}
	}()
	select {
	case u := <-fromFile:
		if u.Op != podsource.SET || len(u.Pods) != 1 || u.Pods[0].Name != "etcd-n1" {
			t.Fatalf("wrapped source sent %+v", u)
		}
	case <-time.After(realWait):
		t.Fatal("the wrapped source sent nothing")
	}
	deadline := time.Now().Add(realWait)
	for {
		p, err := f.client.CoreV1().Pods("kube-system").Get(ctx, "etcd-n1", metav1.GetOptions{})
		_, gone := f.client.CoreV1().Pods("kube-system").Get(ctx, "old-n1", metav1.GetOptions{})
		if err == nil && p.Annotations[podsource.AnnotationConfigMirror] == "h1" && gone != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mirror pod: %v; orphan: %v; want the mirror pod created and the orphan deleted", err, gone)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for len(fromAPI) > 0 {
		for _, p := range (<-fromAPI).Pods {
			if isMirror(p) {
				t.Fatalf("the PodSource sent mirror pod %s/%s as a pod to run", p.Namespace, p.Name)
			}
		}
	}
}

type chanSource struct{ ch chan podsource.Update }

func (chanSource) Name() string { return podsource.SourceFile }
func (s chanSource) Run(ctx context.Context, out chan<- podsource.Update) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case u := <-s.ch:
			select {
			case out <- u:
			case <-ctx.Done():
				return nil
			}
		}
	}
}
