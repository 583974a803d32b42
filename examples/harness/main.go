// Command harness shows nodekit's pod runtime driving a pod on the
// in-memory fakecri runtime: an init container runs first, then an app
// container starts, and a container that crashes is restarted under the
// pod's restart policy. Each round observes the pod and syncs it, the way
// a node agent's pod worker does, and prints what it saw.
//
//	go run ./examples/harness
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

func main() {
	if err := run(context.Background(), os.Stdout, 6); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
}

func demoPod() *v1.Pod {
	env := func(kv ...string) []v1.EnvVar {
		var out []v1.EnvVar
		for i := 0; i < len(kv); i += 2 {
			out = append(out, v1.EnvVar{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default", UID: "demo-uid-1"},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			InitContainers: []v1.Container{{
				Name: "setup", Image: "busybox:1.36", Command: []string{"sh", "-c", "echo ready > /work/flag"},
				Env: env(fakecri.EnvExitCode, "0"),
			}},
			Containers: []v1.Container{
				{Name: "app", Image: "busybox:1.36", Command: []string{"httpd", "-f"}},
				{Name: "flaky", Image: "busybox:1.36", Command: []string{"sh", "-c", "exit 1"},
					Env: env(fakecri.EnvExitCode, "1")},
			},
		},
	}
}

func run(ctx context.Context, out *os.File, rounds int) error {
	fake, err := fakecri.New(fakecri.Config{})
	if err != nil {
		return err
	}
	logs, err := os.MkdirTemp("", "nodekit-harness-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(logs)
	rt, err := cri.New(cri.Config{RuntimeService: fake, ImageService: fake, PodLogsDir: logs})
	if err != nil {
		return err
	}
	pod := demoPod()
	fmt.Fprintf(out, "pod %s/%s on fakecri (restartPolicy %s)\n\n", pod.Namespace, pod.Name, pod.Spec.RestartPolicy)
	for i := 1; i <= rounds; i++ {
		status, err := rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			return err
		}
		result := rt.SyncPod(ctx, pod, status)
		var steps []string
		for _, s := range result.Steps {
			text := string(s.Action) + " " + s.Target
			if s.Err != nil {
				text += " (" + s.Reason + ")"
			}
			steps = append(steps, text)
		}
		if len(steps) == 0 {
			steps = []string{"nothing to do"}
		}
		fmt.Fprintf(out, "round %d: %s\n", i, strings.Join(steps, ", "))
		status, err = rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			return err
		}
		printStatus(out, status)
	}
	return rt.KillPod(ctx, pod, nil, nil)
}

func printStatus(out *os.File, status *runtime.PodStatus) {
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "  CONTAINER\tSTATE\tEXIT\tREASON\tRESTARTS\n")
	seen := map[string]bool{}
	for _, c := range status.ContainerStatuses {
		if seen[c.Name] {
			continue // older instances of a restarted container
		}
		seen[c.Name] = true
		exit := "-"
		if c.State == runtime.ContainerStateExited {
			exit = fmt.Sprint(c.ExitCode)
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%d\n", c.Name, c.State, exit, c.Reason, c.RestartCount)
	}
	w.Flush()
	fmt.Fprintln(out)
}
