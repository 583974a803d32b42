package cgroupfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Error classes, checked with errors.Is.
var (
	// ErrInvalid is a path or a value no cgroup may have.
	ErrInvalid = errors.New("invalid")
	// ErrHasTasks is a cgroup that cannot be removed because tasks are
	// still in it (or in a child that appeared meanwhile).
	ErrHasTasks = errors.New("cgroup has tasks")
	// ErrMemoryBelowUsage is a memory limit below the cgroup's current
	// usage, which the kernel would meet by reclaiming and then killing.
	ErrMemoryBelowUsage = errors.New("memory limit below current usage")
)

// Resources are a cgroup's CPU and memory settings, in cgroup v1 units;
// nil leaves a setting alone.
type Resources struct {
	// CPUShares is cpu.shares, from 2 to 262144; on v2, cpu.weight as
	// CPUSharesToWeight converts it.
	CPUShares *uint64
	// CPUQuota is cpu.cfs_quota_us in µs per period, -1 for no limit; on
	// v2 the first half of cpu.max ("max" for -1).
	CPUQuota *int64
	// CPUPeriod is cpu.cfs_period_us in µs; on v2 the second half of
	// cpu.max.
	CPUPeriod *uint64
	// MemoryLimit is memory.limit_in_bytes, -1 for no limit; on v2
	// memory.max ("max" for -1).
	MemoryLimit *int64
	// PidsLimit is pids.max, -1 for no limit ("max").
	PidsLimit *int64
}

// hierarchy is one cgroup v1 hierarchy, or the unified one.
type hierarchy struct {
	dir         string   // its root directory
	controllers []string // the controllers it is found under: "cpu", "cpuacct"
}

// Manager manages cgroups below one mount point (normally
// /sys/fs/cgroup): cgroup v1, one hierarchy per controller or per group
// of joined controllers (cpu,cpuacct), or v2, one unified hierarchy.
// It is safe for concurrent use.
type Manager struct {
	unified bool
	// hierarchies are every directory below the mount on v1, each once
	// however many names lead to it; the mount itself on v2.
	hierarchies []hierarchy
}

// New detects what is mounted at mount: v2 if mount/cgroup.controllers
// exists, else v1 with a hierarchy per directory below mount, symlinks
// (cpu -> cpu,cpuacct) followed. On v1 the cpu and memory controllers
// must be there. New reads the mount but writes nothing.
func New(mount string) (*Manager, error) {
	mount = filepath.Clean(mount)
	_, err := os.Stat(filepath.Join(mount, "cgroup.controllers"))
	if err == nil {
		return &Manager{unified: true, hierarchies: []hierarchy{{dir: mount}}}, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("cgroupfs: %w", err)
	}
	entries, err := os.ReadDir(mount)
	if err != nil {
		return nil, fmt.Errorf("cgroupfs: %w", err)
	}
	m := &Manager{}
	byDir := map[string]int{}
	for _, e := range entries {
		dir, err := filepath.EvalSymlinks(filepath.Join(mount, e.Name()))
		if err != nil {
			continue // a dangling link leads to no hierarchy
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue
		}
		i, ok := byDir[dir]
		if !ok {
			i = len(m.hierarchies)
			byDir[dir] = i
			m.hierarchies = append(m.hierarchies, hierarchy{dir: dir})
		}
		for _, c := range strings.Split(e.Name(), ",") {
			if !slices.Contains(m.hierarchies[i].controllers, c) {
				m.hierarchies[i].controllers = append(m.hierarchies[i].controllers, c)
			}
		}
	}
	for _, c := range []string{"cpu", "memory"} {
		if _, ok := m.dir(c); !ok {
			return nil, fmt.Errorf("cgroupfs: %s holds neither cgroup.controllers (v2) nor a %s hierarchy (v1)", mount, c)
		}
	}
	return m, nil
}

// Unified reports whether the mount is cgroup v2.
func (m *Manager) Unified() bool { return m.unified }

// dir returns the root of the hierarchy holding controller.
func (m *Manager) dir(controller string) (string, bool) {
	if m.unified {
		return m.hierarchies[0].dir, true
	}
	for _, h := range m.hierarchies {
		if slices.Contains(h.controllers, controller) {
			return h.dir, true
		}
	}
	return "", false
}

// ValidatePath checks that p is a cgroup path no call can leave the mount
// by: absolute, clean (path.Clean leaves it as it is: no "..", ".",
// empty element or trailing slash). The error, of class ErrInvalid, names
// p.
func ValidatePath(p string) error {
	switch {
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("cgroup path %q: %w: not absolute", p, ErrInvalid)
	case path.Clean(p) != p:
		return fmt.Errorf("cgroup path %q: %w: not clean", p, ErrInvalid)
	case slices.Contains(strings.Split(p, "/"), ".."):
		// Clean keeps no ".." in an absolute path; kept for the reader.
		return fmt.Errorf("cgroup path %q: %w: holds \"..\"", p, ErrInvalid)
	}
	return nil
}

// validateChild is ValidatePath for the calls that change a cgroup, which
// the root never is.
func validateChild(p string) error {
	if err := ValidatePath(p); err != nil {
		return err
	}
	if p == "/" {
		return fmt.Errorf("cgroup path %q: %w: the root cgroup", p, ErrInvalid)
	}
	return nil
}

// Ensure creates the cgroup at path, with the missing parents, in every
// hierarchy (see the package doc for v1 cpuset and v2 controllers), and
// sets r on it. An existing cgroup is only set. On error, directories already created stay (Remove takes
// them away).
func (m *Manager) Ensure(path string, r Resources) error {
	if err := validateChild(path); err != nil {
		return fmt.Errorf("cgroupfs: ensure: %w", err)
	}
	if err := r.validate(); err != nil {
		return fmt.Errorf("cgroupfs: ensure %q: %w", path, err)
	}
	elems := strings.Split(path[1:], "/")
	if m.unified {
		if err := m.mkdirUnified(elems); err != nil {
			return fmt.Errorf("cgroupfs: ensure %q: %w", path, err)
		}
	} else {
		for _, h := range m.hierarchies {
			var err error
			if slices.Contains(h.controllers, "cpuset") {
				err = mkdirCpuset(h.dir, elems)
			} else {
				err = os.MkdirAll(filepath.Join(h.dir, filepath.FromSlash(path)), 0o755)
			}
			if err != nil {
				return fmt.Errorf("cgroupfs: ensure %q: %w", path, err)
			}
		}
	}
	return m.Set(path, r)
}

// mkdirCpuset creates the directories of elems below root one at a time,
// each taking cpuset.cpus and cpuset.mems from its parent when it has
// none: a cpuset cgroup with no CPUs or memory nodes takes no task.
func mkdirCpuset(root string, elems []string) error {
	parent := root
	for _, el := range elems {
		dir := filepath.Join(parent, el)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		for _, name := range []string{"cpuset.cpus", "cpuset.mems"} {
			own, err := readFile(filepath.Join(dir, name))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			if own != "" {
				continue
			}
			inherited, err := readFile(filepath.Join(parent, name))
			if err != nil {
				return err
			}
			if err := writeFile(filepath.Join(dir, name), inherited); err != nil {
				return err
			}
		}
		parent = dir
	}
	return nil
}

// required reports whether a pod cgroup needs v2 controller c; the
// others the root offers are enabled when the kernel lets them.
func required(c string) bool { return c == "cpu" || c == "memory" || c == "pids" }

// mkdirUnified creates the directories of elems below the v2 root,
// enabling in each parent's cgroup.subtree_control the controllers its
// cgroup.controllers offers (a plain directory standing in for a cgroup
// has none and offers its parent's) before creating its child.
func (m *Manager) mkdirUnified(elems []string) error {
	parent, available := m.hierarchies[0].dir, []string(nil)
	for _, el := range elems {
		if own, err := readFile(filepath.Join(parent, "cgroup.controllers")); err == nil {
			available = strings.Fields(own)
		}
		if err := enableControllers(parent, available); err != nil {
			return err
		}
		dir := filepath.Join(parent, el)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		parent = dir
	}
	return nil
}

// enableControllers writes "+c" to dir's cgroup.subtree_control for each
// controller of available not yet enabled there: all in one write, or,
// if the kernel refuses that, one by one, failing only for a required
// one.
func enableControllers(dir string, available []string) error {
	file := filepath.Join(dir, "cgroup.subtree_control")
	enabled, err := readFile(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	on := strings.Fields(strings.ReplaceAll(enabled, "+", ""))
	var missing []string
	for _, c := range available {
		if !slices.Contains(on, c) {
			missing = append(missing, "+"+c)
		}
	}
	if len(missing) == 0 || writeFile(file, strings.Join(missing, " ")) == nil {
		return nil
	}
	for _, c := range missing {
		if err := writeFile(file, c); err != nil && required(c[1:]) {
			return fmt.Errorf("enable controller %s: %w", c[1:], err)
		}
	}
	return nil
}

// Set writes r to the existing cgroup at path, in the order V1Files
// gives. A memory limit below the current usage fails with
// ErrMemoryBelowUsage, naming the cgroup, the limit and the usage, before
// anything is written. If the kernel refuses a new CFS period with the
// old quota (it may exceed what the parent allows), the quota is written
// first. On v2, a quota or period given alone keeps the other half of
// cpu.max.
func (m *Manager) Set(path string, r Resources) error {
	if err := validateChild(path); err != nil {
		return fmt.Errorf("cgroupfs: set: %w", err)
	}
	if r.MemoryLimit != nil && *r.MemoryLimit != -1 {
		usage, err := m.MemoryUsage(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err == nil && usage > *r.MemoryLimit {
			return belowUsage(path, *r.MemoryLimit, usage)
		}
	}
	var files []File
	var err error
	if m.unified {
		if (r.CPUQuota == nil) != (r.CPUPeriod == nil) {
			r, err = m.fillCPUMax(path, r)
			if err != nil {
				return err
			}
		}
		files, err = V2Files(r)
	} else {
		files, err = V1Files(r)
	}
	if err != nil {
		return fmt.Errorf("cgroupfs: set %q: %w", path, err)
	}
	for i := 0; i < len(files); i++ {
		f := files[i]
		err := m.write(path, f)
		if f.Name == "cpu.cfs_period_us" && errors.Is(err, syscall.EINVAL) &&
			i+1 < len(files) && files[i+1].Name == "cpu.cfs_quota_us" {
			i++
			if err = m.write(path, files[i]); err == nil {
				err = m.write(path, f)
			}
		}
		if f.Controller == "memory" && errors.Is(err, syscall.EBUSY) {
			// v1 refuses a limit it could not reclaim down to.
			if usage, uerr := m.MemoryUsage(path); uerr == nil {
				return belowUsage(path, *r.MemoryLimit, usage)
			}
		}
		if err != nil {
			return fmt.Errorf("cgroupfs: set %q: %w", path, err)
		}
	}
	return nil
}

func belowUsage(path string, limit, usage int64) error {
	return fmt.Errorf("cgroupfs: cgroup %q: %w: limit %d, usage %d", path, ErrMemoryBelowUsage, limit, usage)
}

// fillCPUMax completes r's quota or period from the cgroup's cpu.max; a
// missing file leaves the default to V2Files.
func (m *Manager) fillCPUMax(path string, r Resources) (Resources, error) {
	data, err := readFile(filepath.Join(m.hierarchies[0].dir, filepath.FromSlash(path), "cpu.max"))
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("cgroupfs: set %q: %w", path, err)
	}
	quota, period, err := parseCPUMax(data)
	if err != nil {
		return r, fmt.Errorf("cgroupfs: set %q: %w", path, err)
	}
	if r.CPUQuota == nil {
		r.CPUQuota = &quota
	} else {
		r.CPUPeriod = &period
	}
	return r, nil
}

// write writes one file of the cgroup at path.
func (m *Manager) write(path string, f File) error {
	root, ok := m.dir(f.Controller)
	if !ok {
		return fmt.Errorf("%s: no %s hierarchy", f.Name, f.Controller)
	}
	return writeFile(filepath.Join(root, filepath.FromSlash(path), f.Name), f.Value)
}

// read reads one file of the cgroup at path.
func (m *Manager) read(path, controller, name string) (string, error) {
	root, ok := m.dir(controller)
	if !ok {
		return "", fmt.Errorf("%s: no %s hierarchy: %w", name, controller, fs.ErrNotExist)
	}
	return readFile(filepath.Join(root, filepath.FromSlash(path), name))
}

// Get reads the cgroup's settings back, unlimited ones as -1; a setting
// whose file is missing (a controller not mounted or not enabled) stays
// nil. A missing cgroup fails with an error wrapping fs.ErrNotExist.
func (m *Manager) Get(path string) (Resources, error) {
	var r Resources
	if err := ValidatePath(path); err != nil {
		return r, fmt.Errorf("cgroupfs: get: %w", err)
	}
	if !m.Exists(path) {
		return r, fmt.Errorf("cgroupfs: get %q: %w", path, fs.ErrNotExist)
	}
	get := func(controller, name string, parse func(string) error) error {
		s, err := m.read(path, controller, name)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err == nil {
			err = parse(s)
		}
		if err != nil {
			return fmt.Errorf("cgroupfs: get %q: %s: %w", path, name, err)
		}
		return nil
	}
	setLimit := func(dst **int64) func(string) error {
		return func(s string) error {
			v, err := parseLimit(s)
			*dst = &v
			return err
		}
	}
	var err error
	if m.unified {
		err = errors.Join(
			get("cpu", "cpu.weight", func(s string) error {
				w, err := strconv.ParseUint(s, 10, 64)
				r.CPUShares = new(CPUWeightToShares(w))
				return err
			}),
			get("cpu", "cpu.max", func(s string) error {
				q, p, err := parseCPUMax(s)
				r.CPUQuota, r.CPUPeriod = &q, &p
				return err
			}),
			get("memory", "memory.max", setLimit(&r.MemoryLimit)))
	} else {
		err = errors.Join(
			get("cpu", "cpu.shares", func(s string) error {
				v, err := strconv.ParseUint(s, 10, 64)
				r.CPUShares = &v
				return err
			}),
			get("cpu", "cpu.cfs_quota_us", setLimit(&r.CPUQuota)),
			get("cpu", "cpu.cfs_period_us", func(s string) error {
				v, err := strconv.ParseUint(s, 10, 64)
				r.CPUPeriod = &v
				return err
			}),
			get("memory", "memory.limit_in_bytes", setLimit(&r.MemoryLimit)))
	}
	if err == nil {
		err = get("pids", "pids.max", setLimit(&r.PidsLimit))
	}
	return r, err
}

// MemoryUsage reads the cgroup's current memory usage in bytes:
// memory.usage_in_bytes on v1, memory.current on v2. A missing cgroup or
// file fails with an error wrapping fs.ErrNotExist.
func (m *Manager) MemoryUsage(path string) (int64, error) {
	if err := ValidatePath(path); err != nil {
		return 0, fmt.Errorf("cgroupfs: memory usage: %w", err)
	}
	name := "memory.usage_in_bytes"
	if m.unified {
		name = "memory.current"
	}
	s, err := m.read(path, "memory", name)
	if err != nil {
		return 0, fmt.Errorf("cgroupfs: memory usage of %q: %w", path, err)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cgroupfs: memory usage of %q: %w", path, err)
	}
	return v, nil
}

// Exists reports whether the cgroup at path is a directory in every
// hierarchy; false for an invalid path.
func (m *Manager) Exists(path string) bool {
	if ValidatePath(path) != nil {
		return false
	}
	for _, h := range m.hierarchies {
		st, err := os.Stat(filepath.Join(h.dir, filepath.FromSlash(path)))
		if err != nil || !st.IsDir() {
			return false
		}
	}
	return true
}

// Children returns the names of the direct child cgroups of path, as the
// cpu (v1) or unified hierarchy holds them, sorted; none for a missing
// cgroup.
func (m *Manager) Children(path string) ([]string, error) {
	if err := ValidatePath(path); err != nil {
		return nil, fmt.Errorf("cgroupfs: children: %w", err)
	}
	root, _ := m.dir("cpu")
	entries, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(path)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cgroupfs: children of %q: %w", path, err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// Remove deletes the cgroup at path in every hierarchy, deepest first:
// the child cgroups below it (those the runtime left for containers that
// are gone) go before it. A missing cgroup is not an error; one with
// tasks stops the removal in its hierarchy with ErrHasTasks naming it.
// The tasks are not killed and nothing is retried.
func (m *Manager) Remove(path string) error {
	if err := validateChild(path); err != nil {
		return fmt.Errorf("cgroupfs: remove: %w", err)
	}
	var errs []error
	for _, h := range m.hierarchies {
		errs = append(errs, removeTree(filepath.Join(h.dir, filepath.FromSlash(path)), path))
	}
	return errors.Join(errs...)
}

// removeTree removes dir, the cgroup called name, after its children.
func removeTree(dir, name string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cgroupfs: remove %q: %w", name, err)
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeTree(filepath.Join(dir, e.Name()), path.Join(name, e.Name())); err != nil {
				return err
			}
		}
	}
	if procs, _ := readFile(filepath.Join(dir, "cgroup.procs")); procs != "" {
		return fmt.Errorf("cgroupfs: remove %q: %w", name, ErrHasTasks)
	}
	err = syscall.Rmdir(dir)
	if errors.Is(err, syscall.ENOTEMPTY) {
		// Only a plain directory standing in for a cgroup holds files
		// rmdir sees (see the package doc): they go with it.
		for _, e := range entries {
			if e.Type().IsRegular() {
				if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
					return fmt.Errorf("cgroupfs: remove %q: %w", name, err)
				}
			}
		}
		err = syscall.Rmdir(dir)
	}
	switch {
	case err == nil, errors.Is(err, syscall.ENOENT):
		return nil
	case errors.Is(err, syscall.EBUSY):
		return fmt.Errorf("cgroupfs: remove %q: %w", name, ErrHasTasks)
	}
	return fmt.Errorf("cgroupfs: remove %q: %w", name, &os.PathError{Op: "rmdir", Path: dir, Err: err})
}

// readFile reads a cgroup file without its surrounding white space.
func readFile(name string) (string, error) {
	data, err := os.ReadFile(name)
	return strings.TrimSpace(string(data)), err
}

// writeFile writes one value to a cgroup file, creating it only where a
// plain directory stands in for a cgroup.
func writeFile(name, value string) error {
	return os.WriteFile(name, []byte(value), 0o644)
}
