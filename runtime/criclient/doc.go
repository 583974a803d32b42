// Package criclient is a CRI v1 client over gRPC on a unix socket.
//
// Dial connects to a container runtime (containerd, CRI-O, or
// runtime/fakecri served by fakecri.Server) and returns a *Client that
// implements the standard interfaces of k8s.io/cri-api/pkg/apis,
// RuntimeService and ImageManagerService, so it can be handed to anything
// written against them: runtime/cri.New, runtime/critest, pleg's evented
// generator, probes' exec prober.
//
// What it adds to the generated gRPC stubs:
//
//   - Dial checks the endpoint before connecting (a unix socket at an
//     absolute path) and calls Version, so a missing socket, a peer that
//     does not serve the CRI, or one that does not answer within the
//     connect timeout (DefaultConnectTimeout, 10 s) fails at once with an
//     error naming the endpoint.
//   - Every call but PullImage, ExecSync and GetContainerEvents is bounded
//     by the per-call timeout (DefaultTimeout, 2 min, the kubelet's
//     --runtime-request-timeout); StopContainer gets its grace period on
//     top, ExecSync its command timeout. Messages may be 16 MiB
//     (DefaultMaxMsgSize), the kubelet's limit.
//   - The connection's flow-control windows are fixed (4 MiB per call,
//     16 MiB in all), not sized by gRPC's bandwidth estimate, which pings
//     the runtime after responses: a round trip at every relist of an
//     idle node, for nothing on a local socket.
//   - A connection lost to a runtime that restarts is made again with the
//     kubelet's CRI client's back-off, 100ms growing to 3s (each attempt
//     given at least 5 s to connect), not gRPC's default, which grows to
//     2 minutes; calls in between fail with runtime.ErrUnavailable
//     (TestClientReconnectsWithinTheKubeletsBackOff).
//   - Every error is an *Error that names the CRI method and the object,
//     keeps the gRPC status, and matches nodekit's error classes with
//     errors.Is (runtime.ErrNotFound, runtime.ErrUnavailable,
//     runtime.ErrDeadlineExceeded, ...; see Error). A response that lacks
//     what the CRI promises (no sandbox ID, no status) is an error, not a
//     nil to dereference later.
//   - ExecSync returns a non-zero exit as a k8s.io/utils/exec
//     CodeExitError with the output, as the upstream client does.
//
// DialWait is Dial for a runtime that may not be up yet, as a node agent
// started before its runtime needs: it logs and waits with back-off
// (100ms doubling to 5s) while the socket is missing or the runtime
// unavailable, and fails at once on what waiting cannot mend.
//
// Wrap and IsNotFound apply the same classification to errors of any
// other implementation of the interfaces (an in-process fakecri returns
// plain gRPC status errors), and FromSandbox, FromContainer,
// FromSandboxStatus, FromContainerStatus (and FromBriefSandbox,
// FromBriefContainer for the lists in brief) convert CRI messages into
// nodekit's runtime types, refusing malformed answers with
// runtime.ErrInvalidResponse. They copy labels and annotations without
// interpreting them: what the kubelet's labels mean is runtime/cri's
// business. FromContainerStatus also carries the resources the runtime
// reports the container runs with (FromContainerResources: the kubelet's
// conversion of CFS quota and period, CPU shares and memory limit into
// CPU limit, CPU request and memory limit) and the process's user.
//
// Lists in brief: ListPodSandboxBrief and ListContainersBrief (the
// BriefLister interface, and functions of the same names that fall back to
// the full calls for any other RuntimeService) make the same calls but
// decode the answer straight from the protobuf wire format (protowire),
// through a codec of their own on the same connection (gRPC's ForceCodecV2
// call option, marked experimental by gRPC), into small BriefSandbox and
// BriefContainer values: IDs, state, creation time, metadata name and
// attempt (and a sandbox's namespace), image, and only the labels and
// annotations named in ListKeys. The maps of every other label and
// annotation, most of the bytes and nearly all the decoding work of a
// list, are skipped unread. For what they keep they follow the generated
// decoder's rules (last map entry wins, repeated messages merge, wrong
// wire types and unknown fields skipped, strings UTF-8); what they skip is
// checked only for its wire structure, so a corrupt skipped annotation
// does not fail the list as it fails the full decode. Whatever they are
// given, they return values or an error naming the call and the item that
// matches runtime.ErrInvalidResponse, never a panic
// (TestBriefListsMatchFullLists, TestBriefDecodersOnCorruptInput,
// FuzzBriefDecoders). A response that gRPC received in several frames is
// decoded from a buffer the Client keeps (up to 4 MiB) instead of a fresh
// zeroed one, and the IDs, names and values a list decodes are the strings
// of earlier lists where they are the same (the Client keeps at most a few
// lists' worth), so a list of unchanged pods allocates next to nothing.
// A caller that lists again and again passes a BriefBuffer, and each list
// decodes its items into the memory of the last one's
// (TestBriefBufferLeavesNothingStale).
// runtime/cri lists pods (and its garbage collector lists) this way, so
// that the generic PLEG's relist every second does not decode every label
// and annotation of the node.
//
// Error messages begin with "cri:", the protocol's name, as they did when
// this client lived in runtime/cri, so logs and alerts that match them
// keep working.
//
// # What it leaves out
//
// Only unix sockets (no TCP, no Windows named pipes); no TLS, which the
// CRI does not use; no retries: a failed call is the caller's to retry,
// since only the caller knows whether it is idempotent. The streaming
// calls (Exec, Attach, PortForward) return the runtime's URL; serving the
// stream is the caller's work.
//
// # Why not k8s.io/cri-client
//
// The upstream CRI client pulls in component-base, OpenTelemetry and
// klog's global logger, and returns bare gRPC status errors; Client is a
// thin layer over the generated gRPC stubs that does neither. Its cost
// over the raw stub is measured by BenchmarkCallOverhead:
//
//	go test -run '^$' -bench CallOverhead -benchmem ./runtime/criclient/
//
// # Usage
//
//	client, err := criclient.Dial(ctx, "unix:///run/containerd/containerd.sock")
//	if err != nil {
//		return err // names the endpoint and what went wrong
//	}
//	defer client.Close(ctx)
//	if _, err := client.ContainerStatus(ctx, id, false); errors.Is(err, runtime.ErrNotFound) {
//		// gone
//	}
//
// Client is safe for concurrent use; it starts no goroutine of its own
// beyond gRPC's, which end with Close.
package criclient
