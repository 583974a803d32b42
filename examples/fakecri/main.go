// Command fakecri serves nodekit's in-memory CRI runtime on a unix socket,
// so any CRI client (crictl, a kubelet, nodekit's runtime/cri) can drive
// it:
//
//	go run ./examples/fakecri --listen unix:///tmp/fakecri.sock
//	crictl --runtime-endpoint unix:///tmp/fakecri.sock runp pod.json
//
// Containers are scripted with FAKECRI_* environment variables in their
// config (see runtime/fakecri). Every image can be pulled unless
// --registry limits the pullable images. On SIGINT, SIGTERM or SIGHUP it
// stops cleanly: it stops serving, removes its socket and exits 0.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nodekit/nodekit/runtime/fakecri"
)

func main() {
	var (
		listen   = flag.String("listen", "unix:///tmp/fakecri.sock", "unix socket to serve the CRI on")
		images   = flag.String("images", "", "comma-separated images present from the start")
		registry = flag.String("registry", "", "comma-separated images a pull can find (default: any)")
		podCIDR  = flag.String("pod-cidr", fakecri.DefaultPodCIDR, "range sandbox IPs come from")
	)
	flag.Parse()
	ctx, stop := signalContext()
	defer stop()
	if err := run(ctx, *listen, list(*images), list(*registry), *podCIDR); err != nil {
		fmt.Fprintln(os.Stderr, "fakecri:", err)
		os.Exit(1)
	}
}

// stopSignals are the signals that stop the command cleanly; SIGHUP (a
// closed terminal, a supervisor's hang-up) is one of them.
func stopSignals() []os.Signal { return []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP} }

// signalContext is cancelled by the first of stopSignals.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), stopSignals()...)
}

func list(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func run(ctx context.Context, listen string, images, registry []string, podCIDR string) error {
	rt, err := fakecri.New(fakecri.Config{Images: images, Registry: registry, PodCIDR: podCIDR})
	if err != nil {
		return err
	}
	lis, err := fakecri.ListenUnix(listen)
	if err != nil {
		return err
	}
	fmt.Printf("fakecri: serving the CRI on %s\n", listen)
	defer os.Remove(strings.TrimPrefix(listen, "unix://"))
	return fakecri.NewServer(rt, rt).Serve(ctx, lis)
}
