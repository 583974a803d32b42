package eviction

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal names what a threshold watches, in the kubelet's words.
type Signal string

// The signals nodekit observes, from the stats Summary.
const (
	// SignalMemoryAvailable is node.memory.availableBytes; its capacity
	// is available plus working set.
	SignalMemoryAvailable Signal = "memory.available"
	// SignalAllocatableMemoryAvailable is the memory left to pods: the
	// summary's "pods" system container (the kubelet's allocatable
	// cgroup), availableBytes of available plus working set; without
	// one, Config.AllocatableMemory less the pods' working sets.
	SignalAllocatableMemoryAvailable Signal = "allocatableMemory.available"
	// SignalNodeFsAvailable is node.fs.availableBytes of capacityBytes.
	SignalNodeFsAvailable Signal = "nodefs.available"
	// SignalNodeFsInodesFree is node.fs.inodesFree of inodes.
	SignalNodeFsInodesFree Signal = "nodefs.inodesFree"
	// SignalImageFsAvailable is node.runtime.imageFs.availableBytes.
	SignalImageFsAvailable Signal = "imagefs.available"
	// SignalImageFsInodesFree is node.runtime.imageFs.inodesFree.
	SignalImageFsInodesFree Signal = "imagefs.inodesFree"
	// SignalContainerFsAvailable is node.runtime.containerFs.availableBytes:
	// the filesystem of the containers' writable layers. Its thresholds
	// are those of the filesystem it lives on (see Config.DedicatedImageFs).
	SignalContainerFsAvailable Signal = "containerfs.available"
	// SignalContainerFsInodesFree is node.runtime.containerFs.inodesFree.
	SignalContainerFsInodesFree Signal = "containerfs.inodesFree"
	// SignalPIDAvailable is node.rlimit.maxpid minus curproc.
	SignalPIDAvailable Signal = "pid.available"
)

// resourceInodes and resourcePIDs name what inode and PID signals
// reclaim, as the kubelet does; they are not API resources.
const (
	resourceInodes v1.ResourceName = "inodes"
	resourcePIDs   v1.ResourceName = "pids"
)

// signalInfo is what each signal reclaims and which condition it raises.
func signalInfo(s Signal) (res v1.ResourceName, cond v1.NodeConditionType, ok bool) {
	switch s {
	case SignalMemoryAvailable, SignalAllocatableMemoryAvailable:
		return v1.ResourceMemory, v1.NodeMemoryPressure, true
	case SignalNodeFsAvailable, SignalImageFsAvailable, SignalContainerFsAvailable:
		return v1.ResourceEphemeralStorage, v1.NodeDiskPressure, true
	case SignalNodeFsInodesFree, SignalImageFsInodesFree, SignalContainerFsInodesFree:
		return resourceInodes, v1.NodeDiskPressure, true
	case SignalPIDAvailable:
		return resourcePIDs, v1.NodePIDPressure, true
	}
	return "", "", false
}

// isMemory reports whether s is one of the memory signals, which are
// reclaimed before any other.
func isMemory(s Signal) bool {
	return s == SignalMemoryAvailable || s == SignalAllocatableMemoryAvailable
}

// Value is a threshold's amount: a quantity, or a fraction of the
// signal's capacity when Quantity is nil.
type Value struct {
	Quantity *resource.Quantity
	// Percentage is a fraction in (0, 1]: 0.1 for "10%".
	Percentage float32
}

// of returns the value as a quantity of the capacity.
func (v Value) of(capacity *resource.Quantity) *resource.Quantity {
	if v.Quantity != nil {
		q := v.Quantity.DeepCopy()
		return &q
	}
	return resource.NewQuantity(int64(float64(v.Percentage)*float64(capacity.Value())), resource.BinarySI)
}

func (v Value) String() string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	return strconv.FormatFloat(math.Round(float64(v.Percentage)*1e6)/1e4, 'f', -1, 64) + "%"
}

// Threshold is met when its signal's available amount is below Value.
type Threshold struct {
	Signal Signal
	Value  Value
	// GracePeriod is how long the threshold must stay met before pods
	// are evicted: 0 for a hard threshold.
	GracePeriod time.Duration
	// MinReclaim is how much more than Value must be available before a
	// met threshold counts as resolved. Nil: nothing more.
	MinReclaim *Value
}

// Hard reports whether the threshold acts at once (no grace period).
func (t Threshold) Hard() bool { return t.GracePeriod == 0 }

func (t Threshold) String() string { return string(t.Signal) + "<" + t.Value.String() }

// Spec holds thresholds as a kubelet's configuration gives them: maps
// from signal to value, as in KubeletConfiguration (evictionHard,
// evictionSoft, evictionSoftGracePeriod, evictionMinimumReclaim).
type Spec struct {
	Hard            map[string]string
	Soft            map[string]string
	SoftGracePeriod map[string]string
	MinimumReclaim  map[string]string
	// EnforceNodeAllocatable is the kubelet's enforceNodeAllocatable:
	// with "pods" in it, each hard memory.available threshold is copied
	// to allocatableMemory.available (with its minimum reclaim), as the
	// kubelet does. Nil: none.
	EnforceNodeAllocatable []string
}

// NodeAllocatableEnforcementPods is the enforceNodeAllocatable key that
// limits the pods to the node's allocatable, the kubelet's default.
const NodeAllocatableEnforcementPods = "pods"

// DefaultHard returns the kubelet's default hard thresholds on Linux:
// memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%,
// imagefs.available<15%, imagefs.inodesFree<5%. The caller owns the map.
func DefaultHard() map[string]string {
	return map[string]string{
		"memory.available":   "100Mi",
		"nodefs.available":   "10%",
		"nodefs.inodesFree":  "5%",
		"imagefs.available":  "15%",
		"imagefs.inodesFree": "5%",
	}
}

// ParseFlag reads the kubelet's command-line form of a threshold list,
// "memory.available<100Mi,nodefs.available<10%" (--eviction-hard,
// --eviction-soft; op "<"), or of grace periods and minimum reclaims,
// "memory.available=1m30s" (op "="). field names the flag in errors.
func ParseFlag(field, s, op string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, stmt := range strings.Split(s, ",") {
		stmt = strings.TrimSpace(stmt)
		k, v, ok := strings.Cut(stmt, op)
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("eviction: %s: %q is not of the form signal%svalue", field, stmt, op)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("eviction: %s: signal %q given twice", field, k)
		}
		out[k] = v
	}
	return out, nil
}

// Parse turns a Spec into thresholds, hard ones first, each list sorted
// by signal, then the allocatableMemory.available copies
// EnforceNodeAllocatable asks for. Errors name the field and the signal: an unknown signal, a
// quantity that does not parse or is not positive, a percentage outside
// (0%, 100%], a soft threshold without a grace period, a negative grace
// period or minimum reclaim. As in the kubelet, "0%" and "100%" disable
// a threshold.
func Parse(spec Spec) ([]Threshold, error) {
	hard, err := parseStatements("evictionHard", spec.Hard)
	if err != nil {
		return nil, err
	}
	soft, err := parseStatements("evictionSoft", spec.Soft)
	if err != nil {
		return nil, err
	}
	grace := map[Signal]time.Duration{}
	for _, k := range sortedKeys(spec.SoftGracePeriod) {
		s := Signal(k)
		if _, _, ok := signalInfo(s); !ok {
			return nil, fmt.Errorf("eviction: evictionSoftGracePeriod: unsupported eviction signal %q", k)
		}
		d, err := time.ParseDuration(spec.SoftGracePeriod[k])
		if err != nil {
			return nil, fmt.Errorf("eviction: evictionSoftGracePeriod[%s]: %w", k, err)
		}
		if d < 0 {
			return nil, fmt.Errorf("eviction: evictionSoftGracePeriod[%s]: %s is negative", k, d)
		}
		grace[s] = d
	}
	minReclaim := map[Signal]*Value{}
	for _, k := range sortedKeys(spec.MinimumReclaim) {
		s := Signal(k)
		if _, _, ok := signalInfo(s); !ok {
			return nil, fmt.Errorf("eviction: evictionMinimumReclaim: unsupported eviction signal %q", k)
		}
		v, err := parseValue(spec.MinimumReclaim[k], true)
		if err != nil {
			return nil, fmt.Errorf("eviction: evictionMinimumReclaim[%s]: %w", k, err)
		}
		minReclaim[s] = v
	}
	out := make([]Threshold, 0, len(hard)+len(soft))
	for _, t := range hard {
		t.MinReclaim = minReclaim[t.Signal]
		out = append(out, t)
	}
	for _, t := range soft {
		d, ok := grace[t.Signal]
		if !ok || d == 0 {
			return nil, fmt.Errorf("eviction: evictionSoftGracePeriod[%s]: a soft threshold needs a grace period", t.Signal)
		}
		t.GracePeriod = d
		t.MinReclaim = minReclaim[t.Signal]
		out = append(out, t)
	}
	if slices.Contains(spec.EnforceNodeAllocatable, NodeAllocatableEnforcementPods) {
		for _, t := range out {
			if t.Signal == SignalMemoryAvailable && t.Hard() {
				t.Signal = SignalAllocatableMemoryAvailable
				out = append(out, t)
			}
		}
	}
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func parseStatements(field string, m map[string]string) ([]Threshold, error) {
	var out []Threshold
	for _, k := range sortedKeys(m) {
		s := Signal(k)
		if _, _, ok := signalInfo(s); !ok {
			return nil, fmt.Errorf("eviction: %s: unsupported eviction signal %q", field, k)
		}
		val := m[k]
		if val == "0%" || val == "100%" {
			continue
		}
		v, err := parseValue(val, false)
		if err != nil {
			return nil, fmt.Errorf("eviction: %s[%s]: %w", field, k, err)
		}
		out = append(out, Threshold{Signal: s, Value: *v})
	}
	return out, nil
}

// parseValue reads "100Mi" or "10%". A threshold must be positive; a
// minimum reclaim (zeroOK) may be zero.
func parseValue(val string, zeroOK bool) (*Value, error) {
	if p, ok := strings.CutSuffix(val, "%"); ok {
		f, err := strconv.ParseFloat(p, 32)
		if err != nil {
			return nil, fmt.Errorf("%q is not a percentage", val)
		}
		if f < 0 || f > 100 || (f == 0 && !zeroOK) {
			return nil, fmt.Errorf("percentage %s must be in (0%%, 100%%]", val)
		}
		return &Value{Percentage: float32(f / 100)}, nil
	}
	q, err := resource.ParseQuantity(val)
	if err != nil {
		return nil, fmt.Errorf("%q is not a quantity: %w", val, err)
	}
	if q.Sign() < 0 || (q.IsZero() && !zeroOK) {
		return nil, fmt.Errorf("quantity %s must be positive", val)
	}
	return &Value{Quantity: &q}, nil
}
