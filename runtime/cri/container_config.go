package cri

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// AnnotationPreStopHandler records a container's preStop hook, so it
// still runs when the pod's spec is gone (an orphaned container).
const AnnotationPreStopHandler = "io.kubernetes.container.preStopHandler"

// containerSpec is one container to start and where it sits in the spec.
type containerSpec struct {
	container *v1.Container
	// field is the container's path for messages: spec.containers[app].
	field string
	// kind is "container", "init container" or "ephemeral container".
	kind string
	// qos is the pod's QoS class, computed once per sync by the caller;
	// empty means containerConfig computes it (O(containers)).
	qos v1.PodQOSClass
	// target is an ephemeral container's targetContainerName, whose
	// process namespace it joins; targetID is that container's ID, which
	// startContainer finds.
	target, targetID string
}

func specOf(pod *v1.Pod, list string, i int) containerSpec {
	switch list {
	case "init":
		c := &pod.Spec.InitContainers[i]
		return containerSpec{container: c, field: "spec.initContainers[" + c.Name + "]", kind: "init container"}
	case "ephemeral":
		ec := &pod.Spec.EphemeralContainers[i]
		c := v1.Container(ec.EphemeralContainerCommon)
		return containerSpec{container: &c, field: "spec.ephemeralContainers[" + c.Name + "]", kind: "ephemeral container", target: ec.TargetContainerName}
	}
	c := &pod.Spec.Containers[i]
	return containerSpec{container: c, field: "spec.containers[" + c.Name + "]", kind: "container"}
}

// containerConfig is the CRI config for one container of a pod. Errors
// name the field (CreateContainerConfigError).
func (r *Runtime) containerConfig(ctx context.Context, pod *v1.Pod, s containerSpec, restartCount int, img *runtimeapi.Image, podIPs []string) (*runtimeapi.ContainerConfig, error) {
	c := s.container
	// The name makes the log's path in the pod's log directory.
	if errs := validation.IsDNS1123Label(c.Name); len(errs) > 0 {
		return nil, fmt.Errorf("%s.name: Invalid value: %q: %s", s.field, c.Name, strings.Join(errs, "; "))
	}
	if err := verifyRunAsNonRoot(pod, c, img); err != nil {
		return nil, err
	}
	env, err := r.makeEnv(ctx, envContext{pod: pod, container: c, field: s.field, podIPs: podIPs})
	if err != nil {
		return nil, err
	}
	expandAll := func(in []string) []string {
		if in == nil {
			return nil
		}
		out := make([]string, len(in))
		for i, v := range in {
			out[i] = expand(v, env.lookup)
		}
		return out
	}
	mounts, err := r.mounts(pod, c, s.field, env)
	if err != nil {
		return nil, err
	}
	if m, err := r.hostsMount(pod, c, podIPs); err != nil {
		return nil, fmt.Errorf("%s: /etc/hosts: %w", s.field, err)
	} else if m != nil {
		mounts = append(mounts, m)
	}
	if m, err := r.terminationMessageMount(pod, c); err != nil {
		return nil, fmt.Errorf("%s.terminationMessagePath: %w", s.field, err)
	} else if m != nil {
		mounts = append(mounts, m)
	}
	sc, err := r.securityContext(pod, c, s.field)
	if err != nil {
		return nil, err
	}
	if s.targetID != "" && sc.GetNamespaceOptions().GetPid() == runtimeapi.NamespaceMode_CONTAINER {
		// An ephemeral container with a target sees the target's
		// processes, unless the pod shares one process namespace anyway.
		sc.NamespaceOptions.Pid = runtimeapi.NamespaceMode_TARGET
		sc.NamespaceOptions.TargetId = s.targetID
	}
	qos := s.qos
	if qos == "" {
		qos = qosClass(pod)
	}
	annotations := containerAnnotations(pod, c, restartCount)
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if b, err := json.Marshal(c.Lifecycle.PreStop); err == nil {
			annotations[AnnotationPreStopHandler] = string(b)
		}
	}
	if len(c.Ports) > 0 {
		if b, err := json.Marshal(c.Ports); err == nil {
			annotations[AnnotationContainerPorts] = string(b)
		}
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: img.GetId(), UserSpecifiedImage: c.Image},
		Command:     expandAll(c.Command),
		Args:        expandAll(c.Args),
		WorkingDir:  c.WorkingDir,
		Labels:      containerLabels(pod, c),
		Annotations: annotations,
		Mounts:      mounts,
		LogPath:     c.Name + "/" + strconv.Itoa(restartCount) + ".log",
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       r.linuxResources(pod, c, qos),
			SecurityContext: sc,
		},
	}
	for _, name := range env.names {
		cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: name, Value: []byte(env.values[name])})
	}
	return cfg, nil
}
