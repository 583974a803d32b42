// Package server is the node's HTTP API, the kubelet's server without the
// kubelet: it serves what a node agent knows over HTTP or HTTPS, behind
// authentication and authorization when configured.
//
//	/healthz                    "ok", or 500 with the reason (Config.Healthy)
//	/pods                       the node's pods with statuses, a v1.PodList
//	/runningpods/               the runtime's running pods, a v1.PodList of
//	                            names, UIDs, container names and images
//	/metrics                    Prometheus text of Config.Metrics
//	/metrics/probes             Prometheus text of Config.ProbeMetrics, the
//	                            prober metrics (404 without it)
//	/configz                    {"kubeletconfig": Config.Configz()}
//	/stats/summary              the node's and pods' resource figures (the
//	                            kubelet's Summary API, stats/v1alpha1)
//	/metrics/resource           the same as the kubelet's resource metrics
//	/metrics/cadvisor           cAdvisor's container and machine metrics,
//	                            those a CRI runtime's stats give
//	/containerLogs/NS/POD/C     a container's log
//	/exec/NS/POD[/UID]/C        a command in a container (SPDY)
//	/attach/NS/POD[/UID]/C      a container's console (SPDY)
//	/portForward/NS/POD[/UID]   the pod's ports (SPDY)
//
// The read-only paths answer GET and HEAD (405 with an Allow header
// otherwise); exec, attach and portForward GET and POST. No path takes a
// body: one over HTTPConfig.MaxBodyBytes is answered 413, headers over
// MaxHeaderBytes 431, and Serve bounds each request by the read, write
// and idle timeouts of HTTPConfig; a followed log and a streaming session
// are exempt from the write timeout and last until either side ends them.
//
// # What the server asks of the node
//
// The consumer declares what it needs: a PodLister (the node's pods: a
// pod it does not list is answered 404 "pod \"NAME\" does not exist" on
// /containerLogs, "pod does not exist" on the streaming paths, as the
// kubelet answers), a RuntimeReader (runtime.Runtime implements it) for
// the running pods and each container's log file and state, and a
// StreamingRuntime (the CRI RuntimeService) for exec, attach and
// port-forward. The agent package passes itself, its runtime and its CRI
// service; agent.Agent.Handler is this package's Handler.
//
// # Container logs
//
// Logs are read from the CRI log file the runtime writes for the
// container (runtime.ContainerStatus.LogPath), in the CRI format, one
// entry a line:
//
//	2026-01-02T03:04:05.123456789Z stdout F a full line
//	2026-01-02T03:04:05.2Z stderr P a part of a line, continued by the next entry
//
// Partial (P) entries are joined into one line; a line that is not in
// the format is skipped, as the kubelet skips it. The query parameters
// are the kubelet's (v1.PodLogOptions): follow, previous (the
// instance the pod's API status names as the container's last terminated
// one, as the kubelet reads it: while the container waits out a restart
// back-off, the newest; from a PodStatusGetter, or the status Pods
// listed; without one, the instance before the newest), timestamps (each line prefixed by its
// RFC3339Nano time), tailLines (or the older "tail", "all" for every
// line; counted in entries of the file, as the kubelet counts them),
// limitBytes, sinceSeconds (against Config.Clock) and sinceTime. A value
// that does not parse is answered 400, one out of range or
// conflicting (sinceSeconds with sinceTime) 422; a container that never
// started, or a previous instance that does not exist, 400 with the
// kubelet's message. stream other than All is answered 400, as the
// kubelet answers it while its PodLogsQuerySplitStreams gate is off (its
// default). A copy holds one 32 KiB buffer whatever the length
// of a line or the limit.
//
// With follow, the log is streamed as the runtime appends to it, woken by
// an fsnotify watch of the log's directory, not by polling: a rotation
// (the file renamed and a new one created at the same path, as the
// kubelet's log manager and the runtime do) is read to the old file's end
// and then from the new file's start. The stream ends when the client
// goes, or when the container is seen stopped: at the first pause, and
// every Config.LogStateCheckPeriod (5s on Config.Clock) while it waits,
// so that a chatty container does not cost a runtime call per write. Rotated
// files (N.log.<time>, .gz) are not read, as the kubelet does not read
// them either.
//
// # Exec, attach and port-forward
//
// The server finds the running container (404 "container not found")
// or the pod's ready sandbox, asks the runtime for a streaming URL
// through the CRI's Exec, Attach or PortForward, and proxies the client's
// upgraded connection to it (k8s.io/apimachinery/pkg/util/proxy), as the
// kubelet does. The query is the kubelet's: command (repeated), input,
// output, error and tty ("1" is on; stdin, stdout and stderr are accepted
// too); with tty, stderr is merged into stdout. The upgraded connection
// is proxied as it comes, so the protocols are those of the runtime's
// streaming server: SPDY, and WebSocket up to v4.channel.k8s.io. kubectl's
// WebSocket (v5.channel.k8s.io, and port-forward's SPDY over WebSocket)
// goes through the API server, which turns it into SPDY toward the node,
// as it does for the kubelet: TestRunOnContainerd in examples/node
// runs logs, exec with stdin and port-forward that way, over SPDY and over
// WebSocket, on containerd. A stream the runtime drops ends the client's
// connection.
//
// # Authentication and authorization
//
// With Config.Authenticator set every request is authenticated first: a
// request it cannot authenticate is answered 401 "Unauthorized".
// NewAuthenticator accepts a client certificate signed by the CA of a
// file (user: the CommonName, groups: the Organizations), a bearer token
// checked by a TokenAuthenticator (a TokenReview webhook fits), and, only
// when AuthenticatorConfig.Anonymous is set, a request with no
// credentials as system:anonymous. Config.Authorizer then decides on the
// kubelet's attributes (RequestAttributes): verb from the method (get,
// create, update, patch, delete), resource nodes, name the node,
// subresource from the path: stats, metrics, log (/logs), pods (/pods,
// /runningpods), healthz, configz, and proxy for the rest,
// /containerLogs, /exec, /attach and /portForward among them. /pods,
// /healthz and /configz may also be reached with proxy. A denial is 403
// "Forbidden (user=U, verb=V, resource=nodes, subresource(s)=[...])", an
// authorizer's error 500. A SubjectAccessReview webhook fits Authorizer.
//
// # Stats
//
// Config.Stats gives the figures of /stats/summary (?only_cpu_and_memory
// as the kubelet's) and /metrics/resource (node_, pod_ and
// container_cpu_usage_seconds_total, _memory_working_set_bytes and
// _swap_usage_bytes, container_swap_limit_bytes,
// container_start_time_seconds, resource_scrape_error, by the kubelet's
// names, labels and help texts; each usage sample stamped with the time
// its figure was read, as metrics-server expects). CRIStats is the
// default the agent uses: each call asks the runtime for its ready
// sandboxes, running containers and ListPodSandboxStats (pods and their
// containers' CPU, memory, swap, writable layer, processes and network)
// and ImageFsInfo (the image filesystem), and reads the node's CPU
// (/proc/stat; its rate since the previous call), memory and swap
// (/proc/meminfo) and root filesystem (statfs). With
// CRIStatsConfig.VolumeStats (the agent sets it to its volume manager's
// VolumeStats) each pod also has its volumes' figures (pods[].volume),
// measured afresh at each call. There is no cadvisor: no system
// containers, no log figures, no accelerators.
// Measured with BenchmarkStatsSummary on fakecri, a summary of 1000 pods
// takes tens of milliseconds, half of it JSON encoding.
//
// /metrics/cadvisor is served when Config.Stats also implements
// ContainerStatsProvider (CRIStats does), on the main and the read-only
// handler, authorized as nodes/metrics. It carries the part of
// cAdvisor's metrics that CRI stats give, with cAdvisor's names, help
// texts, types and labels (container, id, image, name, namespace, pod):
// container_cpu_usage_seconds_total (cpu="total": no per-CPU figures),
// container_memory_usage_bytes, _working_set_bytes, _rss and _swap,
// container_fs_usage_bytes (device: the writable layer's filesystem, from
// /proc/self/mountinfo), container_start_time_seconds,
// container_network_{receive,transmit}_{bytes,errors}_total (per
// interface, on the pod), container_scrape_error, and machine_cpu_cores and
// machine_memory_bytes (labels machine_id, system_uuid, boot_id) with
// machine_scrape_error. The series are cAdvisor's containers: the node as
// the root container (id "/"), each pod as a series with no container,
// image or name, and each running container (name its container ID).
// Unlike cAdvisor's, id is the runtime's sandbox or container ID, not a
// cgroup path, which the CRI does not give; and there are no per-CPU,
// throttling, cache, disk I/O, spec_ or system-container series.
//
// TLSConfig builds the HTTPS configuration: certificate files, or a
// self-signed certificate for the node's names when none are given (as
// the kubelet makes one), and client certificates asked for (not
// required) when a client CA file is set.
//
// # Usage
//
//	srv, err := server.New(server.Config{
//		NodeName: "node-1", Pods: myPods, Runtime: rt, Streaming: criService,
//		Stats: stats, Authenticator: authn, Authorizer: authz,
//	})
//	tlsCfg, err := server.TLSConfig(server.TLSOptions{Hosts: []string{"node-1"}, Now: time.Now(), ClientCAFile: "/etc/kubernetes/pki/ca.crt"})
//	lis, err := net.Listen("tcp", ":10250")
//	err = srv.Serve(ctx, lis, tlsCfg) // until ctx ends
//
// /metrics/probes serves the prober metrics apart from /metrics, as the
// kubelet does (prober_probe_total, prober_probe_duration_seconds): the
// server serves whatever Config.ProbeMetrics gathers, so it should gather
// those alone. Unlike the kubelet's it has no process_start_time_seconds.
// It is on the read-only handler too, and is authorized as nodes/metrics.
//
// Not here: /stats/ other than summary, /logs (the node's own logs), /checkpoint, /run,
// /debug/pprof, /flagz and /statusz.
package server
