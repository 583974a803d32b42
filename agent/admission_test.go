package agent_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/admission"
	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/podsource"
	"github.com/nodekit/nodekit/runtime/cri"
)

// startAdmitting is startFidelity with a node of 1 CPU and the given
// extra admit handlers.
func startAdmitting(t *testing.T, events *eventLog, extra ...admission.Handler) *admitting {
	t.Helper()
	fake := newFake(t)
	dir := t.TempDir()
	f := &fidelity{t: t, fake: fake, api: podsource.NewChannel("api", 16), history: &history{}}
	reg := prometheus.NewRegistry()
	a, err := agent.New(agent.Config{
		Registry: reg,
		NodeName: "node", RuntimeService: fake, ImageService: fake, Sources: []podsource.Source{f.api}, StatusSink: f.history,
		RelistPeriod: 20 * time.Millisecond, HousekeepingPeriod: 50 * time.Millisecond, BackOffPeriod: 50 * time.Millisecond,
		CRI:         cri.Config{PodLogsDir: filepath.Join(dir, "logs"), PodsDir: filepath.Join(dir, "pods"), ResolvConf: "-"},
		Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourcePods: resource.MustParse("10")},
		NodeLabels:  map[string]string{"zone": "a"},
		Events:      events.add, AdmitHandlers: extra,
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, a)
	f.send(podsource.SET)
	return &admitting{fidelity: f, registry: reg}
}

type admitting struct {
	*fidelity
	registry *prometheus.Registry
}

func withCPU(p *v1.Pod, cpu string) *v1.Pod {
	p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
	return p
}

// A pod that does not fit beside a running one is Failed OutOfcpu, with
// the kubelet's message and event, and none of its containers is
// created; the running pod goes on.
func TestPodThatDoesNotFitIsRejectedOutOfcpu(t *testing.T) {
	events := &eventLog{}
	f := startAdmitting(t, events)
	f.send(podsource.ADD, withCPU(apiPod("small", v1.RestartPolicyAlways, []string{"main"}), "600m"))
	f.waitFor("small", "running", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	f.send(podsource.ADD, withCPU(apiPod("big", v1.RestartPolicyAlways, []string{"main"}), "500m"))
	want := "Pod was rejected: Node didn't have enough resource: cpu, requested: 500, used: 600, capacity: 1000"
	got := f.waitFor("big", "failed", func(s v1.PodStatus) bool { return s.Phase == v1.PodFailed })
	if got.Reason != "OutOfcpu" || got.Message != want {
		t.Errorf("big: reason %q message %q, want OutOfcpu %q", got.Reason, got.Message, want)
	}
	if !events.has("OutOfcpu: Node didn't have enough resource: cpu, requested: 500, used: 600, capacity: 1000") {
		t.Errorf("no OutOfcpu warning event for big: %v", events.list)
	}
	// A pod added after it is admitted against the running one only, and
	// runs; by then the rejected pod never had a sandbox nor any status
	// but Failed OutOfcpu, with no container status nor condition.
	f.send(podsource.ADD, withCPU(apiPod("later", v1.RestartPolicyAlways, []string{"main"}), "400m"))
	f.waitFor("later", "running", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	for _, s := range f.history.all("big") {
		if s.Phase != v1.PodFailed || s.Reason != "OutOfcpu" {
			t.Errorf("big had status %s %q, want only Failed OutOfcpu", s.Phase, s.Reason)
		}
		if n := len(s.InitContainerStatuses) + len(s.ContainerStatuses) + len(s.Conditions); n > 0 {
			t.Errorf("big had %d container statuses and conditions, want none, as the kubelet's rejection writes: %+v", n, s)
		}
	}
	sandboxes, err := f.fake.ListPodSandbox(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sandboxes {
		if sb.Metadata.Name == "big" {
			t.Errorf("the rejected pod got a sandbox")
		}
	}
	if s, _ := f.history.last("small"); s.Phase != v1.PodRunning {
		t.Errorf("small is %s, want Running", s.Phase)
	}
	want = `
# HELP kubelet_admission_rejections_total Cumulative number pod admission rejections by the Kubelet.
# TYPE kubelet_admission_rejections_total counter
kubelet_admission_rejections_total{reason="OutOfcpu"} 1
`
	if err := testutil.GatherAndCompare(f.registry, strings.NewReader(want), "kubelet_admission_rejections_total"); err != nil {
		t.Error(err)
	}
}

// A pod whose node selector does not match the node's labels is Failed
// NodeAffinity; an embedder's handler runs after the kubelet's.
func TestAdmitHandlersAndNodeAffinity(t *testing.T) {
	events := &eventLog{}
	mine := admission.HandlerFunc(func(a admission.Attributes) admission.Result {
		if a.Pod.Labels["team"] == "blocked" {
			return admission.Result{Reason: "TeamBlocked", Message: "team is blocked on this node"}
		}
		return admission.Result{Admit: true}
	})
	f := startAdmitting(t, events, mine)
	sel := apiPod("elsewhere", v1.RestartPolicyAlways, []string{"main"})
	sel.Spec.NodeSelector = map[string]string{"zone": "b"}
	blocked := apiPod("blocked", v1.RestartPolicyAlways, []string{"main"})
	blocked.Labels = map[string]string{"team": "blocked"}
	f.send(podsource.ADD, sel, blocked)
	got := f.waitFor("elsewhere", "failed", func(s v1.PodStatus) bool { return s.Phase == v1.PodFailed })
	if got.Reason != "NodeAffinity" || got.Message != "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector" {
		t.Errorf("elsewhere: %q %q", got.Reason, got.Message)
	}
	got = f.waitFor("blocked", "failed", func(s v1.PodStatus) bool { return s.Phase == v1.PodFailed })
	if got.Reason != "TeamBlocked" || got.Message != "Pod was rejected: team is blocked on this node" {
		t.Errorf("blocked: %q %q", got.Reason, got.Message)
	}
}

// Pods added together are admitted in order of creation, each against
// those of the batch admitted before it, as the kubelet admits them one
// by one.
func TestPodsAddedTogetherAreAdmittedInTurn(t *testing.T) {
	f := startAdmitting(t, &eventLog{})
	first := withCPU(apiPod("first", v1.RestartPolicyAlways, []string{"main"}), "600m")
	second := withCPU(apiPod("second", v1.RestartPolicyAlways, []string{"main"}), "300m")
	third := withCPU(apiPod("third", v1.RestartPolicyAlways, []string{"main"}), "300m")
	for i, p := range []*v1.Pod{first, second, third} {
		p.CreationTimestamp = metav1.NewTime(time.Unix(int64(1000+i), 0))
	}
	f.send(podsource.ADD, third, first, second)
	f.waitFor("first", "running", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	f.waitFor("second", "running", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	got := f.waitFor("third", "failed", func(s v1.PodStatus) bool { return s.Phase == v1.PodFailed })
	want := "Pod was rejected: Node didn't have enough resource: cpu, requested: 300, used: 900, capacity: 1000"
	if got.Reason != "OutOfcpu" || got.Message != want {
		t.Errorf("third: reason %q message %q, want OutOfcpu %q", got.Reason, got.Message, want)
	}
}

// A critical pod that does not fit is admitted in place of a pod it may
// preempt, as the kubelet's critical pod admission handler does: the
// preempted pod stops and ends Failed with reason Preempting, the
// kubelet's message, a DisruptionTarget condition and a warning event;
// kubelet_preemptions counts it. A pod that is not critical is refused
// instead, and preempts nothing.
func TestCriticalPodPreemptsToFit(t *testing.T) {
	events := &eventLog{}
	f := startAdmitting(t, events)
	f.send(podsource.ADD, withCPU(apiPod("filler", v1.RestartPolicyAlways, []string{"main"}), "800m"))
	f.waitFor("filler", "running", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })

	f.send(podsource.ADD, withCPU(apiPod("regular", v1.RestartPolicyAlways, []string{"main"}), "500m"))
	if got := f.waitFor("regular", "refused", func(s v1.PodStatus) bool { return s.Phase == v1.PodFailed }); got.Reason != "OutOfcpu" {
		t.Errorf("regular: reason %q, want OutOfcpu", got.Reason)
	}

	crit := withCPU(apiPod("crit", v1.RestartPolicyAlways, []string{"main"}), "500m")
	prio := int32(admission.SystemCriticalPriority)
	crit.Spec.Priority = &prio
	f.send(podsource.ADD, crit)
	got := f.waitFor("filler", "preempted and stopped", func(s v1.PodStatus) bool {
		return s.Phase == v1.PodFailed && len(s.ContainerStatuses) == 1 && s.ContainerStatuses[0].State.Terminated != nil
	})
	if got.Reason != "Preempting" || got.Message != "Preempted in order to admit critical pod" {
		t.Errorf("filler: reason %q message %q, want Preempting, Preempted in order to admit critical pod", got.Reason, got.Message)
	}
	checkDisruptionTarget(t, "filler", got, "Pod was preempted by Kubelet to accommodate a critical pod.")
	f.waitFor("crit", "running", func(s v1.PodStatus) bool { return s.Phase == v1.PodRunning })
	if !events.has("Preempting: Preempted in order to admit critical pod") {
		t.Errorf("no Preempting event: %v", events.list)
	}
	want := `
# HELP kubelet_preemptions Cumulative number of pod preemptions by preemption resource
# TYPE kubelet_preemptions counter
kubelet_preemptions{preemption_signal="cpu"} 1
`
	if err := testutil.GatherAndCompare(f.registry, strings.NewReader(want), "kubelet_preemptions"); err != nil {
		t.Error(err)
	}
}
