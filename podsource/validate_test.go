package podsource_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsource"
)

// Each case breaks one rule of the API server's pod validation; the error
// must name the field.
func TestValidateAPIServerRules(t *testing.T) {
	base := func() *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "c", Image: "i"}},
			Volumes:    []v1.Volume{{Name: "data"}},
		}}
	}
	c0 := func(p *v1.Pod) *v1.Container { return &p.Spec.Containers[0] }
	quantity := resource.MustParse
	ptr := func(i int64) *int64 { return &i }
	for _, tc := range []struct {
		name   string
		mutate func(*v1.Pod)
		want   string
	}{
		{"valid", func(*v1.Pod) {}, ""},
		{"annotations over 256 KiB", func(p *v1.Pod) {
			p.Annotations = map[string]string{"big": strings.Repeat("x", 256<<10)}
		}, "metadata.annotations: Too long"},
		{"annotation key", func(p *v1.Pod) { p.Annotations = map[string]string{"a b": ""} }, "metadata.annotations: Invalid value: \"a b\""},
		{"label key", func(p *v1.Pod) { p.Labels = map[string]string{"-bad": "x"} }, "metadata.labels: Invalid value: \"-bad\""},
		{"label value", func(p *v1.Pod) { p.Labels = map[string]string{"k": strings.Repeat("v", 64)} }, "metadata.labels: Invalid value"},
		{"name too long", func(p *v1.Pod) { p.Name = strings.Repeat("a", 254) }, "metadata.name: Invalid value"},
		{"name with a path", func(p *v1.Pod) { p.Name = "../x" }, "metadata.name: Invalid value: \"../x\""},
		{"namespace with a path", func(p *v1.Pod) { p.Namespace = "a/b" }, "metadata.namespace: Invalid value: \"a/b\""},
		{"no name", func(p *v1.Pod) { p.Name = "" }, "metadata.name: Required value"},
		{"container name", func(p *v1.Pod) { c0(p).Name = "C_1" }, "spec.containers[0].name: Invalid value: \"C_1\""},
		{"container names unique", func(p *v1.Pod) { p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c", Image: "i"}) }, "spec.containers[1].name: Duplicate value: \"c\""},
		{"image required", func(p *v1.Pod) { c0(p).Image = "" }, "spec.containers[0].image: Required value"},
		{"image whitespace", func(p *v1.Pod) { c0(p).Image = " i" }, "spec.containers[0].image: Invalid value"},
		{"pull policy", func(p *v1.Pod) { c0(p).ImagePullPolicy = "Sometimes" }, "spec.containers[0].imagePullPolicy: Unsupported value"},
		{"termination message policy", func(p *v1.Pod) { c0(p).TerminationMessagePolicy = "X" }, "spec.containers[0].terminationMessagePolicy: Unsupported value"},
		{"container port range", func(p *v1.Pod) { c0(p).Ports = []v1.ContainerPort{{ContainerPort: 70000}} }, "spec.containers[0].ports[0].containerPort: Invalid value: 70000"},
		{"container port required", func(p *v1.Pod) { c0(p).Ports = []v1.ContainerPort{{HostPort: 80}} }, "spec.containers[0].ports[0].containerPort: Required value"},
		{"host port range", func(p *v1.Pod) { c0(p).Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: -1}} }, "spec.containers[0].ports[0].hostPort: Invalid value: -1"},
		{"port protocol", func(p *v1.Pod) { c0(p).Ports = []v1.ContainerPort{{ContainerPort: 80, Protocol: "ICMP"}} }, "spec.containers[0].ports[0].protocol: Unsupported value"},
		{"port names unique", func(p *v1.Pod) {
			c0(p).Ports = []v1.ContainerPort{{Name: "web", ContainerPort: 80}, {Name: "web", ContainerPort: 81}}
		}, "spec.containers[0].ports[1].name: Duplicate value"},
		{"host ports conflict", func(p *v1.Pod) {
			c0(p).Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "d", Image: "i", Ports: []v1.ContainerPort{{ContainerPort: 81, HostPort: 8080}}})
		}, "spec.containers[1].ports[0].hostPort: Duplicate value"},
		{"hostNetwork host port", func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			c0(p).Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 81}}
		}, "spec.containers[0].ports[0].hostPort: Invalid value: 81: must match `containerPort`"},
		{"volume names unique", func(p *v1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "data"}) }, "spec.volumes[1].name: Duplicate value: \"data\""},
		{"volume name", func(p *v1.Pod) { p.Spec.Volumes[0].Name = "a.b" }, "spec.volumes[0].name: Invalid value: \"a.b\""},
		{"two volume types", func(p *v1.Pod) {
			p.Spec.Volumes[0].EmptyDir = &v1.EmptyDirVolumeSource{}
			p.Spec.Volumes[0].HostPath = &v1.HostPathVolumeSource{Path: "/x"}
		}, "spec.volumes[0].emptyDir: Forbidden: may not set more than one volume type"},
		{"hostPath type", func(p *v1.Pod) {
			t := v1.HostPathType("Sometimes")
			p.Spec.Volumes[0].HostPath = &v1.HostPathVolumeSource{Path: "/x", Type: &t}
		}, "spec.volumes[0].hostPath.type: Unsupported value"},
		{"secret item path absolute", func(p *v1.Pod) {
			p.Spec.Volumes[0].Secret = &v1.SecretVolumeSource{SecretName: "s", Items: []v1.KeyToPath{{Key: "k", Path: "/etc/passwd"}}}
		}, "spec.volumes[0].secret.items[0].path: Invalid value: \"/etc/passwd\": must be a relative path"},
		{"configMap mode", func(p *v1.Pod) {
			m := int32(0o1777)
			p.Spec.Volumes[0].ConfigMap = &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "c"}, DefaultMode: &m}
		}, "spec.volumes[0].configMap.defaultMode: Invalid value"},
		{"mount refers to a volume", func(p *v1.Pod) { c0(p).VolumeMounts = []v1.VolumeMount{{Name: "nope", MountPath: "/x"}} }, "spec.containers[0].volumeMounts[0].name: Not found: \"nope\""},
		{"mount paths unique", func(p *v1.Pod) {
			c0(p).VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/x"}, {Name: "data", MountPath: "/x"}}
		}, "spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/x\": must be unique"},
		{"bidirectional unprivileged", func(p *v1.Pod) {
			b := v1.MountPropagationBidirectional
			c0(p).VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/x", MountPropagation: &b}}
		}, "spec.containers[0].volumeMounts[0].mountPropagation: Forbidden"},
		{"restart policy", func(p *v1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, "spec.restartPolicy: Unsupported value"},
		{"dns policy", func(p *v1.Pod) { p.Spec.DNSPolicy = "Google" }, "spec.dnsPolicy: Unsupported value"},
		{"dns none needs config", func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSNone }, "spec.dnsConfig: Required value"},
		{"dns nameserver", func(p *v1.Pod) { p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"dns.example"}} }, "spec.dnsConfig.nameservers[0]: Invalid value"},
		{"requests above limits", func(p *v1.Pod) {
			c0(p).Resources = v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: quantity("1")}, Requests: v1.ResourceList{v1.ResourceCPU: quantity("2")}}
		}, "spec.containers[0].resources.requests[cpu]: Invalid value: \"2\": must be less than or equal to the cpu limit of 1"},
		{"negative request", func(p *v1.Pod) { c0(p).Resources.Requests = v1.ResourceList{v1.ResourceMemory: quantity("-1")} }, "spec.containers[0].resources.requests[memory]: Invalid value"},
		{"unknown resource", func(p *v1.Pod) { c0(p).Resources.Requests = v1.ResourceList{"gpus": quantity("1")} }, "spec.containers[0].resources.requests[gpus]: Invalid value: \"gpus\": must be a standard resource"},
		{"extended resource needs a limit", func(p *v1.Pod) { c0(p).Resources.Requests = v1.ResourceList{"example.com/gpu": quantity("1")} }, "spec.containers[0].resources.limits[example.com/gpu]: Required value"},
		{"probe without handler", func(p *v1.Pod) { c0(p).ReadinessProbe = &v1.Probe{} }, "spec.containers[0].readinessProbe: Required value"},
		{"probe with two handlers", func(p *v1.Pod) {
			c0(p).LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}, TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
		}, "spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not set more than one handler type"},
		{"probe port", func(p *v1.Pod) {
			c0(p).ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(0)}}}
		}, "spec.containers[0].readinessProbe.httpGet.port: Invalid value: 0"},
		{"exec probe command", func(p *v1.Pod) { c0(p).StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{}}} }, "spec.containers[0].startupProbe.exec.command: Required value"},
		{"liveness success threshold", func(p *v1.Pod) {
			c0(p).LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}, SuccessThreshold: 2}
		}, "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"},
		{"negative probe period", func(p *v1.Pod) {
			c0(p).ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: -1}
		}, "spec.containers[0].readinessProbe.periodSeconds: Invalid value: -1"},
		{"preStop sleep beyond grace", func(p *v1.Pod) {
			c0(p).Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 31}}}
		}, "spec.containers[0].lifecycle.preStop.sleep: Invalid value: 31"},
		{"init container probe", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "i", ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}}}
		}, "spec.initContainers[0].readinessProbe: Forbidden"},
		{"env var name", func(p *v1.Pod) { c0(p).Env = []v1.EnvVar{{Name: "A=B"}} }, "spec.containers[0].env[0].name: Invalid value: \"A=B\""},
		{"env value and valueFrom", func(p *v1.Pod) {
			c0(p).Env = []v1.EnvVar{{Name: "A", Value: "x", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		}, "spec.containers[0].env[0].valueFrom: Invalid value: \"\": may not be set when `value` is not empty"},
		{"env field path", func(p *v1.Pod) {
			c0(p).Env = []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.secret"}}}}
		}, "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value: \"spec.secret\""},
		{"envFrom without source", func(p *v1.Pod) { c0(p).EnvFrom = []v1.EnvFromSource{{Prefix: "X_"}} }, "spec.containers[0].envFrom[0]: Invalid value"},
		{"run as user", func(p *v1.Pod) { c0(p).SecurityContext = &v1.SecurityContext{RunAsUser: ptr(-1)} }, "spec.containers[0].securityContext.runAsUser: Invalid value: -1"},
		{"seccomp profile path", func(p *v1.Pod) {
			lp := "../../etc/x"
			p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: &lp}}
		}, "spec.securityContext.seccompProfile.localhostProfile: Invalid value: \"../../etc/x\": must not contain '..'"},
		{"fsGroup", func(p *v1.Pod) { p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr(-5)} }, "spec.securityContext.fsGroup: Invalid value: -5"},
		{"container restart policy", func(p *v1.Pod) {
			x := v1.ContainerRestartPolicy("Sometimes")
			c0(p).RestartPolicy = &x
		}, "spec.containers[0].restartPolicy: Unsupported value: \"Sometimes\""},
		{"init restart policy", func(p *v1.Pod) {
			x := v1.ContainerRestartPolicy("Sometimes")
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "i", RestartPolicy: &x}}
		}, "spec.initContainers[0].restartPolicy: Unsupported value: \"Sometimes\""},
		{"ephemeral containers", func(p *v1.Pod) {
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "e", Image: "i"}}}
		}, "spec.ephemeralContainers: Forbidden"},
		{"active deadline", func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(0) }, "spec.activeDeadlineSeconds: Invalid value: 0"},
		{"hostname", func(p *v1.Pod) { p.Spec.Hostname = "a.b" }, "spec.hostname: Invalid value: \"a.b\""},
		{"node selector", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"a b": "c"} }, "spec.nodeSelector: Invalid value: \"a b\""},
		{"toleration operator", func(p *v1.Pod) { p.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: "Maybe"}} }, "spec.tolerations[0].operator: Unsupported value"},
		{"host alias ip", func(p *v1.Pod) { p.Spec.HostAliases = []v1.HostAlias{{IP: "nope"}} }, "spec.hostAliases[0].ip: Invalid value"},
		{"readiness gate", func(p *v1.Pod) { p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "a b"}} }, "spec.readinessGates[0].conditionType: Invalid value"},
		{"sysctl name", func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "net/../x"}}}
		}, "spec.securityContext.sysctls[0].name: Invalid value"},
		{"service account name", func(p *v1.Pod) { p.Spec.ServiceAccountName = "A/B" }, "spec.serviceAccountName: Invalid value"},
		{"os name", func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: "plan9"} }, "spec.os.name: Unsupported value"},
		{"scheduling gates", func(p *v1.Pod) { p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "g"}} }, "spec.schedulingGates: Forbidden"},
		{"preemption policy", func(p *v1.Pod) { x := v1.PreemptionPolicy("Always"); p.Spec.PreemptionPolicy = &x }, "spec.preemptionPolicy: Unsupported value"},
		{"hostnameOverride with hostNetwork", func(p *v1.Pod) { h := "x"; p.Spec.HostNetwork = true; p.Spec.HostnameOverride = &h }, "spec.hostnameOverride: Forbidden"},
		{"projected token without service account", func(p *v1.Pod) {
			p.Spec.Volumes[0].Projected = &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "t"}}}}
		}, "spec.volumes[0].projected.sources[0].serviceAccountToken: Forbidden"},
		{"downward API item path", func(p *v1.Pod) {
			p.Spec.Volumes[0].DownwardAPI = &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{{Path: "../x", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		}, "spec.volumes[0].downwardAPI.items[0].path: Invalid value: \"../x\": must not contain '..'"},
		{"hugepages alone", func(p *v1.Pod) {
			c0(p).Resources.Limits = v1.ResourceList{"hugepages-2Mi": quantity("2Mi")}
		}, "spec.containers[0].resources: Forbidden: HugePages require cpu or memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			tc.mutate(p)
			got := podsource.Validate(p).ToAggregate()
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("unexpected errors: %v", got)
			case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
				t.Errorf("errors %v, want %q", got, tc.want)
			}
		})
	}
}

// Validate applies the defaults to a copy, and leaves its argument alone.
func TestValidateDoesNotModify(t *testing.T) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "i"}}}}
	if errs := podsource.Validate(p); len(errs) > 0 {
		t.Fatal(errs)
	}
	if p.Namespace != "" || p.Spec.RestartPolicy != "" {
		t.Errorf("Validate modified the pod: %+v", p)
	}
}

// A manifest over the size limit is refused (before it is read whole),
// as is one whose annotations pass the API server's 256 KiB budget; the
// other manifests are unaffected.
func TestFileSourceSizeLimits(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "web.yaml", webYAML)
	// 11 MiB: a valid manifest padded with a YAML comment.
	write(t, dir, "huge.yaml", strings.Replace(jobJSON, "job", "huge", 1)+"\n#"+strings.Repeat("x", 11<<20)+"\n")
	// 300 KiB of annotations, well under the file limit.
	write(t, dir, "annotated.yaml", fmt.Sprintf("metadata: {name: annotated, annotations: {note: %q}}\nspec: {containers: [{name: c, image: busybox}]}\n", strings.Repeat("a", 300<<10)))
	var ev events
	src, err := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "n", Events: ev.record})
	if err != nil {
		t.Fatal(err)
	}
	u := next(t, run(t, src))
	if got := names(u.Pods); len(got) != 1 || got[0] != "default/web-n" {
		t.Errorf("pods %v, want only default/web-n", got)
	}
	all := strings.Join(ev.all(), "\n")
	for _, want := range []string{
		"huge.yaml: the file has ",
		"bytes, more than the limit of 10485760",
		"annotated.yaml: pod default/annotated-n: metadata.annotations: Too long",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("events lack %q:\n%.2000s", want, all)
		}
	}

	// The limit can be set.
	small, err := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "n", MaxManifestBytes: 64, Events: ev.record})
	if err != nil {
		t.Fatal(err)
	}
	if u := next(t, run(t, small)); len(u.Pods) != 0 {
		t.Errorf("with a 64-byte limit: pods %v", names(u.Pods))
	}
}

// An HTTP body over the limit is refused, whether or not the response
// states its length.
func TestHTTPSourceBodyLimit(t *testing.T) {
	body := webYAML + "\n#" + strings.Repeat("x", 2048) + "\n"
	for _, chunked := range []bool{false, true} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if chunked {
				w.(http.Flusher).Flush()
			}
			w.Write([]byte(body))
		}))
		got := make(chan string, 10)
		record := func(_ *v1.Pod, _, _, msg string) {
			select {
			case got <- msg:
			default:
			}
		}
		clk := clocktesting.NewFakeClock(time.Now())
		src, _ := podsource.NewHTTP(podsource.HTTPConfig{URL: srv.URL, NodeName: "n", MaxBodyBytes: 1024, Clock: clk, Events: record})
		ch := run(t, src)
		select {
		case msg := <-got:
			if !strings.Contains(msg, "more than the limit of 1024") {
				t.Errorf("chunked=%v: event %q does not tell the body is too large", chunked, msg)
			}
		case u := <-ch:
			t.Errorf("chunked=%v: an oversized body was accepted: %v", chunked, names(u.Pods))
		case <-time.After(10 * time.Second):
			t.Fatalf("chunked=%v: no event within 10s", chunked)
		}
		srv.Close()
	}
}

// An empty file is reported as such, naming the file, instead of as a pod
// with an empty name.
func TestFileSourceEmptyManifest(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "empty.yaml", "")
	write(t, dir, "blank.yaml", "\n  \n")
	write(t, dir, "comments.yaml", "# nothing here\n")
	write(t, dir, "noname.yaml", "spec: {containers: [{name: c, image: busybox}]}\n")
	write(t, dir, "web.yaml", webYAML)
	var ev events
	src, _ := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "n", Events: ev.record})
	if u := next(t, run(t, src)); len(u.Pods) != 1 {
		t.Errorf("pods %v, want web only", names(u.Pods))
	}
	all := strings.Join(ev.all(), "\n")
	for _, want := range []string{
		filepath.Join(dir, "empty.yaml") + ": the file is empty",
		filepath.Join(dir, "blank.yaml") + ": the file is empty",
		filepath.Join(dir, "comments.yaml") + ": holds no object",
		filepath.Join(dir, "noname.yaml") + ": metadata.name: Required value",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("events lack %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "-n\"") {
		t.Errorf("an event speaks of a name made of the node suffix alone:\n%s", all)
	}
}

// A hostPath or a subPath climbing out with ".." is refused with an
// error naming the pod and the field.
func TestFileSourceRefusesBacksteps(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "host.yaml", `metadata: {name: host}
spec:
  volumes: [{name: v, hostPath: {path: /var/lib/../../etc}}]
  containers: [{name: c, image: busybox}]
`)
	write(t, dir, "sub.yaml", `metadata: {name: sub}
spec:
  volumes: [{name: v}]
  containers: [{name: c, image: busybox, volumeMounts: [{name: v, mountPath: /x, subPath: a/../../b}]}]
`)
	write(t, dir, "web.yaml", webYAML)
	var ev events
	src, _ := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "n", Events: ev.record})
	if u := next(t, run(t, src)); len(u.Pods) != 1 {
		t.Errorf("pods %v, want web only", names(u.Pods))
	}
	all := strings.Join(ev.all(), "\n")
	for _, want := range []string{
		`pod default/host-n: spec.volumes[0].hostPath.path: Invalid value: "/var/lib/../../etc": must not contain '..'`,
		`pod default/sub-n: spec.containers[0].volumeMounts[0].subPath: Invalid value: "a/../../b": must not contain '..'`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("events lack %q:\n%s", want, all)
		}
	}
}

// The API server's defaults are applied to a manifest, a negative grace
// period becoming 1 and host ports following container ports under
// hostNetwork.
func TestFileSourceDefaults(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "p.yaml", `metadata: {name: p}
spec:
  terminationGracePeriodSeconds: -5
  hostNetwork: true
  containers:
  - name: c
    image: busybox
    ports: [{containerPort: 8080}]
    lifecycle: {preStop: {httpGet: {port: 8080}}}
    env: [{name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]
`)
	var ev events
	src, _ := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "n", Events: ev.record})
	u := next(t, run(t, src))
	if len(u.Pods) != 1 {
		t.Fatalf("pods %v, events %v", names(u.Pods), ev.all())
	}
	s := u.Pods[0].Spec
	c := s.Containers[0]
	if *s.TerminationGracePeriodSeconds != 1 || c.Ports[0].HostPort != 8080 || c.ImagePullPolicy != v1.PullAlways ||
		c.Lifecycle.PreStop.HTTPGet.Path != "/" || c.Env[0].ValueFrom.FieldRef.APIVersion != "v1" {
		t.Errorf("defaults not applied: grace %d, hostPort %d, pull %s, preStop %+v, env %+v", *s.TerminationGracePeriodSeconds, c.Ports[0].HostPort,
			c.ImagePullPolicy, c.Lifecycle.PreStop.HTTPGet, c.Env[0].ValueFrom.FieldRef)
	}
}

// The message about a pod with thousands of errors lists the first 100
// and counts the others, and a list that every error carries whole is
// given as its count: the message stays small, and its cost linear, from
// a File source and in the Merger alike.
func TestInvalidPodMessageIsBounded(t *testing.T) {
	const items = 5000
	env := strings.TrimSuffix(strings.Repeat("{}, ", items), ", ")
	envYAML := "metadata: {name: env}\nspec: {containers: [{name: c, image: busybox, env: [" + env + "]}]}\n"
	var refs []string
	for i := range 150 {
		refs = append(refs, fmt.Sprintf("{apiVersion: v1, kind: Thing, name: t%d, uid: u%d, controller: true}", i, i))
	}
	ownedYAML := "metadata: {name: owned, ownerReferences: [" + strings.Join(refs, ", ") + "]}\nspec: {containers: [{name: c, image: busybox}]}\n"
	const limit = 32 << 10
	check := func(t *testing.T, all []string, parts ...string) {
		t.Helper()
		for _, e := range all {
			if !strings.Contains(e, parts[0]) {
				continue
			}
			for _, p := range parts[1:] {
				if !strings.Contains(e, p) {
					t.Errorf("the event about %s lacks %q: %.1000s", parts[0], p, e)
				}
			}
			if len(e) > limit {
				t.Errorf("the event about %s has %d bytes, want at most %d", parts[0], len(e), limit)
			}
			return
		}
		t.Errorf("no event about %s; events: %.2000s", parts[0], strings.Join(all, "\n"))
	}

	t.Run("file", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "env.yaml", envYAML)
		write(t, dir, "owned.yaml", ownedYAML)
		write(t, dir, "web.yaml", webYAML)
		var ev events
		src, err := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "n", Events: ev.record})
		if err != nil {
			t.Fatal(err)
		}
		if u := next(t, run(t, src)); !cmp.Equal(names(u.Pods), []string{"default/web-n"}) {
			t.Errorf("pods %v, want default/web-n", names(u.Pods))
		}
		check(t, ev.all(), "env.yaml: pod default/env-n: [spec.containers[0].env[0].name: Required value, ",
			"spec.containers[0].env[99].name: Required value] and 4900 more errors")
		check(t, ev.all(), "owned.yaml: pod default/owned-n: [metadata.ownerReferences: Invalid value: \"<150 items>\": Only one reference can have Controller set to true",
			"for Thing/t0 and Thing/t1, ", "for Thing/t0 and Thing/t100] and 49 more errors")
	})

	t.Run("merger", func(t *testing.T) {
		ch := podsource.NewChannel("api", 1)
		var ev events
		_, read := startMerger(t, &ev, ch)
		bad := pod("env", "env")
		bad.Spec.Containers[0].Env = make([]v1.EnvVar, items)
		ch.Send(context.Background(), podsource.Update{Op: podsource.SET, Pods: []*v1.Pod{bad, pod("ok", "ok")}})
		expectUpdates(t, read, "ADD api ns/ok")
		check(t, ev.all(), "FailedValidation: pod ns/env (UID \"uid-env\") from source api: [spec.containers[0].env[0].name: Required value, ",
			"spec.containers[0].env[99].name: Required value] and 4900 more errors")
	})
}

// Device paths are unique across a container's volumeDevices, whatever
// the names, and a mount path may not be a device path; a long list of
// devices gets exactly the errors of its duplicates.
func TestValidateVolumeDevices(t *testing.T) {
	podWith := func(devices []v1.VolumeDevice, mounts []v1.VolumeMount) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "c", Image: "i", VolumeDevices: devices, VolumeMounts: mounts}},
			Volumes:    []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
		}}
		seen := map[string]bool{}
		for _, d := range devices {
			if d.Name != "" && !seen[d.Name] {
				seen[d.Name] = true
				p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: d.Name, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: d.Name}}})
			}
		}
		return p
	}
	messages := func(p *v1.Pod) []string {
		var out []string
		for _, e := range podsource.Validate(p) {
			out = append(out, e.Error())
		}
		return out
	}
	const dev = "spec.containers[0].volumeDevices"
	for _, tc := range []struct {
		name    string
		devices []v1.VolumeDevice
		mounts  []v1.VolumeMount
		want    []string
	}{
		{"unique", []v1.VolumeDevice{{Name: "a", DevicePath: "/dev/a"}, {Name: "b", DevicePath: "/dev/b"}}, nil, nil},
		{"path twice", []v1.VolumeDevice{{Name: "a", DevicePath: "/dev/x"}, {Name: "b", DevicePath: "/dev/x"}}, nil,
			[]string{dev + `[1].devicePath: Invalid value: "/dev/x": must be unique`}},
		{"path twice, behind a name given twice", []v1.VolumeDevice{{Name: "a", DevicePath: "/dev/x"}, {Name: "a", DevicePath: "/dev/y"}, {Name: "b", DevicePath: "/dev/x"}}, nil,
			[]string{dev + `[1].name: Invalid value: "a": must be unique`, dev + `[2].devicePath: Invalid value: "/dev/x": must be unique`}},
		{"no names", []v1.VolumeDevice{{DevicePath: "/dev/a"}, {DevicePath: "/dev/b"}}, nil,
			[]string{dev + "[0].name: Required value", dev + "[1].name: Required value"}},
		{"mount on a device path", []v1.VolumeDevice{{Name: "a", DevicePath: "/dev/a"}, {Name: "b", DevicePath: "/dev/b"}}, []v1.VolumeMount{{Name: "scratch", MountPath: "/dev/b"}},
			[]string{`spec.containers[0].volumeMounts[0].mountPath: Invalid value: "/dev/b": must not also be a path in volumeDevices`}},
	} {
		if diff := cmp.Diff(tc.want, messages(podWith(tc.devices, tc.mounts))); diff != "" {
			t.Errorf("%s: errors (-want +got):\n%s", tc.name, diff)
		}
	}

	const n = 5000
	devices := make([]v1.VolumeDevice, n)
	for i := range devices {
		devices[i] = v1.VolumeDevice{Name: fmt.Sprintf("v%d", i), DevicePath: fmt.Sprintf("/dev/d%d", i)}
	}
	devices[2500].DevicePath = "/dev/d7"
	devices[n-1].DevicePath = "/dev/d2499"
	want := []string{
		dev + `[2500].devicePath: Invalid value: "/dev/d7": must be unique`,
		fmt.Sprintf(`%s[%d].devicePath: Invalid value: "/dev/d2499": must be unique`, dev, n-1),
		`spec.containers[0].volumeMounts[0].mountPath: Invalid value: "/dev/d42": must not also be a path in volumeDevices`,
	}
	if diff := cmp.Diff(want, messages(podWith(devices, []v1.VolumeMount{{Name: "scratch", MountPath: "/dev/d42"}}))); diff != "" {
		t.Errorf("%d devices: errors (-want +got):\n%s", n, diff)
	}
}

// BenchmarkValidateVolumeDevices validates a container with 10000
// volume devices.
func BenchmarkValidateVolumeDevices(b *testing.B) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "i"}}}}
	for i := range 10000 {
		name := fmt.Sprintf("v%d", i)
		p.Spec.Containers[0].VolumeDevices = append(p.Spec.Containers[0].VolumeDevices, v1.VolumeDevice{Name: name, DevicePath: "/dev/" + name})
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: name, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
	}
	b.ReportAllocs()
	for b.Loop() {
		if errs := podsource.Validate(p); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

// Manifests are decoded as by the kubelet: field names match exactly
// ("Name" is not "name"), unknown fields are ignored, and of a key given
// twice the last value counts.
func TestFileSourceMatchesFieldNamesExactly(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "upper.json", `{"apiVersion":"v1","kind":"Pod","metadata":{"Name":"upper"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`)
	write(t, dir, "image.json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"image"},"spec":{"containers":[{"name":"c","IMAGE":"busybox"}]}}`)
	write(t, dir, "extra.yaml", "apiVersion: v1\nkind: Pod\nmadeUp: 1\nmetadata: {name: extra, madeUp: x}\nspec: {containers: [{name: c, image: busybox, madeUp: [1]}]}\n")
	write(t, dir, "twice.json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"first","name":"second"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`)
	var ev events
	src, err := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "n", Events: ev.record})
	if err != nil {
		t.Fatal(err)
	}
	u := next(t, run(t, src))
	if diff := cmp.Diff([]string{"default/extra-n", "default/second-n"}, names(u.Pods)); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
	all := strings.Join(ev.all(), "\n")
	for _, want := range []string{
		"upper.json: metadata.name: Required value",
		"image.json: pod default/image-n: spec.containers[0].image: Required value",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("events lack %q:\n%s", want, all)
		}
	}
}
