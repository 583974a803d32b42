package criclient

import (
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// The decoders below read the protobuf wire format of the two list
// responses directly, keeping what BriefSandbox and BriefContainer hold.
// They follow the rules of the generated decoder for what they keep: the
// last occurrence of a scalar field wins, repeated occurrences of a
// message field merge, a known field with an unexpected wire type is
// skipped as unknown, enum values outside the known ones are kept as
// they are (the conversion refuses them), strings must be UTF-8. What
// they skip (other labels and annotations, the image ID, the runtime
// handler...) is checked only for its wire structure, not its content.
// Any input, however corrupt, gives values or an error, never a panic.

// DecodeListPodSandboxBrief decodes a ListPodSandboxResponse from its
// wire bytes into BriefSandbox values, keeping the labels and
// annotations keys names. The error names the item and field that could
// not be decoded and matches runtime.ErrInvalidResponse.
func DecodeListPodSandboxBrief(b []byte, keys ListKeys) ([]BriefSandbox, error) {
	return decodeList(b, keys, nil, nil, decodeSandbox)
}

// DecodeListContainersBrief decodes a ListContainersResponse from its wire
// bytes into BriefContainer values (see DecodeListPodSandboxBrief).
func DecodeListContainersBrief(b []byte, keys ListKeys) ([]BriefContainer, error) {
	return decodeList(b, keys, nil, nil, decodeContainer)
}

// undecodable is the error for a part of a response that is not valid
// protobuf, or not what the CRI declares.
func undecodable(where string, args ...any) error {
	return fmt.Errorf("undecodable response: %s: %w", fmt.Sprintf(where, args...), runtime.ErrInvalidResponse)
}

// tag reads a field's tag as the generated decoder does: field numbers
// outside 1..2^29-1 are malformed.
func tag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num > protowire.MaxValidNumber {
		return 0, 0, -1
	}
	return num, typ, n
}

// listBuf is the memory of one kind of brief list, for the next (see
// BriefBuffer).
type listBuf[T any] struct {
	items []T
	vals  []string
}

// take returns n zeroed items and m zeroed values, from buf's memory when
// it is large enough (and buf is not nil), else newly allocated and kept
// in buf for the next list.
func (buf *listBuf[T]) take(n, m int) ([]T, []string) {
	if buf == nil {
		return make([]T, n), make([]string, m)
	}
	if cap(buf.items) < n {
		buf.items = make([]T, n)
	}
	if cap(buf.vals) < m {
		buf.vals = make([]string, m)
	}
	items, vals := buf.items[:n], buf.vals[:m]
	clear(items)
	clear(vals)
	return items, vals
}

// decodeList decodes a message whose field 1 is the repeated item (both
// list responses have this shape). It counts the items first, so the
// items and the values of their kept keys take one allocation each, or
// none when buf holds enough from an earlier list.
func decodeList[T any](b []byte, keys ListKeys, in *interner, buf *listBuf[T], item func(b []byte, it *T, in *interner, keys ListKeys, labels, annotations []string) error) ([]T, error) {
	count := 0
	for rest := b; len(rest) > 0; {
		num, typ, n := tag(rest)
		if n < 0 {
			return nil, undecodable("after item %d: malformed field tag", count)
		}
		rest = rest[n:]
		m := protowire.ConsumeFieldValue(num, typ, rest)
		if m < 0 {
			return nil, undecodable("after item %d: malformed field %d", count, num)
		}
		if num == 1 && typ == protowire.BytesType {
			count++
		}
		rest = rest[m:]
	}
	nl, na := len(keys.Labels), len(keys.Annotations)
	k := nl + na
	items, vals := buf.take(count, count*k)
	i := 0
	for rest := b; len(rest) > 0; {
		num, typ, n := tag(rest) // checked by the first pass
		rest = rest[n:]
		if num != 1 || typ != protowire.BytesType {
			rest = rest[protowire.ConsumeFieldValue(num, typ, rest):]
			continue
		}
		v, m := protowire.ConsumeBytes(rest)
		rest = rest[m:]
		var labels, annotations []string
		if nl > 0 {
			labels = vals[i*k : i*k+nl : i*k+nl]
		}
		if na > 0 {
			annotations = vals[i*k+nl : (i+1)*k : (i+1)*k]
		}
		if err := item(v, &items[i], in, keys, labels, annotations); err != nil {
			return nil, fmt.Errorf("undecodable response: item %d: %w", i, err)
		}
		i++
	}
	return items, nil
}

// fieldError is an item's undecodable field.
func fieldError(name string, problem string) error {
	return fmt.Errorf("%s: %s: %w", name, problem, runtime.ErrInvalidResponse)
}

// str reads a string field's value.
func str(in *interner, b []byte, name string) (string, int, error) {
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return "", n, fieldError(name, "truncated")
	}
	if !utf8.Valid(v) {
		return "", n, fieldError(name, "not UTF-8")
	}
	return in.str(v), n, nil
}

// skip steps over a field the item does not keep.
func skip(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
	n := protowire.ConsumeFieldValue(num, typ, b)
	if n < 0 {
		return n, fieldError(fmt.Sprint("field ", num), "malformed")
	}
	return n, nil
}

func varint(b []byte, name string) (uint64, int, error) {
	v, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return 0, n, fieldError(name, "malformed varint")
	}
	return v, n, nil
}

// walk calls f for each field of the message b; f returns how many bytes
// of the field's value it consumed.
func walk(b []byte, f func(num protowire.Number, typ protowire.Type, b []byte) (int, error)) error {
	for len(b) > 0 {
		num, typ, n := tag(b)
		if n < 0 {
			return fieldError("field tag", "malformed")
		}
		b = b[n:]
		m, err := f(num, typ, b)
		if err != nil {
			return err
		}
		b = b[m:]
	}
	return nil
}

func decodeSandbox(b []byte, s *BriefSandbox, in *interner, keys ListKeys, labels, annotations []string) error {
	s.Labels, s.Annotations = labels, annotations
	return walk(b, func(num protowire.Number, typ protowire.Type, b []byte) (n int, err error) {
		const bytes, vint = protowire.BytesType, protowire.VarintType
		switch {
		case num == 1 && typ == bytes:
			s.ID, n, err = str(in, b, "id")
		case num == 2 && typ == bytes:
			s.HasMetadata = true
			n, err = message(b, "metadata", func(num protowire.Number, typ protowire.Type, b []byte) (n int, err error) {
				switch {
				case num == 1 && typ == bytes:
					s.Name, n, err = str(in, b, "name")
				case num == 3 && typ == bytes:
					s.Namespace, n, err = str(in, b, "namespace")
				case num == 4 && typ == vint:
					var v uint64
					v, n, err = varint(b, "attempt")
					s.Attempt = uint32(v)
				default:
					n, err = skip(num, typ, b)
				}
				return n, err
			})
		case num == 3 && typ == vint:
			var v uint64
			v, n, err = varint(b, "state")
			s.State = runtimeapi.PodSandboxState(int32(v))
		case num == 4 && typ == vint:
			var v uint64
			v, n, err = varint(b, "created_at")
			s.CreatedAt = int64(v)
		case num == 5 && typ == bytes:
			n, err = mapEntry(in, b, "labels", keys.Labels, labels)
		case num == 6 && typ == bytes:
			n, err = mapEntry(in, b, "annotations", keys.Annotations, annotations)
		default:
			n, err = skip(num, typ, b)
		}
		return n, err
	})
}

func decodeContainer(b []byte, c *BriefContainer, in *interner, keys ListKeys, labels, annotations []string) error {
	c.Labels, c.Annotations = labels, annotations
	return walk(b, func(num protowire.Number, typ protowire.Type, b []byte) (n int, err error) {
		const bytes, vint = protowire.BytesType, protowire.VarintType
		switch {
		case num == 1 && typ == bytes:
			c.ID, n, err = str(in, b, "id")
		case num == 2 && typ == bytes:
			c.PodSandboxID, n, err = str(in, b, "pod_sandbox_id")
		case num == 3 && typ == bytes:
			c.HasMetadata = true
			n, err = message(b, "metadata", func(num protowire.Number, typ protowire.Type, b []byte) (n int, err error) {
				switch {
				case num == 1 && typ == bytes:
					c.Name, n, err = str(in, b, "name")
				case num == 2 && typ == vint:
					var v uint64
					v, n, err = varint(b, "attempt")
					c.Attempt = uint32(v)
				default:
					n, err = skip(num, typ, b)
				}
				return n, err
			})
		case num == 4 && typ == bytes:
			n, err = message(b, "image", func(num protowire.Number, typ protowire.Type, b []byte) (n int, err error) {
				if num == 1 && typ == bytes {
					c.Image, n, err = str(in, b, "image")
					return n, err
				}
				return skip(num, typ, b)
			})
		case num == 5 && typ == bytes:
			c.ImageRef, n, err = str(in, b, "image_ref")
		case num == 6 && typ == vint:
			var v uint64
			v, n, err = varint(b, "state")
			c.State = runtimeapi.ContainerState(int32(v))
		case num == 7 && typ == vint:
			var v uint64
			v, n, err = varint(b, "created_at")
			c.CreatedAt = int64(v)
		case num == 8 && typ == bytes:
			n, err = mapEntry(in, b, "labels", keys.Labels, labels)
		case num == 9 && typ == bytes:
			n, err = mapEntry(in, b, "annotations", keys.Annotations, annotations)
		default:
			n, err = skip(num, typ, b)
		}
		return n, err
	})
}

// message decodes an embedded message field with f.
func message(b []byte, name string, f func(num protowire.Number, typ protowire.Type, b []byte) (int, error)) (int, error) {
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return n, fieldError(name, "truncated")
	}
	if err := walk(v, f); err != nil {
		return n, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}

// mapEntry reads one entry of a map<string, string> field and stores its
// value in vals[i] when its key is keys[i]. A later entry with the same
// key replaces an earlier one, as in the decoded map. With no keys asked
// for, the entry is stepped over unread.
func mapEntry(in *interner, b []byte, name string, keys, vals []string) (int, error) {
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return n, fieldError(name, "truncated entry")
	}
	if len(keys) == 0 {
		return n, nil
	}
	var key, val []byte
	err := walk(v, func(num protowire.Number, typ protowire.Type, b []byte) (n int, err error) {
		switch {
		case num == 1 && typ == protowire.BytesType:
			key, n = protowire.ConsumeBytes(b)
		case num == 2 && typ == protowire.BytesType:
			val, n = protowire.ConsumeBytes(b)
		default:
			return skip(num, typ, b)
		}
		if n < 0 {
			return n, fieldError(name, "truncated key or value")
		}
		return n, nil
	})
	if err != nil {
		return n, fmt.Errorf("%s entry: %w", name, err)
	}
	for i, k := range keys {
		if string(key) != k {
			continue
		}
		if !utf8.Valid(val) {
			return n, fieldError(name+" "+k, "not UTF-8")
		}
		vals[i] = in.str(val)
	}
	return n, nil
}

// interner hands out the strings of earlier lists again instead of
// allocating new ones: a relist of unchanged pods reads the same IDs,
// names and label values every time. It keeps what it has seen until it
// holds four times more strings than the last list used, then starts
// afresh, so it never holds more than a few lists' worth. A nil
// *interner allocates every string. Not safe for concurrent use: a
// Client guards each of its interners with a mutex.
type interner struct {
	seen       map[string]string
	used, miss int
}

func (in *interner) str(b []byte) string {
	if in == nil || len(b) == 0 {
		return string(b)
	}
	in.used++
	if s, ok := in.seen[string(b)]; ok {
		return s
	}
	in.miss++
	s := string(b)
	if in.seen == nil {
		in.seen = map[string]string{}
	}
	in.seen[s] = s
	return s
}

// done ends one list's decoding.
func (in *interner) done() {
	if in.miss > 0 && len(in.seen) > 4*in.used+64 {
		clear(in.seen)
	}
	in.used, in.miss = 0, 0
}
