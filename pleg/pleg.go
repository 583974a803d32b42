package pleg

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
)

// EventType is a pod lifecycle event's kind.
type EventType string

// The events a generator emits, the kubelet's.
const (
	// ContainerStarted: a container (or sandbox) is running.
	ContainerStarted EventType = "ContainerStarted"
	// ContainerDied: a container (or sandbox) stopped.
	ContainerDied EventType = "ContainerDied"
	// ContainerRemoved: a container (or sandbox) is gone.
	ContainerRemoved EventType = "ContainerRemoved"
	// ContainerChanged: a container is in an unknown or created state.
	ContainerChanged EventType = "ContainerChanged"
)

// Event is one change to one pod.
type Event struct {
	// ID is the pod's UID.
	ID   types.UID
	Type EventType
	// Data is the container's (or sandbox's) runtime ID.
	Data string
}

// Generator produces pod lifecycle events and keeps the Cache current.
type Generator interface {
	// Run generates events until ctx ends.
	Run(ctx context.Context) error
	// Watch returns the event channel. It is the same channel every time,
	// never closed. When its buffer is full the generator waits for the
	// reader; consumers must drain it promptly.
	Watch() <-chan *Event
	// Healthy returns an error when the generator has not observed the
	// runtime recently enough.
	Healthy() error
}
