package kube

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// realWait bounds every wait of the tests for a goroutine.
const realWait = 10 * time.Second

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type fakeVersioner struct {
	mu      sync.Mutex
	version string
	err     error
}

func (f *fakeVersioner) Version(context.Context, string) (*runtimeapi.VersionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return &runtimeapi.VersionResponse{RuntimeName: "fakecri", RuntimeVersion: f.version}, nil
}

type fakeResources struct{ capacity v1.ResourceList }

func (f fakeResources) Capacity() (v1.ResourceList, error) { return f.capacity.DeepCopy(), nil }

// health is a settable health function.
type health struct {
	mu  sync.Mutex
	err error
}

func (h *health) set(err error) { h.mu.Lock(); h.err = err; h.mu.Unlock() }
func (h *health) get() error    { h.mu.Lock(); defer h.mu.Unlock(); return h.err }

type fixture struct {
	client *fake.Clientset
	clock  *clocktesting.FakeClock
	health *health
	rt     *fakeVersioner
	faults *faults
	cfg    NodeConfig
}

func newFixture(objects ...runtime.Object) *fixture {
	f := &fixture{
		client: fake.NewClientset(objects...),
		clock:  clocktesting.NewFakeClock(t0),
		health: &health{},
		rt:     &fakeVersioner{version: "1.2.3"},
		faults: &faults{left: map[string]int{}, errOf: map[string]error{}},
	}
	f.client.PrependReactor("*", "*", f.faults.react)
	// The fake client gives objects no UID; the API server does.
	uids := 0
	f.client.PrependReactor("create", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if node, ok := a.(k8stesting.CreateAction).GetObject().(*v1.Node); ok && node.UID == "" {
			uids++
			node.UID = types.UID(fmt.Sprintf("uid-%d", uids))
		}
		return false, nil, nil
	})
	f.cfg = NodeConfig{
		Client:   f.client,
		Name:     "n1",
		Hostname: "host-1",
		Labels:   map[string]string{"example.com/role": "edge"},
		Taints:   []v1.Taint{{Key: "example.com/new", Effect: v1.TaintEffectNoSchedule}},
		Runtime:  f.rt,
		SystemInfo: func() (v1.NodeSystemInfo, error) {
			return v1.NodeSystemInfo{KernelVersion: "6.1.0", OSImage: "Test OS", BootID: "boot", MachineID: "machine", OperatingSystem: "linux", Architecture: "amd64"}, nil
		},
		Resources: fakeResources{v1.ResourceList{
			v1.ResourceCPU:              resource.MustParse("4"),
			v1.ResourceMemory:           resource.MustParse("8Gi"),
			v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		}},
		Reserved: v1.ResourceList{
			v1.ResourceCPU:    resource.MustParse("500m"),
			v1.ResourceMemory: resource.MustParse("1Gi"),
		},
		Health: f.health.get,
		Clock:  f.clock,
	}
	return f
}

func (f *fixture) node(t *testing.T) *Node {
	t.Helper()
	n, err := NewNode(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// count returns how many actions of verb on resource (and subresource, if
// not empty) the fake client recorded.
func (f *fixture) count(verb, res, sub string) int {
	c := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == res && (sub == "" || a.GetSubresource() == sub) {
			c++
		}
	}
	return c
}

// notify makes the fake client send on the returned channel for every
// verb on resource, before the default reaction.
func notify(c *fake.Clientset, verb, res string) <-chan struct{} {
	ch := make(chan struct{}, 1000)
	c.PrependReactor(verb, res, func(k8stesting.Action) (bool, runtime.Object, error) {
		ch <- struct{}{}
		return false, nil, nil
	})
	return ch
}

// faults injects errors into the fake client. Its reactor is installed
// first, so reactors added later (notify) still see every call.
type faults struct {
	mu    sync.Mutex
	left  map[string]int
	errOf map[string]error
}

func (fs *faults) react(a k8stesting.Action) (bool, runtime.Object, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	k := a.GetVerb() + " " + a.GetResource().Resource
	if fs.left[k] > 0 {
		fs.left[k]--
		return true, nil, fs.errOf[k]
	}
	return false, nil, nil
}

// failN makes the next n verbs on resource fail with err.
func (f *fixture) failN(verb, res string, n int, err error) {
	f.faults.mu.Lock()
	defer f.faults.mu.Unlock()
	k := verb + " " + res
	f.faults.left[k] += n
	f.faults.errOf[k] = err
}

func expect(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(realWait):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func expectNone(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("unexpected %s", what)
	default:
	}
}

// waitForWaiters waits until n timers wait on clk.
func waitForWaiters(t *testing.T, clk *clocktesting.FakeClock, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(realWait)
	for clk.Waiters() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers wait on the clock, want %d: %s", clk.Waiters(), n, what)
		}
		goruntime.Gosched()
	}
}

var errBoom = errors.New("boom")
