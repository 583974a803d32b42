package criclient_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/criclient"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// Dialling a CRI runtime (here fakecri served on a unix socket) and
// classifying the errors of its calls.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, _ := os.MkdirTemp("", "criclient-example-")
	defer os.RemoveAll(dir)
	endpoint := "unix://" + filepath.Join(dir, "cri.sock")

	fake, _ := fakecri.New(fakecri.Config{})
	lis, err := fakecri.ListenUnix(endpoint)
	if err != nil {
		fmt.Println(err)
		return
	}
	served := make(chan error, 1)
	go func() { served <- fakecri.NewServer(fake, fake).Serve(ctx, lis) }()

	client, err := criclient.Dial(ctx, endpoint)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(client.RuntimeName(), client.RuntimeVersion())

	_, err = client.ContainerStatus(ctx, "no-such-container", false)
	var ce *criclient.Error
	fmt.Println(errors.Is(err, runtime.ErrNotFound), errors.As(err, &ce) && ce.Op == "ContainerStatus")

	_ = client.Close(ctx)
	cancel()
	fmt.Println(<-served)
	// Output:
	// fakecri 0.1.0
	// true true
	// <nil>
}

// Wrap gives the errors of an in-process implementation the classes a
// *Client gives its own.
func ExampleWrap() {
	plain := status.Error(codes.Unavailable, "shutting down")
	err := criclient.Wrap("Status", "", plain)
	fmt.Println(err)
	fmt.Println(errors.Is(err, runtime.ErrUnavailable), status.Code(err))
	// Output:
	// cri: Status: unavailable: shutting down
	// true Unavailable
}
