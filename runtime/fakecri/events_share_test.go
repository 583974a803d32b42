package fakecri_test

import (
	"context"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/fakecri"
)

// An event carries every container's status of its pod, but a container
// that did not change is not described anew: events share its status,
// so a pod of n containers costs n pointers per event, not n statuses.
func TestEventsShareUnchangedContainerStatuses(t *testing.T) {
	e := newEnv(t, fakecri.Config{})
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ch := make(chan *runtimeapi.ContainerEventResponse, 100)
	established := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.rt.GetContainerEvents(ctx, ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(established) })
	}()
	<-established
	defer func() { cancel(); <-done }()

	sb, sbCfg := e.sandbox("p", false)
	a := e.start(sb, sbCfg, "a")
	next := func(id string, typ runtimeapi.ContainerEventType) *runtimeapi.ContainerEventResponse {
		t.Helper()
		for i := 0; i < 10; i++ {
			r := <-ch
			if r.GetContainerId() == id && r.GetContainerEventType() == typ {
				return r
			}
		}
		t.Fatalf("no %v event of %s among the next 10", typ, id)
		return nil
	}
	find := func(r *runtimeapi.ContainerEventResponse, id string) *runtimeapi.ContainerStatus {
		for _, s := range r.GetContainersStatuses() {
			if s.GetId() == id {
				return s
			}
		}
		t.Fatalf("the %v event of %s does not describe %s", r.GetContainerEventType(), r.GetContainerId(), id)
		return nil
	}
	first := find(next(a, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT), a)
	b := e.start(sb, sbCfg, "b")
	ev := next(b, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	if find(ev, a) != first {
		t.Error("an event describes an unchanged container anew")
	}
	if got := find(ev, b).GetState(); got != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("the started container's status in its event: %v", got)
	}
}
