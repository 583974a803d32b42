package cri_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/runtime/fakecri"
)

// errRefused stands for the API server's Forbidden, as a node's getter
// gets it before the Node authorizer knows the pod is bound to the node.
var errRefused = errors.New(`configmaps "settings" is forbidden: User "system:node:n" cannot get resource "configmaps": no relationship found between node 'n' and this object`)

// refusingFirst is an ObjectGetter that fails the first `failures` Gets
// with err, then answers from objects.
type refusingFirst struct {
	objects
	err error

	mu       sync.Mutex
	failures int
	calls    int
}

func (r *refusingFirst) fail() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.failures > 0 {
		r.failures--
		return true
	}
	return false
}

func (r *refusingFirst) GetConfigMap(ctx context.Context, ns, name string) (*v1.ConfigMap, error) {
	if r.fail() {
		return nil, fmt.Errorf("getter: configMap %s/%s: %w", ns, name, r.err)
	}
	return r.objects.GetConfigMap(ctx, ns, name)
}

func (r *refusingFirst) GetSecret(ctx context.Context, ns, name string) (*v1.Secret, error) {
	if r.fail() {
		return nil, fmt.Errorf("getter: secret %s/%s: %w", ns, name, r.err)
	}
	return r.objects.GetSecret(ctx, ns, name)
}

func TestEnvObjectsRefusedOrMissingAtFirstAreRetried(t *testing.T) {
	// As the kubelet: the container is not created while an object it
	// takes env from cannot be read (CreateContainerConfigError, the
	// getter's error in the message), and the next sync reads it again.
	// A refusal is not a missing object: an optional reference does not
	// skip it.
	for _, tc := range []struct {
		name     string
		err      error
		wantMsg  string
		optional bool
	}{
		{"refused", errRefused, "is forbidden", false},
		{"refused, optional", errRefused, "is forbidden", true},
		{"missing", runtime.ErrNotFound, `configmap "settings" not found`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getter := &refusingFirst{err: tc.err, failures: 1, objects: objects{
				configMaps: map[string]*v1.ConfigMap{"ns/settings": {Data: map[string]string{"data-1": "value-1"}}},
				secrets:    map[string]*v1.Secret{"ns/creds": {Data: map[string][]byte{"token": []byte("s3cret")}}},
			}}
			h := newHarness(t, fakecri.Config{}, func(c *cri.Config) { c.Objects = getter })
			pod := testPod(v1.RestartPolicyNever, nil, "app")
			pod.Spec.Containers[0].Env = []v1.EnvVar{
				{Name: "CONFIG_DATA_1", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
					LocalObjectReference: v1.LocalObjectReference{Name: "settings"}, Key: "data-1", Optional: ptr.To(tc.optional)}}},
				{Name: "SECRET_DATA", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
					LocalObjectReference: v1.LocalObjectReference{Name: "creds"}, Key: "token"}}},
			}
			s := lastStep(h.rt.SyncPod(h.ctx, pod, h.status(pod)), "app")
			if s == nil || s.Reason != cri.ReasonCreateContainerConfigError || !strings.Contains(s.Message, tc.wantMsg) ||
				!strings.Contains(s.Message, "env[0] (CONFIG_DATA_1).valueFrom.configMapKeyRef") {
				t.Fatalf("first sync: step %+v, want CreateContainerConfigError naming the field and %q", s, tc.wantMsg)
			}
			if tc.err != runtime.ErrNotFound && strings.Contains(s.Message, "not found") {
				t.Errorf("first sync: %q calls a refusal a missing object", s.Message)
			}
			if ev := h.eventsWith("Failed"); len(ev) != 1 {
				t.Errorf("events %v, want one Failed", ev)
			}
			st := h.status(pod)
			if c := st.FindContainerStatus("app"); c != nil {
				t.Fatalf("a container was created: %+v", c)
			}
			s = lastStep(h.rt.SyncPod(h.ctx, pod, st), "app")
			if s == nil || s.Err != nil {
				t.Fatalf("second sync: step %+v, want the container started", s)
			}
			env := map[string]string{}
			for _, kv := range h.rec.config("app").GetEnvs() {
				env[kv.GetKey()] = string(kv.GetValue())
			}
			if env["CONFIG_DATA_1"] != "value-1" || env["SECRET_DATA"] != "s3cret" {
				t.Errorf("env %v, want CONFIG_DATA_1=value-1 and SECRET_DATA=s3cret", env)
			}
		})
	}
}
