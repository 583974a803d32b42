package runtime_test

import (
	"errors"
	"fmt"

	"github.com/nodekit/nodekit/runtime"
)

func ExampleParseContainerID() {
	id, err := runtime.ParseContainerID("containerd://0123abcd")
	fmt.Println(id.Type, id.ID, err)
	_, err = runtime.ParseContainerID("0123abcd")
	fmt.Println(errors.Is(err, runtime.ErrInvalidArgument))
	// Output:
	// containerd 0123abcd <nil>
	// true
}

func ExampleStatus_Ready() {
	st := &runtime.Status{Conditions: []runtime.Condition{
		{Type: runtime.RuntimeReady, Status: true},
		{Type: runtime.NetworkReady, Status: false, Reason: "NetworkPluginNotReady", Message: "cni config uninitialized"},
	}}
	err := st.Ready()
	fmt.Println(err)
	fmt.Println(errors.Is(err, runtime.ErrUnavailable))
	// Output:
	// runtime: NetworkReady is false: NetworkPluginNotReady: cni config uninitialized: unavailable
	// true
}

func ExamplePodStatus_FindContainerStatus() {
	st := &runtime.PodStatus{ContainerStatuses: []*runtime.ContainerStatus{
		{Name: "app", State: runtime.ContainerStateRunning, RestartCount: 2},
		{Name: "app", State: runtime.ContainerStateExited, RestartCount: 1},
	}}
	c := st.FindContainerStatus("app")
	fmt.Println(c.State, c.RestartCount, len(st.ContainerStatusesByName("app")))
	// Output: running 2 2
}
