// Package podsource turns pod manifests into a stream of pod updates, as
// the kubelet's pkg/kubelet/config does.
//
// Sources:
//   - File: static pods from a directory, one Pod per file (YAML or
//     JSON), watched with fsnotify and re-read every 20 s. An empty or
//     missing directory is an empty set; one that cannot be read keeps
//     the pods last sent.
//   - HTTP: a Pod or a PodList at a URL, polled every 20 s. A failed
//     fetch keeps the pods last sent.
//   - Channel: pods a program sends itself.
//
// File and HTTP pods become static pods as the kubelet makes them: the
// API server's defaults applied (restart and DNS policy, grace period,
// pull policy, termination message path, probe timings...), the name
// suffixed with the node name, a stable UID derived from the node, the
// file or URL and the content (so an edited manifest is a new pod), the
// kubernetes.io/config.{hash,source,seen} annotations, spec.nodeName, and
// a toleration of NoExecute taints.
//
// A manifest that does not parse or fails Validate (names, unique
// container and volume names, images, ports, volume references, restart
// and DNS policies, probe handlers) gets a FailedToLoadManifest warning
// event and a log line naming the file and the field, and is left out;
// the other manifests keep running.
//
// Merger runs the sources and merges them into one stream of REMOVE, ADD,
// UPDATE, DELETE and RECONCILE operations, tagged with their source, and
// reports when every source has been seen (SeenAllSources), after which a
// pod missing from all sources is really gone.
//
// What it leaves out: an API-server source; it belongs in the kube package
// (the API-server adapters), which is not written yet.
package podsource
