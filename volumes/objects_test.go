package volumes_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/cri"
	"github.com/nodekit/nodekit/volumes"
)

// One Objects serves the runtime's env and the volumes.
var _ cri.ObjectGetter = (*volumes.Objects)(nil)

func TestObjects(t *testing.T) {
	ctx := context.Background()
	var o volumes.Objects
	if _, err := o.GetConfigMap(ctx, "ns", "c"); !runtime.IsNotFound(err) {
		t.Errorf("GetConfigMap on empty Objects: %v, want not found", err)
	}
	c := cm("c", map[string]string{"k": "v"})
	o.SetConfigMap(c)
	c.Data["k"] = "changed by the caller"
	got, err := o.GetConfigMap(ctx, "ns", "c")
	if err != nil || got.Data["k"] != "v" {
		t.Errorf("GetConfigMap = %v, %v; want the stored copy with k=v", got, err)
	}
	if _, err := o.GetConfigMap(ctx, "other", "c"); !runtime.IsNotFound(err) {
		t.Errorf("GetConfigMap in another namespace: %v, want not found", err)
	}
	o.DeleteConfigMap("ns", "c")
	if _, err := o.GetConfigMap(ctx, "ns", "c"); !runtime.IsNotFound(err) {
		t.Errorf("GetConfigMap after Delete: %v, want not found", err)
	}

	o.SetSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"},
		Data: map[string][]byte{"a": []byte("1")}, StringData: map[string]string{"b": "2"}})
	s, err := o.GetSecret(ctx, "ns", "s")
	if err != nil || string(s.Data["a"]) != "1" || string(s.Data["b"]) != "2" || s.StringData != nil {
		t.Errorf("GetSecret = %+v, %v; want data a=1 b=2 (stringData merged)", s, err)
	}
	o.DeleteSecret("ns", "s")
	if _, err := o.GetSecret(ctx, "ns", "s"); !runtime.IsNotFound(err) {
		t.Errorf("GetSecret after Delete: %v, want not found", err)
	}
}

func TestObjectsConcurrentUse(t *testing.T) {
	var o volumes.Objects
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 100 {
				name := fmt.Sprintf("o%d", j%5)
				o.SetConfigMap(cm(name, map[string]string{"i": fmt.Sprint(i)}))
				o.SetSecret(secret(name, nil))
				_, _ = o.GetConfigMap(context.Background(), "ns", name)
				_, _ = o.GetSecret(context.Background(), "ns", name)
				if j%3 == 0 {
					o.DeleteConfigMap("ns", name)
					o.DeleteSecret("ns", name)
				}
			}
		}()
	}
	wg.Wait()
}
