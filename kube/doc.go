// Package kube connects nodekit to a Kubernetes API server: it makes the
// machine a node of a cluster.
//
// It is the only part of nodekit that imports k8s.io/client-go; no other
// package imports kube, so an agent that never talks to an API server
// never links client-go. It imports package server for the types of the
// node server's authentication and authorization interfaces.
//
// # Node registration, status and Lease
//
// A Node (NewNode, then Run) does what the kubelet does for its Node
// object:
//
//   - Registration: it creates the Node, or adopts the existing one of the
//     same name. A new Node gets the labels kubernetes.io/hostname,
//     kubernetes.io/os, kubernetes.io/arch and NodeConfig.Labels, and
//     NodeConfig.Taints (the kubelet's registerWithTaints). An adopted Node
//     gets those labels merged in (these win, every other label stays);
//     its taints are left alone, as the kubelet leaves them. A failed
//     registration is retried after 100ms, doubling up to 7s.
//   - Status: addresses (NodeIPs as InternalIP, then the Hostname),
//     capacity from a ResourceProvider (default HostResources: cpu from
//     runtime.NumCPU, memory from /proc/meminfo, ephemeral-storage from
//     statfs of the root dir; pods from MaxPods) and allocatable with
//     NodeConfig.Reserved subtracted, nodeInfo (KubeletVersion, the CRI
//     runtime's "NAME://VERSION", kernel, OS image, boot ID, machine ID),
//     daemonEndpoints, declaredFeatures (NodeConfig.DeclaredFeatures, by
//     default those nodekit implements, so that the scheduler places the
//     pods that need them here), and the conditions MemoryPressure, DiskPressure and
//     PIDPressure from a ConditionsProvider and Ready from
//     NodeConfig.Health, with the kubelet's reasons and messages.
//     Conditions set by others (NetworkUnavailable) are kept. Every
//     NodeStatusUpdateFrequency (10s) the status is computed and compared
//     with the Node's, ignoring heartbeat times; it is patched (strategic
//     merge on the status subresource) when it changed, or when
//     NodeStatusReportFrequency (5m) has passed since the last patch. The
//     first read of a sync may come from the API server's cache
//     (resourceVersion 0); a failed patch is retried up to 5 times with
//     fresh reads. A Node deleted while running is registered again at
//     the next sync.
//   - Lease: a coordination.k8s.io/v1 Lease named after the node in
//     kube-node-lease, owned by the Node object, with LeaseDuration (40s)
//     renewed every LeaseRenewInterval (10s). A failed renewal is retried
//     after 200ms, doubling up to 7s or the renew interval, whichever is
//     shorter.
//
// Everything above works with the node's own identity (user
// system:node:NAME in group system:nodes) under the Node authorizer and the
// NodeRestriction admission plugin: it never needs cluster-admin. Every
// period and back-off runs on NodeConfig.Clock.
//
// # Differences from the kubelet
//
// The Node reads its own Node object with a GET at resourceVersion 0 on
// each status sync (served from the API server's watch cache) instead of
// keeping an informer. It does not spread its first report with a random
// delay, and it renews the Lease without jitter. It re-creates a Node
// deleted while it runs, where the kubelet keeps failing its status
// updates until it is restarted.
//
// # Usage
//
//	n, err := kube.NewNode(kube.NodeConfig{
//		Client:  kubernetes.NewForConfigOrDie(restConfig),
//		Name:    "edge-1",
//		NodeIPs: []net.IP{net.ParseIP("192.0.2.10")},
//		Runtime: criClient,  // runtime/criclient.Client: containerRuntimeVersion
//		Health:  a.Healthy,  // agent.Agent: runtime ready and PLEG current
//	})
//	if err != nil { ... }
//	go n.Run(ctx)
//
// # Pod source
//
// A PodSource is the podsource.Source of the pods bound to the node: a
// list and watch of the pods with spec.nodeName=NAME (the field selector
// the Node authorizer requires), sent as a SET of all of them after every
// change, as the kubelet's API-server source does; the podsource.Merger
// makes ADD, UPDATE, DELETE (a deletionTimestamp: the graceful deletion
// the API server began), REMOVE and RECONCILE of them. List it in
// podsource.MergerConfig.Sources beside a File source for static pods.
//
// # Pod status
//
// A StatusSink is the status.Sink that writes pod statuses through the
// pods/status subresource with the kubelet's merge rules (a terminal phase
// stays, conditions owned by others stay, the node's DisruptionTarget is
// written only as the pod turns terminal, the resource claims' statuses
// stay, a terminal pod goes with PodReady and ContainersReady false, for
// the reason PodFailed or PodCompleted), only when the API server's
// status differs, with the pod's UID in the patch; the status.Manager in
// front of it retries, so an absent API server loses no status, and,
// in an agent, holds a terminal phase back until the pod's containers
// have stopped (status.Config.CouldHaveRunningContainers), so no
// controller replaces a pod that still runs. As a status.Reconciler it
// tells the status.Manager when the API's status of a pod, as the pod
// source's watch delivers it, differs from what it would write (another
// writer changed it), compared as the kubelet compares them, and the
// status is written again, once per status.ReconcileInterval at most.
// Static pods are not reconciled (their API object is the mirror pod).
// Patched and Skipped count the writes made and spared.
//
// The StatusSink's own rate limit (StatusSinkConfig.QPS and Burst, a
// token bucket on the injected clock) bounds how fast statuses go out
// whatever else shares the client; with StatusSinkConfig.MirrorPods, a
// static pod's status is written to its mirror pod.
//
// # Mirror pods
//
// A MirrorPods keeps a mirror pod in the API server for every static pod,
// as the kubelet does: created with the annotation
// kubernetes.io/config.mirror (the static pod's config.hash) and the Node
// as controlling owner, deleted and created again when the manifest
// changes, created again when someone deletes it, deleted when the static
// pod goes. It sees the static pods by wrapping their source
// (MirrorPods.Source(file)) and the mirror pods through the PodSource
// (PodSourceConfig.MirrorPods), so the agent needs no hook; the PodSource
// never sends a mirror pod as a pod to run. Unlike the kubelet, which
// works from its pod syncs, it mirrors every static pod its source gives,
// admitted or not, and deletes a mirror pod as soon as its manifest is
// gone rather than once the static pod's containers have stopped.
//
// # Events
//
// An EventRecorder sends events with client-go's event broadcaster and
// correlator (a private scheme; its clock injected): repeats become a
// count, floods of similar events one aggregated event, and each object
// gets a burst of 25 then one every 5 minutes, the kubelet's defaults.
// Its Event is agent.Config.Events and NodeConfig.Events: pod events
// refer to the pod, manifest and Node events (Starting, RegisteredNode,
// NodeReady, NodeNotReady) to the Node. Run starts and stops it.
//
// # ConfigMaps, secrets and tokens
//
// Objects is both runtime/cri.ObjectGetter (cri.Config.Objects: env,
// envFrom, image pull secrets) and volumes.ObjectGetter. The first Get of
// an object reads it and starts a watch of that object alone (field
// selector metadata.name, which the Node authorizer allows for objects
// the node's pods refer to); later Gets are answered from the watch. A
// watch unused for ObjectsConfig.TTL (5m) stops, where the kubelet stops
// it when the last pod referring to the object goes: Objects is told of
// no pods. A missing object wraps runtime.ErrNotFound.
//
// # Services
//
// Services is runtime/cri.ServiceLister (cri.Config.Services): a list and
// watch of the services of every namespace, which the Node authorizer's
// static rules let a node read, kept in a cache indexed by namespace, as
// the kubelet's service lister. The runtime turns them into the
// containers' service environment variables (FOO_SERVICE_HOST,
// FOO_PORT...). Before the first list is read ListServices fails with
// ErrServicesNotSynced, so a pod from the API server waits (its container
// fails with CreateContainerConfigError and is retried) rather than start
// without KUBERNETES_SERVICE_HOST; a static pod starts without. Run fills
// and follows the cache until its ctx ends.
//
// Tokens is a volumes.TokenGetter over the TokenRequest API
// (serviceaccounts/token, bound to the pod), caching a token until 80%
// of its life or 24 hours have passed, as the kubelet's token manager.
//
// # Pod deletion
//
// A PodDeleter finishes the graceful deletion the API server began, as the
// kubelet does: given to agent.Config.PodTerminated, it is called once the
// pod's containers and sandboxes are gone and deletes the pod object with
// grace period 0 and a precondition on its UID (a new pod of the same
// name is never touched). Static pods, mirror pods and pods that merely
// ended (no deletionTimestamp) are left alone; a pod that had ended
// before its deletion arrived is deleted at the agent's next housekeeping.
// Unlike the kubelet, which deletes from its status manager after the
// final status was written, the deletion does not wait for that status to
// reach the API server: the object it would be written to is being
// removed.
//
// # The node server's authentication and authorization
//
// TokenReviewAuthenticator is the server.TokenAuthenticator of the node
// server's bearer tokens (server.AuthenticatorConfig.Tokens), and
// SubjectAccessReviewAuthorizer its server.Authorizer, as the kubelet's
// authentication.webhook and authorization mode Webhook are: each asks the
// API server (a TokenReview of authentication.k8s.io/v1, a
// SubjectAccessReview of authorization.k8s.io/v1 with the user, UID,
// groups and extra the authenticator found and the kubelet's attributes:
// verb, resource nodes, subresource proxy, stats, log, metrics, pods...,
// name the node). The node's own credentials may create both: the Node
// authorizer of kube-apiserver v1.37 lets system:nodes create
// tokenreviews and subjectaccessreviews, as TestReviewsAgainstAPIServer
// checks.
//
// Answers are kept on TokenReviewConfig.Clock and
// SubjectAccessReviewConfig.Clock, with the kubelet's TTLs: a token's user,
// and a token the API server did not authenticate without saying why, for
// CacheTTL (2m, authentication.webhook.cacheTTL); an allowed review for
// AuthorizedTTL (5m, cacheAuthorizedTTL), a denied or undecided one for
// UnauthorizedTTL (30s, cacheUnauthorizedTTL). A review that failed is
// never kept, nor a token review whose status carries an error (an
// invalid or expired token). As the kubelet, the server answers a token
// that could not be authenticated 401 and a failed SubjectAccessReview
// 500. Tokens are kept only as SHA-256
// hashes; each cache holds at most CacheSize answers.
//
// A review that fails with a transient error (a connection reset, the API
// server's internal error, timeout or 429) is retried as the kubelet
// retries it, five calls in all, waiting 0.5s, 0.75s, 1.125s and 1.69s on
// the clock, within Timeout (10s). Differences from the kubelet: the waits
// have no jitter, and concurrent reviews of the same token or attributes
// are not merged into one.
//
//	tokens, _ := kube.NewTokenReviewAuthenticator(kube.TokenReviewConfig{Client: client})
//	authz, _ := kube.NewSubjectAccessReviewAuthorizer(kube.SubjectAccessReviewConfig{Client: client})
//	authn, _ := server.NewAuthenticator(server.AuthenticatorConfig{ClientCAFile: caFile, Tokens: tokens})
//	srv, _ := server.New(server.Config{NodeName: name, Pods: pods, Authenticator: authn, Authorizer: authz})
//
// # A whole node
//
// With the node's own credentials, these make an agent.Agent a node of the
// cluster, as TestAgentAgainstAPIServer does against a real API server:
//
//	client := kubernetes.NewForConfigOrDie(nodeRestConfig)
//	mirrors, _ := kube.NewMirrorPods(kube.MirrorPodsConfig{Client: client, NodeName: name})
//	src, _ := kube.NewPodSource(kube.PodSourceConfig{Client: client, NodeName: name, MirrorPods: mirrors})
//	file, _ := podsource.NewFile(podsource.FileConfig{Dir: "/etc/kubernetes/manifests", NodeName: name})
//	sink, _ := kube.NewStatusSink(kube.StatusSinkConfig{Client: client, MirrorPods: true})
//	del, _ := kube.NewPodDeleter(kube.PodDeleterConfig{Client: client})
//	events, _ := kube.NewEventRecorder(kube.EventRecorderConfig{Client: client, NodeName: name})
//	objects, _ := kube.NewObjects(kube.ObjectsConfig{Client: client})
//	services, _ := kube.NewServices(kube.ServicesConfig{Client: client})
//	a, _ := agent.New(agent.Config{NodeName: name, RuntimeService: rs, ImageService: is,
//		Sources: []podsource.Source{src, mirrors.Source(file)}, StatusSink: sink,
//		PodTerminated: del.PodTerminated, Events: events.Event, CRI: cri.Config{Objects: objects, Services: services}})
//	n, _ := kube.NewNode(kube.NodeConfig{Client: client, Name: name, Runtime: rs, Health: a.Healthy, Events: events.Event})
//	for _, run := range []func(context.Context) error{events.Run, objects.Run, services.Run, mirrors.Run, a.Run, n.Run} {
//		go run(ctx)
//	}
//
// A pod created on the node runs with the variables of a service the
// administrator created, its status reaches Running and Ready in
// the API server, and a graceful deletion stops its containers and then
// removes the pod object; TestNodeExtrasAgainstAPIServer adds the static
// pods' mirror pods, events, env from a configMap, a token, and a 30s
// outage of the API server that loses no pod and no status. examples/node is such a node agent, started like
// the kubelet. Package kubetest starts the real etcd and kube-apiserver
// these tests use, for the tests of programs built on kube.
//
// # Not yet here
//
// Certificate bootstrap and rotation.
package kube
