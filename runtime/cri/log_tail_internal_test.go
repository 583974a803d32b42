package cri

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// countingReader is an io.ReaderAt that counts the bytes read.
type countingReader struct {
	r    *bytes.Reader
	read atomic.Int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.read.Add(int64(n))
	return n, err
}

func criLine(stream, tag, content string) string {
	return "2026-01-01T00:00:00.000000000Z " + stream + " " + tag + " " + content + "\n"
}

func TestTailOfReadsOnlyTheEnd(t *testing.T) {
	var b strings.Builder
	b.WriteString(criLine("stdout", "F", "MARKER at the start"))
	for b.Len() < 4<<20 {
		b.WriteString(criLine("stdout", "F", strings.Repeat("x", 100)))
	}
	var want strings.Builder
	for i := range 100 {
		b.WriteString(criLine("stderr", "F", fmt.Sprint("line ", i)))
		if i >= 20 {
			want.WriteString(fmt.Sprint("line ", i, "\n"))
		}
	}
	b.WriteString(criLine("stderr", "P", "partial "))
	b.WriteString(criLine("stderr", "F", "joined"))
	want.WriteString("partial joined\n")
	r := &countingReader{r: bytes.NewReader([]byte(b.String()))}

	got := tailOf(r, int64(b.Len()))
	// The last 80 lines, of which the two last make one.
	w := want.String()
	w = w[strings.Index(w, "line 22\n"):]
	if got != w {
		t.Errorf("tail:\n%q\nwant:\n%q", got, w)
	}
	if n := r.read.Load(); n > 2*tailBlock {
		t.Errorf("read %d bytes of a %d-byte log, want at most %d", n, b.Len(), 2*tailBlock)
	}
}

func TestTailOfBounds(t *testing.T) {
	long := strings.Repeat("y", 3000)
	for _, tc := range []struct {
		name, log, want string
	}{
		{"empty", "", ""},
		{"whole small file", criLine("stdout", "F", "a") + criLine("stdout", "P", "b") + criLine("stdout", "F", "c"), "a\nbc\n"},
		{"last line still being written", criLine("stdout", "F", "a") + "2026-01-01T00:00:00Z stdout P b", "a\nb"},
		{"content capped at the last 2048 bytes", criLine("stdout", "F", long), long[len(long)-2047:] + "\n"},
		{"malformed lines skipped", "garbage\n" + criLine("stdout", "F", "ok"), "ok\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tailOf(strings.NewReader(tc.log), int64(len(tc.log))); got != tc.want {
				t.Errorf("tail %q, want %q", got, tc.want)
			}
		})
	}
	// Lines cut by the window are dropped, whole ones kept, and reading
	// stops at maxTailRead.
	var b strings.Builder
	for b.Len() < 1<<20 {
		b.WriteString(criLine("stdout", "P", strings.Repeat("z", 16<<10)))
	}
	r := &countingReader{r: bytes.NewReader([]byte(b.String()))}
	got := tailOf(r, int64(b.Len()))
	if len(got) != maxFallbackBytes || strings.Trim(got, "z") != "" {
		t.Errorf("tail of long partial lines: %d bytes, want %d of content", len(got), maxFallbackBytes)
	}
	if n := r.read.Load(); n > maxTailRead+tailBlock {
		t.Errorf("read %d bytes, want at most %d", n, maxTailRead+tailBlock)
	}
}
