package volumes

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
)

// Objects is an in-memory ObjectGetter: configMaps and secrets set by the
// embedder (a node agent without an API server, a test harness). It has
// the method set of runtime/cri.ObjectGetter too, so one Objects serves
// the runtime's env and the volumes. The zero value is empty and ready;
// all methods are safe for concurrent use and never block.
type Objects struct {
	mu         sync.RWMutex
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
}

var _ ObjectGetter = (*Objects)(nil)

func objectKey(namespace, name string) string { return namespace + "/" + name }

// SetConfigMap adds or replaces the configMap of cm's namespace and name.
// It stores a copy, so the caller may modify cm afterwards.
func (o *Objects) SetConfigMap(cm *v1.ConfigMap) {
	cm = cm.DeepCopy()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.configMaps == nil {
		o.configMaps = map[string]*v1.ConfigMap{}
	}
	o.configMaps[objectKey(cm.Namespace, cm.Name)] = cm
}

// DeleteConfigMap removes a configMap; removing a missing one does nothing.
func (o *Objects) DeleteConfigMap(namespace, name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.configMaps, objectKey(namespace, name))
}

// SetSecret adds or replaces the secret of s's namespace and name. It
// stores a copy, with StringData merged into Data as the API server
// does on a write, so the caller may modify s afterwards.
func (o *Objects) SetSecret(s *v1.Secret) {
	s = s.DeepCopy()
	if len(s.StringData) > 0 {
		if s.Data == nil {
			s.Data = make(map[string][]byte, len(s.StringData))
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.secrets == nil {
		o.secrets = map[string]*v1.Secret{}
	}
	o.secrets[objectKey(s.Namespace, s.Name)] = s
}

// DeleteSecret removes a secret; removing a missing one does nothing.
func (o *Objects) DeleteSecret(namespace, name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.secrets, objectKey(namespace, name))
}

// GetConfigMap returns the configMap, or an error wrapping
// runtime.ErrNotFound. The caller must not modify it.
func (o *Objects) GetConfigMap(_ context.Context, namespace, name string) (*v1.ConfigMap, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	if cm, ok := o.configMaps[objectKey(namespace, name)]; ok {
		return cm, nil
	}
	return nil, fmt.Errorf("configmap %s/%s: %w", namespace, name, runtime.ErrNotFound)
}

// GetSecret returns the secret, or an error wrapping runtime.ErrNotFound.
// The caller must not modify it.
func (o *Objects) GetSecret(_ context.Context, namespace, name string) (*v1.Secret, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	if s, ok := o.secrets[objectKey(namespace, name)]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("secret %s/%s: %w", namespace, name, runtime.ErrNotFound)
}
