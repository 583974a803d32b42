// Package cgroupfs creates, sets, reads and removes pod cgroups directly
// in the cgroup file system, as the kubelet's pod container manager does
// with the cgroupfs driver: one directory per pod below its QoS class
// cgroup ("/kubepods/burstable/pod<uid>"), in which the container runtime
// then puts the containers' own cgroups.
//
// A Manager works below one mount point, normally /sys/fs/cgroup, and
// finds out at New whether that holds the unified hierarchy (cgroup v2:
// cgroup.controllers at its root) or one hierarchy per controller
// (cgroup v1, including hybrid hosts whose cgroup2 part is mounted at
// "unified" next to the v1 controllers). Paths are cgroupfs names,
// '/'-separated and absolute, relative to each hierarchy's root;
// ValidatePath refuses anything that is not clean or holds "..", so no
// call ever touches a file outside the mount.
//
// # What it does
//
//   - Ensure creates a cgroup with its missing parents and sets its
//     resources. On v1 it creates the directory in every hierarchy found,
//     as runc's cgroupfs driver does for containers, so the pod cgroup is
//     where the runtime puts container cgroups beneath and Remove later
//     finds all of them; in the cpuset hierarchy every new directory first
//     takes cpuset.cpus and cpuset.mems from its parent, without which no
//     task could join it or a child. On v2 it enables every controller the
//     root offers in cgroup.subtree_control of each ancestor, from the
//     root down, before creating the child (cpu, memory and pids must
//     succeed, the others are best effort).
//   - Set writes Resources, which are in cgroup v1 units as the kubelet
//     computes them; on v2 they are converted as the kubelet and runc do
//     (V2Files, CPUSharesToWeight). The memory limit is written first and
//     is refused with ErrMemoryBelowUsage when it is below the cgroup's
//     current usage, before anything else is written, so a failed resize
//     leaves the cgroup as it was; the CFS period is written before the
//     quota.
//   - Get reads the settings back (unlimited values as -1), MemoryUsage
//     the current usage, Children the names of the child cgroups (the pod
//     cgroups below a QoS class cgroup, for cleaning up orphans).
//   - Remove deletes a cgroup and whatever child cgroups the runtime left
//     below it, deepest first, in every hierarchy; one that still has
//     tasks stops it with ErrHasTasks naming that cgroup.
//
// # What it leaves out
//
// The systemd cgroup driver, hugetlb limits, cpuset assignments, the
// cgroup v2 memory protections (memory.min, memory.low, memory.high) and
// swap; killing the tasks of a cgroup before removing it, and retrying a
// removal, are the caller's. The kubelet does this through runc's cgroup
// library; that library keeps process-wide state (its cpuset and
// hierarchy caches, the hybrid-mode subsystem list set in init), which a
// library like nodekit must not carry, and the few files a pod cgroup
// needs are simple to write, so they are written here by hand.
//
// # Concurrency
//
// A Manager holds only what New found and is safe for concurrent use.
// Calls on different cgroups do not interfere; calls on the same cgroup
// are not serialized, each file write being atomic on its own.
//
// # Testing
//
// A directory tree on an ordinary file system can stand in for a mount:
// directories for the hierarchies (cpu, memory, ... or cpu,cpuacct with
// symlinks) or a cgroup.controllers file for v2, plain files for the
// interface files. Writes then create the files, so a test reads back
// exactly what was written; Remove deletes such a directory's plain files
// with it (rmdir never reports a real cgroup as not empty), and a
// non-empty cgroup.procs file stands for a cgroup with tasks.
//
// # Usage
//
//	m, err := cgroupfs.New("/sys/fs/cgroup")
//	if err != nil { ... }
//	pod := "/kubepods/burstable/pod" + string(uid)
//	err = m.Ensure(pod, cgroupfs.Resources{
//		CPUShares:   new(uint64(512)),
//		CPUQuota:    new(int64(50000)),
//		CPUPeriod:   new(uint64(100000)),
//		MemoryLimit: new(int64(256 << 20)),
//	})
//	...
//	err = m.Remove(pod) // after the pod's containers are gone
package cgroupfs
