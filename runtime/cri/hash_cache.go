package cri

import (
	"reflect"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// maxHashCache bounds the spec-hash cache; past it the cache starts over.
const maxHashCache = 1 << 16

// hashCache remembers each pod container's spec hashes (HashContainer
// and SpecHash) with a copy of the spec they were computed from. A spec
// that is deeply equal to the copy reuses them, so a sync with nothing to
// do does not re-encode every spec; a spec changed in any way, even in
// place, is hashed afresh.
type hashCache struct {
	// mu guards entries; an entry is never changed once stored.
	mu      sync.Mutex
	entries map[hashKey]*hashEntry
}

type hashKey struct {
	pod  types.UID
	name string
}

type hashEntry struct {
	spec   v1.Container
	hashes specHashes
}

func newHashCache() *hashCache { return &hashCache{entries: map[hashKey]*hashEntry{}} }

// hashes returns the hashes of c, a container of pod, SpecHash included.
func (hc *hashCache) hashes(pod types.UID, c *v1.Container) specHashes {
	key := hashKey{pod, c.Name}
	hc.mu.Lock()
	e := hc.entries[key]
	hc.mu.Unlock()
	if e != nil && specEqual(&e.spec, c) {
		return e.hashes
	}
	full := SpecHash(c)
	e = &hashEntry{spec: *c.DeepCopy(), hashes: specHashes{kubelet: HashContainer(c), spec: full, specHex: strconv.FormatUint(full, 16)}}
	hc.mu.Lock()
	if len(hc.entries) >= maxHashCache {
		hc.entries = map[hashKey]*hashEntry{}
	}
	hc.entries[key] = e
	hc.mu.Unlock()
	return e.hashes
}

// forget drops a pod's entries.
func (hc *hashCache) forget(pod types.UID) {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	for k := range hc.entries {
		if k.pod == pod {
			delete(hc.entries, k)
		}
	}
}

// specEqual reports whether two container specs are deeply equal. It is
// reflect.DeepEqual without the cycle tracking API objects never need,
// which is where DeepEqual allocates; here only map keys are copied.
func specEqual(a, b *v1.Container) bool {
	return valuesEqual(reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem())
}

func valuesEqual(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.Float32, reflect.Float64:
		return a.Float() == b.Float()
	case reflect.String:
		return a.String() == b.String()
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		if a.Kind() == reflect.Interface && a.Elem().Type() != b.Elem().Type() {
			return false
		}
		return valuesEqual(a.Elem(), b.Elem())
	case reflect.Struct:
		for i, n := 0, a.NumField(); i < n; i++ {
			if !valuesEqual(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.IsNil() != b.IsNil() {
			return false
		}
		fallthrough
	case reflect.Array:
		if a.Len() != b.Len() {
			return false
		}
		for i := 0; i < a.Len(); i++ {
			if !valuesEqual(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		if a.Type() == resourceListType {
			return resourceListsEqual(a.Interface().(v1.ResourceList), b.Interface().(v1.ResourceList))
		}
		var it reflect.MapIter
		it.Reset(a)
		for it.Next() {
			bv := b.MapIndex(it.Key())
			if !bv.IsValid() || !valuesEqual(it.Value(), bv) {
				return false
			}
		}
		return true
	}
	// Funcs, channels and unsafe pointers do not occur in API objects.
	return false
}

var resourceListType = reflect.TypeOf(v1.ResourceList(nil))

// resourceListsEqual compares quantities by value, as SpecHash hashes
// them, without the copies reflection would make.
func resourceListsEqual(a, b v1.ResourceList) bool {
	for name, qa := range a {
		qb, ok := b[name]
		if !ok || qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}
