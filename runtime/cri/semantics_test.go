package cri_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// objects is an in-memory cri.ObjectGetter.
type objects struct {
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
}

func (o objects) GetConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	if cm, ok := o.configMaps[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, fmt.Errorf("configmap %s/%s: %w", ns, name, runtime.ErrNotFound)
}

func (o objects) GetSecret(_ context.Context, ns, name string) (*v1.Secret, error) {
	if s, ok := o.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("secret %s/%s: %w", ns, name, runtime.ErrNotFound)
}

// volumeDirs is a cri.Volumes over directories of a test.
type volumeDirs map[string]string

func (v volumeDirs) HostPath(_ *v1.Pod, name string) (string, error) {
	if p, ok := v[name]; ok {
		return p, nil
	}
	return "", fmt.Errorf("volume %q is not mounted", name)
}

// lastStep returns the last step for a container.
func lastStep(res *runtime.SyncResult, target string) *runtime.SyncStep {
	var s *runtime.SyncStep
	for i := range res.Steps {
		if res.Steps[i].Target == target {
			s = &res.Steps[i]
		}
	}
	return s
}

func TestCrashLoopBackOff(t *testing.T) {
	h := newHarness(t, fakecri.Config{}, func(c *cri.Config) {
		c.CrashLoopBackOff = cri.BackOff{Initial: 10 * time.Second, Max: 40 * time.Second}
	})
	pod := testPod(v1.RestartPolicyAlways, nil, "crasher")
	withEnv(&pod.Spec.Containers[0], fakecri.EnvExitCode, "1")
	h.sync(pod) // first start

	// The first restart is immediate; then each waits twice as long as
	// the one before, up to Max.
	h.sync(pod)
	for _, wait := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 40 * time.Second} {
		res := h.rt.SyncPod(h.ctx, pod, h.status(pod))
		s := lastStep(res, "crasher")
		if s.Reason != cri.ReasonCrashLoopBackOff || !strings.Contains(s.Message, "back-off "+wait.String()) {
			t.Fatalf("right after a crash: %+v, want CrashLoopBackOff with back-off %v", s, wait)
		}
		// The refusal says when the back-off ends, for the pod workers.
		until, ok := runtime.BackOffUntil(res.Error())
		if now := h.clock.Now(); !ok || !until.After(now) || until.After(now.Add(wait+time.Millisecond)) {
			t.Fatalf("back-off ends at %v (found %v), want within %v of %v", until, ok, wait, now)
		}
		h.clock.Step(wait - time.Second)
		res = h.rt.SyncPod(h.ctx, pod, h.status(pod))
		if s := lastStep(res, "crasher"); s.Reason != cri.ReasonCrashLoopBackOff {
			t.Fatalf("%v into a %v back-off: %+v, want still backing off", wait-time.Second, wait, s)
		}
		if later, _ := runtime.BackOffUntil(res.Error()); !later.Equal(until) {
			t.Fatalf("the same back-off ends at %v, then at %v", until, later)
		}
		h.clock.Step(time.Second + time.Millisecond)
		if s := lastStep(h.rt.SyncPod(h.ctx, pod, h.status(pod)), "crasher"); s.Err != nil {
			t.Fatalf("after the %v back-off: %+v, want a restart", wait, s)
		}
	}
	if got := states(h.status(pod))["crasher"]; got != "exited/1/5" {
		t.Errorf("crasher %s, want exited with restart count 5", got)
	}
	if len(h.eventsWith("BackOff")) == 0 {
		t.Error("no BackOff event")
	}

	// A changed spec starts afresh: restarted at once.
	pod.Spec.Containers[0].Args = []string{"--fixed"}
	if s := lastStep(h.rt.SyncPod(h.ctx, pod, h.status(pod)), "crasher"); s.Err != nil {
		t.Errorf("after a spec change: %+v, want an immediate restart", s)
	}
}

func TestCrashLoopBackOffResetsAfterALongRun(t *testing.T) {
	h := newHarness(t, fakecri.Config{}, func(c *cri.Config) {
		c.CrashLoopBackOff = cri.BackOff{Initial: 10 * time.Second, Max: 40 * time.Second, Reset: 2 * time.Minute}
	})
	pod := testPod(v1.RestartPolicyAlways, nil, "c")
	withEnv(&pod.Spec.Containers[0], fakecri.EnvExitAfter, "3m", fakecri.EnvExitCode, "1")
	h.sync(pod)
	h.clock.Step(3 * time.Minute) // crash after a long run
	h.sync(pod)                   // immediate restart
	h.clock.Step(3 * time.Minute) // another long run, another crash
	if s := lastStep(h.rt.SyncPod(h.ctx, pod, h.status(pod)), "c"); s.Err != nil {
		t.Errorf("a crash after running longer than Reset: %+v, want an immediate restart", s)
	}
}

func TestEnvironment(t *testing.T) {
	objs := objects{
		configMaps: map[string]*v1.ConfigMap{"ns/settings": {Data: map[string]string{"LEVEL": "debug", "bad-key": "x", "MODE": "fast"}}},
		secrets:    map[string]*v1.Secret{"ns/creds": {Data: map[string][]byte{"token": []byte("s3cret")}}},
	}
	h := newHarness(t, fakecri.Config{}, func(c *cri.Config) {
		c.Objects = objs
		c.NodeName = "node-1"
		c.NodeIPs = []string{"127.0.0.1"}
		c.NodeAllocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}
	})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Labels = map[string]string{"tier": "web"}
	c := &pod.Spec.Containers[0]
	c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}
	c.EnvFrom = []v1.EnvFromSource{
		{Prefix: "CFG_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}}},
		{Prefix: "BAD=", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}}},
	}
	c.Env = []v1.EnvVar{
		{Name: "GREETING", Value: "hello"},
		{Name: "MESSAGE", Value: "$(GREETING) world, $$(GREETING) stays, $(UNDEFINED) too"},
		{Name: "CFG_MODE", Value: "slow"}, // overrides the envFrom value
		{Name: "TOKEN", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "creds"}, Key: "token"}}},
		{Name: "OPTIONAL", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}, Key: "k", Optional: ptr.To(true)}}},
		{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "TIER", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['tier']"}}},
		{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "HOST_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
		{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "MEM_MI", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
		{Name: "CPUS", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}},
	}
	c.Command = []string{"echo", "$(MESSAGE)"}
	c.Args = []string{"$(POD_NAME)", "$$(POD_NAME)"}
	h.sync(pod)

	cfg := h.rec.config("app")
	got := map[string]string{}
	var order []string
	for _, kv := range cfg.GetEnvs() {
		got[kv.GetKey()] = string(kv.GetValue())
		order = append(order, kv.GetKey())
	}
	want := map[string]string{
		"CFG_LEVEL": "debug", "CFG_MODE": "slow", "CFG_bad-key": "x",
		"GREETING": "hello", "MESSAGE": "hello world, $(GREETING) stays, $(UNDEFINED) too",
		"TOKEN": "s3cret", "POD_NAME": "p", "TIER": "web", "NODE": "node-1", "HOST_IP": "127.0.0.1",
		"POD_IP": "127.88.0.1", "MEM_MI": "64", "CPUS": "2",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if order[0] != "CFG_LEVEL" || order[1] != "CFG_MODE" || order[2] != "CFG_bad-key" {
		t.Errorf("env order %v, want envFrom first", order)
	}
	if diff := cmp.Diff([]string{"echo", "hello world, $(GREETING) stays, $(UNDEFINED) too"}, cfg.GetCommand()); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"p", "$(POD_NAME)"}, cfg.GetArgs()); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if ev := h.eventsWith("InvalidEnvironmentVariableNames"); len(ev) != 1 || !strings.Contains(ev[0], "BAD=LEVEL, BAD=MODE, BAD=bad-key") {
		t.Errorf("invalid-name events: %v", ev)
	}
}

func TestEnvironmentErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  v1.EnvVar
		want string
	}{
		{"missing configMap", v1.EnvVar{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}, Key: "k"}}},
			`spec.containers[app].env[0] (X).valueFrom.configMapKeyRef: configmap "absent" not found`},
		{"missing key", v1.EnvVar{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}, Key: "nope"}}},
			"couldn't find key nope in ConfigMap ns/settings"},
		{"bad field path", v1.EnvVar{Name: "X", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nothing"}}},
			`spec.containers[app].env[0] (X).valueFrom.fieldRef: unsupported fieldPath "spec.nothing"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, fakecri.Config{}, func(c *cri.Config) {
				c.Objects = objects{configMaps: map[string]*v1.ConfigMap{"ns/settings": {Data: map[string]string{"k": "v"}}}}
			})
			pod := testPod(v1.RestartPolicyAlways, nil, "app", "other")
			pod.Spec.Containers[0].Env = []v1.EnvVar{tc.env}
			res := h.rt.SyncPod(h.ctx, pod, h.status(pod))
			s := lastStep(res, "app")
			if s.Reason != cri.ReasonCreateContainerConfigError || !strings.Contains(s.Message, tc.want) || !strings.Contains(s.Message, "pod ns/p") {
				t.Errorf("step %+v, want CreateContainerConfigError with %q", s, tc.want)
			}
			if o := lastStep(res, "other"); o.Err != nil {
				t.Errorf("the other container: %v, want it started", o.Err)
			}
		})
	}
}

func TestResourcesAndOOMScores(t *testing.T) {
	q := resource.MustParse
	h := newHarness(t, fakecri.Config{}, func(c *cri.Config) {
		c.NodeAllocatable = v1.ResourceList{v1.ResourceMemory: q("1000Mi")}
	})
	type want struct {
		shares, quota, period, mem, oom int64
	}
	for _, tc := range []struct {
		name string
		res  v1.ResourceRequirements
		want want
	}{
		{"best effort", v1.ResourceRequirements{}, want{shares: 2, oom: 1000}},
		{"guaranteed", v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: q("500m"), v1.ResourceMemory: q("100Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: q("500m"), v1.ResourceMemory: q("100Mi")},
		}, want{shares: 512, quota: 50000, period: 100000, mem: 100 << 20, oom: -997}},
		{"burstable", v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: q("250m"), v1.ResourceMemory: q("250Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: q("1")},
		}, want{shares: 256, quota: 100000, period: 100000, oom: 750}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			pod.Name = strings.ReplaceAll(tc.name, " ", "-")
			pod.UID = types.UID("uid-" + pod.Name)
			pod.Spec.Containers[0].Resources = tc.res
			h.sync(pod)
			r := h.rec.config("app").GetLinux().GetResources()
			got := want{r.GetCpuShares(), r.GetCpuQuota(), r.GetCpuPeriod(), r.GetMemoryLimitInBytes(), r.GetOomScoreAdj()}
			if got != tc.want {
				t.Errorf("resources %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSecurityContext(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app", "root-check", "user-ok")
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](2000), SupplementalGroups: []int64{3000}}
	pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{
		RunAsGroup:               ptr.To[int64](1001),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}, Drop: []v1.Capability{"ALL"}},
		SeccompProfile:           &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
	}
	// runAsNonRoot with the image's root user and no runAsUser fails;
	// with a non-root runAsUser it passes.
	pod.Spec.Containers[1].SecurityContext = &v1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)}
	pod.Spec.Containers[2].SecurityContext = &v1.SecurityContext{RunAsNonRoot: ptr.To(true)}
	res := h.rt.SyncPod(h.ctx, pod, h.status(pod))

	sc := h.rec.config("app").GetLinux().GetSecurityContext()
	if sc.GetRunAsUser().GetValue() != 1000 || sc.GetRunAsGroup().GetValue() != 1001 || !sc.GetNoNewPrivs() || !sc.GetReadonlyRootfs() {
		t.Errorf("security context %v", sc)
	}
	if diff := cmp.Diff([]int64{3000, 2000}, sc.GetSupplementalGroups()); diff != "" {
		t.Errorf("supplemental groups (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"NET_ADMIN"}, sc.GetCapabilities().GetAddCapabilities()); diff != "" {
		t.Errorf("added capabilities (-want +got):\n%s", diff)
	}
	if sc.GetSeccomp().GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault {
		t.Errorf("seccomp %v, want RuntimeDefault", sc.GetSeccomp())
	}
	if !slices.Contains(sc.GetMaskedPaths(), "/proc/kcore") || !slices.Contains(sc.GetReadonlyPaths(), "/proc/sys") {
		t.Errorf("masked %v read-only %v, want the defaults", sc.GetMaskedPaths(), sc.GetReadonlyPaths())
	}
	if s := lastStep(res, "root-check"); s.Reason != cri.ReasonCreateContainerConfigError || !strings.Contains(s.Message, "runAsUser breaks non-root policy") {
		t.Errorf("runAsNonRoot with runAsUser 0: %+v", s)
	}
	if s := lastStep(res, "user-ok"); s.Err != nil {
		t.Errorf("runAsNonRoot with the pod's runAsUser 1000: %v", s.Err)
	}

	// Without any runAsUser, the image's user (root here) decides.
	pod2 := testPod(v1.RestartPolicyAlways, nil, "app")
	pod2.Name, pod2.UID = "p2", "uid-p2"
	pod2.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}
	if s := lastStep(h.rt.SyncPod(h.ctx, pod2, h.status(pod2)), "app"); s.Reason != cri.ReasonCreateContainerConfigError || !strings.Contains(s.Message, "image will run as root") {
		t.Errorf("runAsNonRoot with a root image: %+v", s)
	}
}

func TestVolumeMountsAndSubPaths(t *testing.T) {
	data := t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(data, "escape")); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, fakecri.Config{}, func(c *cri.Config) { c.Volumes = volumeDirs{"data": data} })
	for _, tc := range []struct {
		name    string
		mount   v1.VolumeMount
		env     []v1.EnvVar
		want    string // host path, or an error fragment
		wantErr bool
	}{
		{name: "whole volume", mount: v1.VolumeMount{Name: "data", MountPath: "/data", ReadOnly: true}, want: data},
		{name: "subPath", mount: v1.VolumeMount{Name: "data", MountPath: "/data", SubPath: "a/b"}, want: filepath.Join(data, "a/b")},
		{name: "subPathExpr", mount: v1.VolumeMount{Name: "data", MountPath: "/data", SubPathExpr: "logs/$(POD)"},
			env: []v1.EnvVar{{Name: "POD", Value: "p"}}, want: filepath.Join(data, "logs/p")},
		{name: "dot-dot", mount: v1.VolumeMount{Name: "data", MountPath: "/data", SubPath: "../etc"}, want: "must not contain '..'", wantErr: true},
		{name: "absolute", mount: v1.VolumeMount{Name: "data", MountPath: "/data", SubPath: "/etc"}, want: "must be a relative path", wantErr: true},
		{name: "symlink escape", mount: v1.VolumeMount{Name: "data", MountPath: "/data", SubPath: "escape"}, want: "resolves outside its volume", wantErr: true},
		{name: "unknown volume", mount: v1.VolumeMount{Name: "nope", MountPath: "/x"}, want: `volumeMounts[0] (nope): the pod has no volume named "nope"`, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			pod.Name = strings.ToLower(strings.ReplaceAll(tc.name, " ", "-"))
			pod.UID = types.UID("uid-" + pod.Name)
			pod.Spec.Volumes = []v1.Volume{{Name: "data"}}
			pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{tc.mount}
			pod.Spec.Containers[0].Env = tc.env
			s := lastStep(h.rt.SyncPod(h.ctx, pod, h.status(pod)), "app")
			if tc.wantErr {
				if s.Reason != cri.ReasonCreateContainerConfigError || !strings.Contains(s.Message, tc.want) {
					t.Errorf("step %+v, want CreateContainerConfigError with %q", s, tc.want)
				}
				return
			}
			if s.Err != nil {
				t.Fatal(s.Err)
			}
			m := h.rec.config("app").GetMounts()[0]
			if m.GetHostPath() != tc.want || m.GetContainerPath() != "/data" || m.GetReadonly() != tc.mount.ReadOnly {
				t.Errorf("mount %v, want %s at /data", m, tc.want)
			}
		})
	}
}

func TestTerminationMessage(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyNever, nil, "written", "fallback", "quiet")
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].TerminationMessagePath = "/dev/termination-log"
	}
	withEnv(&pod.Spec.Containers[0], fakecri.EnvExitCode, "1", fakecri.EnvTerminationMessage, "config file is invalid")
	withEnv(&pod.Spec.Containers[1], fakecri.EnvExitCode, "2", fakecri.EnvLog, "starting\npanic: boom")
	pod.Spec.Containers[1].TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	withEnv(&pod.Spec.Containers[2], fakecri.EnvExitCode, "3", fakecri.EnvLog, "not a message")
	h.sync(pod)
	st := h.status(pod)
	for name, want := range map[string]string{"written": "config file is invalid", "fallback": "starting\npanic: boom\n", "quiet": ""} {
		if got := st.FindContainerStatus(name).Message; got != want {
			t.Errorf("%s: message %q, want %q", name, got, want)
		}
	}
	m := h.rec.config("written").GetMounts()
	if len(m) != 2 || m[0].GetContainerPath() != "/etc/hosts" || m[1].GetContainerPath() != "/dev/termination-log" {
		t.Errorf("mounts %v, want the pod's hosts file, then the termination message file", m)
	}
}

func TestDNS(t *testing.T) {
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("# node\nnameserver 127.0.0.53\nsearch node.test\noptions edns0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		cluster []string
		policy  v1.DNSPolicy
		hostNet bool
		config  *v1.PodDNSConfig
		want    *runtimeapi.DNSConfig
		event   bool
	}{
		{"cluster first", []string{"10.0.0.10"}, v1.DNSClusterFirst, false, nil,
			&runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"}, Searches: []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local", "node.test"}, Options: []string{"ndots:5"}}, false},
		{"cluster first without cluster DNS", nil, v1.DNSClusterFirst, false, nil,
			&runtimeapi.DNSConfig{Servers: []string{"127.0.0.53"}, Searches: []string{"node.test"}, Options: []string{"edns0"}}, true},
		{"host network uses the node's", []string{"10.0.0.10"}, v1.DNSClusterFirst, true, nil,
			&runtimeapi.DNSConfig{Servers: []string{"127.0.0.53"}, Searches: []string{"node.test"}, Options: []string{"edns0"}}, false},
		{"none with dnsConfig", nil, v1.DNSNone, false,
			&v1.PodDNSConfig{Nameservers: []string{"127.0.0.9"}, Searches: []string{"a.test"}, Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}}},
			&runtimeapi.DNSConfig{Servers: []string{"127.0.0.9"}, Searches: []string{"a.test"}, Options: []string{"ndots:2"}}, false},
		{"default merged with dnsConfig", nil, v1.DNSDefault, false,
			&v1.PodDNSConfig{Options: []v1.PodDNSConfigOption{{Name: "edns0"}, {Name: "timeout", Value: ptr.To("1")}}},
			&runtimeapi.DNSConfig{Servers: []string{"127.0.0.53"}, Searches: []string{"node.test"}, Options: []string{"edns0", "timeout:1"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, fakecri.Config{}, func(c *cri.Config) {
				c.ClusterDNS, c.ClusterDomain, c.ResolvConf = tc.cluster, "cluster.local", resolv
			})
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			pod.Spec.DNSPolicy, pod.Spec.HostNetwork, pod.Spec.DNSConfig = tc.policy, tc.hostNet, tc.config
			h.sync(pod)
			h.rec.mu.Lock()
			got := h.rec.sandboxes[0].GetDnsConfig()
			h.rec.mu.Unlock()
			if got.GetServers() == nil {
				got.Servers = []string{}
			}
			if diff := cmp.Diff(tc.want.GetServers(), got.GetServers()); diff != "" {
				t.Errorf("servers (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want.GetSearches(), got.GetSearches()); diff != "" {
				t.Errorf("searches (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want.GetOptions(), got.GetOptions()); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
			if ev := h.eventsWith("MissingClusterDNS"); (len(ev) > 0) != tc.event {
				t.Errorf("MissingClusterDNS events %v, want %v", ev, tc.event)
			}
		})
	}
}

func TestPostStartHooks(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/started" || r.Header.Get("X-Check") != "yes" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	portNum, _ := strconv.Atoi(port)

	h := newHarness(t, fakecri.Config{}, func(c *cri.Config) { c.NodeIPs = []string{"127.0.0.1"} })
	pod := testPod(v1.RestartPolicyNever, nil, "http-ok", "exec-fails")
	pod.Spec.HostNetwork = true
	pod.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "web", ContainerPort: int32(portNum)}}
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{
		Path: "/started", Port: intstr.FromString("web"), HTTPHeaders: []v1.HTTPHeader{{Name: "X-Check", Value: "yes"}},
	}}}
	pod.Spec.Containers[1].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"setup", "--now"}}}}
	withEnv(&pod.Spec.Containers[1], fakecri.EnvExec, `{"setup --now": {"exitCode": 4, "stderr": "no config"}}`)

	res := h.rt.SyncPod(h.ctx, pod, h.status(pod))
	if s := lastStep(res, "http-ok"); s.Err != nil || hits.Load() != 1 {
		t.Errorf("HTTP postStart: %v after %d requests, want success after 1", s.Err, hits.Load())
	}
	s := lastStep(res, "exec-fails")
	if s.Reason != cri.ReasonPostStartHookError || !strings.Contains(s.Message, "exited with 4: no config") {
		t.Errorf("failing exec postStart: %+v", s)
	}
	st := h.status(pod)
	if got := st.FindContainerStatus("exec-fails"); got.State != runtime.ContainerStateExited || got.ExitCode != 137 {
		t.Errorf("container with a failed postStart: %s %d, want killed (137)", got.State, got.ExitCode)
	}
	if len(h.eventsWith("FailedPostStartHook")) != 1 {
		t.Errorf("events %v, want one FailedPostStartHook", h.events)
	}
}

func TestPreStopHookAndGrace(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 12}}}
	h.sync(pod)
	id := h.status(pod).FindContainerStatus("app").ID.ID

	done := make(chan error, 1)
	go func() { done <- h.rt.KillPod(h.ctx, pod, nil, nil) }()
	// The sleep hook waits on the clock; step it through the 12 s.
	deadline := time.Now().Add(10 * time.Second)
	for !h.clock.HasWaiters() && time.Now().Before(deadline) {
		runtimeGosched()
	}
	h.clock.Step(12 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := h.rec.stops[id]; got != 18 {
		t.Errorf("stop grace after a 12 s preStop: %d, want 30-12 = 18", got)
	}

	// An orphan (no spec) still runs the recorded preStop hook, through
	// exec.
	pod2 := testPod(v1.RestartPolicyAlways, nil, "app")
	pod2.Name, pod2.UID = "orphan", "uid-orphan"
	pod2.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"drain"}}}}
	h.sync(pod2)
	h.fake.ResetCalls()
	pods, _ := h.rt.GetPods(h.ctx, false)
	for _, p := range pods {
		if p.ID == pod2.UID {
			if err := h.rt.KillPod(h.ctx, nil, p, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	calls := h.fake.Calls()
	exec, stop := slices.Index(calls, "ExecSync"), slices.Index(calls, "StopContainer")
	if exec < 0 || stop < exec {
		t.Errorf("calls %v, want the preStop exec before the stop", calls)
	}
}

func TestKillOrderSidecarsLast(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, []string{"proxy", "logger"}, "app", "worker")
	always := v1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers[0].RestartPolicy = &always
	pod.Spec.InitContainers[1].RestartPolicy = &always
	for i := 0; i < 4; i++ {
		h.sync(pod)
	}
	if got := states(h.status(pod)); len(got) != 4 {
		t.Fatalf("containers %v, want all four running", got)
	}
	h.rec.mu.Lock()
	h.rec.stopOrder = nil
	h.rec.mu.Unlock()
	if err := h.rt.KillPod(h.ctx, pod, nil, nil); err != nil {
		t.Fatal(err)
	}
	order := h.rec.stopOrder
	if len(order) != 4 {
		t.Fatalf("stopped %v", order)
	}
	slices.Sort(order[:2])
	if diff := cmp.Diff([]string{"app", "worker", "logger", "proxy"}, order); diff != "" {
		t.Errorf("stop order (-want +got):\n%s", diff)
	}
}

func TestGraceOverrideOnlyShortens(t *testing.T) {
	h := newHarness(t, fakecri.Config{})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](10)
	h.sync(pod)
	id := h.status(pod).FindContainerStatus("app").ID.ID
	if err := h.rt.KillPod(h.ctx, pod, nil, ptr.To[int64](60)); err != nil {
		t.Fatal(err)
	}
	if got := h.rec.stops[id]; got != 10 {
		t.Errorf("grace with a longer override: %d, want the spec's 10", got)
	}
}

func runtimeGosched() { goruntime.Gosched() }

// failingLiveness reports every container's liveness as failed.
type failingLiveness struct{}

func (failingLiveness) Liveness(runtime.ContainerID) cri.ProbeResult { return cri.ProbeFailure }
func (failingLiveness) Startup(runtime.ContainerID) cri.ProbeResult  { return cri.ProbeSuccess }

func TestLivenessKillUsesTheProbesGracePeriod(t *testing.T) {
	h := newHarness(t, fakecri.Config{}, func(c *cri.Config) { c.Probes = failingLiveness{} })
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](60)
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{
		ProbeHandler:                  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}},
		TerminationGracePeriodSeconds: ptr.To[int64](3),
	}
	// The first sync starts the container; the liveness failure then
	// kills it with the probe's 3 s, not the pod's 60 s, and restarts it.
	h.rt.SyncPod(h.ctx, pod, h.status(pod))
	id := h.status(pod).FindContainerStatus("app").ID.ID
	res := h.rt.SyncPod(h.ctx, pod, h.status(pod))
	if diff := cmp.Diff([]string{"KillContainer app", "StartContainer app"}, steps(res)); diff != "" {
		t.Fatalf("steps (-want +got):\n%s", diff)
	}
	if got := h.rec.stops[id]; got != 3 {
		t.Errorf("killed with %ds, want the probe's 3", got)
	}
}
