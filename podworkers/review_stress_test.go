package podworkers_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podworkers"
	"github.com/nodekit/nodekit/runtime"
)

// checker is a handler that fails or panics at random and checks the
// lifecycle: one call at a time per pod, and never a sync once the pod's
// termination began, nor anything once it is terminated.
type checker struct {
	mu       sync.Mutex
	rnd      *rand.Rand
	inFlight map[types.UID]bool
	phase    map[types.UID]int // 0 syncing, 1 terminating, 2 terminated, 3 done
	static   types.UID         // the static pod whose steps run, until it is done
	errs     []string
}

func isStaticUID(uid types.UID) bool { return uid[0] == 's' }

func (c *checker) enter(uid types.UID, kind int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inFlight[uid] {
		c.errs = append(c.errs, fmt.Sprintf("%s: concurrent calls", uid))
	}
	c.inFlight[uid] = true
	if kind < c.phase[uid] {
		c.errs = append(c.errs, fmt.Sprintf("%s: step %d after phase %d", uid, kind, c.phase[uid]))
	}
	if c.phase[uid] == 3 {
		c.errs = append(c.errs, fmt.Sprintf("%s: step %d after the pod was done", uid, kind))
	}
	if isStaticUID(uid) {
		if c.static != "" && c.static != uid {
			c.errs = append(c.errs, fmt.Sprintf("%s: step %d while static pod %s of the same name runs", uid, kind, c.static))
		}
		c.static = uid
	}
	return c.rnd.Intn(4) == 0
}

func (c *checker) leave(uid types.UID, kind int, failed bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight[uid] = false
	if failed {
		if c.rnd.Intn(2) == 0 {
			panic("injected")
		}
		return errors.New("injected")
	}
	switch kind {
	case 1:
		c.phase[uid] = 2
	case 2:
		c.phase[uid] = 3
		if c.static == uid {
			c.static = ""
		}
	}
	return nil
}

func (c *checker) SyncPod(_ context.Context, _ podworkers.UpdateType, pod *v1.Pod, _ *runtime.PodStatus) (bool, error) {
	failed := c.enter(pod.UID, 0)
	if err := c.leave(pod.UID, 0, failed); err != nil {
		return false, err
	}
	c.mu.Lock()
	terminal := c.rnd.Intn(10) == 0
	if terminal {
		c.phase[pod.UID] = 1
	}
	c.mu.Unlock()
	return terminal, nil
}

func (c *checker) terminating(uid types.UID) error {
	c.mu.Lock()
	if c.phase[uid] == 0 {
		c.phase[uid] = 1
	}
	c.mu.Unlock()
	failed := c.enter(uid, 1)
	return c.leave(uid, 1, failed)
}

func (c *checker) SyncTerminatingPod(_ context.Context, pod *v1.Pod, _ *runtime.PodStatus, _ int64) error {
	return c.terminating(pod.UID)
}

func (c *checker) SyncTerminatingRuntimePod(_ context.Context, p *runtime.Pod) error {
	if err := c.terminating(p.ID); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.phase[p.ID] = 3
	return nil
}

func (c *checker) SyncTerminatedPod(_ context.Context, pod *v1.Pod, _ *runtime.PodStatus) error {
	failed := c.enter(pod.UID, 2)
	return c.leave(pod.UID, 2, failed)
}

// Random updates, kills, resyncs and housekeeping from several goroutines,
// with failing and panicking steps: every pod no longer desired ends up
// finished and forgotten, including static pods that share a name, and
// no lifecycle rule is broken on the way.
func TestConcurrentLifecyclesAllFinish(t *testing.T) {
	for seed := int64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { concurrentLifecycles(t, seed) })
	}
}

func concurrentLifecycles(t *testing.T, seed int64) {
	c := &checker{rnd: rand.New(rand.NewSource(seed)), inFlight: map[types.UID]bool{}, phase: map[types.UID]int{}}
	clk := clocktesting.NewFakeClock(t0)
	pw, err := podworkers.New(podworkers.Config{Handler: c, Cache: cache{}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pw.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	const n = 40
	pods := make([]*v1.Pod, n)
	for i := range pods {
		if i%4 == 0 {
			pods[i] = staticPod(fmt.Sprint("s", i), "v1") // 10 static pods, one name
		} else {
			pods[i] = pod(fmt.Sprint("p", i), "v1")
		}
	}
	// Housekeeping forgets finished pods, which may then start afresh: it
	// runs alone, and resets the checker for the pods it forgot.
	var house sync.RWMutex
	housekeeping := func(desired []*v1.Pod) map[types.UID]podworkers.State {
		house.Lock()
		defer house.Unlock()
		states := pw.SyncKnownPods(desired)
		c.mu.Lock()
		for uid := range c.phase {
			if _, ok := states[uid]; !ok {
				delete(c.phase, uid)
			}
		}
		c.mu.Unlock()
		return states
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(seed*10 + int64(g)))
			for i := 0; i < 300; i++ {
				p := pods[r.Intn(n)]
				op := r.Intn(7)
				if op == 6 {
					var desired []*v1.Pod
					for _, q := range pods {
						if r.Intn(3) != 0 {
							desired = append(desired, q)
						}
					}
					housekeeping(desired)
					continue
				}
				house.RLock()
				switch op {
				case 0:
					pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
				case 1:
					pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodUpdate, Pod: p})
				case 2:
					pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: p})
				case 3:
					g := int64(r.Intn(40))
					pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: p, Kill: &podworkers.KillPodOptions{GracePeriodOverride: &g}})
				case 4:
					pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, RunningPod: &runtime.Pod{ID: types.UID(fmt.Sprint("orphan", r.Intn(5))), Name: "o", Namespace: "ns"}})
				case 5:
					pw.Due(clk.Now())
				}
				house.RUnlock()
				goschedHelper()
			}
		}(g)
	}
	wg.Wait()
	// Nothing is desired any more: drive every pod to its end.
	deadline := time.Now().Add(20 * time.Second)
	for {
		states := housekeeping(nil)
		if len(states) == 0 {
			break
		}
		if time.Now().After(deadline) {
			var s []string
			for uid, st := range states {
				s = append(s, fmt.Sprintf("%s=%v finished=%v", uid, st, pw.ShouldPodContentBeRemoved(uid)))
			}
			t.Fatalf("pods never finished: %v", s)
		}
		if clk.HasWaiters() {
			clk.Step(time.Minute)
		}
		goschedHelper()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.errs {
		t.Error(e)
	}
}
