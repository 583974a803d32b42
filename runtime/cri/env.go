package cri

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodekit/nodekit/internal/podutil"
	"github.com/nodekit/nodekit/runtime"
)

// envList is an ordered environment in which a later definition of a name
// replaces the earlier value in place.
type envList struct {
	names  []string
	values map[string]string
}

func (e *envList) set(name, value string) {
	if e.values == nil {
		e.values = map[string]string{}
	}
	if _, ok := e.values[name]; !ok {
		e.names = append(e.names, name)
	}
	e.values[name] = value
}

func (e *envList) lookup(name string) (string, bool) {
	v, ok := e.values[name]
	return v, ok
}

// podIPs and the node facts the downward API needs.
type envContext struct {
	pod       *v1.Pod
	container *v1.Container
	field     string // "spec.containers[app]"
	podIPs    []string
}

// makeEnv builds a container's environment as the kubelet does: envFrom
// sources first, in order, then env entries, each value expanded against
// the variables defined before it and then the service variables, and
// last the service variables the container does not define itself.
// Errors name the field.
func (r *Runtime) makeEnv(ctx context.Context, ec envContext) (*envList, error) {
	env := &envList{}
	pod, c := ec.pod, ec.container
	services, err := r.serviceEnv(ctx, pod)
	if err != nil {
		return nil, err
	}
	lookup := func(name string) (string, bool) {
		if v, ok := env.lookup(name); ok {
			return v, true
		}
		return services.lookup(name)
	}
	for i, src := range c.EnvFrom {
		field := fmt.Sprintf("%s.envFrom[%d]", ec.field, i)
		var data map[string]string
		switch {
		case src.ConfigMapRef != nil:
			cm, err := r.configMap(ctx, pod, src.ConfigMapRef.Name, field+".configMapRef")
			if err != nil {
				if isOptional(src.ConfigMapRef.Optional) && isNotFoundObject(err) {
					continue
				}
				return nil, err
			}
			data = cm.Data
		case src.SecretRef != nil:
			s, err := r.secret(ctx, pod, src.SecretRef.Name, field+".secretRef")
			if err != nil {
				if isOptional(src.SecretRef.Optional) && isNotFoundObject(err) {
					continue
				}
				return nil, err
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		default:
			return nil, fmt.Errorf("%s: neither configMapRef nor secretRef is set", field)
		}
		var invalid []string
		for _, k := range slices.Sorted(maps.Keys(data)) {
			name := src.Prefix + k
			if errs := validation.IsEnvVarName(name); len(errs) > 0 {
				invalid = append(invalid, name)
				continue
			}
			env.set(name, data[k])
		}
		if len(invalid) > 0 {
			r.cfg.Events(pod, v1.EventTypeWarning, "InvalidEnvironmentVariableNames",
				fmt.Sprintf("Keys [%s] from %s were skipped since they are invalid environment variable names.", strings.Join(invalid, ", "), field))
		}
	}
	for i, e := range c.Env {
		field := fmt.Sprintf("%s.env[%d] (%s)", ec.field, i, e.Name)
		if e.ValueFrom == nil {
			env.set(e.Name, expand(e.Value, lookup))
			continue
		}
		v, ok, err := r.envValueFrom(ctx, ec, e.ValueFrom, field)
		if err != nil {
			return nil, err
		}
		if ok {
			env.set(e.Name, v)
		}
	}
	for _, name := range services.names {
		if _, ok := env.lookup(name); !ok {
			env.set(name, services.values[name])
		}
	}
	return env, nil
}

func isOptional(b *bool) bool { return b != nil && *b }

// envValueFrom resolves one valueFrom; ok is false for an optional
// reference that is missing.
func (r *Runtime) envValueFrom(ctx context.Context, ec envContext, src *v1.EnvVarSource, field string) (string, bool, error) {
	pod := ec.pod
	switch {
	case src.FieldRef != nil:
		v, err := r.podField(ec, src.FieldRef.FieldPath)
		if err != nil {
			return "", false, fmt.Errorf("%s.valueFrom.fieldRef: %w", field, err)
		}
		return v, true, nil
	case src.ResourceFieldRef != nil:
		v, err := r.resourceField(ec, src.ResourceFieldRef)
		if err != nil {
			return "", false, fmt.Errorf("%s.valueFrom.resourceFieldRef: %w", field, err)
		}
		return v, true, nil
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := r.configMap(ctx, pod, ref.Name, field+".valueFrom.configMapKeyRef")
		if err != nil {
			if isOptional(ref.Optional) && isNotFoundObject(err) {
				return "", false, nil
			}
			return "", false, err
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if isOptional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("%s.valueFrom.configMapKeyRef: couldn't find key %s in ConfigMap %s/%s", field, ref.Key, pod.Namespace, ref.Name)
		}
		return v, true, nil
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := r.secret(ctx, pod, ref.Name, field+".valueFrom.secretKeyRef")
		if err != nil {
			if isOptional(ref.Optional) && isNotFoundObject(err) {
				return "", false, nil
			}
			return "", false, err
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			if isOptional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("%s.valueFrom.secretKeyRef: couldn't find key %s in Secret %s/%s", field, ref.Key, pod.Namespace, ref.Name)
		}
		return string(v), true, nil
	}
	return "", false, fmt.Errorf("%s.valueFrom: no source is set", field)
}

func (r *Runtime) configMap(ctx context.Context, pod *v1.Pod, name, field string) (*v1.ConfigMap, error) {
	if r.cfg.Objects == nil {
		return nil, fmt.Errorf("%s: configMap %s/%s: no object source is configured", field, pod.Namespace, name)
	}
	cm, err := r.cfg.Objects.GetConfigMap(ctx, pod.Namespace, name)
	if isNotFoundObject(err) {
		return nil, fmt.Errorf("%s: configmap %q not found: %w", field, name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: configmap %q: %w", field, name, err)
	}
	return cm, nil
}

func (r *Runtime) secret(ctx context.Context, pod *v1.Pod, name, field string) (*v1.Secret, error) {
	if r.cfg.Objects == nil {
		return nil, fmt.Errorf("%s: secret %s/%s: no object source is configured", field, pod.Namespace, name)
	}
	s, err := r.cfg.Objects.GetSecret(ctx, pod.Namespace, name)
	if isNotFoundObject(err) {
		return nil, fmt.Errorf("%s: secret %q not found: %w", field, name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: secret %q: %w", field, name, err)
	}
	return s, nil
}

// podField resolves a downward-API field path.
func (r *Runtime) podField(ec envContext, path string) (string, error) {
	pod := ec.pod
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		if pod.Spec.NodeName != "" {
			return pod.Spec.NodeName, nil
		}
		return r.cfg.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return first(r.cfg.NodeIPs), nil
	case "status.hostIPs":
		return strings.Join(r.cfg.NodeIPs, ","), nil
	case "status.podIP":
		return first(r.podIPs(ec)), nil
	case "status.podIPs":
		return strings.Join(r.podIPs(ec), ","), nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
}

// podIPs are the sandbox's IPs, or the node's on the host network.
func (r *Runtime) podIPs(ec envContext) []string {
	if ec.pod.Spec.HostNetwork {
		return r.cfg.NodeIPs
	}
	return ec.podIPs
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// subscript parses "prefix['key']".
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}

// resourceField resolves a resourceFieldRef of the container, or of
// the one it names, as the kubelet does (podutil.ResourceFieldValue): a
// limit the container does not set is the pod's, else the node's
// allocatable (Config.NodeAllocatable).
func (r *Runtime) resourceField(ec envContext, ref *v1.ResourceFieldSelector) (string, error) {
	c := ec.container
	if ref.ContainerName != "" && ref.ContainerName != c.Name {
		c = findContainer(ec.pod, ref.ContainerName)
		if c == nil {
			return "", fmt.Errorf("no container named %q", ref.ContainerName)
		}
	}
	return podutil.ResourceFieldValue(ec.pod, c, ref, r.cfg.NodeAllocatable)
}

// findContainer finds a container of any kind by name.
func findContainer(pod *v1.Pod, name string) *v1.Container {
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
			return &c
		}
	}
	return nil
}

func isNotFoundObject(err error) bool { return errors.Is(err, runtime.ErrNotFound) }
