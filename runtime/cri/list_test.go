package cri_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/criclient"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// staticPod is one of n pods as a file source hands them to the agent:
// one container, the source's annotations, a label.
func staticPod(i int) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("pod-%04d-bench", i), Namespace: "default", UID: types.UID(fmt.Sprintf("%032x", i)),
			Labels: map[string]string{"app": "bench"},
			Annotations: map[string]string{
				"kubernetes.io/config.hash":   fmt.Sprintf("%032x", i),
				"kubernetes.io/config.seen":   "2026-01-02T03:04:05.000000006Z",
				"kubernetes.io/config.source": "file",
			},
		},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{
			Name: "main", Image: "busybox:1.36", TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile,
		}}},
	}
}

// servedRuntime returns a Runtime that reaches fakecri over a unix socket
// through criclient, with n running static pods.
func servedRuntime(tb testing.TB, n int) (*cri.Runtime, *criclient.Client) {
	tb.Helper()
	fake, err := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}, PodCIDR: "127.64.0.0/10"})
	if err != nil {
		tb.Fatal(err)
	}
	client, err := criclient.Dial(context.Background(), serveOnSocket(tb, fake))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = client.Close(context.Background()) }) // before the server stops
	rt, err := cri.New(cri.Config{RuntimeService: client, ImageService: client, PodLogsDir: tb.TempDir(), PodsDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		if err := rt.SyncPod(context.Background(), staticPod(i), nil).Error(); err != nil {
			tb.Fatal(err)
		}
	}
	return rt, client
}

// cannedRuntime serves, on a unix socket, the answers fakecri gave for n
// static pods to Version, ListPodSandbox and ListContainers, as bytes
// captured once: the server then does next to nothing per call, so that
// a benchmark of the client side measures the client side. It returns a
// Runtime dialled to it through criclient.
func cannedRuntime(tb testing.TB, n int) *cri.Runtime {
	tb.Helper()
	ctx := context.Background()
	fake, err := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}, PodCIDR: "127.64.0.0/10"})
	if err != nil {
		tb.Fatal(err)
	}
	rt, err := cri.New(cri.Config{RuntimeService: fake, ImageService: fake, PodLogsDir: tb.TempDir(), PodsDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		if err := rt.SyncPod(ctx, staticPod(i), nil).Error(); err != nil {
			tb.Fatal(err)
		}
	}
	version, _ := fake.Version(ctx, "v1")
	sandboxes, _ := fake.ListPodSandbox(ctx, nil)
	containers, _ := fake.ListContainers(ctx, nil)
	answers := map[string][]byte{}
	for method, m := range map[string]proto.Message{
		runtimeapi.RuntimeService_Version_FullMethodName:        version,
		runtimeapi.RuntimeService_ListPodSandbox_FullMethodName: &runtimeapi.ListPodSandboxResponse{Items: sandboxes},
		runtimeapi.RuntimeService_ListContainers_FullMethodName: &runtimeapi.ListContainersResponse{Containers: containers},
	} {
		if answers[method], err = proto.Marshal(m); err != nil {
			tb.Fatal(err)
		}
	}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(func(_ any, st grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(st)
		var req []byte
		if err := st.RecvMsg(&req); err != nil {
			return err
		}
		b, ok := answers[method]
		if !ok {
			return status.Error(codes.Unimplemented, method)
		}
		return st.SendMsg(b)
	}))
	endpoint := "unix://" + filepath.Join(tb.TempDir(), "canned.sock")
	lis, err := fakecri.ListenUnix(endpoint)
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	client, err := criclient.Dial(ctx, endpoint)
	if err != nil {
		srv.Stop()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = client.Close(ctx)
		srv.Stop()
		<-done
	})
	out, err := cri.New(cri.Config{RuntimeService: client, ImageService: client, PodLogsDir: tb.TempDir(), PodsDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// rawCodec passes bytes through: the canned server's requests are read
// as bytes and its answers are sent as they were captured.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// BenchmarkGetPods is the list half of every relist of the generic PLEG,
// the agent's side only: GetPods(all) of n unchanged one-container
// static pods, over gRPC on a unix socket, from a server that answers
// with bytes fakecri gave once (cannedRuntime).
func BenchmarkGetPods(b *testing.B) {
	benchmarkList(b, func(ctx context.Context, rt *cri.Runtime) (int, error) {
		pods, err := rt.GetPods(ctx, true)
		return len(pods), err
	})
}

// BenchmarkVisitPods is BenchmarkGetPods through runtime.PodVisitor, as
// the generic PLEG relists: the pods are listed into the memory of the
// last list.
func BenchmarkVisitPods(b *testing.B) {
	benchmarkList(b, func(ctx context.Context, rt *cri.Runtime) (int, error) {
		seen := 0
		err := rt.VisitPods(ctx, true, func(*runtime.Pod) { seen++ })
		return seen, err
	})
}

// benchmarkList runs list, which returns how many pods it listed, on
// cannedRuntimes of 100 and 1000 pods.
func benchmarkList(b *testing.B, list func(context.Context, *cri.Runtime) (int, error)) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprint(n, "pods"), func(b *testing.B) {
			rt := cannedRuntime(b, n)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if got, err := list(ctx, rt); err != nil || got != n {
					b.Fatalf("%d pods listed, %v", got, err)
				}
			}
		})
	}
}

// visited lists through VisitPods and copies what it is lent.
func visited(t *testing.T, rt *cri.Runtime, all bool) []*runtime.Pod {
	t.Helper()
	var out []*runtime.Pod
	err := rt.VisitPods(context.Background(), all, func(p *runtime.Pod) { out = append(out, p.Clone()) })
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestVisitPodsMatchesGetPods: VisitPods lends the pods GetPods returns,
// in the same order, list after list, while the memory it lists into is
// reused as pods come, change and go, and the lists grow and shrink.
func TestVisitPodsMatchesGetPods(t *testing.T) {
	ctx := context.Background()
	rt, client := servedRuntime(t, 4)
	check := func(step string, pods int) {
		t.Helper()
		for _, all := range []bool{true, false} {
			want, err := rt.GetPods(ctx, all)
			if err != nil {
				t.Fatal(err)
			}
			if all && len(want) != pods {
				t.Fatalf("%s: GetPods lists %d pods, want %d", step, len(want), pods)
			}
			if diff := cmp.Diff(want, visited(t, rt, all), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s: VisitPods(%v) (-GetPods +VisitPods):\n%s", step, all, diff)
			}
		}
	}
	check("four pods", 4)

	// A pod of three containers, one of which exits: the pods' slots
	// now hold more containers than the last list put there.
	big := staticPod(10)
	big.Spec.RestartPolicy = v1.RestartPolicyNever
	for _, name := range []string{"b", "c"} {
		big.Spec.Containers = append(big.Spec.Containers, v1.Container{Name: name, Image: "busybox:1.36"})
	}
	withEnv(&big.Spec.Containers[2], fakecri.EnvExitCode, "1")
	if err := rt.SyncPod(ctx, big, nil).Error(); err != nil {
		t.Fatal(err)
	}
	check("a pod of three containers", 5)

	// Three pods killed and their sandboxes removed: a shorter list into
	// the memory of a longer one.
	for i := range 3 {
		p := staticPod(i)
		if err := rt.KillPod(ctx, p, nil, nil); err != nil {
			t.Fatal(err)
		}
		sandboxes, err := client.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(p.UID)}})
		if err != nil {
			t.Fatal(err)
		}
		for _, sb := range sandboxes {
			if err := client.RemovePodSandbox(ctx, sb.Id); err != nil {
				t.Fatal(err)
			}
		}
	}
	check("three pods removed", 2)

	// Longer again than any list before.
	for i := 20; i < 30; i++ {
		if err := rt.SyncPod(ctx, staticPod(i), nil).Error(); err != nil {
			t.Fatal(err)
		}
	}
	check("ten pods more", 12)

	// A VisitPods from fn lists into new memory: the outer pod stays as
	// it was lent.
	var outer, inner int
	err := rt.VisitPods(ctx, true, func(p *runtime.Pod) {
		outer++
		id, containers := p.ID, len(p.Containers)
		if err := rt.VisitPods(ctx, true, func(*runtime.Pod) { inner++ }); err != nil {
			t.Fatal(err)
		}
		if p.ID != id || len(p.Containers) != containers {
			t.Fatalf("pod %s changed while lent: now %s with %d containers", id, p.ID, len(p.Containers))
		}
	})
	if err != nil || outer != 12 || inner != 12*12 {
		t.Errorf("nested VisitPods: %d outer and %d inner pods, %v; want 12 and 144", outer, inner, err)
	}

	// A list that fails lends nothing.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	called := false
	if err := rt.VisitPods(cancelled, true, func(*runtime.Pod) { called = true }); err == nil || called {
		t.Errorf("VisitPods on a cancelled context: %v, fn called %v", err, called)
	}
}

// tamperedLists answers the list calls of its runtime with a container
// that has no metadata appended (bad), or without the sandboxes of one
// pod (hidden).
type tamperedLists struct {
	criapi.RuntimeService
	bad    bool
	hidden types.UID
}

func (l *tamperedLists) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	cs, err := l.RuntimeService.ListContainers(ctx, f)
	if l.bad {
		cs = append(cs, &runtimeapi.Container{Id: "no-metadata", Labels: map[string]string{cri.LabelPodUID: "some-pod"}})
	}
	return cs, err
}

func (l *tamperedLists) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	sbs, err := l.RuntimeService.ListPodSandbox(ctx, f)
	return slices.DeleteFunc(sbs, func(sb *runtimeapi.PodSandbox) bool {
		return l.hidden != "" && sb.GetLabels()[cri.LabelPodUID] == string(l.hidden)
	}), err
}

// TestVisitPodsAfterAFailedList: a list that fails half-way through the
// memory VisitPods reuses (a container without metadata, after the
// sandboxes were filled in) lends nothing, and leaves nothing of itself
// in the next list; a pod whose containers are listed without its
// sandbox is lent as GetPods returns it.
func TestVisitPodsAfterAFailedList(t *testing.T) {
	ctx := context.Background()
	fake, err := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}, PodCIDR: "127.64.0.0/10"})
	if err != nil {
		t.Fatal(err)
	}
	lists := &tamperedLists{RuntimeService: fake}
	rt, err := cri.New(cri.Config{RuntimeService: lists, ImageService: fake, PodLogsDir: t.TempDir(), PodsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := rt.SyncPod(ctx, staticPod(i), nil).Error(); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step string, pods int) {
		t.Helper()
		want, err := rt.GetPods(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) != pods {
			t.Fatalf("%s: GetPods lists %d pods, want %d", step, len(want), pods)
		}
		if diff := cmp.Diff(want, visited(t, rt, true), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: VisitPods (-GetPods +VisitPods):\n%s", step, diff)
		}
	}
	check("three pods", 3)

	lists.bad = true
	called := false
	if err := rt.VisitPods(ctx, true, func(*runtime.Pod) { called = true }); !errors.Is(err, runtime.ErrInvalidResponse) || called {
		t.Errorf("a list with a container without metadata: %v, fn called %v; want ErrInvalidResponse and no call", err, called)
	}
	lists.bad = false
	check("after the failed list", 3)

	lists.hidden = staticPod(1).UID
	check("a pod listed without its sandbox", 3)
	if pods, _ := rt.GetPods(ctx, true); len(pods[1].Sandboxes) != 0 || len(pods[1].Containers) != 1 {
		t.Errorf("the pod without its sandbox: %d sandboxes and %d containers, want 0 and 1", len(pods[1].Sandboxes), len(pods[1].Containers))
	}
	lists.hidden = ""
	check("the sandbox listed again", 3)
}

// TestGetPodsOverGRPCMatchesInProcess: GetPods through a criclient.Client
// (the brief lists, decoded from the wire) and through the same fakecri
// in process (the full lists) give the same pods, containers, states,
// hashes and images, for all pods and for running ones.
func TestGetPodsOverGRPCMatchesInProcess(t *testing.T) {
	ctx := context.Background()
	rt, client := servedRuntime(t, 5)
	exited := staticPod(9)
	exited.Spec.RestartPolicy = v1.RestartPolicyNever
	withEnv(&exited.Spec.Containers[0], fakecri.EnvExitCode, "3")
	if err := rt.SyncPod(ctx, exited, nil).Error(); err != nil {
		t.Fatal(err)
	}
	// A sandbox no agent made is left out either way.
	if _, err := client.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "other", Namespace: "x", Uid: "x"}}, ""); err != nil {
		t.Fatal(err)
	}
	full, err := cri.New(cri.Config{RuntimeService: fullLists{client}, ImageService: client, PodLogsDir: t.TempDir(), PodsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, all := range []bool{true, false} {
		brief, err := rt.GetPods(ctx, all)
		if err != nil {
			t.Fatal(err)
		}
		want, err := full.GetPods(ctx, all)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) != 6 {
			t.Fatalf("GetPods(%v): %d pods, want 6", all, len(want))
		}
		if diff := cmp.Diff(want, brief); diff != "" {
			t.Errorf("GetPods(%v) over the brief lists (-full +brief):\n%s", all, diff)
		}
		if h := brief[0].Containers[0].Hash; h == 0 {
			t.Errorf("GetPods(%v): container hash not read", all)
		}
	}
}

// fullLists hides the brief lists of a Client, so that Runtime takes the
// full path.
type fullLists struct{ criapi.RuntimeService }

// overlappingLists, once armed, answers a sandbox or container list only
// when the other kind was asked for too (bounded at 10 s, then it fails),
// and can fail or panic either kind.
type overlappingLists struct {
	criapi.RuntimeService
	armed                 bool
	sandboxes, containers chan struct{}
	sandboxErr            error
	containerPanic        any
}

func newOverlappingLists(rs criapi.RuntimeService) *overlappingLists {
	return &overlappingLists{RuntimeService: rs, sandboxes: make(chan struct{}), containers: make(chan struct{})}
}

// meet says that this kind was asked for, and waits for the other.
func (l *overlappingLists) meet(mine, other chan struct{}) error {
	if !l.armed {
		return nil
	}
	close(mine)
	select {
	case <-other:
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("the other list was not asked for within 10 s")
	}
}

func (l *overlappingLists) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	if err := l.meet(l.sandboxes, l.containers); err != nil {
		return nil, err
	}
	if l.sandboxErr != nil {
		return nil, l.sandboxErr
	}
	return l.RuntimeService.ListPodSandbox(ctx, f)
}

func (l *overlappingLists) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	if err := l.meet(l.containers, l.sandboxes); err != nil {
		return nil, err
	}
	if l.containerPanic != nil {
		panic(l.containerPanic)
	}
	return l.RuntimeService.ListContainers(ctx, f)
}

// TestListsSandboxesAndContainersAtOnce: GetPods and VisitPods ask for
// the sandboxes and the containers at the same time (a runtime that
// answers neither until it was asked for both still answers them); an
// error of either list is GetPods's error; a panic while listing the
// containers is raised again in the caller's goroutine, where a pod
// worker's recover catches it, not in one of its own that would end the
// process.
func TestListsSandboxesAndContainersAtOnce(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		visit   bool
		tamper  func(*overlappingLists)
		wantErr string
		panics  string
	}{
		{name: "GetPods"},
		{name: "VisitPods", visit: true},
		{name: "a sandbox list that fails", tamper: func(l *overlappingLists) { l.sandboxErr = errors.New("sandboxes unavailable") }, wantErr: "sandboxes unavailable"},
		{name: "a container list that panics", tamper: func(l *overlappingLists) { l.containerPanic = "decoder bug" }, panics: "decoder bug"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, err := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}, PodCIDR: "127.64.0.0/10"})
			if err != nil {
				t.Fatal(err)
			}
			lists := newOverlappingLists(fake)
			rt, err := cri.New(cri.Config{RuntimeService: lists, ImageService: fake, PodLogsDir: t.TempDir(), PodsDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if err := rt.SyncPod(ctx, staticPod(i), nil).Error(); err != nil {
					t.Fatal(err)
				}
			}
			lists.armed = true
			if tc.tamper != nil {
				tc.tamper(lists)
			}
			var pods int
			var recovered any
			func() {
				defer func() { recovered = recover() }()
				if tc.visit {
					err = rt.VisitPods(ctx, true, func(*runtime.Pod) { pods++ })
					return
				}
				var got []*runtime.Pod
				got, err = rt.GetPods(ctx, true)
				pods = len(got)
			}()
			switch {
			case tc.panics != "":
				if s, _ := recovered.(string); !strings.Contains(s, tc.panics) || !strings.Contains(s, "ListContainers") {
					t.Fatalf("recovered %v, want the panic %q with the stack of the container list", recovered, tc.panics)
				}
			case recovered != nil:
				t.Fatalf("panic: %v", recovered)
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case pods != 2:
				t.Fatalf("listed %d pods, want 2", pods)
			}
		})
	}
}
