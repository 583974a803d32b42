package cri

import (
	"fmt"
	"path/filepath"
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet's default masked and read-only paths for the Default proc
// mount; runtimes apply only what they are given.
var (
	defaultMaskedPaths = []string{
		"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
		"/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
	}
	defaultReadonlyPaths = []string{
		"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
	}
)

// effectiveSecurity merges the pod's security context into the
// container's: the container's fields win.
type effectiveSecurity struct {
	runAsUser, runAsGroup *int64
	runAsNonRoot          *bool
	seccomp               *v1.SeccompProfile
}

func securityOf(pod *v1.Pod, c *v1.Container) effectiveSecurity {
	var e effectiveSecurity
	if p := pod.Spec.SecurityContext; p != nil {
		e.runAsUser, e.runAsGroup, e.runAsNonRoot, e.seccomp = p.RunAsUser, p.RunAsGroup, p.RunAsNonRoot, p.SeccompProfile
	}
	if s := c.SecurityContext; s != nil {
		if s.RunAsUser != nil {
			e.runAsUser = s.RunAsUser
		}
		if s.RunAsGroup != nil {
			e.runAsGroup = s.RunAsGroup
		}
		if s.RunAsNonRoot != nil {
			e.runAsNonRoot = s.RunAsNonRoot
		}
		if s.SeccompProfile != nil {
			e.seccomp = s.SeccompProfile
		}
	}
	return e
}

// securityContext is the CRI Linux security context of a container.
func (r *Runtime) securityContext(pod *v1.Pod, c *v1.Container, field string) (*runtimeapi.LinuxContainerSecurityContext, error) {
	e := securityOf(pod, c)
	sc := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: namespaceOptions(pod)}
	if e.runAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *e.runAsUser}
	}
	if e.runAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *e.runAsGroup}
	}
	if p := pod.Spec.SecurityContext; p != nil {
		sc.SupplementalGroups = append(sc.SupplementalGroups, p.SupplementalGroups...)
		if p.FSGroup != nil {
			sc.SupplementalGroups = append(sc.SupplementalGroups, *p.FSGroup)
		}
	}
	profile, err := r.seccompProfile(e.seccomp, field)
	if err != nil {
		return nil, err
	}
	sc.Seccomp = profile
	procMountUnmasked := false
	if s := c.SecurityContext; s != nil {
		if s.Privileged != nil {
			sc.Privileged = *s.Privileged
		}
		if s.ReadOnlyRootFilesystem != nil {
			sc.ReadonlyRootfs = *s.ReadOnlyRootFilesystem
		}
		if s.AllowPrivilegeEscalation != nil {
			sc.NoNewPrivs = !*s.AllowPrivilegeEscalation
		}
		if caps := s.Capabilities; caps != nil {
			sc.Capabilities = &runtimeapi.Capability{}
			for _, cap := range caps.Add {
				sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(cap))
			}
			for _, cap := range caps.Drop {
				sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(cap))
			}
		}
		procMountUnmasked = s.ProcMount != nil && *s.ProcMount == v1.UnmaskedProcMount
	}
	if !sc.Privileged && !procMountUnmasked {
		sc.MaskedPaths = defaultMaskedPaths
		sc.ReadonlyPaths = defaultReadonlyPaths
	}
	return sc, nil
}

// seccompProfile maps a pod or container seccomp profile; none means
// Unconfined, the kubelet's default without SeccompDefault.
func (r *Runtime) seccompProfile(p *v1.SeccompProfile, field string) (*runtimeapi.SecurityProfile, error) {
	if p == nil {
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	switch p.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case v1.SeccompProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	case v1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" || !filepath.IsLocal(*p.LocalhostProfile) {
			return nil, fmt.Errorf("%s.securityContext.seccompProfile.localhostProfile: must be a relative path below the seccomp root", field)
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: filepath.Join(r.cfg.SeccompRoot, *p.LocalhostProfile)}, nil
	}
	return nil, fmt.Errorf("%s.securityContext.seccompProfile.type: unsupported %q", field, p.Type)
}

// verifyRunAsNonRoot enforces runAsNonRoot as the kubelet does: by the
// effective runAsUser if set, else by the image's user.
func verifyRunAsNonRoot(pod *v1.Pod, c *v1.Container, img *runtimeapi.Image) error {
	e := securityOf(pod, c)
	if e.runAsNonRoot == nil || !*e.runAsNonRoot {
		return nil
	}
	if e.runAsUser != nil {
		if *e.runAsUser == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", podRef(pod), c.Name)
		}
		return nil
	}
	if uid := img.GetUid(); uid != nil {
		if uid.GetValue() == 0 {
			return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", podRef(pod), c.Name)
		}
		return nil
	}
	if user := img.GetUsername(); user != "" {
		if _, err := strconv.ParseInt(user, 10, 64); err != nil {
			return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", user, podRef(pod), c.Name)
		}
		if user == "0" {
			return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", podRef(pod), c.Name)
		}
		return nil
	}
	return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", podRef(pod), c.Name)
}
