// Package podsource turns pod manifests into a stream of pod updates, as
// the kubelet's pkg/kubelet/config does.
//
// Sources:
//   - File: static pods from a directory, one Pod per file (YAML or
//     JSON), watched with fsnotify and re-read every 20 s; a re-read
//     sends an update only when a file appeared or went, or gave another
//     pod or error (TestScanReportsOnlyChanges). A file is parsed again
//     when its modification time, size, inode or status change time
//     (ctime, which, unlike the modification time, cannot be set back)
//     changed, so an edit that keeps the size and restores the
//     modification time is picked up, as by the kubelet, which reads
//     every file again (off Linux only the modification time and size
//     count). An empty or
//     missing directory is an empty set; one that cannot be read keeps
//     the pods last sent. A file over FileConfig.MaxManifestBytes
//     (default 10 MiB, the kubelet's limit) is refused from its size,
//     before it is read. An empty file, or one holding only comments, is
//     reported as such; a manifest without a name gets metadata.name:
//     Required value (not an error about the name the node suffix would
//     make of it). A path that is not a regular file (a named pipe, a
//     socket, a device) is refused with that reason without being opened,
//     so a named pipe cannot block the source; a symlink is followed and
//     one to a directory skipped, as by the kubelet
//     (TestFileSourceSkipsWhatIsNotARegularFile).
//   - HTTP: a Pod or a PodList at a URL, polled every 20 s. A failed
//     fetch keeps the pods last sent. A body the same, byte for byte, as
//     the last one read is not parsed again, as in the kubelet: the
//     events about its invalid items are not repeated at every poll. A
//     body over HTTPConfig.MaxBodyBytes (default 10 MiB) is refused: from
//     its Content-Length when the response states one, else after
//     reading one byte past the limit.
//   - Channel: pods a program sends itself.
//
// Manifests are decoded as by the kubelet: field names match exactly
// (metadata.Name is not metadata.name, so such a manifest has no name),
// unknown fields are ignored, and of a key given twice the last counts.
//
// File and HTTP pods become static pods as the kubelet makes them: the
// API server's defaults applied (restart and DNS policy, grace period,
// pull policy, termination message path, probe timings, HTTP handler
// path and scheme, volume file modes, host ports under hostNetwork...),
// the name suffixed with the node name, a stable UID derived from the
// node, the file or URL and the content (so an edited manifest is a new
// pod; the place of a pod in a PodList does not count, so reordering a
// list restarts nothing), the kubernetes.io/config.{hash,source,seen}
// annotations, spec.nodeName, and a toleration of NoExecute taints. The
// kubelet feeds the node name into the UIDs of file pods only; nodekit
// feeds it into those of HTTP pods too, so that nodes polling one URL do
// not run pods with the same UID.
//
// # Validation
//
// A manifest that does not parse or fails Validate gets a
// FailedToLoadManifest warning event and a log line naming the file, the
// pod and the field, and is left out; the other manifests keep running.
// The message lists the errors as the API server does, but at most the
// first 100, then the count of the others ("[...] and 4900 more errors"),
// and it gives a list value of more than 100 items as its count
// ("<150 items>"), which the API server would spell out in every error
// that names the list: a manifest with millions of errors costs a message
// of bounded size, built in linear time. Validation itself is linear in
// the size of the pod: a 10 MiB manifest of empty env items, one error
// each, is refused in seconds (BenchmarkLoadWorstCaseManifest).
// Validate applies the API server's pod validation rules that a node can
// check on its own:
//   - metadata: name a DNS subdomain (at most 253 characters), namespace a
//     DNS label, label keys and values, annotation keys and their total
//     size (256 KiB), owner references, finalizers;
//   - containers: at least one; names DNS labels, unique across init and
//     regular containers; image set, without surrounding spaces; pull
//     policy and termination message policy; ports (container port
//     1-65535, host port 0-65535, protocol, unique IANA names, no two on
//     the same host port, protocol and address, host port equal to the
//     container port under hostNetwork); environment variable names,
//     exactly one source per valueFrom (and none with a value), downward
//     API field paths, configMap and secret key references; envFrom;
//     volume mounts (a volume of the pod, a unique mount path, subPath and
//     subPathExpr relative without "..", propagation, Bidirectional only
//     when privileged, recursive read-only); volume devices; resources
//     (known or extended names, non-negative, integer extended resources,
//     requests at most limits, equal to them for hugepages and extended
//     resources, hugepages only with cpu or memory); resize policy;
//     security context (user and group IDs, procMount, privilege
//     escalation, seccomp and AppArmor profiles, a Localhost seccomp
//     profile relative without ".."); probes (exactly one handler, its
//     port, path, scheme and command, non-negative timings, success
//     threshold 1 for liveness and startup, no grace period for
//     readiness); lifecycle hooks (one handler, sleep within the grace
//     period, stop signals); init containers: no probes or hooks unless
//     restartPolicy is Always; a container's own restartPolicy (Always,
//     OnFailure or Never) and restartPolicyRules (only with a
//     restartPolicy; at most 20, each with action Restart or
//     RestartAllContainers and exitCodes: operator In or NotIn, at most
//     255 values); no ephemeral containers
//     on create (Validate, static pods);
//   - ephemeral containers, on pods that gain them after creation (the
//     Merger): a valid container, a name unique among all the pod's
//     containers, targetContainerName naming a regular or init container,
//     none of the fields the API server forbids them (ports, resources,
//     probes, lifecycle, restart and resize policies), no subPath or
//     subPathExpr;
//   - volumes: names DNS labels and unique; exactly one volume type;
//     hostPath set, without "..", a known type; emptyDir size; secret,
//     configMap, downwardAPI and projected: names, file modes, item paths
//     relative, without "..", unique in a projection; service account
//     tokens only with a service account; persistentVolumeClaim claim
//     name; nfs server and absolute path; image reference and pull
//     policy;
//   - the pod: restart and DNS policies, DNS config (required for None, at
//     most 3 IP nameservers, 32 searches of 2048 characters), grace
//     period not negative (a negative one is made 1, as the API server
//     does), active deadline, hostname, subdomain and hostnameOverride,
//     node selector, tolerations, host aliases, readiness gates, no
//     scheduling gates (the pod is on its node already), service account,
//     priority and runtime class names, preemption policy, overhead, OS
//     name, pod security context (IDs, sysctl names, fsGroup and
//     supplemental-group policies, SELinux change policy, seccomp and
//     AppArmor), shareProcessNamespace with hostPID, hostUsers false with
//     hostPID or hostIPC.
//
// Left to the API server, which knows the cluster or guards features a
// node does not check: admission (quotas, limit ranges, pod security),
// affinity and topology spread constraints, resource claims and
// pod-level resources, the volume types of cloud providers beyond their
// being the only type set, Windows options, pod-specific annotations
// (seccomp, AppArmor and toleration annotations), spec.nodeName (the node
// sets it).
//
// Per-container restartPolicy and restartPolicyRules are accepted as the
// API server accepts them with the ContainerRestartRules and
// RestartAllContainersOnContainerExits features (on by default since
// Kubernetes 1.35 and 1.37), and followed by runtime/cri, status and
// probes: the action Restart restarts the container, the action
// RestartAllContainers every init, sidecar and regular container of the
// pod.
//
// Merger runs the sources and merges them into one stream of REMOVE, ADD,
// UPDATE, DELETE and RECONCILE operations, tagged with their source, and
// reports when every source has been seen (SeenAllSources), after which a
// pod missing from all sources is really gone.
//
// Every pod enters through the Merger, whatever its source (File, HTTP,
// Channel or one of your own): it gets the API server's defaults and
// Validate there, on a copy (except that ephemeral containers, which the
// API server adds to running pods, are checked rather than refused), and its UID must be safe in a file name (at
// most 128 letters, digits, '-', '_' or '.', not "." or ".."), since the
// UID, like the namespace, the name and the container names, becomes part
// of the paths of the pod's directories and logs. A pod that fails gets a
// FailedValidation event (MergerConfig.Events) naming the pod, its source
// (and file or URL) and the field, and is left out; the other pods of the
// update go through. In a SET, the pod is then gone from the source; in
// an ADD or UPDATE, the pod keeps its last valid version. A nil pod in an
// update is left out with a FailedValidation event about no pod (nil)
// naming the source, and a log line; the other pods of the update are
// unaffected.
//
// A full name (namespace/name, after the node-name suffix) belongs to one
// pod, as in the kubelet, where a second pod of the same name is refused
// with a FailedValidation event. The kubelet checks this within one source
// update; the Merger checks it across all sources too, and gives the name
// deterministically: to the pod of the source listed first in
// MergerConfig.Sources, and within a source to the pod first in its SET (a
// File sends its files in name order, an HTTP source in list order) or,
// for ADDs, the first sent. The others are refused with an event naming
// them, their source and file, and the pod that holds the name, once per
// refusal; when the holder goes, the next one is added. Since the outcome
// depends only on what the sources hold, a pod that wins a name later
// displaces (REMOVE, then ADD) the one that held it. A UID is likewise
// given to one pod only.
//
// What it leaves out: an API-server source; it belongs in the kube package
// (the API-server adapters), which is not written yet.
package podsource
