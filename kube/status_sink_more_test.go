package kube_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kube"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/status"
)

// TestStatusSinkMirrorPods checks that a static pod's status is written
// to its mirror pod, and that a missing or outdated mirror pod makes an
// error the status.Manager retries.
func TestStatusSinkMirrorPods(t *testing.T) {
	static := apiPod("kube-system", "etcd-n1", "h2", "n1", 0)
	static.Annotations = map[string]string{podsource.AnnotationConfigSource: podsource.SourceFile, podsource.AnnotationConfigHash: "h2"}
	mirror := apiPod("kube-system", "etcd-n1", "mirror-uid", "n1", 0)
	mirror.Annotations = map[string]string{podsource.AnnotationConfigMirror: "h1"}
	client := fake.NewClientset()
	s, err := kube.NewStatusSink(kube.StatusSinkConfig{Client: client, MirrorPods: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.UpdatePodStatus(ctx, static, running("10.0.0.5")); !errors.Is(err, kube.ErrNoMirrorPod) {
		t.Fatalf("no mirror pod: err = %v; want ErrNoMirrorPod", err)
	}
	if err := client.Tracker().Add(mirror); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdatePodStatus(ctx, static, running("10.0.0.5")); !errors.Is(err, kube.ErrNoMirrorPod) {
		t.Fatalf("mirror pod of an older manifest: err = %v; want ErrNoMirrorPod", err)
	}
	mirror.Annotations[podsource.AnnotationConfigMirror] = "h2"
	if err := client.Tracker().Update(v1.SchemeGroupVersion.WithResource("pods"), mirror, "kube-system"); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdatePodStatus(ctx, static, running("10.0.0.5")); err != nil {
		t.Fatal(err)
	}
	p, err := client.Tracker().Get(v1.SchemeGroupVersion.WithResource("pods"), "kube-system", "etcd-n1")
	if err != nil {
		t.Fatal(err)
	}
	if st := p.(*v1.Pod).Status; st.Phase != v1.PodRunning || st.PodIP != "10.0.0.5" {
		t.Fatalf("mirror pod status = %+v; want the static pod's", st)
	}

	// Without MirrorPods, static pods are skipped as before.
	plain := newSink(t, client)
	before := len(client.Actions())
	if err := plain.UpdatePodStatus(ctx, static, running("10.0.0.6")); err != nil || len(client.Actions()) != before {
		t.Fatalf("sink without MirrorPods: err %v, %d calls; want nil, none", err, len(client.Actions())-before)
	}
}

// TestStatusSinkRateLimit checks that with QPS 2 and Burst 3, three
// statuses are written at once and the fourth waits half a second of the
// clock.
func TestStatusSinkRateLimit(t *testing.T) {
	pod := apiPod("default", "web", "u1", "n1", 0)
	client := fake.NewClientset(pod)
	clk := clocktesting.NewFakeClock(t0)
	s, err := kube.NewStatusSink(kube.StatusSinkConfig{Client: client, QPS: 2, Burst: 3, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 3 {
		if err := s.UpdatePodStatus(ctx, sourced(pod), running("10.0.0."+string(rune('1'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	if s.Patched() != 3 {
		t.Fatalf("patched %d within the burst, want 3", s.Patched())
	}
	done := make(chan error, 1)
	go func() { done <- s.UpdatePodStatus(ctx, sourced(pod), running("10.0.0.9")) }()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the fourth status did not wait on the clock")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("the fourth status went through at once: %v", err)
	default:
	}
	clk.Step(499 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the fourth status went through before 500ms: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	clk.Step(time.Millisecond)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the fourth status still waits after 500ms")
	}
	if s.Patched() != 4 {
		t.Fatalf("patched %d, want 4", s.Patched())
	}

	// A cancelled wait gives ctx's error and writes nothing.
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- s.UpdatePodStatus(cctx, sourced(pod), running("10.0.0.10")) }()
	for !clk.HasWaiters() {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatal("the fifth status did not wait on the clock")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || s.Patched() != 4 {
		t.Fatalf("cancelled wait: err %v, patched %d; want context.Canceled, 4", err, s.Patched())
	}
}

// TestStatusSinkWritesDisruptionTarget checks that the DisruptionTarget
// condition of a pod the node evicted reaches the API with the phase,
// reason and message, stamped when it is written, stays through later
// statuses, and, as the kubelet's status manager does, replaces one set
// by another component when the pod turns terminal, keeping its
// transition time; a status that is not terminal does not write it.
func TestStatusSinkWritesDisruptionTarget(t *testing.T) {
	const msg = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
	at := metav1.NewTime(t0.Add(time.Minute))
	sent := metav1.NewTime(t0.Add(2 * time.Minute))
	kubelets := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet, Message: msg, LastTransitionTime: at}
	evicted := func() v1.PodStatus {
		s := running("10.0.0.5")
		s.Phase, s.Reason, s.Message = v1.PodFailed, "Evicted", msg
		s.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}, {Type: v1.ContainersReady, Status: v1.ConditionFalse}, kubelets}
		return s
	}
	disruption := func(st v1.PodStatus) *v1.PodCondition {
		for _, c := range st.Conditions {
			if c.Type == v1.DisruptionTarget {
				return &c
			}
		}
		return nil
	}

	pod := apiPod("default", "hog", "u1", "n1", 0)
	pod.Status = running("10.0.0.5")
	tainted := apiPod("default", "tainted", "u2", "n1", 0)
	tainted.Status = running("10.0.0.6")
	tainted.Status.Conditions = append(tainted.Status.Conditions, v1.PodCondition{
		Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "DeletionByTaintManager", Message: "Taint manager: deleting due to NoExecute taint",
	})
	quiet := apiPod("default", "quiet", "u3", "n1", 0)
	quiet.Status = running("10.0.0.7")
	client := fake.NewClientset(pod, tainted, quiet)
	s, err := kube.NewStatusSink(kube.StatusSinkConfig{Client: client, Clock: clocktesting.NewFakeClock(sent.Time)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	if err := s.UpdatePodStatus(ctx, sourced(pod), evicted()); err != nil {
		t.Fatal(err)
	}
	got := podStatus(t, client, "hog")
	if got.Phase != v1.PodFailed || got.Reason != "Evicted" || got.Message != msg {
		t.Fatalf("hog: phase %s reason %q message %q, want Failed, Evicted, the message", got.Phase, got.Reason, got.Message)
	}
	written := kubelets
	written.LastTransitionTime = sent
	if d := cmp.Diff(&written, disruption(got)); d != "" {
		t.Fatalf("hog: DisruptionTarget (-want +got):\n%s", d)
	}
	later := evicted()
	later.ContainerStatuses[0].Ready = false
	if err := s.UpdatePodStatus(ctx, sourced(pod), later); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&written, disruption(podStatus(t, client, "hog"))); d != "" {
		t.Errorf("hog after a later status: DisruptionTarget (-want +got):\n%s", d)
	}

	if err := s.UpdatePodStatus(ctx, sourced(tainted), evicted()); err != nil {
		t.Fatal(err)
	}
	replaced := kubelets
	replaced.LastTransitionTime = metav1.Time{} // the API's, of the same status
	if d := cmp.Diff(&replaced, disruption(podStatus(t, client, "tainted"))); d != "" {
		t.Errorf("tainted: the node's DisruptionTarget must replace the API's as the pod turns terminal (-want +got):\n%s", d)
	}

	notYet := evicted()
	notYet.Phase, notYet.Reason, notYet.Message = v1.PodRunning, "", ""
	if err := s.UpdatePodStatus(ctx, sourced(quiet), notYet); err != nil {
		t.Fatal(err)
	}
	if c := disruption(podStatus(t, client, "quiet")); c != nil {
		t.Errorf("quiet: a status that is not terminal wrote DisruptionTarget %+v", c)
	}
}

// TestStatusSinkRestoresAStatusAnotherWriterChanged checks the
// reconciliation a watch makes possible, as the kubelet's status manager
// restores a status another writer changed: NeedsReconcile is true only
// when the API's status differs from what the sink would write (not for
// another component's condition, nor for a static pod), and the
// status.Manager then writes it again.
func TestStatusSinkRestoresAStatusAnotherWriterChanged(t *testing.T) {
	ctx := context.Background()
	pod := apiPod("default", "web", "u1", "n1", 0)
	client := fake.NewClientset(pod)
	s := newSink(t, client)
	m := status.New(status.Config{Sink: s})
	st := running("10.0.0.5")
	st.QOSClass = v1.PodQOSBestEffort
	m.SetPodStatus(sourced(pod), st)
	if err := m.Flush(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	api := func() *v1.Pod {
		t.Helper()
		p, err := client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sourced(p)
	}
	ours, _ := m.GetPodStatus(pod.UID)
	if s.NeedsReconcile(api(), ours) {
		t.Fatal("the API has what the sink wrote, yet NeedsReconcile")
	}
	gated := api()
	gated.Status.Conditions = append(gated.Status.Conditions, v1.PodCondition{Type: "example.com/gate", Status: v1.ConditionTrue})
	if s.NeedsReconcile(gated, ours) {
		t.Error("another component's condition made NeedsReconcile true")
	}

	tampered := api()
	for i := range tampered.Status.Conditions {
		if tampered.Status.Conditions[i].Type == v1.PodReady {
			tampered.Status.Conditions[i].Status, tampered.Status.Conditions[i].Reason = v1.ConditionFalse, "Tampered"
		}
	}
	if _, err := client.CoreV1().Pods("default").UpdateStatus(ctx, tampered, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !s.NeedsReconcile(api(), ours) {
		t.Fatal("a Ready another writer turned False: NeedsReconcile false")
	}
	static := api()
	static.Annotations[podsource.AnnotationConfigSource] = podsource.SourceFile
	if s.NeedsReconcile(static, ours) {
		t.Error("a static pod: NeedsReconcile true")
	}
	m.Reconcile(api())
	if err := m.Flush(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if !conditionTrueIn(api().Status.Conditions, v1.PodReady) {
		t.Errorf("after Reconcile the API's Ready is still %+v", api().Status.Conditions)
	}
}

func conditionTrueIn(cs []v1.PodCondition, t v1.PodConditionType) bool {
	for _, c := range cs {
		if c.Type == t {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// TestStatusSinkWritesATerminalPodOnce checks that a pod the API shows
// terminal, which the node still shows ready, is written once: the
// readiness the sink turns False keeps the API's transition time, so a
// later write (or a reconciliation) finds nothing to change.
func TestStatusSinkWritesATerminalPodOnce(t *testing.T) {
	ctx := context.Background()
	pod := apiPod("default", "done", "u1", "n1", 0)
	pod.Status = running("10.0.0.5")
	pod.Status.Phase = v1.PodFailed
	client := fake.NewClientset(pod)
	clk := clocktesting.NewFakeClock(t0)
	s, err := kube.NewStatusSink(kube.StatusSinkConfig{Client: client, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	st := running("10.0.0.5") // the node still has it Running and Ready
	for i := range 3 {
		if err := s.UpdatePodStatus(ctx, sourced(pod), st); err != nil {
			t.Fatal(err)
		}
		clk.Step(5 * time.Second)
		if i == 0 && s.Patched() != 1 {
			t.Fatalf("first write: %d patches, want 1", s.Patched())
		}
	}
	if s.Patched() != 1 {
		t.Errorf("%d patches for the same status written three times, want 1", s.Patched())
	}
	api, err := client.CoreV1().Pods("default").Get(ctx, "done", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.NeedsReconcile(sourced(api), st) {
		t.Error("NeedsReconcile true for what the sink wrote")
	}
}

// TestStatusSinkKeepsOthersConditionsFirst checks the kubelet's order:
// the conditions of other components first, then the kubelet's; an API
// status in that order is not rewritten.
func TestStatusSinkKeepsOthersConditionsFirst(t *testing.T) {
	ctx := context.Background()
	gate := v1.PodCondition{Type: "example.com/gate", Status: v1.ConditionTrue}
	pod := apiPod("default", "gated", "u1", "n1", 0)
	pod.Status = running("10.0.0.5")
	pod.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.5"}}
	pod.Status.Conditions = append([]v1.PodCondition{gate}, pod.Status.Conditions...)
	client := fake.NewClientset(pod)
	s := newSink(t, client)
	st := running("10.0.0.5")
	if s.NeedsReconcile(sourced(pod), st) {
		t.Error("NeedsReconcile true for an API status in the kubelet's order")
	}
	if err := s.UpdatePodStatus(ctx, sourced(pod), st); err != nil {
		t.Fatal(err)
	}
	if s.Patched() != 0 {
		t.Errorf("%d patches of an API status in the kubelet's order, want 0", s.Patched())
	}
}
