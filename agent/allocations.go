package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// allocationFile is Config.AllocationCheckpoint on disk: the admitted
// pods' allocations, by UID (a map of allocationEntry), and the SHA-256
// of those bytes as written, so that a file written in part or edited is
// told from one the agent wrote, whatever version of the agent reads it.
type allocationFile struct {
	Pods     json.RawMessage `json:"pods"`
	Checksum string          `json:"checksum"`
}

// allocationEntry is one pod's allocation: its containers' resources by
// name (init containers included) and its spec.resources.
type allocationEntry struct {
	Containers map[string]v1.ResourceRequirements `json:"containers,omitempty"`
	Pod        *v1.ResourceRequirements           `json:"pod,omitempty"`
}

func checksumOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// readAllocations reads the allocations kept in path. A missing file is
// none; a file that does not parse or whose checksum does not match is
// an error, as the kubelet refuses a corrupt allocation checkpoint: the
// pods would otherwise run with resources they were never given.
func readAllocations(path string) (map[types.UID]allocation, string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading the allocation checkpoint: %w", err)
	}
	corrupt := func(why string) error {
		return fmt.Errorf("allocation checkpoint %s is corrupt (%s); drain the node and remove the file", path, why)
	}
	var f allocationFile
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&f); err != nil {
		return nil, "", corrupt(err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, "", corrupt("data after the checkpoint")
	}
	if len(f.Pods) == 0 {
		return nil, "", corrupt("no pods field")
	}
	sum := checksumOf(f.Pods)
	if sum != f.Checksum {
		return nil, "", corrupt(fmt.Sprintf("checksum %q, its pods sum to %q", f.Checksum, sum))
	}
	var pods map[types.UID]allocationEntry
	if err := json.Unmarshal(f.Pods, &pods); err != nil {
		return nil, "", corrupt(err.Error())
	}
	out := make(map[types.UID]allocation, len(pods))
	for uid, e := range pods {
		al := allocation{containers: e.Containers, pod: e.Pod}
		if al.containers == nil {
			al.containers = map[string]v1.ResourceRequirements{}
		}
		out[uid] = al
	}
	return out, sum, nil
}

// writeAllocations replaces path with the allocations, atomically (a
// synced temporary file renamed over it), unless they sum to last, the
// checksum of what the file already holds. It returns the new checksum.
func writeAllocations(path string, allocs map[types.UID]allocation, last string) (string, error) {
	pods := make(map[types.UID]allocationEntry, len(allocs))
	for uid, al := range allocs {
		pods[uid] = allocationEntry{Containers: al.containers, Pod: al.pod}
	}
	body, err := json.Marshal(pods) // map keys sorted: the same entries, the same bytes
	if err != nil {
		return last, err
	}
	sum := checksumOf(body)
	if sum == last {
		return last, nil
	}
	b, err := json.Marshal(allocationFile{Pods: body, Checksum: sum})
	if err != nil {
		return last, err
	}
	if err := replaceFile(path, b); err != nil {
		return last, fmt.Errorf("writing the allocation checkpoint: %w", err)
	}
	return sum, nil
}

// replaceFile replaces path with b atomically: a synced temporary file
// beside it, renamed over it.
func replaceFile(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone once renamed; left only on failure
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// restoreAllocations reads Config.AllocationCheckpoint, once, before the
// agent handles any pod: the allocations of the pods an earlier run
// admitted, which they are admitted with again.
func (a *Agent) restoreAllocations() error {
	if a.cfg.AllocationCheckpoint == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(a.cfg.AllocationCheckpoint), 0o750); err != nil {
		return fmt.Errorf("agent: the allocation checkpoint's directory: %w", err)
	}
	allocs, sum, err := readAllocations(a.cfg.AllocationCheckpoint)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.ckptMu.Lock()
	a.ckptSum = sum
	a.ckptMu.Unlock()
	a.mu.Lock()
	a.restored = allocs
	a.mu.Unlock()
	if len(allocs) > 0 {
		a.log.V(2).Info("restored pod allocations", "pods", len(allocs), "file", a.cfg.AllocationCheckpoint)
	}
	return nil
}

// allocationsChanged records a change of the allocations (a.mu held).
func (a *Agent) allocationsChanged() { a.allocGen++ }

// saveAllocations writes the admitted pods' allocations, and those
// restored and not yet claimed, to Config.AllocationCheckpoint when they
// changed since the last write. It is called after a batch of changes,
// before the syncs that carry them out; a failed write is logged and
// made again at the next call (housekeeping makes one every period).
// It must not be called with a.mu held. It reports whether the
// checkpoint then holds every change (always without a checkpoint).
func (a *Agent) saveAllocations() (saved bool) {
	if a.cfg.AllocationCheckpoint == "" {
		return true
	}
	a.ckptMu.Lock()
	defer a.ckptMu.Unlock()
	a.mu.Lock()
	gen := a.allocGen
	if gen == a.ckptGen {
		a.mu.Unlock()
		return true
	}
	allocs := make(map[types.UID]allocation, len(a.resizes)+len(a.restored))
	for uid, al := range a.restored {
		allocs[uid] = al
	}
	for uid, st := range a.resizes {
		allocs[uid] = st.alloc
	}
	a.mu.Unlock()
	sum, err := writeAllocations(a.cfg.AllocationCheckpoint, allocs, a.ckptSum)
	if err != nil {
		a.log.Error(err, "saving the pods' allocations failed; trying again at the next change or housekeeping", "file", a.cfg.AllocationCheckpoint)
		return false
	}
	a.ckptSum, a.ckptGen = sum, gen
	return true
}
