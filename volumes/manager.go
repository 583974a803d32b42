package volumes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Manager is the volume manager, as the kubelet's: it keeps the desired
// state (the pods added and not removed, and the volumes their
// containers mount), the actual state (the volumes set up on disk), and
// a reconciler, Run, that brings the second to the first: it sets up the
// volumes of added pods, sets up Refresh volumes again every
// Config.SyncPeriod, tears down the volumes of removed pods and removes
// their volume directories, and removes what is left of orphaned pods
// (CleanupOrphans). Failed operations are retried with a per-volume
// back-off of 500ms doubling to 2m2s, the kubelet's.
//
// The reconciler works only on what changed: a pass when nothing was
// added, removed or fell due costs a clock read and a lock. Operations on
// different volumes run concurrently, each on a goroutine of its own, so
// a slow or hung SetUp holds back only its pod.
//
// Every method is safe for concurrent use.
type Manager struct {
	cfg       Config
	log       logr.Logger
	metrics   *metrics
	byEscaped map[string]Plugin // plugins by escaped name, for dirs found on disk
	wake      chan struct{}     // capacity 1: a pending wake-up coalesces
	ops       sync.WaitGroup    // running operations

	// mu guards everything below.
	mu      sync.Mutex
	pods    map[types.UID]*podState
	dirty   map[types.UID]struct{} // pods whose desired or actual state changed
	nextDue time.Time              // earliest retry or refresh; zero: none
	changed chan struct{}          // closed and replaced at every state change
	// CleanupOrphans' memory: the modification time of Config.PodsDir
	// at its last scan, and the pods found there or forgotten since that
	// the manager does not know.
	scanned    bool
	scanAgain  bool
	scanTime   time.Time
	candidates map[types.UID]struct{}
}

// podState is one pod's desired and actual state.
type podState struct {
	uid    types.UID
	pod    *v1.Pod // nil for a pod found on disk
	wanted bool
	orphan bool // found on disk: its whole directory goes
	// bad input, each naming the pod and the field
	errs    []string
	badVols []string
	vols    map[string]*volState
	// the removal of the pod's volume (orphan: pod) directory
	busy    bool
	err     error
	backoff time.Duration
	retryAt time.Time
}

// volState is one volume's desired and actual state.
type volState struct {
	name     string
	spec     *v1.Volume // nil for a volume found on disk
	plugin   Plugin
	attrs    Attributes
	dir      string
	field    string // spec.volumes[i]
	wanted   bool
	mounted  bool   // set up
	touched  bool   // SetUp was called: TearDown is due once unwanted
	hostPath string // what SetUp returned
	busy     bool   // an operation runs
	cancel   func() // cancels the running SetUp; nil when none runs
	canceled bool   // RemovePod cancelled the running SetUp
	err      error  // the last operation's failure
	backoff  time.Duration
	retryAt  time.Time
	// refresh of Refresh volumes
	refreshAt  time.Time
	refreshNow bool
}

// New returns a Manager for cfg. It copies and checks cfg, does no I/O
// and starts nothing: Run reconciles.
func New(cfg Config) (*Manager, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:       cfg,
		log:       cfg.Logger,
		byEscaped: make(map[string]Plugin, len(cfg.Plugins)),
		wake:      make(chan struct{}, 1),
		pods:      map[types.UID]*podState{},
		dirty:     map[types.UID]struct{}{},
		changed:   make(chan struct{}),

		candidates: map[types.UID]struct{}{},
	}
	for _, p := range cfg.Plugins {
		m.byEscaped[EscapePluginName(p.Name())] = p
	}
	var err error
	if m.metrics, err = newMetrics(m, cfg.Registerer); err != nil {
		return nil, fmt.Errorf("volumes: %w", err)
	}
	return m, nil
}

// AddPod puts the pod in the desired state: the volumes its containers
// (init, regular and ephemeral) mount are set up by Run. Volumes no
// container mounts are left alone, as the kubelet does. A volumeMount
// naming no volume of the pod, a volume no plugin supports, and a volume
// name that is not one path element are errors WaitForAttachAndMount
// returns, naming the pod and the field; the pod's other volumes are set
// up all the same. A UID that is not one path element (it names the
// pod's directory) leaves every volume of the pod unset, with an error. A pod already added keeps
// the volumes it had (a pod's volumes do not change for its UID) and only
// its spec is replaced, for plugins that show pod fields. The caller must
// not modify pod afterwards. It does not block.
func (m *Manager) AddPod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.pods[pod.UID]
	if ps != nil && ps.wanted {
		ps.pod = pod
		return
	}
	if ps == nil {
		ps = &podState{uid: pod.UID, vols: map[string]*volState{}}
		m.pods[pod.UID] = ps
	}
	ps.pod, ps.wanted, ps.orphan = pod, true, false
	ps.errs, ps.badVols = nil, nil
	m.desire(ps)
	m.markDirty(pod.UID)
}

// validDirName reports whether s can name a directory beneath another
// without leaving it: one path element, not "." or "..". Pod UIDs and
// volume names become directory names.
func validDirName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00")
}

// desire computes the volumes ps.pod wants.
func (m *Manager) desire(ps *podState) {
	pod := ps.pod
	name := pod.Namespace + "/" + pod.Name
	if !validDirName(string(ps.uid)) {
		ps.errs = append(ps.errs, fmt.Sprintf("pod %s: metadata.uid: %q cannot name the pod's directory", name, ps.uid))
		for i := range pod.Spec.Volumes {
			ps.badVols = append(ps.badVols, pod.Spec.Volumes[i].Name)
		}
		slices.Sort(ps.badVols)
		return
	}
	used := map[string]bool{}
	mounts := func(field string, vms []v1.VolumeMount) {
		for j, vm := range vms {
			if !slices.ContainsFunc(pod.Spec.Volumes, func(v v1.Volume) bool { return v.Name == vm.Name }) {
				if !slices.Contains(ps.badVols, vm.Name) {
					ps.badVols = append(ps.badVols, vm.Name)
				}
				ps.errs = append(ps.errs, fmt.Sprintf("pod %s: %s.volumeMounts[%d].name: the pod has no volume named %q in spec.volumes", name, field, j, vm.Name))
				continue
			}
			used[vm.Name] = true
		}
	}
	for i := range pod.Spec.InitContainers {
		mounts(fmt.Sprintf("spec.initContainers[%d]", i), pod.Spec.InitContainers[i].VolumeMounts)
	}
	for i := range pod.Spec.Containers {
		mounts(fmt.Sprintf("spec.containers[%d]", i), pod.Spec.Containers[i].VolumeMounts)
	}
	for i := range pod.Spec.EphemeralContainers {
		mounts(fmt.Sprintf("spec.ephemeralContainers[%d]", i), pod.Spec.EphemeralContainers[i].VolumeMounts)
	}
	for _, vs := range ps.vols {
		vs.wanted = false
	}
	podDir := m.podDir(ps.uid)
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if !used[v.Name] {
			continue
		}
		if _, dup := ps.vols[v.Name]; dup && ps.vols[v.Name].wanted {
			continue // the first of the name counts
		}
		if !validDirName(v.Name) {
			ps.badVols = append(ps.badVols, v.Name)
			ps.errs = append(ps.errs, fmt.Sprintf("pod %s: spec.volumes[%d].name: %q cannot name the volume's directory", name, i, v.Name))
			continue
		}
		p := m.findPlugin(v)
		if p == nil {
			ps.badVols = append(ps.badVols, v.Name)
			ps.errs = append(ps.errs, fmt.Sprintf("pod %s: spec.volumes[%d] (%s): no volume plugin supports its type (%s)", name, i, v.Name, volumeType(v)))
			continue
		}
		vs := ps.vols[v.Name]
		if onDisk := ps.vols[v.Name+"\x00"+p.Name()]; vs == nil && onDisk != nil && !onDisk.busy {
			// Found on disk by CleanupOrphans and wanted again: adopted.
			delete(ps.vols, onDisk.name)
			onDisk.name, vs = v.Name, onDisk
			ps.vols[v.Name] = vs
		}
		if vs == nil {
			vs = &volState{name: v.Name, plugin: p, dir: VolumeDir(podDir, p.Name(), v.Name)}
			ps.vols[v.Name] = vs
		}
		vs.spec, vs.attrs, vs.wanted = v, p.Attributes(v), true
		vs.field = fmt.Sprintf("spec.volumes[%d] (%s)", i, v.Name)
	}
	slices.Sort(ps.badVols)
}

func (m *Manager) findPlugin(v *v1.Volume) Plugin {
	for _, p := range m.cfg.Plugins {
		if p.CanSupport(v) {
			return p
		}
	}
	return nil
}

// volumeType names the source a volume sets ("emptyDir", "nfs"...).
func volumeType(v *v1.Volume) string {
	rv := reflect.ValueOf(v.VolumeSource)
	for i := range rv.NumField() {
		if f := rv.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			tag, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("json"), ",")
			return tag
		}
	}
	return "no volume source set"
}

// RemovePod takes the pod out of the desired state: Run tears its
// volumes down and removes its volume directory. Call it once the pod's
// containers are gone; WaitForUnmount waits for the teardown. A SetUp
// of the pod's volumes still running has its ctx cancelled, so that a
// plugin blocked on a getter does not hold the teardown back. For a pod
// the manager does not know it looks for volumes on disk (left by an
// earlier run, for a pod that ended before it) and tears those down.
// It does not block but for that look.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.pods[uid]
	if ps == nil && !validDirName(string(uid)) {
		return
	}
	if ps == nil {
		m.mu.Unlock()
		vols := m.scanVolumes(uid)
		m.mu.Lock()
		if _, known := m.pods[uid]; !known && len(vols) > 0 {
			m.pods[uid] = &podState{uid: uid, vols: vols}
			m.markDirty(uid)
		}
		return
	}
	if !ps.wanted {
		return
	}
	ps.wanted = false
	ps.errs, ps.badVols = nil, nil
	for _, vs := range ps.vols {
		vs.wanted = false
		// A failed SetUp's error and back-off are no teardown's: the
		// teardown starts at once.
		vs.err, vs.backoff, vs.retryAt = nil, 0, time.Time{}
		if vs.cancel != nil {
			vs.cancel() // a SetUp still running (a getter that hangs) must not hold back the teardown
			vs.canceled = true
		}
	}
	m.markDirty(uid)
}

// markDirty queues the pod for the reconciler and wakes it. m.mu is
// held.
func (m *Manager) markDirty(uid types.UID) {
	m.dirty[uid] = struct{}{}
	m.notify()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// notify wakes the waiters. m.mu is held.
func (m *Manager) notify() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// due records that work falls due at t. m.mu is held.
func (m *Manager) due(t time.Time) {
	if m.nextDue.IsZero() || t.Before(m.nextDue) {
		m.nextDue = t
	}
}

// Run reconciles until ctx ends: at once, whenever pods are added or
// removed or an operation ends, and when a retry or refresh falls due on
// Config.Clock. It returns nil after ctx ended and every operation it
// started has returned.
func (m *Manager) Run(ctx context.Context) error {
	defer m.ops.Wait()
	for {
		next := m.reconcile(ctx)
		var timer <-chan time.Time
		var stop func() bool
		if !next.IsZero() {
			t := m.cfg.Clock.NewTimer(next.Sub(m.cfg.Clock.Now()))
			timer, stop = t.C(), t.Stop
		}
		select {
		case <-ctx.Done():
		case <-m.wake:
		case <-timer:
		}
		if stop != nil {
			stop()
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// reconcile is one pass: it starts the operations that are due and
// returns when the next one falls due (zero: none). A pass with nothing
// queued and nothing due returns at once.
func (m *Manager) reconcile(ctx context.Context) time.Time {
	now := m.cfg.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	timeDue := !m.nextDue.IsZero() && !now.Before(m.nextDue)
	if len(m.dirty) == 0 && !timeDue {
		return m.nextDue
	}
	if timeDue {
		m.nextDue = time.Time{}
		for _, ps := range m.pods {
			m.step(ctx, ps, now)
		}
	} else {
		for uid := range m.dirty {
			if ps := m.pods[uid]; ps != nil {
				m.step(ctx, ps, now)
			}
		}
	}
	clear(m.dirty)
	return m.nextDue
}

// step starts the pod's due operations. m.mu is held.
func (m *Manager) step(ctx context.Context, ps *podState, now time.Time) {
	if ps.busy {
		return // its directories are being removed; it is dirty again after
	}
	for _, vs := range ps.vols {
		if vs.busy {
			continue
		}
		switch {
		case vs.wanted && !vs.mounted:
			if sharesDir(ps, vs) {
				continue // set up once the other entry's operation ends
			}
			if now.Before(vs.retryAt) {
				m.due(vs.retryAt)
				continue
			}
			m.startSetUp(ctx, ps, vs)
		case vs.wanted && vs.attrs.Refresh:
			if !vs.refreshNow && now.Before(vs.refreshAt) {
				m.due(vs.refreshAt)
				continue
			}
			m.startSetUp(ctx, ps, vs)
		case !vs.wanted:
			if !vs.touched {
				delete(ps.vols, vs.name)
				continue
			}
			if now.Before(vs.retryAt) {
				m.due(vs.retryAt)
				continue
			}
			m.startTearDown(ctx, ps, vs)
		}
	}
	if ps.wanted || len(ps.vols) > 0 {
		return
	}
	if !validDirName(string(ps.uid)) {
		delete(m.pods, ps.uid) // it never had a directory
		m.notify()
		return
	}
	if now.Before(ps.retryAt) {
		m.due(ps.retryAt)
		return
	}
	m.startRemoveDirs(ctx, ps)
}

// sharesDir reports whether another entry of the pod, one found on disk
// and being torn down, holds the volume's directory. m.mu is held.
func sharesDir(ps *podState, vs *volState) bool {
	for _, o := range ps.vols {
		if o != vs && o.dir == vs.dir && (o.busy || o.touched && !o.wanted) {
			return true
		}
	}
	return false
}

func (m *Manager) podDir(uid types.UID) string {
	return filepath.Join(m.cfg.PodsDir, string(uid))
}

func (ps *podState) name() string {
	if ps.pod == nil {
		return string(ps.uid)
	}
	return ps.pod.Namespace + "/" + ps.pod.Name
}

// event is an event to send once m.mu is released.
type event struct {
	pod                  *v1.Pod
	typ, reason, message string
}

// startSetUp sets the volume up on a goroutine. m.mu is held.
func (m *Manager) startSetUp(ctx context.Context, ps *podState, vs *volState) {
	vs.busy, vs.touched, vs.refreshNow = true, true, false
	req := &Request{Pod: ps.pod, Volume: vs.spec, Dir: vs.dir, Update: vs.mounted}
	plugin, attrs := vs.plugin, vs.attrs
	ctx, cancel := context.WithCancel(ctx)
	vs.cancel = cancel
	m.ops.Add(1)
	go func() {
		defer m.ops.Done()
		defer cancel()
		start := m.cfg.Clock.Now()
		hostPath, err := m.setUp(ctx, req, plugin, attrs)
		m.metrics.observe(plugin.Name(), "volume_mount", err, m.cfg.Clock.Since(start))
		m.mu.Lock()
		vs.cancel = nil
		ev := m.finishSetUp(ps, vs, hostPath, err)
		m.mu.Unlock()
		if ev != nil {
			m.cfg.Events(ev.pod, ev.typ, ev.reason, ev.message)
		}
	}()
}

func (m *Manager) setUp(ctx context.Context, req *Request, plugin Plugin, attrs Attributes) (string, error) {
	if err := os.MkdirAll(filepath.Dir(req.Dir), 0o750); err != nil {
		return "", err
	}
	if !req.Update {
		if _, err := os.Lstat(req.Dir); err == nil {
			req.Update = true // set up by an earlier run
		}
	}
	hostPath, err := plugin.SetUp(ctx, req)
	if err != nil {
		return "", err
	}
	if attrs.Managed {
		fail := func(path string, err error) {
			m.log.Error(err, "setting the fsGroup failed", "pod", req.Pod.Namespace+"/"+req.Pod.Name, "volume", req.Volume.Name, "path", path)
		}
		if err := setOwnership(req.Pod, hostPath, attrs.ReadOnly, fail); err != nil {
			return "", fmt.Errorf("setting the fsGroup: %w", err)
		}
	}
	return hostPath, nil
}

// finishSetUp records a SetUp's outcome. m.mu is held.
func (m *Manager) finishSetUp(ps *podState, vs *volState, hostPath string, err error) *event {
	now := m.cfg.Clock.Now()
	vs.busy = false
	defer m.markDirty(ps.uid)
	canceled := vs.canceled
	vs.canceled = false
	if err != nil && (!vs.wanted || canceled) {
		// The pod was removed meanwhile (its SetUp cancelled): the
		// teardown is next, at once; or it was added again since, and
		// the SetUp starts again at once.
		m.log.V(2).Info("volume set-up of a removed pod ended", "pod", ps.name(), "podUID", ps.uid, "volume", vs.spec.Name, "err", err)
		return nil
	}
	if err != nil {
		vs.err = fmt.Errorf("%s: %w", vs.field, err)
		vs.backoff = nextBackoff(vs.backoff)
		vs.retryAt = now.Add(vs.backoff)
		if vs.mounted {
			vs.refreshAt = vs.retryAt
		}
		m.due(vs.retryAt)
		m.log.V(2).Info("volume set-up failed", "pod", ps.name(), "podUID", ps.uid, "volume", vs.spec.Name, "err", err)
		if ps.pod == nil {
			return nil
		}
		return &event{ps.pod, v1.EventTypeWarning, "FailedMount", fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", vs.spec.Name, err)}
	}
	first := !vs.mounted
	vs.err, vs.backoff, vs.retryAt = nil, 0, time.Time{}
	vs.mounted, vs.hostPath = true, hostPath
	if vs.attrs.Refresh {
		vs.refreshAt = now.Add(m.cfg.SyncPeriod)
		m.due(vs.refreshAt)
	}
	if first {
		m.log.V(2).Info("volume set up", "pod", ps.name(), "podUID", ps.uid, "volume", vs.spec.Name, "path", hostPath)
	}
	return nil
}

func nextBackoff(d time.Duration) time.Duration {
	if d == 0 {
		return initialRetry
	}
	return min(2*d, maxRetry)
}

// startTearDown tears the volume down on a goroutine. m.mu is held.
func (m *Manager) startTearDown(ctx context.Context, ps *podState, vs *volState) {
	vs.busy = true
	plugin, dir := vs.plugin, vs.dir
	m.ops.Add(1)
	go func() {
		defer m.ops.Done()
		start := m.cfg.Clock.Now()
		err := plugin.TearDown(ctx, dir)
		m.metrics.observe(plugin.Name(), "volume_unmount", err, m.cfg.Clock.Since(start))
		m.mu.Lock()
		defer m.mu.Unlock()
		vs.busy = false
		defer m.markDirty(ps.uid)
		if err != nil {
			vs.err = fmt.Errorf("volume %q: tear down %s: %w", baseName(vs.name), dir, err)
			vs.backoff = nextBackoff(vs.backoff)
			vs.retryAt = m.cfg.Clock.Now().Add(vs.backoff)
			m.due(vs.retryAt)
			m.log.Error(err, "volume tear-down failed", "pod", ps.name(), "podUID", ps.uid, "volume", baseName(vs.name))
			return
		}
		m.log.V(2).Info("volume torn down", "pod", ps.name(), "podUID", ps.uid, "volume", baseName(vs.name))
		vs.err, vs.backoff, vs.retryAt = nil, 0, time.Time{}
		vs.mounted, vs.touched, vs.hostPath = false, false, ""
		if !vs.wanted {
			delete(ps.vols, vs.name)
		}
	}()
}

// baseName is a volume's name without the plugin suffix given to one
// found on disk under another plugin.
func baseName(key string) string {
	name, _, _ := strings.Cut(key, "\x00")
	return name
}

// startRemoveDirs removes, on a goroutine, the pod's emptied volume
// directories, and for an orphan its whole directory. m.mu is held.
func (m *Manager) startRemoveDirs(ctx context.Context, ps *podState) {
	ps.busy = true
	orphan := ps.orphan
	m.ops.Add(1)
	go func() {
		defer m.ops.Done()
		err := m.removeDirs(ps.uid, orphan)
		m.mu.Lock()
		defer m.mu.Unlock()
		ps.busy = false
		defer m.markDirty(ps.uid)
		if err != nil {
			ps.err = err
			ps.backoff = nextBackoff(ps.backoff)
			ps.retryAt = m.cfg.Clock.Now().Add(ps.backoff)
			m.due(ps.retryAt)
			m.log.Error(err, "removing a pod's volume directory failed", "pod", ps.name(), "podUID", ps.uid)
			return
		}
		if !ps.wanted && len(ps.vols) == 0 {
			delete(m.pods, ps.uid)
			if !orphan {
				m.candidates[ps.uid] = struct{}{} // its directory stays
			}
		}
	}()
}

// removeDirs removes <pod>/volumes, which only empty plugin directories
// may still hold, and for an orphan the pod's directory, unless a mount
// point lies beneath it.
func (m *Manager) removeDirs(uid types.UID, orphan bool) error {
	podDir := m.podDir(uid)
	volumesDir := filepath.Join(podDir, "volumes")
	entries, err := os.ReadDir(volumesDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(volumesDir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return leftOver(err)
		}
	}
	if err := os.Remove(volumesDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return leftOver(err)
	}
	if !orphan {
		return nil
	}
	mps, err := m.cfg.Mounter.List()
	if err != nil {
		return fmt.Errorf("listing mounts: %w", err)
	}
	for _, mp := range mps {
		if mp.Path == podDir || strings.HasPrefix(mp.Path, podDir+"/") {
			return fmt.Errorf("orphaned pod directory %s: %s is still mounted", podDir, mp.Path)
		}
	}
	return removeAll(podDir)
}

func leftOver(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && errors.Is(pe.Err, syscall.ENOTEMPTY) {
		return fmt.Errorf("volume directory %s still holds volumes no plugin tears down", pe.Path)
	}
	return err
}

// WaitForAttachAndMount blocks until every volume the pod's containers
// mount is set up, and returns nil; the pod must have been added
// (AddPod). Refresh volumes already set up are set up again soon after,
// without being waited for (the kubelet's remount at each sync). It
// returns an error, without waiting further, as soon as the pod has bad
// input or a volume's last SetUp failed, and when ctx ends or
// Config.MountTimeout passes. The error is the kubelet's: "unmounted
// volumes=[a b], unattached volumes=[], failed to process volumes=[b]:
// " followed by the errors, which name the pod, the volumes and the
// fields.
func (m *Manager) WaitForAttachAndMount(ctx context.Context, pod *v1.Pod) error {
	if pod == nil {
		return nil
	}
	m.mu.Lock()
	ps := m.pods[pod.UID]
	if ps == nil || !ps.wanted {
		m.mu.Unlock()
		return fmt.Errorf("volumes: pod %s/%s was not added to the volume manager", pod.Namespace, pod.Name)
	}
	refresh := false
	for _, vs := range ps.vols {
		if vs.wanted && vs.mounted && vs.attrs.Refresh && !vs.busy {
			vs.refreshNow, refresh = true, true
		}
	}
	if refresh {
		m.markDirty(pod.UID)
	}
	m.mu.Unlock()
	var timer <-chan time.Time
	for {
		m.mu.Lock()
		ps := m.pods[pod.UID]
		if ps == nil || !ps.wanted {
			m.mu.Unlock()
			return fmt.Errorf("volumes: pod %s/%s was removed from the volume manager", pod.Namespace, pod.Name)
		}
		unmounted, failed, msgs := mountState(ps)
		ch := m.changed
		m.mu.Unlock()
		if len(unmounted) == 0 {
			return nil
		}
		if len(msgs) > 0 {
			return mountError(unmounted, failed, strings.Join(msgs, "; "), nil)
		}
		if timer == nil {
			t := m.cfg.Clock.NewTimer(m.cfg.MountTimeout)
			defer t.Stop()
			timer = t.C()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return mountError(unmounted, failed, "", ctx.Err())
		case <-timer:
			return mountError(unmounted, failed, "", context.DeadlineExceeded) // the kubelet's words
		}
	}
}

// mountState lists the pod's volumes not set up, those with bad input,
// and the errors to report. m.mu is held.
func mountState(ps *podState) (unmounted, failed, msgs []string) {
	unmounted = slices.Clone(ps.badVols)
	failed = ps.badVols
	msgs = slices.Clone(ps.errs)
	var volErrs []string
	for _, vs := range ps.vols {
		if !vs.wanted || vs.mounted {
			continue
		}
		unmounted = append(unmounted, vs.spec.Name)
		if vs.err != nil {
			volErrs = append(volErrs, vs.err.Error())
		}
	}
	slices.Sort(unmounted)
	unmounted = slices.Compact(unmounted)
	slices.Sort(volErrs)
	if len(volErrs) > 0 {
		name := ps.name()
		for _, e := range volErrs {
			msgs = append(msgs, "pod "+name+": "+e)
		}
	}
	return unmounted, failed, msgs
}

func mountError(unmounted, failed []string, msg string, cause error) error {
	if failed == nil {
		failed = []string{}
	}
	head := fmt.Sprintf("unmounted volumes=%v, unattached volumes=[], failed to process volumes=%v", unmounted, failed)
	if cause != nil {
		return fmt.Errorf("%s: %w", head, cause)
	}
	return errors.New(head + ": " + msg)
}

// WaitForUnmount blocks until the volumes of a removed pod are torn down
// and its volume directory is gone, and returns nil; at once for a pod
// the manager does not know, or one added again. It returns an error, at
// once, when a teardown or the directory's removal last failed (Run
// retries it), and when ctx ends or Config.MountTimeout passes.
func (m *Manager) WaitForUnmount(ctx context.Context, uid types.UID) error {
	var timer <-chan time.Time
	for {
		m.mu.Lock()
		ps := m.pods[uid]
		if ps == nil || ps.wanted {
			m.mu.Unlock()
			return nil
		}
		var left, msgs []string
		for _, vs := range ps.vols {
			left = append(left, baseName(vs.name))
			if vs.err != nil && !vs.wanted {
				msgs = append(msgs, vs.err.Error())
			}
		}
		if ps.err != nil {
			msgs = append(msgs, ps.err.Error())
		}
		name := ps.name()
		ch := m.changed
		m.mu.Unlock()
		slices.Sort(left)
		slices.Sort(msgs)
		if len(msgs) > 0 {
			return fmt.Errorf("volumes of pod %s not torn down, volumes=%v: %s", name, left, strings.Join(msgs, "; "))
		}
		if timer == nil {
			t := m.cfg.Clock.NewTimer(m.cfg.MountTimeout)
			defer t.Stop()
			timer = t.C()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("volumes of pod %s not torn down, volumes=%v: %w", name, left, ctx.Err())
		case <-timer:
			return fmt.Errorf("volumes of pod %s not torn down, volumes=%v: %w", name, left, context.DeadlineExceeded)
		}
	}
}

// PodVolumesExist reports whether the pod still has volumes: set up,
// being set up or torn down, or left on disk in its volume directory
// (by an earlier run, before CleanupOrphans removed them). It does a
// stat for a pod the manager does not know.
func (m *Manager) PodVolumesExist(uid types.UID) bool {
	m.mu.Lock()
	ps := m.pods[uid]
	m.mu.Unlock()
	if ps != nil {
		return true
	}
	if !validDirName(string(uid)) {
		return false
	}
	_, err := os.Lstat(filepath.Join(m.podDir(uid), "volumes"))
	return err == nil
}

// HostPath implements runtime/cri.Volumes: the host directory or file
// (hostPath) of the pod's volume, once it is set up. It returns an error
// naming the volume when it is not set up (WaitForAttachAndMount first).
// It does not block.
func (m *Manager) HostPath(pod *v1.Pod, volume string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ps := m.pods[pod.UID]; ps != nil {
		if vs := ps.vols[volume]; vs != nil && vs.wanted && vs.mounted {
			return vs.hostPath, nil
		}
	}
	return "", fmt.Errorf("volume %q is not set up", volume)
}

// MountReadOnly reports whether the pod's volume must be mounted
// read-only whatever its volumeMounts say: its plugin's Attributes say
// ReadOnly (configMap, secret, downwardAPI and projected content), as the
// kubelet mounts them. It implements runtime/cri.ReadOnlyVolumes. It does
// not block and is safe for concurrent use.
func (m *Manager) MountReadOnly(pod *v1.Pod, volume string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ps := m.pods[pod.UID]; ps != nil {
		if vs := ps.vols[volume]; vs != nil {
			return vs.attrs.ReadOnly
		}
	}
	return false
}

// CleanupOrphans removes the volumes and directories of the pods under
// Config.PodsDir that the manager does not know and keep does not claim:
// pods of an earlier run that no source wants any more, or pods removed
// since. Call it only once every pod source has delivered its pods (the
// kubelet waits for its sources too), and again from time to time: keep
// should claim every pod a source holds or whose containers may still
// run. It reads Config.PodsDir and each orphan's volume directory and
// returns; Run tears the volumes down (a directory no plugin knows stays,
// and so does its pod's directory) and removes the pod's directory, but
// never one with a mount point beneath it. keep is called on the
// caller's goroutine. It returns the error of reading Config.PodsDir; a
// missing one holds no orphan.
func (m *Manager) CleanupOrphans(keep func(types.UID) bool) error {
	st, err := os.Stat(m.cfg.PodsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("volumes: orphan cleanup: %w", err)
	}
	// The directory is read again only when its entries changed (its
	// modification time moved); otherwise the candidates are the pods it
	// held that the manager did not know, and those the manager forgot
	// since: an idle node does no directory scan.
	// A change within the file system's timestamp granularity of a scan
	// leaves the time as it was: a scan that found a change is followed by
	// one more at the next call.
	m.mu.Lock()
	changed := !m.scanned || !st.ModTime().Equal(m.scanTime)
	rescan := changed || m.scanAgain
	m.scanAgain = changed
	m.mu.Unlock()
	if rescan {
		f, err := os.Open(m.cfg.PodsDir)
		if err != nil {
			return fmt.Errorf("volumes: orphan cleanup: %w", err)
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			return fmt.Errorf("volumes: orphan cleanup: %w", err)
		}
		m.mu.Lock()
		m.scanned, m.scanTime = true, st.ModTime()
		clear(m.candidates)
		for _, n := range names {
			m.candidates[types.UID(n)] = struct{}{}
		}
		m.mu.Unlock()
	}
	m.mu.Lock()
	var check []types.UID
	for uid := range m.candidates {
		if _, known := m.pods[uid]; known {
			delete(m.candidates, uid) // a candidate again once forgotten
			continue
		}
		check = append(check, uid)
	}
	m.mu.Unlock()
	for _, uid := range check {
		if keep(uid) {
			continue
		}
		if st, err := os.Lstat(m.podDir(uid)); err != nil || !st.IsDir() {
			m.mu.Lock()
			delete(m.candidates, uid)
			m.mu.Unlock()
			continue
		}
		vols := m.scanVolumes(uid)
		m.mu.Lock()
		if _, known := m.pods[uid]; !known {
			m.log.V(0).Info("removing the volumes of an orphaned pod", "podUID", uid, "volumes", len(vols))
			m.pods[uid] = &podState{uid: uid, orphan: true, vols: vols}
			m.markDirty(uid)
		}
		delete(m.candidates, uid)
		m.mu.Unlock()
	}
	return nil
}

// scanVolumes finds the volumes of a pod on disk.
func (m *Manager) scanVolumes(uid types.UID) map[string]*volState {
	vols := map[string]*volState{}
	volumesDir := filepath.Join(m.podDir(uid), "volumes")
	plugins, _ := os.ReadDir(volumesDir)
	for _, pe := range plugins {
		p := m.byEscaped[pe.Name()]
		if p == nil {
			m.log.V(0).Info("a volume directory of an orphaned pod belongs to no plugin; it stays", "podUID", uid, "path", filepath.Join(volumesDir, pe.Name()))
			continue
		}
		names, _ := os.ReadDir(filepath.Join(volumesDir, pe.Name()))
		for _, ve := range names {
			key := ve.Name() + "\x00" + p.Name()
			vols[key] = &volState{name: key, plugin: p, dir: filepath.Join(volumesDir, pe.Name(), ve.Name()), touched: true}
		}
	}
	return vols
}
