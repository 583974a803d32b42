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
	}
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
		defaultContainer(&s.InitContainers[i])
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i])
	}
	for i := range s.Volumes {
		v := &s.Volumes[i]
		if v.VolumeSource == (v1.VolumeSource{}) {
			v.EmptyDir = &v1.EmptyDirVolumeSource{}
		}
	}
}

func defaultContainer(c *v1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = v1.PullIfNotPresent
		if named, err := reference.ParseNormalizedNamed(c.Image); err == nil {
			_, digested := named.(reference.Digested)
			t, tagged := named.(reference.Tagged)
			if !digested && (!tagged || t.Tag() == "latest") {
				c.ImagePullPolicy = v1.PullAlways
			}
		}
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
		if g := p.HTTPGet; g != nil {
			if g.Path == "" {
				g.Path = "/"
			}
			if g.Scheme == "" {
				g.Scheme = v1.URISchemeHTTP
			}
		}
	}
}
