package podsource_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/podsource"
)

// startMerger runs a Merger over the sources and returns it and a function
// that reads the next n updates as "OP source ns/name,...".
func startMerger(t *testing.T, ev *events, sources ...podsource.Source) (*podsource.Merger, func(n int) []string) {
	t.Helper()
	m, err := podsource.NewMerger(podsource.MergerConfig{Sources: sources, Events: ev.record})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return m, func(n int) []string {
		t.Helper()
		var got []string
		for range n {
			u := next(t, m.Updates())
			got = append(got, string(u.Op)+" "+u.Source+" "+strings.Join(names(u.Pods), ","))
		}
		return got
	}
}

func expectUpdates(t *testing.T, read func(int) []string, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, read(len(want))); diff != "" {
		t.Errorf("updates (-want +got):\n%s", diff)
	}
}

// expectEvent waits up to 10s for an event holding all the parts.
func expectEvent(t *testing.T, ev *events, parts ...string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		changed := ev.wait()
		for _, e := range ev.all() {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(e, p)
			}
			if ok {
				return
			}
		}
		select {
		case <-changed:
		case <-timeout:
			t.Errorf("no event with all of %q within 10s; events:\n%s", parts, strings.Join(ev.all(), "\n"))
			return
		}
	}
}

// Two manifest files with the same pod name: the first file by name wins,
// the second gets a FailedValidation event naming its file and the winner.
func TestMergerDuplicateNameInTwoFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", webYAML)
	write(t, dir, "b.yaml", strings.Replace(webYAML, "8080", "9090", 1))
	src, err := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "n"})
	if err != nil {
		t.Fatal(err)
	}
	var ev events
	m, read := startMerger(t, &ev, src)
	expectUpdates(t, read, "ADD file default/web-n")
	pods := m.Pods()
	if len(pods) != 1 || pods[0].Spec.Containers[0].Ports[0].ContainerPort != 8080 {
		t.Errorf("pods %v: want the one of a.yaml only", names(pods))
	}
	expectEvent(t, &ev, "FailedValidation", "pod default/web-n", "from source file, "+dir+"/b.yaml", `metadata.name: Duplicate value: "default/web-n"`, dir+"/a.yaml")
}

// Across sources, the source listed first holds a contested name whatever
// the order of arrival; the loser is added when the name is free again.
func TestMergerDuplicateNameAcrossSources(t *testing.T) {
	first, second := podsource.NewChannel("first", 10), podsource.NewChannel("second", 10)
	var ev events
	_, read := startMerger(t, &ev, first, second)
	ctx := context.Background()
	mine, theirs := pod("1", "web"), pod("2", "web")

	second.Send(ctx, podsource.Update{Op: podsource.SET, Pods: []*v1.Pod{theirs}})
	expectUpdates(t, read, "ADD second ns/web")
	first.Send(ctx, podsource.Update{Op: podsource.SET, Pods: []*v1.Pod{mine}})
	expectUpdates(t, read, "REMOVE second ns/web", "ADD first ns/web")
	expectEvent(t, &ev, "FailedValidation", "pod ns/web (UID \"uid-2\") from source second", `metadata.name: Duplicate value: "ns/web"`, "the pod ns/web (UID \"uid-1\") from source first has it")

	// Re-sending changes nothing and repeats no event. Updates of one
	// source are merged in order, those of two sources in any order.
	n := len(ev.all())
	second.Send(ctx, podsource.Update{Op: podsource.SET, Pods: []*v1.Pod{theirs}})
	second.Send(ctx, podsource.Update{Op: podsource.SET, Pods: []*v1.Pod{theirs, pod("m", "m")}})
	first.Send(ctx, podsource.Update{Op: podsource.SET, Pods: []*v1.Pod{mine, pod("3", "other")}})
	got := read(2)
	sort.Strings(got)
	if diff := cmp.Diff([]string{"ADD first ns/other", "ADD second ns/m"}, got); diff != "" {
		t.Errorf("updates (-want +got):\n%s", diff)
	}
	if len(ev.all()) != n {
		t.Errorf("events repeated: %v", ev.all()[n:])
	}

	// The winner goes: the other pod gets the name.
	first.Send(ctx, podsource.Update{Op: podsource.SET, Pods: []*v1.Pod{pod("3", "other")}})
	expectUpdates(t, read, "REMOVE first ns/web", "ADD second ns/web")

	// Within one update, the first pod wins.
	second.Send(ctx, podsource.Update{Op: podsource.SET, Pods: []*v1.Pod{theirs, pod("4", "web"), pod("m", "m")}})
	first.Send(ctx, podsource.Update{Op: podsource.ADD, Pods: []*v1.Pod{pod("5", "x"), pod("6", "x")}})
	expectUpdates(t, read, "ADD first ns/x")
	expectEvent(t, &ev, "pod ns/web (UID \"uid-4\") from source second", "the pod ns/web (UID \"uid-2\") from source second has it")
	expectEvent(t, &ev, "pod ns/x (UID \"uid-6\") from source first", `metadata.name: Duplicate value: "ns/x"`)

	// A UID, too, belongs to one pod.
	first.Send(ctx, podsource.Update{Op: podsource.ADD, Pods: []*v1.Pod{pod("2", "y")}})
	expectUpdates(t, read, "REMOVE second ns/web", "ADD first ns/y")
	expectEvent(t, &ev, "pod ns/web (UID \"uid-2\") from source second", `metadata.uid: Duplicate value: "uid-2"`, "the pod ns/y (UID \"uid-2\") from source first has it")
}

// A channel or custom source gets the defaults and validation files get;
// an invalid pod is refused with an event naming it and the field, and
// the valid pods of the same update go through.
func TestMergerValidatesEverySource(t *testing.T) {
	ch := podsource.NewChannel("api", 10)
	var ev events
	m, read := startMerger(t, &ev, ch)
	good := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "good", UID: "u-good"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox:1.36"}}}}
	escape := pod("esc", "../x")
	badUID := pod("x", "bad-uid")
	badUID.UID = "../../etc"
	noUID := pod("y", "no-uid")
	noUID.UID = ""
	badNS := pod("z", "bad-ns")
	badNS.Namespace = "a/b"
	badContainer := pod("w", "bad-container")
	badContainer.Spec.Containers[0].Name = "../c"
	sent := []*v1.Pod{escape, good, badUID, noUID, badNS, badContainer}
	ch.Send(context.Background(), podsource.Update{Op: podsource.SET, Pods: sent})
	expectUpdates(t, read, "ADD api default/good")
	p := m.Pods()[0]
	if p.Spec.RestartPolicy != v1.RestartPolicyAlways || p.Spec.DNSPolicy != v1.DNSClusterFirst || p.Spec.Containers[0].TerminationMessagePath == "" {
		t.Errorf("defaults not applied: %+v", p.Spec)
	}
	if good.Namespace != "" || good.Spec.RestartPolicy != "" {
		t.Errorf("the Merger modified the pod the source sent: %+v", good)
	}
	for _, want := range [][]string{
		{"pod ns/../x", "from source api", `metadata.name: Invalid value: "../x"`},
		{"pod ns/bad-uid", "from source api", `metadata.uid: Invalid value: "../../etc"`},
		{"pod ns/no-uid", "from source api", "metadata.uid: Required value"},
		{"pod a/b/bad-ns", "from source api", `metadata.namespace: Invalid value: "a/b"`},
		{"pod ns/bad-container", "from source api", `spec.containers[0].name: Invalid value: "../c"`},
	} {
		expectEvent(t, &ev, append([]string{"FailedValidation"}, want...)...)
	}

	// An invalid update of a valid pod leaves the pod as it was.
	bad := good.DeepCopy()
	bad.Spec.Containers[0].Image = ""
	ch.Send(context.Background(), podsource.Update{Op: podsource.UPDATE, Pods: []*v1.Pod{bad}})
	ch.Send(context.Background(), podsource.Update{Op: podsource.ADD, Pods: []*v1.Pod{pod("v", "v")}})
	expectUpdates(t, read, "ADD api ns/v")
	expectEvent(t, &ev, "pod default/good", "from source api", "spec.containers[0].image: Required value")
	if got := names(m.Pods()); !cmp.Equal(got, []string{"default/good", "ns/v"}) {
		t.Errorf("pods %v", got)
	}
}

// A nil pod in an update, from a channel or a custom source, is refused
// with an event naming the source, and the other pods of the update go
// through, in a SET, an ADD and a REMOVE.
func TestMergerRefusesNilPods(t *testing.T) {
	ch := podsource.NewChannel("custom", 10)
	var ev events
	m, read := startMerger(t, &ev, ch)
	ctx := context.Background()
	a, b, c := pod("a", "a"), pod("b", "b"), pod("c", "c")

	ch.Send(ctx, podsource.Update{Op: podsource.SET, Pods: []*v1.Pod{a, nil, b}})
	expectUpdates(t, read, "ADD custom ns/a,ns/b")
	expectEvent(t, &ev, "FailedValidation", "a nil pod from source custom (op SET)")

	ch.Send(ctx, podsource.Update{Op: podsource.ADD, Pods: []*v1.Pod{nil, c}})
	expectUpdates(t, read, "ADD custom ns/c")
	expectEvent(t, &ev, "FailedValidation", "a nil pod from source custom (op ADD)")

	ch.Send(ctx, podsource.Update{Op: podsource.REMOVE, Pods: []*v1.Pod{nil, a}})
	expectUpdates(t, read, "REMOVE custom ns/a")
	expectEvent(t, &ev, "FailedValidation", "a nil pod from source custom (op REMOVE)")
	if got := names(m.Pods()); !cmp.Equal(got, []string{"ns/b", "ns/c"}) {
		t.Errorf("pods %v, want ns/b and ns/c", got)
	}
}
