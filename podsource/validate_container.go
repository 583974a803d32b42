package podsource

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateContainers checks the regular then the init containers; names
// are unique across both lists.
func validateContainers(spec *v1.PodSpec, volumes map[string]v1.VolumeSource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	grace := spec.TerminationGracePeriodSeconds
	cpath := path.Child("containers")
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(cpath, "a pod needs at least one container"))
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		p := cpath.Index(i)
		errs = append(errs, validateContainer(c, spec, volumes, names, p)...)
		errs = append(errs, validateLifecycleAndProbes(c, grace, spec.OS, p)...)
		errs = append(errs, validateRestartPolicy(c, p)...)
	}
	errs = append(errs, hostPortConflicts(spec.Containers, cpath)...)

	ipath := path.Child("initContainers")
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		p := ipath.Index(i)
		errs = append(errs, validateContainer(c, spec, volumes, names, p)...)
		errs = append(errs, hostPortConflicts([]v1.Container{*c}, ipath)...)
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
		errs = append(errs, validateRestartPolicy(c, p)...)
		if sidecar {
			errs = append(errs, validateLifecycleAndProbes(c, grace, spec.OS, p)...)
			continue
		}
		for name, set := range map[string]bool{"lifecycle": c.Lifecycle != nil, "livenessProbe": c.LivenessProbe != nil, "readinessProbe": c.ReadinessProbe != nil, "startupProbe": c.StartupProbe != nil} {
			if set {
				errs = append(errs, field.Forbidden(p.Child(name), "may not be set for init containers without restartPolicy=Always"))
			}
		}
		for j, r := range c.ResizePolicy {
			if r.RestartPolicy == v1.RestartContainer {
				errs = append(errs, field.Invalid(p.Child("resizePolicy").Index(j).Child("restartPolicy"), r.RestartPolicy, "must not be RestartContainer for init containers without restartPolicy=Always"))
			}
		}
	}
	errs = append(errs, validateEphemeralContainers(spec, volumes, names, path.Child("ephemeralContainers"))...)
	return errs
}

// maxRestartRules and maxRestartRuleExitCodes are the API server's
// bounds on a container's restartPolicyRules.
const (
	maxRestartRules         = 20
	maxRestartRuleExitCodes = 255
)

// validateRestartPolicy checks a regular or init container's own
// restartPolicy and restartPolicyRules (the ContainerRestartRules
// feature, on by default since Kubernetes 1.35): a policy among Always,
// OnFailure and Never; rules only with a policy, at most 20, each with
// action Restart or RestartAllContainers (the
// RestartAllContainersOnContainerExits feature, on by default since
// Kubernetes 1.37, which also lets sidecars have rules) and exitCodes
// (operator In or NotIn, at most 255 values).
func validateRestartPolicy(c *v1.Container, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	policies := []v1.ContainerRestartPolicy{v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyOnFailure}
	switch {
	case c.RestartPolicy == nil && len(c.RestartPolicyRules) == 0:
		return nil
	case c.RestartPolicy == nil:
		errs = append(errs, field.Required(path.Child("restartPolicy"), "must specify restartPolicy when restart rules are used"))
	case !slices.Contains(policies, *c.RestartPolicy):
		errs = append(errs, field.NotSupported(path.Child("restartPolicy"), *c.RestartPolicy, policies))
	}
	rpath := path.Child("restartPolicyRules")
	if len(c.RestartPolicyRules) > maxRestartRules {
		errs = append(errs, field.TooMany(rpath, len(c.RestartPolicyRules), maxRestartRules))
	}
	actions := []v1.ContainerRestartRuleAction{v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleActionRestartAllContainers}
	for i, r := range c.RestartPolicyRules {
		p := rpath.Index(i)
		if !slices.Contains(actions, r.Action) {
			errs = append(errs, field.NotSupported(p.Child("action"), r.Action, actions))
		}
		if r.ExitCodes == nil {
			errs = append(errs, field.Required(p.Child("exitCodes"), "must be specified"))
			continue
		}
		ops := []v1.ContainerRestartRuleOnExitCodesOperator{v1.ContainerRestartRuleOnExitCodesOpIn, v1.ContainerRestartRuleOnExitCodesOpNotIn}
		if !slices.Contains(ops, r.ExitCodes.Operator) {
			errs = append(errs, field.NotSupported(p.Child("exitCodes", "operator"), r.ExitCodes.Operator, ops))
		}
		if len(r.ExitCodes.Values) > maxRestartRuleExitCodes {
			errs = append(errs, field.TooMany(p.Child("exitCodes", "values"), len(r.ExitCodes.Values), maxRestartRuleExitCodes))
		}
	}
	return errs
}

// ephemeralAllowed are the fields an ephemeral container may set, the
// API server's list; any other field of EphemeralContainerCommon (ports,
// resources, probes, lifecycle, restart and resize policies, and any
// field added later) is refused.
var ephemeralAllowed = sets.New(
	"Name", "Image", "Command", "Args", "WorkingDir", "EnvFrom", "Env", "VolumeMounts", "VolumeDevices",
	"TerminationMessagePath", "TerminationMessagePolicy", "ImagePullPolicy", "SecurityContext", "Stdin", "StdinOnce", "TTY",
)

// validateEphemeralContainers checks ephemeral containers as the API
// server does when they are added (through the pod's ephemeralcontainers
// subresource): each is a valid container whose name is unique among all
// of the pod's containers, whose targetContainerName (if any) names a
// regular or init container, which sets only the fields of
// ephemeralAllowed and mounts no subPath. names holds the regular and init
// containers' names.
func validateEphemeralContainers(spec *v1.PodSpec, volumes map[string]v1.VolumeSource, names sets.Set[string], path *field.Path) field.ErrorList {
	if len(spec.EphemeralContainers) == 0 {
		return nil
	}
	var errs field.ErrorList
	targets := names.Clone()
	for i := range spec.EphemeralContainers {
		ec := &spec.EphemeralContainers[i]
		p := path.Index(i)
		c := v1.Container(ec.EphemeralContainerCommon)
		errs = append(errs, validateContainer(&c, spec, volumes, names, p)...)
		if ec.TargetContainerName != "" && !targets.Has(ec.TargetContainerName) {
			errs = append(errs, field.NotFound(p.Child("targetContainerName"), ec.TargetContainerName))
		}
		v := reflect.ValueOf(ec.EphemeralContainerCommon)
		for j := 0; j < v.NumField(); j++ {
			f := v.Type().Field(j)
			if !ephemeralAllowed.Has(f.Name) && !v.Field(j).IsZero() {
				errs = append(errs, field.Forbidden(p.Child(strings.ToLower(f.Name[:1])+f.Name[1:]), "cannot be set for an Ephemeral Container"))
			}
		}
		for j, m := range ec.VolumeMounts {
			if m.SubPath != "" {
				errs = append(errs, field.Forbidden(p.Child("volumeMounts").Index(j).Child("subPath"), "cannot be set for an Ephemeral Container"))
			}
			if m.SubPathExpr != "" {
				errs = append(errs, field.Forbidden(p.Child("volumeMounts").Index(j).Child("subPathExpr"), "cannot be set for an Ephemeral Container"))
			}
		}
	}
	return errs
}

// validateContainer checks what every container kind shares.
func validateContainer(c *v1.Container, spec *v1.PodSpec, volumes map[string]v1.VolumeSource, names sets.Set[string], path *field.Path) field.ErrorList {
	var errs field.ErrorList
	add := func(e ...*field.Error) { errs = append(errs, e...) }
	if c.Name == "" {
		add(field.Required(path.Child("name"), ""))
	} else {
		add(dnsLabel(c.Name, path.Child("name"))...)
		if names.Has(c.Name) {
			add(field.Duplicate(path.Child("name"), c.Name))
		}
		names.Insert(c.Name)
	}
	switch {
	case c.Image == "":
		add(field.Required(path.Child("image"), ""))
	case strings.TrimSpace(c.Image) != c.Image:
		add(field.Invalid(path.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	switch c.ImagePullPolicy {
	case v1.PullAlways, v1.PullIfNotPresent, v1.PullNever:
	case "":
		add(field.Required(path.Child("imagePullPolicy"), ""))
	default:
		add(field.NotSupported(path.Child("imagePullPolicy"), c.ImagePullPolicy, []v1.PullPolicy{v1.PullAlways, v1.PullIfNotPresent, v1.PullNever}))
	}
	switch c.TerminationMessagePolicy {
	case v1.TerminationMessageReadFile, v1.TerminationMessageFallbackToLogsOnError:
	case "":
		add(field.Required(path.Child("terminationMessagePolicy"), ""))
	default:
		add(field.NotSupported(path.Child("terminationMessagePolicy"), c.TerminationMessagePolicy, []v1.TerminationMessagePolicy{v1.TerminationMessageReadFile, v1.TerminationMessageFallbackToLogsOnError}))
	}
	add(validatePorts(c.Ports, path.Child("ports"))...)
	add(validateEnv(c, path)...)
	add(validateMounts(c, volumes, path)...)
	add(validateResources(&c.Resources, path.Child("resources"))...)
	add(validateResizePolicy(c.ResizePolicy, path.Child("resizePolicy"))...)
	add(validateSecurityContext(c.SecurityContext, spec, path.Child("securityContext"))...)
	return errs
}

func validatePorts(ports []v1.ContainerPort, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		p := path.Index(i)
		if port.Name != "" {
			if msgs := validation.IsValidPortName(port.Name); len(msgs) > 0 {
				for _, msg := range msgs {
					errs = append(errs, field.Invalid(p.Child("name"), port.Name, msg))
				}
			} else if names.Has(port.Name) {
				errs = append(errs, field.Duplicate(p.Child("name"), port.Name))
			}
			names.Insert(port.Name)
		}
		if port.ContainerPort == 0 {
			errs = append(errs, field.Required(p.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
				errs = append(errs, field.Invalid(p.Child("containerPort"), port.ContainerPort, msg))
			}
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(p.Child("hostPort"), port.HostPort, msg))
			}
		}
		if port.HostIP != "" {
			errs = append(errs, validation.IsValidIP(p.Child("hostIP"), port.HostIP)...)
		}
		switch port.Protocol {
		case v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
		case "":
			errs = append(errs, field.Required(p.Child("protocol"), ""))
		default:
			errs = append(errs, field.NotSupported(p.Child("protocol"), port.Protocol, []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}))
		}
	}
	return errs
}

// hostPortConflicts refuses two ports of the containers bound to the same
// host port, protocol and address.
func hostPortConflicts(containers []v1.Container, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, c := range containers {
		for j, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			key := fmt.Sprintf("%s/%s/%d", port.Protocol, port.HostIP, port.HostPort)
			if seen.Has(key) {
				errs = append(errs, field.Duplicate(path.Index(i).Child("ports").Index(j).Child("hostPort"), key))
			}
			seen.Insert(key)
		}
	}
	return errs
}

// The downward API fields an environment variable may read.
var envFieldPaths = []string{"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"}

// The downward API fields a volume file may hold.
var volumeFieldPaths = []string{"metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid"}

// The container resources the downward API exposes (besides hugepages-*).
var resourceFieldPaths = []string{"limits.cpu", "limits.ephemeral-storage", "limits.memory", "requests.cpu", "requests.ephemeral-storage", "requests.memory"}

func validateEnv(c *v1.Container, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, e := range c.Env {
		p := path.Child("env").Index(i)
		if e.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else {
			for _, msg := range validation.IsRelaxedEnvVarName(e.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), e.Name, msg))
			}
		}
		from := e.ValueFrom
		if from == nil {
			continue
		}
		fp := p.Child("valueFrom")
		n := 0
		if from.FieldRef != nil {
			n++
			errs = append(errs, validateFieldRef(from.FieldRef, envFieldPaths, fp.Child("fieldRef"))...)
		}
		if from.ResourceFieldRef != nil {
			n++
			errs = append(errs, validateResourceFieldRef(from.ResourceFieldRef, false, fp.Child("resourceFieldRef"))...)
		}
		if r := from.ConfigMapKeyRef; r != nil {
			n++
			errs = append(errs, validateKeyRef(r.Name, r.Key, fp.Child("configMapKeyRef"))...)
		}
		if r := from.SecretKeyRef; r != nil {
			n++
			errs = append(errs, validateKeyRef(r.Name, r.Key, fp.Child("secretKeyRef"))...)
		}
		if r := from.FileKeyRef; r != nil {
			n++
			rp := fp.Child("fileKeyRef")
			if r.Path == "" {
				errs = append(errs, field.Required(rp.Child("path"), ""))
			} else {
				errs = append(errs, localNonReservedPath(r.Path, rp.Child("path"))...)
			}
			if r.Key == "" {
				errs = append(errs, field.Required(rp.Child("key"), ""))
			} else {
				for _, msg := range validation.IsRelaxedEnvVarName(r.Key) {
					errs = append(errs, field.Invalid(rp.Child("key"), r.Key, msg))
				}
			}
		}
		switch {
		case n == 0:
			errs = append(errs, field.Invalid(fp, "", "must set one of fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef or fileKeyRef"))
		case e.Value != "":
			errs = append(errs, field.Invalid(fp, "", "may not be set when `value` is not empty"))
		case n > 1:
			errs = append(errs, field.Invalid(fp, "", "may set only one source"))
		}
	}
	for i, e := range c.EnvFrom {
		p := path.Child("envFrom").Index(i)
		if e.Prefix != "" {
			for _, msg := range validation.IsRelaxedEnvVarName(e.Prefix) {
				errs = append(errs, field.Invalid(p.Child("prefix"), e.Prefix, msg))
			}
		}
		n := 0
		if e.ConfigMapRef != nil {
			n++
			errs = append(errs, objectName(e.ConfigMapRef.Name, p.Child("configMapRef", "name"))...)
		}
		if e.SecretRef != nil {
			n++
			errs = append(errs, objectName(e.SecretRef.Name, p.Child("secretRef", "name"))...)
		}
		if n != 1 {
			errs = append(errs, field.Invalid(p, "", "must set exactly one of configMapRef or secretRef"))
		}
	}
	return errs
}

func objectName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	return dnsSubdomain(name, path)
}

func validateKeyRef(name, key string, path *field.Path) field.ErrorList {
	errs := dnsSubdomain(name, path.Child("name"))
	if key == "" {
		return append(errs, field.Required(path.Child("key"), ""))
	}
	for _, msg := range validation.IsConfigMapKey(key) {
		errs = append(errs, field.Invalid(path.Child("key"), key, msg))
	}
	return errs
}

// validateFieldRef checks a downward API field: version v1 and one of the
// allowed paths, or a label or annotation by key.
func validateFieldRef(f *v1.ObjectFieldSelector, allowed []string, path *field.Path) field.ErrorList {
	if f.APIVersion == "" {
		return field.ErrorList{field.Required(path.Child("apiVersion"), "")}
	}
	if f.APIVersion != "v1" {
		return field.ErrorList{field.NotSupported(path.Child("apiVersion"), f.APIVersion, []string{"v1"})}
	}
	if f.FieldPath == "" {
		return field.ErrorList{field.Required(path.Child("fieldPath"), "")}
	}
	for _, prefix := range []string{"metadata.labels", "metadata.annotations"} {
		rest, ok := strings.CutPrefix(f.FieldPath, prefix+"['")
		if !ok || !strings.HasSuffix(rest, "']") {
			continue
		}
		key := strings.TrimSuffix(rest, "']")
		if prefix == "metadata.annotations" {
			key = strings.ToLower(key)
		}
		var errs field.ErrorList
		for _, msg := range validation.IsQualifiedName(key) {
			errs = append(errs, field.Invalid(path.Child("fieldPath"), f.FieldPath, msg))
		}
		return errs
	}
	if !sets.New(allowed...).Has(f.FieldPath) {
		return field.ErrorList{field.NotSupported(path.Child("fieldPath"), f.FieldPath, allowed)}
	}
	return nil
}

func validateResourceFieldRef(f *v1.ResourceFieldSelector, volume bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case volume && f.ContainerName == "":
		errs = append(errs, field.Required(path.Child("containerName"), ""))
	case f.Resource == "":
		errs = append(errs, field.Required(path.Child("resource"), ""))
	case !sets.New(resourceFieldPaths...).Has(f.Resource) && !strings.HasPrefix(f.Resource, "requests.hugepages-") && !strings.HasPrefix(f.Resource, "limits.hugepages-"):
		errs = append(errs, field.NotSupported(path.Child("resource"), f.Resource, resourceFieldPaths))
	}
	if f.Divisor.Sign() < 0 {
		errs = append(errs, field.Invalid(path.Child("divisor"), f.Divisor.String(), "must not be negative"))
	}
	return errs
}

// validateEnvFileVolumes checks that a fileKeyRef names an emptyDir volume
// of the pod.
func validateEnvFileVolumes(spec *v1.PodSpec, volumes map[string]v1.VolumeSource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(cs []v1.Container, cpath *field.Path) {
		for i, c := range cs {
			for j, e := range c.Env {
				if e.ValueFrom == nil || e.ValueFrom.FileKeyRef == nil {
					continue
				}
				name := e.ValueFrom.FileKeyRef.VolumeName
				p := cpath.Index(i).Child("env").Index(j).Child("valueFrom", "fileKeyRef", "volumeName")
				if src, ok := volumes[name]; !ok {
					errs = append(errs, field.NotFound(p, name))
				} else if src.EmptyDir == nil {
					errs = append(errs, field.Invalid(p, name, "must name an emptyDir volume"))
				}
			}
		}
	}
	check(spec.Containers, path.Child("containers"))
	check(spec.InitContainers, path.Child("initContainers"))
	return errs
}

func validateMounts(c *v1.Container, volumes map[string]v1.VolumeSource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	add := func(e ...*field.Error) { errs = append(errs, e...) }
	// devices maps each device's name to its path (the last one for a
	// name given twice); paths holds the paths met so far that have no
	// "..".
	devices := map[string]string{}
	paths := sets.New[string]()
	for i, d := range c.VolumeDevices {
		p := path.Child("volumeDevices").Index(i)
		if d.Name == "" {
			add(field.Required(p.Child("name"), ""))
		} else if src, ok := volumes[d.Name]; !ok {
			add(field.NotFound(p.Child("name"), d.Name))
		} else if src.PersistentVolumeClaim == nil && src.Ephemeral == nil {
			add(field.Invalid(p.Child("name"), d.Name, "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode"))
		}
		if _, dup := devices[d.Name]; dup && d.Name != "" {
			add(field.Invalid(p.Child("name"), d.Name, "must be unique"))
		}
		if d.DevicePath == "" {
			add(field.Required(p.Child("devicePath"), ""))
		}
		if paths.Has(d.DevicePath) {
			add(field.Invalid(p.Child("devicePath"), d.DevicePath, "must be unique"))
		}
		if back := noBacksteps(d.DevicePath, p.Child("devicePath")); len(back) > 0 {
			add(back...)
		} else {
			paths.Insert(d.DevicePath)
		}
		devices[d.Name] = d.DevicePath
	}
	devicePaths := sets.New[string]()
	for _, p := range devices {
		devicePaths.Insert(p)
	}
	privileged := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
	mountPaths := sets.New[string]()
	for i, m := range c.VolumeMounts {
		p := path.Child("volumeMounts").Index(i)
		if m.Name == "" {
			add(field.Required(p.Child("name"), ""))
		} else if _, ok := volumes[m.Name]; !ok {
			add(field.NotFound(p.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			add(field.Required(p.Child("mountPath"), ""))
		} else if mountPaths.Has(m.MountPath) {
			add(field.Invalid(p.Child("mountPath"), m.MountPath, "must be unique"))
		}
		mountPaths.Insert(m.MountPath)
		if _, ok := devices[m.Name]; ok {
			add(field.Invalid(p.Child("name"), m.Name, "must not also be in volumeDevices"))
		}
		if devicePaths.Has(m.MountPath) {
			add(field.Invalid(p.Child("mountPath"), m.MountPath, "must not also be a path in volumeDevices"))
		}
		if m.SubPath != "" {
			add(localDescendingPath(m.SubPath, p.Child("subPath"))...)
		}
		if m.SubPathExpr != "" {
			if m.SubPath != "" {
				add(field.Invalid(p.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
			}
			add(localDescendingPath(m.SubPathExpr, p.Child("subPathExpr"))...)
		}
		if mp := m.MountPropagation; mp != nil {
			switch *mp {
			case v1.MountPropagationNone, v1.MountPropagationHostToContainer:
			case v1.MountPropagationBidirectional:
				if !privileged {
					add(field.Forbidden(p.Child("mountPropagation"), "Bidirectional mount propagation is available only to privileged containers"))
				}
			default:
				add(field.NotSupported(p.Child("mountPropagation"), *mp, []v1.MountPropagationMode{v1.MountPropagationBidirectional, v1.MountPropagationHostToContainer, v1.MountPropagationNone}))
			}
		}
		if r := m.RecursiveReadOnly; r != nil {
			rp := p.Child("recursiveReadOnly")
			switch *r {
			case v1.RecursiveReadOnlyDisabled:
			case v1.RecursiveReadOnlyEnabled, v1.RecursiveReadOnlyIfPossible:
				if !m.ReadOnly {
					add(field.Forbidden(rp, "may only be set when readOnly is true"))
				}
				if m.MountPropagation != nil && *m.MountPropagation != v1.MountPropagationNone {
					add(field.Forbidden(rp, "may only be set when mountPropagation is None or not set"))
				}
			default:
				add(field.NotSupported(rp, *r, []v1.RecursiveReadOnlyMode{v1.RecursiveReadOnlyDisabled, v1.RecursiveReadOnlyEnabled, v1.RecursiveReadOnlyIfPossible}))
			}
		}
		seen := sets.New[string]()
		for j, o := range m.BindMountOptions {
			op := p.Child("bindMountOptions").Index(j)
			switch v1.BindMountOption(o) {
			case v1.BindMountOptionNoExec, v1.BindMountOptionNoDev, v1.BindMountOptionNoSUID:
			default:
				add(field.NotSupported(op, o, []v1.BindMountOption{v1.BindMountOptionNoDev, v1.BindMountOptionNoExec, v1.BindMountOptionNoSUID}))
			}
			if seen.Has(o) {
				add(field.Duplicate(op, o))
			}
			seen.Insert(o)
		}
		if src, ok := volumes[m.Name]; ok && src.Image != nil && len(m.BindMountOptions) > 0 {
			add(field.Invalid(p.Child("bindMountOptions"), m.BindMountOptions, "may not be used with image volumes"))
		}
	}
	return errs
}

// The resources a container may name without a domain.
var containerResources = sets.New(v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage)

// validateResources checks resource names and quantities, and that a
// request does not exceed its limit (and equals it for resources that
// cannot be overcommitted: hugepages and extended resources).
func validateResources(r *v1.ResourceRequirements, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	lpath, rpath := path.Child("limits"), path.Child("requests")
	cpuOrMemory, hugePages := false, false
	check := func(name v1.ResourceName, q resource.Quantity, p *field.Path) {
		errs = append(errs, validateResourceName(name, p)...)
		errs = append(errs, nonNegativeQuantity(q, p)...)
		if isExtendedResource(name) && q.MilliValue()%1000 != 0 {
			errs = append(errs, field.Invalid(p, q.String(), "must be an integer"))
		}
		switch {
		case name == v1.ResourceCPU || name == v1.ResourceMemory:
			cpuOrMemory = true
		case strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix):
			hugePages = true
		}
	}
	for name, q := range r.Limits {
		check(name, q, lpath.Key(string(name)))
	}
	for name, q := range r.Requests {
		check(name, q, rpath.Key(string(name)))
		limit, ok := r.Limits[name]
		overcommit := !isExtendedResource(name) && !strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
		switch {
		case ok && !overcommit && q.Cmp(limit) != 0:
			errs = append(errs, field.Invalid(rpath.Key(string(name)), q.String(), fmt.Sprintf("must be equal to the %s limit of %s", name, limit.String())))
		case ok && q.Cmp(limit) > 0:
			errs = append(errs, field.Invalid(rpath.Key(string(name)), q.String(), fmt.Sprintf("must be less than or equal to the %s limit of %s", name, limit.String())))
		case !ok && !overcommit:
			errs = append(errs, field.Required(lpath.Key(string(name)), "a limit is needed for a resource that cannot be overcommitted"))
		}
	}
	if hugePages && !cpuOrMemory {
		errs = append(errs, field.Forbidden(path, "HugePages require cpu or memory"))
	}
	for i, c := range r.Claims {
		if c.Name == "" {
			errs = append(errs, field.Required(path.Child("claims").Index(i), ""))
		}
	}
	return errs
}

func validateResourceName(name v1.ResourceName, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(name)) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	if len(errs) > 0 {
		return errs
	}
	switch {
	case !strings.Contains(string(name), "/"):
		if !containerResources.Has(name) && !strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
			errs = append(errs, field.Invalid(path, name, "must be a standard resource for containers"))
		}
	case strings.Contains(string(name), v1.ResourceDefaultNamespacePrefix):
	case !isExtendedResource(name):
		errs = append(errs, field.Invalid(path, name, "doesn't follow the extended resource name standard"))
	}
	return errs
}

// isExtendedResource reports a resource outside the kubernetes.io domain
// whose quota name ("requests." + name) is a qualified name.
func isExtendedResource(name v1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, v1.ResourceDefaultNamespacePrefix) || strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+s)) == 0
}

func nonNegativeQuantity(q resource.Quantity, path *field.Path) field.ErrorList {
	if q.Sign() < 0 {
		return field.ErrorList{field.Invalid(path, q.String(), "must be greater than or equal to 0")}
	}
	return nil
}

func validateResizePolicy(policies []v1.ContainerResizePolicy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[v1.ResourceName]()
	for i, p := range policies {
		ip := path.Index(i)
		switch p.ResourceName {
		case v1.ResourceCPU, v1.ResourceMemory:
		case "":
			errs = append(errs, field.Required(ip.Child("resourceName"), ""))
		default:
			errs = append(errs, field.NotSupported(ip.Child("resourceName"), p.ResourceName, []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}))
		}
		if seen.Has(p.ResourceName) {
			errs = append(errs, field.Duplicate(ip.Child("resourceName"), p.ResourceName))
		}
		seen.Insert(p.ResourceName)
		switch p.RestartPolicy {
		case v1.NotRequired, v1.RestartContainer:
		case "":
			errs = append(errs, field.Required(ip.Child("restartPolicy"), ""))
		default:
			errs = append(errs, field.NotSupported(ip.Child("restartPolicy"), p.RestartPolicy, []v1.ResourceResizeRestartPolicy{v1.NotRequired, v1.RestartContainer}))
		}
	}
	return errs
}

func validateSecurityContext(sc *v1.SecurityContext, spec *v1.PodSpec, path *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	errs := ids(sc.RunAsUser, sc.RunAsGroup, path)
	if pm := sc.ProcMount; pm != nil {
		switch *pm {
		case v1.DefaultProcMount:
		case v1.UnmaskedProcMount:
			if spec.HostUsers == nil || *spec.HostUsers {
				errs = append(errs, field.Invalid(path.Child("procMount"), *pm, "`hostUsers` must be false to use Unmasked"))
			}
		default:
			errs = append(errs, field.NotSupported(path.Child("procMount"), *pm, []v1.ProcMountType{v1.DefaultProcMount, v1.UnmaskedProcMount}))
		}
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		if sc.Privileged != nil && *sc.Privileged {
			errs = append(errs, field.Invalid(path, "privileged", "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
		}
		if sc.Capabilities != nil {
			for _, c := range sc.Capabilities.Add {
				if c == "CAP_SYS_ADMIN" {
					errs = append(errs, field.Invalid(path, "CAP_SYS_ADMIN", "cannot set `allowPrivilegeEscalation` to false and add CAP_SYS_ADMIN"))
				}
			}
		}
	}
	errs = append(errs, validateSeccomp(sc.SeccompProfile, path.Child("seccompProfile"))...)
	errs = append(errs, validateAppArmor(sc.AppArmorProfile, path.Child("appArmorProfile"))...)
	return errs
}

// validateLifecycleAndProbes checks the hooks and probes of a regular or
// sidecar container.
func validateLifecycleAndProbes(c *v1.Container, grace *int64, os *v1.PodOS, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if l := c.Lifecycle; l != nil {
		lp := path.Child("lifecycle")
		if l.PostStart != nil {
			errs = append(errs, validateHandler(handler{l.PostStart.Exec, l.PostStart.HTTPGet, l.PostStart.TCPSocket, nil, l.PostStart.Sleep}, grace, lp.Child("postStart"))...)
		}
		if l.PreStop != nil {
			errs = append(errs, validateHandler(handler{l.PreStop.Exec, l.PreStop.HTTPGet, l.PreStop.TCPSocket, nil, l.PreStop.Sleep}, grace, lp.Child("preStop"))...)
		}
		if s := l.StopSignal; s != nil {
			sp := lp.Child("stopSignal")
			switch {
			case os == nil:
				errs = append(errs, field.Forbidden(sp, "may not be set when `spec.os.name` is not set"))
			case os.Name == v1.Windows && *s != v1.SIGKILL && *s != v1.SIGTERM:
				errs = append(errs, field.NotSupported(sp, *s, []v1.Signal{v1.SIGKILL, v1.SIGTERM}))
			case os.Name == v1.Linux && !isLinuxSignal(*s):
				errs = append(errs, field.Invalid(sp, *s, "must be a Linux signal name such as SIGTERM or SIGRTMIN+1"))
			}
		}
	}
	for _, x := range []struct {
		name  string
		probe *v1.Probe
	}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}} {
		pr := x.probe
		if pr == nil {
			continue
		}
		pp := path.Child(x.name)
		h := pr.ProbeHandler
		errs = append(errs, validateHandler(handler{h.Exec, h.HTTPGet, h.TCPSocket, h.GRPC, nil}, grace, pp)...)
		for _, n := range []struct {
			field string
			value int32
		}{{"initialDelaySeconds", pr.InitialDelaySeconds}, {"timeoutSeconds", pr.TimeoutSeconds}, {"periodSeconds", pr.PeriodSeconds}, {"successThreshold", pr.SuccessThreshold}, {"failureThreshold", pr.FailureThreshold}} {
			if n.value < 0 {
				errs = append(errs, field.Invalid(pp.Child(n.field), n.value, "must be greater than or equal to 0"))
			}
		}
		if x.name != "readinessProbe" && pr.SuccessThreshold != 1 {
			errs = append(errs, field.Invalid(pp.Child("successThreshold"), pr.SuccessThreshold, "must be 1"))
		}
		if g := pr.TerminationGracePeriodSeconds; g != nil {
			if x.name == "readinessProbe" {
				errs = append(errs, field.Invalid(pp.Child("terminationGracePeriodSeconds"), *g, "must not be set for readiness probes"))
			} else if *g <= 0 {
				errs = append(errs, field.Invalid(pp.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
			}
		}
	}
	return errs
}

// isLinuxSignal accepts the signal names the API server knows for Linux.
func isLinuxSignal(s v1.Signal) bool {
	switch s {
	case v1.SIGABRT, v1.SIGALRM, v1.SIGBUS, v1.SIGCHLD, v1.SIGCLD, v1.SIGCONT, v1.SIGFPE, v1.SIGHUP,
		v1.SIGILL, v1.SIGINT, v1.SIGIO, v1.SIGIOT, v1.SIGKILL, v1.SIGPIPE, v1.SIGPOLL, v1.SIGPROF,
		v1.SIGPWR, v1.SIGQUIT, v1.SIGSEGV, v1.SIGSTKFLT, v1.SIGSTOP, v1.SIGSYS, v1.SIGTERM, v1.SIGTRAP,
		v1.SIGTSTP, v1.SIGTTIN, v1.SIGTTOU, v1.SIGURG, v1.SIGUSR1, v1.SIGUSR2, v1.SIGVTALRM, v1.SIGWINCH,
		v1.SIGXCPU, v1.SIGXFSZ, v1.SIGRTMIN, v1.SIGRTMAX:
		return true
	}
	for i := 1; i <= 15; i++ {
		if s == v1.Signal(fmt.Sprintf("SIGRTMIN+%d", i)) {
			return true
		}
	}
	for i := 1; i <= 14; i++ {
		if s == v1.Signal(fmt.Sprintf("SIGRTMAX-%d", i)) {
			return true
		}
	}
	return false
}

// handler is the union of the probe and lifecycle handler types.
type handler struct {
	exec  *v1.ExecAction
	http  *v1.HTTPGetAction
	tcp   *v1.TCPSocketAction
	grpc  *v1.GRPCAction
	sleep *v1.SleepAction
}

// validateHandler requires exactly one handler type and checks it.
func validateHandler(h handler, grace *int64, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	one := func(set bool, name string, check func(p *field.Path)) {
		if !set {
			return
		}
		n++
		if n > 1 {
			errs = append(errs, field.Forbidden(path.Child(name), "may not set more than one handler type"))
			return
		}
		check(path.Child(name))
	}
	one(h.exec != nil, "exec", func(p *field.Path) {
		if len(h.exec.Command) == 0 {
			errs = append(errs, field.Required(p.Child("command"), ""))
		}
	})
	one(h.http != nil, "httpGet", func(p *field.Path) {
		if h.http.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), ""))
		}
		errs = append(errs, portNumOrName(h.http.Port, p.Child("port"))...)
		if h.http.Scheme != v1.URISchemeHTTP && h.http.Scheme != v1.URISchemeHTTPS {
			errs = append(errs, field.NotSupported(p.Child("scheme"), h.http.Scheme, []v1.URIScheme{v1.URISchemeHTTP, v1.URISchemeHTTPS}))
		}
		for _, hd := range h.http.HTTPHeaders {
			for _, msg := range validation.IsHTTPHeaderName(hd.Name) {
				errs = append(errs, field.Invalid(p.Child("httpHeaders"), hd.Name, msg))
			}
		}
	})
	one(h.tcp != nil, "tcpSocket", func(p *field.Path) {
		errs = append(errs, portNumOrName(h.tcp.Port, p.Child("port"))...)
	})
	one(h.grpc != nil, "grpc", func(p *field.Path) {
		for _, msg := range validation.IsValidPortNum(int(h.grpc.Port)) {
			errs = append(errs, field.Invalid(p.Child("port"), h.grpc.Port, msg))
		}
	})
	one(h.sleep != nil, "sleep", func(p *field.Path) {
		if grace != nil && (h.sleep.Seconds < 0 || h.sleep.Seconds > *grace) {
			errs = append(errs, field.Invalid(p, h.sleep.Seconds, fmt.Sprintf("must be non-negative and not more than terminationGracePeriodSeconds (%d)", *grace)))
		}
	})
	if n == 0 {
		errs = append(errs, field.Required(path, "must set one handler (exec, httpGet, tcpSocket, grpc or sleep)"))
	}
	return errs
}

func portNumOrName(port intstr.IntOrString, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if port.Type == intstr.String {
		for _, msg := range validation.IsValidPortName(port.StrVal) {
			errs = append(errs, field.Invalid(path, port.StrVal, msg))
		}
		return errs
	}
	for _, msg := range validation.IsValidPortNum(port.IntValue()) {
		errs = append(errs, field.Invalid(path, port.IntValue(), msg))
	}
	return errs
}
