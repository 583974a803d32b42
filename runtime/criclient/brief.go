package criclient

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// ListKeys names the labels and annotations a brief list keeps. A brief
// list skips every other label and annotation without decoding it.
type ListKeys struct {
	Labels      []string
	Annotations []string
}

// BriefSandbox is a sandbox of ListPodSandbox as a brief list keeps it:
// enough to tell pods apart and follow their state, without the label
// and annotation maps.
type BriefSandbox struct {
	ID string
	// HasMetadata reports whether the runtime sent a metadata block;
	// Name, Namespace and Attempt come from it.
	HasMetadata bool
	Name        string
	Namespace   string
	Attempt     uint32
	State       runtimeapi.PodSandboxState
	CreatedAt   int64 // nanoseconds since the epoch, as the CRI sends it
	// Labels holds the value of each label of ListKeys.Labels, in that
	// order; "" where the sandbox has no such label. Nil when no label
	// was asked for. Annotations likewise for ListKeys.Annotations.
	Labels      []string
	Annotations []string
}

// BriefContainer is a container of ListContainers as a brief list keeps
// it (see BriefSandbox).
type BriefContainer struct {
	ID           string
	PodSandboxID string
	// HasMetadata reports whether the runtime sent a metadata block;
	// Name and Attempt come from it.
	HasMetadata bool
	Name        string
	Attempt     uint32
	// Image is the image spec's image, ImageRef the resolved reference.
	Image       string
	ImageRef    string
	State       runtimeapi.ContainerState
	CreatedAt   int64
	Labels      []string
	Annotations []string
}

// BriefBuffer is memory that brief lists reuse from one call to the
// next, so that a caller listing again and again (a relist every second)
// does not allocate the items each time. A call given a buffer returns
// values that share its memory: pass the same buffer again only once the
// values of the last call are no longer used. It keeps the memory of the
// largest list it served. The zero value is ready; a nil *BriefBuffer
// makes every call allocate. A sandbox list and a container list may use
// one buffer at the same time (each kind has memory of its own); two
// lists of the same kind may not.
type BriefBuffer struct {
	sandboxes  listBuf[BriefSandbox]
	containers listBuf[BriefContainer]
}

// BriefLister is the optional capability of a RuntimeService to list
// sandboxes and containers in brief, decoding only what a BriefSandbox or
// BriefContainer keeps. *Client has it; ListPodSandboxBrief and
// ListContainersBrief fall back to the full calls for a RuntimeService
// without it.
type BriefLister interface {
	// ListPodSandboxBrief is ListPodSandbox in brief. It blocks for the
	// call and is safe for concurrent use (each with a buffer of its own,
	// or nil); the result belongs to the caller, in buf's memory when
	// buf is not nil.
	ListPodSandboxBrief(ctx context.Context, f *runtimeapi.PodSandboxFilter, keys ListKeys, buf *BriefBuffer) ([]BriefSandbox, error)
	// ListContainersBrief is ListContainers in brief.
	ListContainersBrief(ctx context.Context, f *runtimeapi.ContainerFilter, keys ListKeys, buf *BriefBuffer) ([]BriefContainer, error)
}

var _ BriefLister = (*Client)(nil)

// ListPodSandboxBrief lists the sandboxes of rs in brief: with rs's own
// ListPodSandboxBrief when rs is a BriefLister, otherwise with
// ListPodSandbox and BriefOfSandbox. Both give the same answer for the
// same sandboxes. Errors are rs's, wrapped as Wrap does. buf, when not
// nil, is reused as BriefBuffer says (by a BriefLister only).
func ListPodSandboxBrief(ctx context.Context, rs criapi.RuntimeService, f *runtimeapi.PodSandboxFilter, keys ListKeys, buf *BriefBuffer) ([]BriefSandbox, error) {
	if bl, ok := rs.(BriefLister); ok {
		return bl.ListPodSandboxBrief(ctx, f, keys, buf)
	}
	list, err := rs.ListPodSandbox(ctx, f)
	if err != nil {
		return nil, Wrap("ListPodSandbox", "", err)
	}
	out := make([]BriefSandbox, len(list))
	for i, s := range list {
		out[i] = BriefOfSandbox(s, keys)
	}
	return out, nil
}

// ListContainersBrief lists the containers of rs in brief (see
// ListPodSandboxBrief).
func ListContainersBrief(ctx context.Context, rs criapi.RuntimeService, f *runtimeapi.ContainerFilter, keys ListKeys, buf *BriefBuffer) ([]BriefContainer, error) {
	if bl, ok := rs.(BriefLister); ok {
		return bl.ListContainersBrief(ctx, f, keys, buf)
	}
	list, err := rs.ListContainers(ctx, f)
	if err != nil {
		return nil, Wrap("ListContainers", "", err)
	}
	out := make([]BriefContainer, len(list))
	for i, c := range list {
		out[i] = BriefOfContainer(c, keys)
	}
	return out, nil
}

// BriefOfSandbox is what a brief list keeps of s.
func BriefOfSandbox(s *runtimeapi.PodSandbox, keys ListKeys) BriefSandbox {
	return BriefSandbox{
		ID:          s.GetId(),
		HasMetadata: s.GetMetadata() != nil,
		Name:        s.GetMetadata().GetName(),
		Namespace:   s.GetMetadata().GetNamespace(),
		Attempt:     s.GetMetadata().GetAttempt(),
		State:       s.GetState(),
		CreatedAt:   s.GetCreatedAt(),
		Labels:      pick(s.GetLabels(), keys.Labels),
		Annotations: pick(s.GetAnnotations(), keys.Annotations),
	}
}

// BriefOfContainer is what a brief list keeps of c.
func BriefOfContainer(c *runtimeapi.Container, keys ListKeys) BriefContainer {
	return BriefContainer{
		ID:           c.GetId(),
		PodSandboxID: c.GetPodSandboxId(),
		HasMetadata:  c.GetMetadata() != nil,
		Name:         c.GetMetadata().GetName(),
		Attempt:      c.GetMetadata().GetAttempt(),
		Image:        c.GetImage().GetImage(),
		ImageRef:     c.GetImageRef(),
		State:        c.GetState(),
		CreatedAt:    c.GetCreatedAt(),
		Labels:       pick(c.GetLabels(), keys.Labels),
		Annotations:  pick(c.GetAnnotations(), keys.Annotations),
	}
}

func pick(m map[string]string, keys []string) []string {
	if len(keys) == 0 {
		return nil
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

// FromBriefSandbox converts a sandbox listed in brief into *out as
// FromSandbox converts the full one, with the same checks and errors; out
// is left alone on error.
func FromBriefSandbox(typ string, s *BriefSandbox, out *runtime.Container) error {
	if s.ID == "" {
		return invalid("sandbox", "?", "no ID")
	}
	if !s.HasMetadata {
		return invalid("sandbox", s.ID, "no metadata")
	}
	st, ok := sandboxState(s.State)
	if !ok {
		return invalid("sandbox", s.ID, "unknown state %d", s.State)
	}
	cs := runtime.ContainerStateExited
	if st == runtime.SandboxStateReady {
		cs = runtime.ContainerStateRunning
	}
	*out = runtime.Container{
		ID:        runtime.ContainerID{Type: typ, ID: s.ID},
		Name:      s.Name,
		State:     cs,
		CreatedAt: unixNano(s.CreatedAt),
	}
	return nil
}

// FromBriefContainer converts a container listed in brief into *out as
// FromContainer converts the full one, with the same checks and errors;
// out is left alone on error. Hash is left zero.
func FromBriefContainer(typ string, c *BriefContainer, out *runtime.Container) error {
	if c.ID == "" {
		return invalid("container", "?", "no ID")
	}
	if !c.HasMetadata {
		return invalid("container", c.ID, "no metadata")
	}
	st, ok := containerState(c.State)
	if !ok {
		return invalid("container", c.ID, "unknown state %d", c.State)
	}
	*out = runtime.Container{
		ID:        runtime.ContainerID{Type: typ, ID: c.ID},
		Name:      c.Name,
		Image:     c.Image,
		ImageRef:  c.ImageRef,
		State:     st,
		CreatedAt: unixNano(c.CreatedAt),
	}
	return nil
}

// ListPodSandboxBrief implements BriefLister: the ListPodSandbox call,
// its response decoded straight from the wire into BriefSandbox values
// (see DecodeListPodSandboxBrief). Errors name the call; an undecodable
// response matches runtime.ErrInvalidResponse.
func (c *Client) ListPodSandboxBrief(ctx context.Context, f *runtimeapi.PodSandboxFilter, keys ListKeys, buf *BriefBuffer) ([]BriefSandbox, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	var lb *listBuf[BriefSandbox]
	if buf != nil {
		lb = &buf.sandboxes
	}
	d := &briefDecoder[BriefSandbox]{scratch: &c.sandboxScratch, decode: func(b []byte) ([]BriefSandbox, error) {
		if !c.sandboxStrings.mu.TryLock() {
			return decodeList(b, keys, nil, lb, decodeSandbox)
		}
		defer c.sandboxStrings.mu.Unlock()
		defer c.sandboxStrings.in.done()
		return decodeList(b, keys, &c.sandboxStrings.in, lb, decodeSandbox)
	}}
	if err := c.conn.Invoke(ctx, runtimeapi.RuntimeService_ListPodSandbox_FullMethodName, &runtimeapi.ListPodSandboxRequest{Filter: f}, d, grpc.ForceCodecV2(briefCodec{})); err != nil {
		return nil, Wrap("ListPodSandbox", "", err)
	}
	if d.err != nil {
		return nil, fmt.Errorf("cri: ListPodSandbox: %w", d.err)
	}
	return d.items, nil
}

// ListContainersBrief implements BriefLister (see ListPodSandboxBrief).
func (c *Client) ListContainersBrief(ctx context.Context, f *runtimeapi.ContainerFilter, keys ListKeys, buf *BriefBuffer) ([]BriefContainer, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	var lb *listBuf[BriefContainer]
	if buf != nil {
		lb = &buf.containers
	}
	d := &briefDecoder[BriefContainer]{scratch: &c.containerScratch, decode: func(b []byte) ([]BriefContainer, error) {
		if !c.containerStrings.mu.TryLock() {
			return decodeList(b, keys, nil, lb, decodeContainer)
		}
		defer c.containerStrings.mu.Unlock()
		defer c.containerStrings.in.done()
		return decodeList(b, keys, &c.containerStrings.in, lb, decodeContainer)
	}}
	if err := c.conn.Invoke(ctx, runtimeapi.RuntimeService_ListContainers_FullMethodName, &runtimeapi.ListContainersRequest{Filter: f}, d, grpc.ForceCodecV2(briefCodec{})); err != nil {
		return nil, Wrap("ListContainers", "", err)
	}
	if d.err != nil {
		return nil, fmt.Errorf("cri: ListContainers: %w", d.err)
	}
	return d.items, nil
}

// briefDecoder receives one response. Its decode error is kept apart
// from gRPC's, which would flatten it into a status message.
type briefDecoder[T any] struct {
	scratch *scratch
	decode  func([]byte) ([]T, error)
	items   []T
	err     error
}

// unmarshal decodes the response, in place when gRPC received it in one
// piece, else from a copy in the scratch buffer (the decoded values copy
// what they keep, so the buffer is free again once decode returns).
func (d *briefDecoder[T]) unmarshal(data mem.BufferSlice) {
	if len(data) == 1 {
		d.items, d.err = d.decode(data[0].ReadOnlyData())
		return
	}
	b := d.scratch.get(data.Len())
	data.CopyTo(b)
	d.items, d.err = d.decode(b)
	d.scratch.put(b)
}

// lockedInterner is an interner for one kind of list; a list that finds
// it taken allocates its strings.
type lockedInterner struct {
	mu sync.Mutex
	in interner
}

// maxScratch bounds the buffer a Client keeps between brief lists: a
// list of a few thousand containers; a larger response is copied into a
// buffer of its own.
const maxScratch = 4 << 20

// scratch is a Client's buffer for one kind of brief list's response
// that gRPC received in several pieces (one per HTTP/2 data frame), one
// for each kind, as a sandbox list and a container list may be decoded
// at the same time. Reusing it spares a fresh, zeroed buffer per list. The zero value is ready; safe
// for concurrent use (a list that finds it taken makes its own).
type scratch struct {
	mu  sync.Mutex
	buf []byte
}

func (s *scratch) get(n int) []byte {
	s.mu.Lock()
	b := s.buf
	s.buf = nil
	s.mu.Unlock()
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

func (s *scratch) put(b []byte) {
	if cap(b) > maxScratch {
		return
	}
	s.mu.Lock()
	if cap(b) > cap(s.buf) {
		s.buf = b
	}
	s.mu.Unlock()
}

// briefCodec marshals requests as gRPC's proto codec does and hands the
// bytes of a response to a *briefDecoder, which decodes them before the
// call returns (gRPC frees the buffers after Unmarshal).
type briefCodec struct{}

func (briefCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("criclient: cannot marshal %T", v)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (briefCodec) Unmarshal(data mem.BufferSlice, v any) error {
	d, ok := v.(interface{ unmarshal(mem.BufferSlice) })
	if !ok {
		return fmt.Errorf("criclient: cannot unmarshal into %T", v)
	}
	d.unmarshal(data)
	return nil
}

// Name is the content subtype: requests go out as application/grpc+proto.
func (briefCodec) Name() string { return "proto" }
