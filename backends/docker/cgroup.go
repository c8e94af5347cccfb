package docker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The host's cgroup files of a container, read by the sandbox host itself: the fast way to a
// container's counters (the daemon's stats API answers a second reading only at its collector's
// next tick, up to a second later). They are found from the container's first process (its
// /proc/PID/cgroup) and the worker's own mount table, so they need the worker to run on the
// daemon's host in the host's cgroup namespace; elsewhere the engine falls back to the stats API.

// cgroupFiles are the counter files of one cgroup.
type cgroupFiles struct {
	// cpu is v1's cpuacct.usage (nanoseconds) or v2's cpu.stat (usage_usec).
	cpu string
	// peak is v1's memory.max_usage_in_bytes or v2's memory.peak (absent before Linux 5.19).
	peak string
	// current is v1's memory.usage_in_bytes or v2's memory.current.
	current string
	v2      bool
}

// cgroupMount is one cgroup filesystem mounted on the host.
type cgroupMount struct {
	dir, root   string
	controllers []string // v1's controllers; nil for cgroup2
}

// cgroupFilesOf finds the counter files of the cgroup of process pid.
func cgroupFilesOf(pid int) (cgroupFiles, error) {
	mounts, err := readCgroupMounts("/proc/self/mountinfo")
	if err != nil {
		return cgroupFiles{}, err
	}
	membership, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return cgroupFiles{}, fmt.Errorf("cgroup of process %d: %w", pid, err)
	}
	return resolveCgroup(mounts, membership)
}

// resolveCgroup joins a process's cgroup membership (/proc/PID/cgroup) with the mounts: v1's
// cpuacct and memory hierarchies when the process is in both, else the unified hierarchy.
func resolveCgroup(mounts []cgroupMount, membership []byte) (cgroupFiles, error) {
	v1 := map[string]string{}
	unified := ""
	for _, line := range strings.Split(strings.TrimSpace(string(membership)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			unified = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			v1[c] = parts[2]
		}
	}
	at := func(path string, v2 bool, controller string) (string, bool) {
		for _, m := range mounts {
			if (m.controllers == nil) != v2 || (!v2 && !slices.Contains(m.controllers, controller)) {
				continue
			}
			rel, err := filepath.Rel(m.root, path)
			if err != nil || strings.HasPrefix(rel, "..") {
				continue
			}
			return filepath.Join(m.dir, rel), true
		}
		return "", false
	}
	cpuPath, okC := v1["cpuacct"]
	memPath, okM := v1["memory"]
	if okC && okM {
		cpuDir, ok1 := at(cpuPath, false, "cpuacct")
		memDir, ok2 := at(memPath, false, "memory")
		if ok1 && ok2 {
			return cgroupFiles{cpu: filepath.Join(cpuDir, "cpuacct.usage"), peak: filepath.Join(memDir, "memory.max_usage_in_bytes"),
				current: filepath.Join(memDir, "memory.usage_in_bytes")}, nil
		}
	}
	if dir, ok := at(unified, true, ""); ok && unified != "" && unified != "/" {
		return cgroupFiles{cpu: filepath.Join(dir, "cpu.stat"), peak: filepath.Join(dir, "memory.peak"),
			current: filepath.Join(dir, "memory.current"), v2: true}, nil
	}
	return cgroupFiles{}, errors.New("cgroup: the process's cpu and memory cgroups are not mounted here")
}

// readCgroupMounts lists the cgroup filesystems of a mountinfo file.
func readCgroupMounts(mountinfo string) ([]cgroupMount, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, fmt.Errorf("cgroup mounts: %w", err)
	}
	defer f.Close()
	var out []cgroupMount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 3 {
			continue
		}
		switch tail[0] {
		case "cgroup2":
			out = append(out, cgroupMount{dir: fields[4], root: fields[3]})
		case "cgroup":
			out = append(out, cgroupMount{dir: fields[4], root: fields[3], controllers: strings.Split(tail[2], ",")})
		}
	}
	return out, sc.Err()
}

// Read reads the counters.
func (f cgroupFiles) Read(context.Context) (containerStats, error) { return f.read() }

// read reads the counters.
func (f cgroupFiles) read() (containerStats, error) {
	var st containerStats
	cpu, err := os.ReadFile(f.cpu)
	if err != nil {
		return st, fmt.Errorf("cgroup: %w", err)
	}
	if f.v2 {
		usec, err := statField(cpu, "usage_usec")
		if err != nil {
			return st, fmt.Errorf("cgroup: %s: %w", f.cpu, err)
		}
		st.CPU = time.Duration(usec) * time.Microsecond
	} else {
		ns, err := strconv.ParseInt(string(bytes.TrimSpace(cpu)), 10, 64)
		if err != nil {
			return st, fmt.Errorf("cgroup: %s: %w", f.cpu, err)
		}
		st.CPU = time.Duration(ns)
	}
	if st.MemoryBytes, err = readInt(f.current); err != nil {
		return st, err
	}
	if st.PeakMemoryBytes, err = readInt(f.peak); errors.Is(err, os.ErrNotExist) && f.v2 {
		st.PeakMemoryBytes, err = 0, nil // a kernel before 5.19 keeps no peak
	}
	return st, err
}

// statField returns a "key value" line's value from a flat-keyed cgroup file.
func statField(b []byte, key string) (int64, error) {
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s", key)
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("cgroup: %w", err)
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cgroup: %s: %w", path, err)
	}
	return n, nil
}
