package kube

// Pressure is what a ConditionsProvider reports: whether the node is short
// of memory, disk or process IDs. Each becomes the node condition of the
// same name (MemoryPressure, DiskPressure, PIDPressure), with the
// kubelet's reasons.
type Pressure struct {
	Memory bool
	Disk   bool
	PID    bool
}

// ConditionsProvider reports the node's pressure conditions; an eviction
// manager is the natural implementation.
type ConditionsProvider interface {
	// Pressure returns the current pressure. It must not block; it is
	// called on every status computation, from one goroutine at a time.
	Pressure() Pressure
}

// NoPressure is the default ConditionsProvider: never under pressure.
type NoPressure struct{}

// Pressure implements ConditionsProvider.
func (NoPressure) Pressure() Pressure { return Pressure{} }

// ConditionsFunc adapts a function to ConditionsProvider.
type ConditionsFunc func() Pressure

// Pressure implements ConditionsProvider.
func (f ConditionsFunc) Pressure() Pressure { return f() }
