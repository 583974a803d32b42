package eviction

// layout is where the node keeps images and the containers' writable
// layers: on the node's filesystem (neither set), images and layers on
// an image filesystem of their own (dedicated), or images there and the
// layers on the node's filesystem (dedicated and split, the kubelet's
// split image filesystem).
type layout struct{ dedicated, split bool }

// measure is what ranking counts of a pod for a disk signal, as the
// kubelet's buildSignalToRankFunc does.
func (l layout) measure(s Signal) fsMeasure {
	switch {
	case !l.dedicated:
		return measureAll
	case !l.split:
		if s == SignalNodeFsAvailable || s == SignalNodeFsInodesFree {
			return fsMeasure{logs: true, volumes: true}
		}
		return fsMeasure{root: true}
	}
	if s == SignalImageFsAvailable || s == SignalImageFsInodesFree {
		// Only images, which no pod is charged for.
		return fsMeasure{}
	}
	return measureAll
}

// reclaim says which node-level reclaim helps a disk signal, as the
// kubelet's buildSignalToNodeReclaimFuncs does: removing dead
// containers, unused images.
func (l layout) reclaim(s Signal) (containers, images bool) {
	nodeFs := s == SignalNodeFsAvailable || s == SignalNodeFsInodesFree
	imageFs := s == SignalImageFsAvailable || s == SignalImageFsInodesFree
	containerFs := s == SignalContainerFsAvailable || s == SignalContainerFsInodesFree
	switch {
	case !nodeFs && !imageFs && !containerFs:
		return false, false
	case !l.dedicated:
		return true, true
	case !l.split:
		return !nodeFs, !nodeFs
	}
	return !imageFs, imageFs
}

// withContainerFs sets the containerfs thresholds as the kubelet's
// UpdateContainerFsThresholds does: copies of the nodefs thresholds
// (hard and soft, bytes and inodes) on a node with one filesystem or a
// split image filesystem, of the imagefs ones with a dedicated image
// filesystem. A containerfs threshold in ts is replaced by the copy, or
// dropped when there is nothing to copy; ignored reports whether ts had
// one.
func withContainerFs(ts []Threshold, l layout) (out []Threshold, ignored bool) {
	from := [2]Signal{SignalNodeFsAvailable, SignalNodeFsInodesFree}
	if l.dedicated && !l.split {
		from = [2]Signal{SignalImageFsAvailable, SignalImageFsInodesFree}
	}
	to := [2]Signal{SignalContainerFsAvailable, SignalContainerFsInodesFree}
	kind := func(t Threshold) int {
		if t.Hard() {
			return 0
		}
		return 1
	}
	var src [2][2]*Threshold // [bytes, inodes][hard, soft]; the last one wins
	for i := range ts {
		for k := range from {
			if ts[i].Signal == from[k] {
				src[k][kind(ts[i])] = &ts[i]
			}
		}
	}
	derive := func(k, h int) (Threshold, bool) {
		if src[k][h] == nil {
			return Threshold{}, false
		}
		t := *src[k][h]
		t.Signal = to[k]
		return t, true
	}
	var done [2][2]bool
	out = make([]Threshold, 0, len(ts)+4)
	for _, t := range ts {
		k := -1
		for i := range to {
			if t.Signal == to[i] {
				k = i
			}
		}
		if k < 0 {
			out = append(out, t)
			continue
		}
		ignored = true
		if h := kind(t); !done[k][h] {
			done[k][h] = true
			if d, ok := derive(k, h); ok {
				out = append(out, d)
			}
		}
	}
	for k := range to {
		for h := range 2 {
			if d, ok := derive(k, h); ok && !done[k][h] {
				out = append(out, d)
			}
		}
	}
	return out, ignored
}
