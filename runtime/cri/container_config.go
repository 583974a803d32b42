package cri

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// containerConfig is the CRI config for one container of a pod. It fails
// with an error naming the field when the spec asks for something this
// runtime cannot provide.
func (r *Runtime) containerConfig(pod *v1.Pod, c *v1.Container, restartCount int, imageRef string) (*runtimeapi.ContainerConfig, error) {
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image},
		Command:     c.Command,
		Args:        c.Args,
		WorkingDir:  c.WorkingDir,
		Labels:      containerLabels(pod, c),
		Annotations: containerAnnotations(pod, c, restartCount),
		LogPath:     c.Name + "/" + strconv.Itoa(restartCount) + ".log",
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: namespaceOptions(pod),
			},
		},
	}
	for i, e := range c.Env {
		if e.ValueFrom != nil {
			return nil, fmt.Errorf("spec.containers[%s].env[%d] (%s): valueFrom is not supported by this runtime", c.Name, i, e.Name)
		}
		cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	if len(c.EnvFrom) > 0 {
		return nil, fmt.Errorf("spec.containers[%s].envFrom: not supported by this runtime", c.Name)
	}
	sc := cfg.Linux.SecurityContext
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		sc.SupplementalGroups = psc.SupplementalGroups
	}
	if csc := c.SecurityContext; csc != nil {
		if csc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *csc.RunAsUser}
		}
		if csc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *csc.RunAsGroup}
		}
		if csc.Privileged != nil {
			sc.Privileged = *csc.Privileged
		}
		if csc.ReadOnlyRootFilesystem != nil {
			sc.ReadonlyRootfs = *csc.ReadOnlyRootFilesystem
		}
	}
	return cfg, nil
}
