// Package e2e holds the end-to-end tests: against a real containerd +
// runc, the CRI conformance suite, the pod runtime's sync semantics, the
// probes, volumes (an emptyDir shared by two containers, a read-only
// hostPath, a Memory emptyDir as a tmpfs), resource limits (a container
// over its memory limit reported OOMKilled with exit code 137; a pod
// writing past its emptyDir's sizeLimit evicted by the agent's eviction
// manager with the kubelet's message), the node server (logs, exec
// through containerd's streaming server, stats), and the standalone agent
// running the sample manifests; and crictl against fakecri. They need the
// environment that hack/e2e/run.sh prepares (NODEKIT_E2E_ENDPOINT,
// NODEKIT_E2E_IMAGE, NODEKIT_CRICTL) and skip without it; run them with
// "make e2e".
package e2e
