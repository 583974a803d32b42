// Package cri implements nodekit's pod-level runtime.Runtime over the
// CRI: New returns a *Runtime that drives any implementation of the
// standard k8s.io/cri-api/pkg/apis interfaces (RuntimeService,
// ImageManagerService) with the kubelet's pod semantics: a
// *criclient.Client dialled to containerd or CRI-O, an in-memory
// *fakecri.Runtime, or cri-api's testing fakes.
//
// The gRPC client is package runtime/criclient (dial, per-call timeouts,
// errors classified for errors.Is, conversion of CRI messages); this
// package uses its Wrap and IsNotFound on the errors of whatever services
// it is given, so they classify alike. Dial and Client are kept here as
// a shorthand for criclient.Dial and criclient.Client, so code written
// when the client lived in this package compiles unchanged; new code
// imports criclient.
//
// # Pod sync
//
// SyncPod follows the kubelet's kuberuntime manager (pkg/kubelet/kuberuntime).
// ComputePodActions, a pure function of the pod spec, the observed
// runtime.PodStatus and the probes' results, decides what to do; see its
// doc for the rules: sandbox (re)creation and attempts, init containers
// run in order but judged from the last one backwards (a later init
// container or sidecar that has run proves the earlier ones ran, so one
// the runtime no longer shows is not run again), only in the current
// sandbox, sidecars (restartable init containers) gated on their startup
// probes and restarted whatever the restart policy, a regular init
// container that failed or is in an unknown state failing the pod under
// restartPolicy Never, ephemeral containers (started once in the running
// sandbox, even before the pod has initialized, never restarted, in the
// process namespace of their targetContainerName when they name one),
// restart policies (the pod's, and per container its own restartPolicy
// and restartPolicyRules, the kubelet's ContainerRestartRules feature),
// restarts of all containers (a rule with the action RestartAllContainers,
// the kubelet's RestartAllContainersOnContainerExits feature), spec-hash
// changes, liveness and startup failures, unknown states. SyncPod then
// carries the actions out and reports each step with the kubelet's
// waiting reason on failure.
//
//   - Restart of all containers: when the newest instance of an init,
//     sidecar or regular container exited with a code that its first
//     matching restart rule gives the action RestartAllContainers, the
//     round does only this: every instance of every init and regular
//     container is removed, one that may still run first stopped without
//     its preStop hook and with a 2 s timeout (a Killing event), the
//     instances that triggered it last; each removal is a step with
//     action runtime.ActionRemoveContainer (RemoveContainerError on
//     failure), and the first failure ends the round. The sandbox,
//     ephemeral containers and logs stay. The next round finds no
//     container and starts the pod as new, restart back-off included
//     (there is no exited instance to judge it from): init containers in
//     order, sidecars, regular containers, whatever the restart policies.
//     A killed container's own exit code is never looked at, as it is
//     removed, so the restart happens once per triggering exit, not in a
//     loop. The caller is expected to sync the pod again at once after a
//     round with removals, as the kubelet does.
//   - Restart counts and log files: a container's restart count, and the
//     number of its log file, are one more than its newest instance's;
//     when the runtime has none (after a restart of all containers, or
//     when the runtime lost its state) they go on from the highest N.log
//     left in the container's log directory, as the kubelet does, so the
//     earlier logs are kept.
//   - Restart back-off (CrashLoopBackOff): per pod, container and
//     SpecHash, so a changed spec starts afresh; the first restart is
//     immediate, then 10 s doubling to 5 min, forgotten once a container
//     ran for 10 min (Config.CrashLoopBackOff). As in the kubelet, it is
//     judged from the newest exited instance in the observation the sync
//     started from, so a container killed for a failed liveness or
//     startup probe goes through it too: its restart waits while the
//     instance before it exited less than the current delay ago. A
//     restart refused by the back-off fails its step with a
//     *runtime.BackOffError that says when the back-off ends, so the pod
//     workers retry the sync then.
//   - Images: before a container is created, Config.Images (by default
//     the image manager of package runtime/cri/images) makes sure its
//     image is present: pull policy (Always for :latest or no tag, else
//     IfNotPresent, unless the spec says), pull secrets turned into CRI
//     auth, ErrImagePull then ImagePullBackOff (10 s doubling to 5 min,
//     Config.ImagePullBackOff), ErrImageNeverPull, InvalidImageName;
//     pulls serialized unless Config.MaxParallelImagePulls allows more,
//     ended with the caller's context and cut off after
//     Config.ImagePullTimeout (30 min). The waiting reason it returns is
//     the step's reason. See that package for the rules.
//   - Container config: command and args with $(VAR) expansion ($$ is an
//     escaped $; unknown names stay as written), env and envFrom from
//     configMaps and secrets (Config.Objects; optional references),
//     service environment variables from Config.Services (FOO_SERVICE_HOST,
//     FOO_SERVICE_PORT, FOO_SERVICE_PORT_<PORT NAME>, and the Docker link
//     variables FOO_PORT, FOO_PORT_<port>_<PROTO> with _PROTO, _PORT and
//     _ADDR) for every service of the pod's namespace with a cluster IP
//     (not for enableServiceLinks: false) and always for the "kubernetes"
//     service of the default namespace; the container's own variables win
//     over them and $(VAR) in env values sees them after its own. Without
//     Config.Services there are none, as with a kubelet without an API
//     server. The
//     downward API (fieldRef, resourceFieldRef with divisors; a cpu,
//     memory or ephemeral-storage limit the container does not set is the
//     pod-level limit, else Config.NodeAllocatable's), working dir, CPU shares
//     from requests, CFS quota from limits, the memory limit, the OOM
//     score of the pod's QoS class, the security context (run as
//     user/group, runAsNonRoot enforced against runAsUser or the image's
//     user, privileged, capabilities, read-only root, no-new-privileges,
//     seccomp, the default masked and read-only /proc paths), volume
//     mounts from Config.Volumes with subPath and subPathExpr confined to
//     the volume (no absolute paths, no "..", no symlink escapes):
//     resolved with openat2 RESOLVE_BENEATH (or, without openat2, an
//     O_NOFOLLOW walk that refuses every symlink), missing directories
//     made with mkdirat beneath their verified parent so a refused subPath
//     creates nothing outside, with the volume's own mode as the kubelet
//     gives them (an emptyDir's 0777 and fsGroup setgid bit, so a
//     container of any user can write there), and the runtime given the canonical path
//     read back from the descriptor (see below for how that differs from
//     the kubelet), the
//     termination message file, the kubelet's labels and annotations and
//     log layout (<PodLogsDir>/<namespace>_<name>_<uid>/<container>/<n>.log).
//   - /etc/hosts, the kubelet's: every container (init and ephemeral ones
//     too) gets the pod's hosts file, <PodsDir>/<uid>/etc-hosts, mounted
//     writable at /etc/hosts, unless one of its volumeMounts is at
//     /etc/hosts, or the pod is on the pod network and has no IP. On the
//     pod network the file is "# Kubernetes-managed hosts file.", the
//     localhost lines, then each pod IP with the pod's FQDN and hostname
//     (the hostname alone without a subdomain); on the host network it is
//     a header line and the node's file (Config.NodeHostsFile); both end
//     with the pod's hostAliases under "# Entries added by HostAliases.".
//     It is written, in place, before each container is created.
//   - Sandbox config: hostname (hostnameOverride, else hostname, else the
//     pod name, cut to 63 characters without a trailing '-' or '.'; under
//     setHostnameAsFQDN with a subdomain, the FQDN
//     <hostname>.<subdomain>.<namespace>.svc.<ClusterDomain>, at most 64
//     characters; a hostname, subdomain or hostnameOverride that is not a
//     valid DNS name is an error naming the field), port
//     mappings, host network/PID/IPC, privileged when any init, regular or
//     ephemeral container is, sysctls, seccomp, DNS from dnsPolicy and dnsConfig (ClusterFirst
//     falls back to the node's resolver when Config.ClusterDNS is empty,
//     with a MissingClusterDNS event), and the cgroupfs parent
//     <root>/<qos>/pod<uid> when Config.CgroupRoot is set.
//   - Pod cgroups (Config.CgroupRoot, the kubelet's cgroupsPerQOS with
//     the cgroupfs driver): the pod's cgroup is created before its
//     sandbox, with the kubelet's settings (CPU shares from the pod's
//     effective requests; the CFS quota and memory limit from its limits
//     for a guaranteed pod, and for a burstable one where every container
//     or spec.resources sets them; the minimum shares for a best-effort
//     pod), on cgroup v1 or v2. KillPod removes it once nothing of the pod
//     runs; GarbageCollect removes those of pods that are gone. The QoS
//     tiers get the kubelet's CPU shares: best-effort 2, burstable those
//     of the sum of its pods' CPU requests, kept as pod cgroups are
//     created, resized and removed. Pods whose cgroups an earlier run
//     made count, until synced, with the request their shares stand
//     for. A failed write is logged, as the kubelet does, not a failed
//     sync, and tried again at the next change or GarbageCollect.
//   - In-place resize: a running container (regular, sidecar, or init
//     container still running) whose CPU or memory request or limit, as
//     its spec gives them, differ from those it was started or last
//     resized with (kept in memory; after a restart, the CPU shares and
//     quota and memory limit the runtime reports) is updated with
//     UpdateContainerResources, unless its resizePolicy for a changed
//     resource is RestartContainer: it is then killed ("Container <name>
//     resize requires restart") and started again. A limit the container
//     does not set is the pod-level one (spec.resources). The pod cgroup
//     is raised before the containers and lowered after them, decreases
//     first; a memory limit is never lowered below what the pod (for its
//     cgroup) or the container (as the runtime reports) uses: the
//     step (runtime.ActionResize, reason ResizePodInPlaceError) fails
//     with the kubelet's "cannot decrease memory limits: ..." and nothing
//     changes. A failed resize does not stop the sync. The hash that
//     restarts a changed container (SpecHash) leaves requests and limits
//     out. GetPodStatus adds to what the runtime reports of a running
//     container's resources the memory request it was given;
//     ResizeInProgress (runtime.ResizeChecker) and PodCgroupResources
//     (runtime.PodCgroupReader) tell a caller where a resize stands.
//   - Hooks: postStart (exec, HTTP GET, sleep) after the start; a failure
//     kills the container and reports PostStartHookError. preStop runs
//     inside the grace period, which is shortened by the time it took:
//     the hook is given up once the grace period is over (an exec hook
//     gets it as its exec timeout, so the runtime ends the command).
//     postStart has no limit of its own, as with the kubelet: it runs
//     until it ends or the sync's context does.
//     An HTTP hook goes to the handler's host, else the pod's first IP
//     (the one the sync saw, else the runtime's for the pod's newest ready
//     sandbox; the node's for a host-network pod); a pod with no IP fails
//     the hook, as with the kubelet. An orphan's HTTP preStop hook runs
//     from what was recorded on its container: the pod UID label and the
//     ports annotation (io.kubernetes.container.ports), for named ports.
//     As with the kubelet, an HTTP hook uses the handler's scheme (HTTPS
//     without certificate checks), sends User-Agent kube-lifecycle/1.37
//     and Accept */* unless the handler sets them, follows redirects only
//     to the same host name, and fails only when no answer comes: any
//     status code is a success. An HTTPS hook that a plain HTTP server
//     answers is sent again over HTTP without its Authorization header;
//     when that works the hook succeeded, with a LifecycleHTTPFallback
//     Warning event (the kubelet also counts these in
//     kubelet_lifecycle_handler_http_fallbacks_total; runtime/cri has no
//     metrics of its own and does not).
//
// KillPod starts stopping every container at once, preStop hooks
// included, then stops the sandboxes. The grace period is the deletion
// grace period, else the spec's, else 30 s (at least 2 s); an override can
// only shorten it. As in the kubelet, a sidecar waits, within its grace
// period, until the regular containers and the sidecars after it have
// exited, and is then stopped with what is left of the period (less its
// preStop hook and the wait, in whole seconds, at least 2 s): sidecars
// stop in reverse start order, after what they serve, and a pod's
// termination takes one grace period, not one per sidecar. A container
// whose pod spec is gone still gets its recorded grace period and preStop
// hook. Given no running pod, KillPod asks the runtime for the pod's
// sandboxes and containers with a label selector on its UID, so killing
// many pods at once costs one small lookup each, not a list of the whole
// node each (BenchmarkKillPodLookup: at 1000 pods on fakecri, 73
// allocations where listing the node took 22,000).
//
// GetPods (the generic PLEG's relist, every second) asks for the
// sandboxes and the containers at once, so a relist waits for one round
// trip to the runtime, not two, and the agent's threads wake less often
// for it: the idle 100-pod agent of hack/benchagent (generic PLEG) woke
// 28-29 times a second instead of 38-45 (TestListsSandboxesAndContainersAtOnce
// gives the runtime both calls before it answers either). It lists in brief: it
// needs of each sandbox and container only its IDs, state, creation time,
// name, image, the pod UID, name and namespace labels and the container
// hash annotation, so it asks for those with criclient.ListKeys. A
// *criclient.Client decodes just them from the wire and skips every other
// label and annotation undecoded (criclient.BriefLister); any other
// RuntimeService is listed in full and projected, with the same result
// (TestGetPodsOverGRPCMatchesInProcess). The pods and their containers
// are allocated in two blocks, the brief values are decoded into the
// memory of the last relist's (a criclient.BriefBuffer), and the Client
// hands out again the strings it decoded in earlier lists.
// BenchmarkGetPods, the agent's side of the two list calls against canned
// fakecri answers over a unix socket, at 100 static pods: 528 allocations
// and 67 kB a relist, where the full decode took 12,765 and 575 kB (1000
// pods: 2,370 and 0.5 MB, from 124,400 and 5 MB); before the buffer and
// with the pods' block sized for one pod per object, 107 kB (0.9 MB):
//
//	go test -run '^$' -bench 'GetPods$' -benchmem ./runtime/cri/
//
// VisitPods (runtime.PodVisitor), which the generic PLEG relists through,
// lists the same pods into the memory of its last list and lends each to
// a function, so that a relist allocates no pod and no container:
// BenchmarkVisitPods, the same calls, 319 allocations and 21 kB at 100
// pods, 334 and 28 kB at 1000, nearly all of them gRPC's own
// (TestVisitPodsMatchesGetPods lists through both while pods come,
// change and go):
//
//	go test -run '^$' -bench 'VisitPods$' -benchmem ./runtime/cri/
//
// GetPodStatus reports every sandbox and container instance newest first,
// with the runtime's exit reasons (Completed, Error, OOMKilled, and
// containerd's StartError where dockershim used to say
// ContainerCannotRun) and the termination message (at most 4 KiB of its
// file), or under FallbackToLogsOnError after a failure with no message
// the tail of the log: its last 80 lines, at most 2048 bytes, partial CRI
// lines joined. The log is read from its end in 8 KiB blocks, never more
// than 64 KiB of it, so a status costs the same for a huge log; a line
// cut by that window is left out.
//
// GarbageCollect (runtime.GarbageCollector) removes dead containers beyond
// a per-pod-container and a node limit, older than a minimum age, oldest
// first, with their logs; all of a gone pod's containers, sandboxes and
// log directory; and sandboxes that are neither ready nor in use. A log
// file or directory whose path, built from the runtime's labels and log
// paths, does not lie under Config.PodLogsDir (a "../" namespace, a name
// with a slash, a log directory elsewhere or behind a symlink out of it)
// is left in place and logged. It lists in brief too, keeping only the
// pod UID label, so a collection that removes nothing, the usual minute,
// decodes no label map (TestGarbageCollectOverGRPC).
//
// LogRotator rotates the logs of running containers as the kubelet's
// container log manager does: every Period (10 s, the kubelet's
// containerLogMonitorInterval) it lists the running containers of a CRI
// RuntimeService into a queue that holds each container once, and
// MaxWorkers goroutines (1, containerLogMaxWorkers) take them from it, so
// a slow rotation holds up neither the next listing nor, with more than
// one worker, the other containers, and no container is rotated by two
// workers at once. A log that reached MaxSize (10Mi) is
// renamed to "<log>.<YYYYMMDD-hhmmss>" of the clock and the runtime asked
// to ReopenContainerLog; if it cannot, the rename is undone. Before that
// the older rotated files are gzipped (the newest rotated file is the only
// plain one) and the oldest removed, so at most MaxFiles (5) files remain,
// the live one included. A log that is missing is reopened. Lines that the
// runtime writes while the log is renamed go to the rotated file until it
// reopens the log, none lost (TestLogRotatorUnderAFastWriter). A log the
// runtime reports outside LogRotatorConfig.LogsDir (the runtime's
// PodLogsDir), lexically or behind a symlink out of it, is neither rotated
// nor pruned, and its check fails saying so
// (TestLogRotatorLeavesLogsOutsideLogsDir).
//
// A pod's namespace, name and UID and its containers' names make paths on
// the node (its log directory, its container logs). SyncPod refuses, with
// an error naming the field, a pod whose namespace is not a DNS-1123 label
// (or empty), whose name is not a DNS-1123 subdomain, whose UID holds a
// slash, a backslash or a NUL or is "." or "..", or a container whose name is not a DNS-1123
// label, as the API server would: a caller of this package that did not
// validate its pods cannot make it write outside its directories
// (TestPodPartsThatWouldLeaveTheLogsDirAreRefused).
//
// # Spec hashes and adoption
//
// Every container carries the kubelet's labels and annotations, its
// io.kubernetes.container.hash included, computed as kubelet v1.37 does
// (HashContainer: 32-bit FNV-1a over the name and the image only), and
// nodekit's own io.nodekit.container.specHash (SpecHash: 64-bit FNV-1a
// over the JSON of the spec without its requests and limits, which are
// resized in place; one recorded by an earlier nodekit, with them, is
// accepted while they are unchanged). A running container whose recorded kubelet
// hash differs from its spec's is restarted, as by the kubelet. One that
// also records a SpecHash (nodekit created it) is restarted when that
// differs too, so that nodekit still restarts a container for any spec
// change, as it intends for specs that change under the same pod UID
// (manifests, channel sources). So a kubelet adopts nodekit's containers,
// and nodekit adopts a kubelet's, without restarting them; a container
// that records no hash at all is left running, and one created by an
// earlier nodekit (which wrote a 64-bit SpecHash into the kubelet's
// annotation) is compared on the whole spec.
//
// A sync with nothing to do makes no CRI call and one allocation: spec
// hashes are cached per pod container and checked by a deep comparison,
// so specs changed in place are still seen.
//
// # Where nodekit differs from the kubelet, and why
//
//   - Any change to a nodekit container's spec but its requests and
//     limits restarts it (SpecHash), where the kubelet only sees the name
//     and the image change (the API allows no other): nodekit's pod
//     sources may change a spec in place.
//   - A running container that records no hash is left running; the
//     kubelet would take the missing hash as a change and restart it.
//   - The crash-loop back-off is keyed by SpecHash, so any spec change
//     but a resize starts it afresh; the kubelet keys it by the name and
//     the image.
//   - A container status without a SandboxID (from a caller that does
//     not fill it) counts as in the current sandbox for the
//     init-container rules.
//   - With no ProbeResults, sidecars count as started once running.
//   - A panic in a goroutine the runtime starts for a pod (the parallel
//     kills of KillPod, a lifecycle hook) is recovered, logged with the
//     pod and the stack, counted in nodekit_runtime_panics_total
//     (Config.Registerer), and becomes the error of that step (a hook
//     failure, a kill error); the kubelet lets it crash the process. A
//     library embedded in a larger program must not take it down for one
//     pod's bad data.
//   - A subPath is handed to the runtime as its canonical host path, not
//     as a private bind mount of the opened descriptor: that needs mount
//     privilege and teardown, and containerd resolves the host path again
//     when it creates the container anyway. A container that can write
//     to the volume could still swap a directory for a symlink in between.
//   - Image pulls have a total deadline (Config.ImagePullTimeout): the
//     kubelet has none (see runtime/cri/images).
//   - An exec preStop hook gets the grace period as its exec timeout, so
//     the runtime ends the command; the kubelet passes no timeout and
//     only stops waiting for it.
//   - Probes, eviction and volumes are separate packages; this one only
//     consumes their results through ProbeResults and Volumes.
//
// # Usage
//
//	client, err := criclient.Dial(ctx, "unix:///run/containerd/containerd.sock")
//	if err != nil { ... }
//	defer client.Close(ctx)
//	rt, err := cri.New(cri.Config{RuntimeService: client, ImageService: client})
//	status, err := rt.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
//	result := rt.SyncPod(ctx, pod, status)
package cri
