package podsource

import (
	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
)

// applyDefaults sets the defaults the API server would set on a pod
// (k8s.io/kubernetes pkg/apis/core/v1 defaults, which are not a library):
// the ones a node acts on.
func applyDefaults(pod *v1.Pod) {
	s := &pod.Spec
	if pod.Namespace == "" {
		pod.Namespace = v1.NamespaceDefault
	}
	if s.RestartPolicy == "" {
		s.RestartPolicy = v1.RestartPolicyAlways
	}
	if s.DNSPolicy == "" {
		s.DNSPolicy = v1.DNSClusterFirst
	}
	if s.TerminationGracePeriodSeconds == nil {
		g := int64(v1.DefaultTerminationGracePeriodSeconds)
		s.TerminationGracePeriodSeconds = &g
	} else if *s.TerminationGracePeriodSeconds < 0 {
		// The API server turns a negative grace period into 1.
		g := int64(1)
		s.TerminationGracePeriodSeconds = &g
	}
	if s.ServiceAccountName == "" {
		s.ServiceAccountName = s.DeprecatedServiceAccount //nolint:staticcheck // the alias is kept in sync
	}
	s.DeprecatedServiceAccount = s.ServiceAccountName //nolint:staticcheck
	if s.SchedulerName == "" {
		s.SchedulerName = v1.DefaultSchedulerName
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &v1.PodSecurityContext{}
	}
	if s.EnableServiceLinks == nil {
		t := true
		s.EnableServiceLinks = &t
	}
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i], s.HostNetwork)
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i], s.HostNetwork)
	}
	for i := range s.EphemeralContainers {
		c := v1.Container(s.EphemeralContainers[i].EphemeralContainerCommon)
		defaultContainer(&c, s.HostNetwork)
		s.EphemeralContainers[i].EphemeralContainerCommon = v1.EphemeralContainerCommon(c)
	}
	for i := range s.Volumes {
		defaultVolume(&s.Volumes[i].VolumeSource)
	}
}

func defaultVolume(v *v1.VolumeSource) {
	mode := func(m **int32) {
		if *m == nil {
			x := int32(0o644)
			*m = &x
		}
	}
	switch {
	case *v == (v1.VolumeSource{}):
		v.EmptyDir = &v1.EmptyDirVolumeSource{}
	case v.HostPath != nil && v.HostPath.Type == nil:
		t := v1.HostPathUnset
		v.HostPath.Type = &t
	case v.Secret != nil:
		mode(&v.Secret.DefaultMode)
	case v.ConfigMap != nil:
		mode(&v.ConfigMap.DefaultMode)
	case v.DownwardAPI != nil:
		mode(&v.DownwardAPI.DefaultMode)
		defaultFieldRefs(v.DownwardAPI.Items)
	case v.Projected != nil:
		mode(&v.Projected.DefaultMode)
		for i := range v.Projected.Sources {
			src := &v.Projected.Sources[i]
			if src.DownwardAPI != nil {
				defaultFieldRefs(src.DownwardAPI.Items)
			}
			if t := src.ServiceAccountToken; t != nil && t.ExpirationSeconds == nil {
				hour := int64(3600)
				t.ExpirationSeconds = &hour
			}
		}
	case v.Image != nil && v.Image.PullPolicy == "":
		v.Image.PullPolicy = pullPolicy(v.Image.Reference)
	}
}

func defaultFieldRefs(items []v1.DownwardAPIVolumeFile) {
	for i := range items {
		if f := items[i].FieldRef; f != nil && f.APIVersion == "" {
			f.APIVersion = "v1"
		}
	}
}

// pullPolicy is the API server's default pull policy for an image:
// Always for the latest tag (or no tag), IfNotPresent otherwise.
func pullPolicy(image string) v1.PullPolicy {
	if named, err := reference.ParseNormalizedNamed(image); err == nil {
		_, digested := named.(reference.Digested)
		t, tagged := named.(reference.Tagged)
		if !digested && (!tagged || t.Tag() == "latest") {
			return v1.PullAlways
		}
	}
	return v1.PullIfNotPresent
}

func defaultHTTPGet(g *v1.HTTPGetAction) {
	if g == nil {
		return
	}
	if g.Path == "" {
		g.Path = "/"
	}
	if g.Scheme == "" {
		g.Scheme = v1.URISchemeHTTP
	}
}

func defaultContainer(c *v1.Container, hostNetwork bool) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = pullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = v1.ProtocolTCP
		}
		if hostNetwork && c.Ports[i].HostPort == 0 {
			c.Ports[i].HostPort = c.Ports[i].ContainerPort
		}
	}
	for i := range c.Env {
		if from := c.Env[i].ValueFrom; from != nil && from.FieldRef != nil && from.FieldRef.APIVersion == "" {
			from.FieldRef.APIVersion = "v1"
		}
	}
	if l := c.Lifecycle; l != nil {
		if l.PostStart != nil {
			defaultHTTPGet(l.PostStart.HTTPGet)
		}
		if l.PreStop != nil {
			defaultHTTPGet(l.PreStop.HTTPGet)
		}
	}
	// Requests default to limits.
	for name, q := range c.Resources.Limits {
		if c.Resources.Requests == nil {
			c.Resources.Requests = v1.ResourceList{}
		}
		if _, ok := c.Resources.Requests[name]; !ok {
			c.Resources.Requests[name] = q.DeepCopy()
		}
	}
	for _, p := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p == nil {
			continue
		}
		if p.TimeoutSeconds == 0 {
			p.TimeoutSeconds = 1
		}
		if p.PeriodSeconds == 0 {
			p.PeriodSeconds = 10
		}
		if p.SuccessThreshold == 0 {
			p.SuccessThreshold = 1
		}
		if p.FailureThreshold == 0 {
			p.FailureThreshold = 3
		}
		defaultHTTPGet(p.HTTPGet)
	}
}
