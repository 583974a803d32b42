package podsource

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks the API server's rules that matter on a node: names,
// unique container and volume names, images, ports, volume references,
// restart and DNS policies, grace periods and probe handlers. The errors
// name the field.
func Validate(pod *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	for _, msg := range validation.IsDNS1123Subdomain(pod.Name) {
		errs = append(errs, field.Invalid(meta.Child("name"), pod.Name, msg))
	}
	for _, msg := range validation.IsDNS1123Label(pod.Namespace) {
		errs = append(errs, field.Invalid(meta.Child("namespace"), pod.Namespace, msg))
	}
	spec := field.NewPath("spec")
	if len(pod.Spec.Containers) == 0 {
		errs = append(errs, field.Required(spec.Child("containers"), "a pod needs at least one container"))
	}
	volumes := sets.New[string]()
	for i, v := range pod.Spec.Volumes {
		p := spec.Child("volumes").Index(i).Child("name")
		for _, msg := range validation.IsDNS1123Label(v.Name) {
			errs = append(errs, field.Invalid(p, v.Name, msg))
		}
		if volumes.Has(v.Name) {
			errs = append(errs, field.Duplicate(p, v.Name))
		}
		volumes.Insert(v.Name)
	}
	names := sets.New[string]()
	check := func(path *field.Path, c *v1.Container, init bool) {
		for _, msg := range validation.IsDNS1123Label(c.Name) {
			errs = append(errs, field.Invalid(path.Child("name"), c.Name, msg))
		}
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(path.Child("name"), c.Name))
		}
		names.Insert(c.Name)
		if c.Image == "" {
			errs = append(errs, field.Required(path.Child("image"), ""))
		}
		portNames := sets.New[string]()
		for j, port := range c.Ports {
			pp := path.Child("ports").Index(j)
			if port.ContainerPort < 1 || port.ContainerPort > 65535 {
				errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, "must be between 1 and 65535"))
			}
			if port.HostPort < 0 || port.HostPort > 65535 {
				errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, "must be between 0 and 65535"))
			}
			if port.Name != "" {
				for _, msg := range validation.IsValidPortName(port.Name) {
					errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
				}
				if portNames.Has(port.Name) {
					errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
				}
				portNames.Insert(port.Name)
			}
			switch port.Protocol {
			case "", v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
			default:
				errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, []string{"TCP", "UDP", "SCTP"}))
			}
		}
		for j, m := range c.VolumeMounts {
			if !volumes.Has(m.Name) {
				errs = append(errs, field.NotFound(path.Child("volumeMounts").Index(j).Child("name"), m.Name))
			}
		}
		if c.RestartPolicy != nil && (!init || *c.RestartPolicy != v1.ContainerRestartPolicyAlways) {
			errs = append(errs, field.Forbidden(path.Child("restartPolicy"), "only init containers may set restartPolicy, and only to Always"))
		}
		for name, probe := range map[string]*v1.Probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe, "startupProbe": c.StartupProbe} {
			if probe == nil {
				continue
			}
			n := 0
			h := probe.ProbeHandler
			for _, set := range []bool{h.Exec != nil, h.HTTPGet != nil, h.TCPSocket != nil, h.GRPC != nil} {
				if set {
					n++
				}
			}
			if n != 1 {
				errs = append(errs, field.Invalid(path.Child(name), fmt.Sprintf("%d handlers", n), "must have exactly one handler (exec, httpGet, tcpSocket or grpc)"))
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		check(spec.Child("initContainers").Index(i), &pod.Spec.InitContainers[i], true)
	}
	for i := range pod.Spec.Containers {
		check(spec.Child("containers").Index(i), &pod.Spec.Containers[i], false)
	}
	switch pod.Spec.RestartPolicy {
	case v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
	default:
		errs = append(errs, field.NotSupported(spec.Child("restartPolicy"), pod.Spec.RestartPolicy, []string{"Always", "OnFailure", "Never"}))
	}
	switch pod.Spec.DNSPolicy {
	case v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet, v1.DNSDefault, v1.DNSNone:
	default:
		errs = append(errs, field.NotSupported(spec.Child("dnsPolicy"), pod.Spec.DNSPolicy, []string{"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"}))
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(spec.Child("terminationGracePeriodSeconds"), *g, "must be >= 0"))
	}
	return errs
}
