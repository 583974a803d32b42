package criclient_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/criclient"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

var (
	podKeys  = criclient.ListKeys{Labels: []string{"io.kubernetes.pod.uid", "io.kubernetes.pod.name", "io.kubernetes.pod.namespace"}}
	ctrKeys  = criclient.ListKeys{Labels: podKeys.Labels, Annotations: []string{"io.kubernetes.container.hash"}}
	someKeys = []criclient.ListKeys{
		{},
		podKeys,
		ctrKeys,
		{Labels: []string{"absent", "app", "app"}, Annotations: []string{"big", "absent", "io.kubernetes.container.hash"}},
	}
)

// populate gives fake sandboxes and containers in every state, with and
// without the pod labels, with many labels and annotations and a large
// one, so that a list spans several HTTP/2 frames.
func populate(t testing.TB, fake *fakecri.Runtime, pods int) {
	t.Helper()
	ctx := context.Background()
	big := strings.Repeat("x", 20000)
	for i := range pods {
		uid := string(rune('a'+i%26)) + strings.Repeat("0", i/26+1)
		labels := map[string]string{"io.kubernetes.pod.uid": uid, "io.kubernetes.pod.name": "p-" + uid, "io.kubernetes.pod.namespace": "ns", "app": "ünïcode"}
		if i%7 == 3 {
			labels = map[string]string{"app": "foreign"} // not made by an agent
		}
		annotations := map[string]string{"kubernetes.io/config.source": "file", "io.kubernetes.container.hash": "abc123"}
		if i == 1 {
			annotations["big"] = big
		}
		sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p-" + uid, Namespace: "ns", Uid: uid, Attempt: uint32(i % 3)}, Labels: labels, Annotations: annotations}
		sb, err := fake.RunPodSandbox(ctx, sbCfg, "")
		if err != nil {
			t.Fatal(err)
		}
		for j, state := range []string{"created", "running", "exited"} {
			id, err := fake.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: state, Attempt: uint32(j)},
				Image:    &runtimeapi.ImageSpec{Image: "busybox:1.36"},
				Labels:   labels, Annotations: annotations,
			}, sbCfg)
			if err != nil {
				t.Fatal(err)
			}
			if state != "created" {
				if err := fake.StartContainer(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			if state == "exited" {
				if err := fake.StopContainer(ctx, id, 0); err != nil {
					t.Fatal(err)
				}
			}
		}
		if i%5 == 4 {
			if err := fake.StopPodSandbox(ctx, sb); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func briefSandboxes(list []*runtimeapi.PodSandbox, keys criclient.ListKeys) []criclient.BriefSandbox {
	out := make([]criclient.BriefSandbox, len(list))
	for i, s := range list {
		out[i] = criclient.BriefOfSandbox(s, keys)
	}
	return out
}

func briefContainers(list []*runtimeapi.Container, keys criclient.ListKeys) []criclient.BriefContainer {
	out := make([]criclient.BriefContainer, len(list))
	for i, c := range list {
		out[i] = criclient.BriefOfContainer(c, keys)
	}
	return out
}

// TestBriefListsMatchFullLists: what the brief lists decode from the wire
// is what the full lists decode, projected, for fakecri's real answers,
// with and without filters.
func TestBriefListsMatchFullLists(t *testing.T) {
	fake, c := serveFake(t, fakecri.Config{Images: []string{"busybox:1.36"}})
	populate(t, fake, 40)
	ctx := context.Background()
	// One buffer for every list, as a relist uses it: each list reuses
	// the memory of the last.
	var buf criclient.BriefBuffer
	sandboxFilters := []*runtimeapi.PodSandboxFilter{
		nil,
		{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		{LabelSelector: map[string]string{"io.kubernetes.pod.uid": "b0"}},
	}
	containerFilters := []*runtimeapi.ContainerFilter{
		nil,
		{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}},
		{LabelSelector: map[string]string{"io.kubernetes.pod.uid": "b0"}},
	}
	for _, keys := range someKeys {
		for _, f := range sandboxFilters {
			full, err := c.ListPodSandbox(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			brief, err := c.ListPodSandboxBrief(ctx, f, keys, &buf)
			if err != nil {
				t.Fatal(err)
			}
			if len(full) == 0 {
				t.Fatalf("filter %v: no sandboxes to compare", f)
			}
			if diff := cmp.Diff(briefSandboxes(full, keys), brief); diff != "" {
				t.Errorf("keys %v, filter %v: brief sandboxes differ from the full list (-full +brief):\n%s", keys, f, diff)
			}
		}
		for _, f := range containerFilters {
			full, err := c.ListContainers(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			brief, err := c.ListContainersBrief(ctx, f, keys, &buf)
			if err != nil {
				t.Fatal(err)
			}
			if len(full) == 0 {
				t.Fatalf("filter %v: no containers to compare", f)
			}
			if diff := cmp.Diff(briefContainers(full, keys), brief); diff != "" {
				t.Errorf("keys %v, filter %v: brief containers differ from the full list (-full +brief):\n%s", keys, f, diff)
			}
		}
	}
	// The helpers take the brief path for a Client and the full path for
	// anything else, with the same answer.
	viaClient, err := criclient.ListContainersBrief(ctx, c, nil, ctrKeys, nil)
	if err != nil {
		t.Fatal(err)
	}
	viaFake, err := criclient.ListContainersBrief(ctx, fake, nil, ctrKeys, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(viaFake, viaClient); diff != "" {
		t.Errorf("ListContainersBrief over gRPC and in process differ (-in process +gRPC):\n%s", diff)
	}
	sbClient, err := criclient.ListPodSandboxBrief(ctx, c, nil, podKeys, nil)
	if err != nil {
		t.Fatal(err)
	}
	sbFake, err := criclient.ListPodSandboxBrief(ctx, fake, nil, podKeys, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sbFake, sbClient); diff != "" {
		t.Errorf("ListPodSandboxBrief over gRPC and in process differ (-in process +gRPC):\n%s", diff)
	}
}

// TestBriefListErrorsNameTheCall: a failed call and an undecodable answer
// are errors that name the CRI call; the latter matches
// runtime.ErrInvalidResponse.
func TestBriefListErrorsNameTheCall(t *testing.T) {
	ctx := context.Background()
	fake, c := serveFake(t, fakecri.Config{})
	fake.InjectError("ListPodSandbox", errors.New("boom"))
	if _, err := c.ListPodSandboxBrief(ctx, nil, podKeys, nil); err == nil || !strings.Contains(err.Error(), "ListPodSandbox") {
		t.Errorf("failed ListPodSandboxBrief: %v, want an error naming ListPodSandbox", err)
	}

	garbage := []byte{0x0a, 0x05, 0x0a, 0x10, 'a'} // item 0 says its ID has 16 bytes, has 1
	c2 := serveCanned(t, map[string][]byte{
		runtimeapi.RuntimeService_ListPodSandbox_FullMethodName: garbage,
		runtimeapi.RuntimeService_ListContainers_FullMethodName: garbage,
	})
	_, err := c2.ListPodSandboxBrief(ctx, nil, podKeys, nil)
	if !errors.Is(err, runtime.ErrInvalidResponse) || !strings.Contains(err.Error(), "ListPodSandbox") {
		t.Errorf("garbage ListPodSandbox answer: %v, want ErrInvalidResponse naming ListPodSandbox", err)
	}
	_, err = c2.ListContainersBrief(ctx, nil, ctrKeys, nil)
	if !errors.Is(err, runtime.ErrInvalidResponse) || !strings.Contains(err.Error(), "ListContainers") || !strings.Contains(err.Error(), "item 0") {
		t.Errorf("garbage ListContainers answer: %v, want ErrInvalidResponse naming ListContainers and the item", err)
	}
}

// serveCanned serves the given wire bytes as the answers of the named
// methods and a Version answer, and returns a Client dialled to it.
func serveCanned(t *testing.T, answers map[string][]byte) *criclient.Client {
	t.Helper()
	v, err := proto.Marshal(&runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "canned", RuntimeVersion: "1", RuntimeApiVersion: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	all := map[string][]byte{runtimeapi.RuntimeService_Version_FullMethodName: v}
	for k, b := range answers {
		all[k] = b
	}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(func(_ any, st grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(st)
		var req []byte
		if err := st.RecvMsg(&req); err != nil {
			return err
		}
		return st.SendMsg(all[method])
	}))
	endpoint := "unix://" + filepath.Join(t.TempDir(), "canned.sock")
	lis, err := fakecri.ListenUnix(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	c, err := criclient.Dial(context.Background(), endpoint)
	if err != nil {
		srv.Stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close(context.Background())
		srv.Stop()
		<-done
	})
	return c
}

type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// wireSamples are real list answers of fakecri, as wire bytes.
func wireSamples(t testing.TB) (sandboxes, containers []byte) {
	t.Helper()
	fake, err := fakecri.New(fakecri.Config{Images: []string{"busybox:1.36"}})
	if err != nil {
		t.Fatal(err)
	}
	populate(t, fake, 8)
	sbs, _ := fake.ListPodSandbox(context.Background(), nil)
	cs, _ := fake.ListContainers(context.Background(), nil)
	if sandboxes, err = proto.Marshal(&runtimeapi.ListPodSandboxResponse{Items: sbs}); err != nil {
		t.Fatal(err)
	}
	if containers, err = proto.Marshal(&runtimeapi.ListContainersResponse{Containers: cs}); err != nil {
		t.Fatal(err)
	}
	return sandboxes, containers
}

// checkDecoders decodes b both ways: the brief decoders never panic;
// whenever the generated decoder accepts b, they accept it too and agree
// with it; when they refuse b, the error matches ErrInvalidResponse.
func checkDecoders(t *testing.T, b []byte) {
	t.Helper()
	for _, keys := range someKeys {
		var full runtimeapi.ListPodSandboxResponse
		fullErr := proto.Unmarshal(b, &full)
		brief, err := criclient.DecodeListPodSandboxBrief(b, keys)
		if err != nil && !errors.Is(err, runtime.ErrInvalidResponse) {
			t.Fatalf("DecodeListPodSandboxBrief(%x): %v, want ErrInvalidResponse", b, err)
		}
		if fullErr == nil {
			if err != nil {
				t.Fatalf("DecodeListPodSandboxBrief(%x) refuses what proto accepts: %v", b, err)
			}
			if diff := cmp.Diff(briefSandboxes(full.GetItems(), keys), brief); diff != "" {
				t.Fatalf("DecodeListPodSandboxBrief(%x) (-proto +brief):\n%s", b, diff)
			}
		}
		var fullC runtimeapi.ListContainersResponse
		fullErr = proto.Unmarshal(b, &fullC)
		briefC, err := criclient.DecodeListContainersBrief(b, keys)
		if err != nil && !errors.Is(err, runtime.ErrInvalidResponse) {
			t.Fatalf("DecodeListContainersBrief(%x): %v, want ErrInvalidResponse", b, err)
		}
		if fullErr == nil {
			if err != nil {
				t.Fatalf("DecodeListContainersBrief(%x) refuses what proto accepts: %v", b, err)
			}
			if diff := cmp.Diff(briefContainers(fullC.GetContainers(), keys), briefC); diff != "" {
				t.Fatalf("DecodeListContainersBrief(%x) (-proto +brief):\n%s", b, diff)
			}
		}
	}
}

// TestBriefDecodersOnCorruptInput mutates real answers (flipped bytes,
// truncation, spliced fields) and checks the brief decoders against the
// generated one on each (see checkDecoders). Seeded: the same inputs on
// every run.
func TestBriefDecodersOnCorruptInput(t *testing.T) {
	sandboxes, containers := wireSamples(t)
	checkDecoders(t, sandboxes)
	checkDecoders(t, containers)
	checkDecoders(t, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		src := sandboxes
		if i%2 == 1 {
			src = containers
		}
		b := append([]byte(nil), src...)
		switch i % 4 {
		case 0: // flip a few bytes
			for range 1 + rng.IntN(3) {
				b[rng.IntN(len(b))] = byte(rng.UintN(256))
			}
		case 1: // truncate
			b = b[:rng.IntN(len(b))]
		case 2: // splice random bytes in
			at := rng.IntN(len(b))
			junk := make([]byte, 1+rng.IntN(8))
			for j := range junk {
				junk[j] = byte(rng.UintN(256))
			}
			b = append(b[:at], append(junk, b[at:]...)...)
		case 3: // both kinds of answer glued
			b = append(b[:rng.IntN(len(b))], (sandboxes[rng.IntN(len(sandboxes)):])...)
		}
		checkDecoders(t, b)
	}
}

// FuzzBriefDecoders runs the same check on inputs from go test -fuzz.
func FuzzBriefDecoders(f *testing.F) {
	sandboxes, containers := wireSamples(f)
	f.Add(sandboxes)
	f.Add(containers)
	f.Add([]byte{0x0a, 0x02, 0x12, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) { checkDecoders(t, b) })
}

// wire builds protobuf wire bytes field by field.
type wire []byte

func (w wire) str(num protowire.Number, s string) wire {
	return protowire.AppendString(protowire.AppendTag(w, num, protowire.BytesType), s)
}

func (w wire) msg(num protowire.Number, m wire) wire {
	return protowire.AppendBytes(protowire.AppendTag(w, num, protowire.BytesType), m)
}

func (w wire) varint(num protowire.Number, v uint64) wire {
	return protowire.AppendVarint(protowire.AppendTag(w, num, protowire.VarintType), v)
}

func entry(k, v string) wire { return wire{}.str(1, k).str(2, v) }

// TestBriefDecodersFollowProtobufRules: on hand-made answers that real
// runtimes rarely send, the brief decoders decode as the generated
// decoder does (a later map entry replaces an earlier one with the same
// key, a repeated message merges, a known field with another wire type
// and unknown fields are skipped), and refuse what it refuses in the
// values they keep.
func TestBriefDecodersFollowProtobufRules(t *testing.T) {
	uid := podKeys.Labels[0]
	sandbox := wire{}.
		str(1, "sb1").
		msg(2, wire{}.str(1, "first").varint(4, 2)).
		msg(2, wire{}.str(1, "second").str(3, "ns")). // merges: name replaced, attempt kept
		str(3, "not a varint").                       // state with the wrong wire type: unknown
		varint(3, uint64(runtimeapi.PodSandboxState_SANDBOX_NOTREADY)).
		varint(4, 1<<62).
		msg(5, entry(uid, "old")).
		msg(5, entry("other", "x")).
		msg(5, entry(uid, "new")). // replaces "old"
		msg(5, wire{}.str(2, "no key")).
		varint(99, 7). // unknown field
		msg(6, entry("io.kubernetes.container.hash", "ff"))
	container := wire{}.
		str(1, "c1").str(2, "sb1").
		msg(3, wire{}.str(1, "main").varint(2, 3)).
		msg(4, wire{}.str(1, "busybox").msg(2, entry("a", "b")).str(18, "busybox:1.36")).
		str(5, "sha256:abc").
		varint(6, uint64(runtimeapi.ContainerState_CONTAINER_EXITED)).
		varint(7, 5).
		msg(8, entry(uid, "u")).
		msg(9, entry("io.kubernetes.container.hash", "ff")).
		str(10, "image-id")
	for name, b := range map[string]wire{
		"sandbox":                   wire{}.msg(1, sandbox).msg(1, wire{}),
		"container":                 wire{}.msg(1, container).varint(2, 1),
		"negative state":            wire{}.msg(1, wire{}.str(1, "x").varint(3, uint64(1<<64-1))),
		"unknown state":             wire{}.msg(1, wire{}.str(1, "x").varint(6, 42)),
		"skipped invalid UTF-8":     wire{}.msg(1, wire{}.str(1, "x").msg(5, entry("other", "\xff"))),
		"labels not UTF-8":          wire{}.msg(1, wire{}.str(1, "x").msg(5, entry(uid, "\xff"))),
		"container labels not UTF8": wire{}.msg(1, wire{}.str(1, "x").msg(8, entry(uid, "\xff"))),
		"id not UTF-8":              wire{}.msg(1, wire{}.str(1, "\xff")),
		"group":                     wire{}.msg(1, protowire.AppendTag(protowire.AppendTag(wire{}.str(1, "x"), 50, protowire.StartGroupType), 50, protowire.EndGroupType)),
		"stray end group":           protowire.AppendTag(nil, 3, protowire.EndGroupType),
		"field number 0":            wire{0x02, 0x00},
		"field number too large":    protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3),
	} {
		t.Run(name, func(t *testing.T) { checkDecoders(t, b) })
	}

	got, err := criclient.DecodeListPodSandboxBrief(wire{}.msg(1, sandbox), criclient.ListKeys{Labels: []string{uid, "other", "absent"}, Annotations: []string{"io.kubernetes.container.hash"}})
	want := []criclient.BriefSandbox{{ID: "sb1", HasMetadata: true, Name: "second", Namespace: "ns", Attempt: 2, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, CreatedAt: 1 << 62,
		Labels: []string{"new", "x", ""}, Annotations: []string{"ff"}}}
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("DecodeListPodSandboxBrief: %v (-want +got):\n%s", err, diff)
	}
	for _, b := range []wire{
		wire{}.msg(1, wire{}.str(1, "x").msg(5, entry(uid, "\xff"))),
		wire{}.msg(1, wire{}.str(1, "x").msg(2, wire{}.str(1, "\xff"))),
	} {
		_, err := criclient.DecodeListPodSandboxBrief(b, podKeys)
		if !errors.Is(err, runtime.ErrInvalidResponse) || !strings.Contains(err.Error(), "item 0") || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("a kept value that is not UTF-8: %v, want ErrInvalidResponse naming the item and the problem", err)
		}
	}
}

// TestBriefBufferLeavesNothingStale: a list that reuses a buffer shows
// nothing of the items the last list put there: a foreign sandbox and its
// containers, listed alone where labelled ones were, have no pod labels
// and no hash.
func TestBriefBufferLeavesNothingStale(t *testing.T) {
	fake, c := serveFake(t, fakecri.Config{Images: []string{"busybox:1.36"}})
	populate(t, fake, 8)
	ctx := context.Background()
	var buf criclient.BriefBuffer
	all, err := c.ListPodSandboxBrief(ctx, nil, podKeys, nil)
	if err != nil {
		t.Fatal(err)
	}
	own, foreign := "", ""
	for _, s := range all {
		if s.Labels[0] == "" {
			foreign = s.ID
		} else {
			own = s.ID
		}
	}
	if foreign == "" || own == "" {
		t.Fatalf("want a labelled sandbox and a foreign one: %+v", all)
	}
	// The buffer's first slots hold a labelled sandbox and its labelled
	// containers, whatever order the runtime lists in.
	primed, err := c.ListPodSandboxBrief(ctx, &runtimeapi.PodSandboxFilter{Id: own}, podKeys, &buf)
	if err != nil || len(primed) != 1 || primed[0].Labels[0] == "" {
		t.Fatalf("prime with the labelled sandbox %s: %+v, %v", own, primed, err)
	}
	primedC, err := c.ListContainersBrief(ctx, &runtimeapi.ContainerFilter{PodSandboxId: own}, ctrKeys, &buf)
	if err != nil || len(primedC) == 0 || primedC[0].Labels[0] == "" {
		t.Fatalf("prime with the labelled sandbox's containers: %+v, %v", primedC, err)
	}
	full, err := c.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{Id: foreign})
	if err != nil {
		t.Fatal(err)
	}
	brief, err := c.ListPodSandboxBrief(ctx, &runtimeapi.PodSandboxFilter{Id: foreign}, podKeys, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(briefSandboxes(full, podKeys), brief); diff != "" {
		t.Errorf("the foreign sandbox listed into a used buffer (-full +brief):\n%s", diff)
	}
	fullC, err := c.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: foreign})
	if err != nil {
		t.Fatal(err)
	}
	briefC, err := c.ListContainersBrief(ctx, &runtimeapi.ContainerFilter{PodSandboxId: foreign}, ctrKeys, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(fullC) == 0 {
		t.Fatal("the foreign sandbox has no containers to compare")
	}
	if diff := cmp.Diff(briefContainers(fullC, ctrKeys), briefC); diff != "" {
		t.Errorf("the foreign containers listed into a used buffer (-full +brief):\n%s", diff)
	}
}
