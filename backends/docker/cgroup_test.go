package docker

import (
	"os"
	"path/filepath"
	"testing"
)

func TestResolveCgroup(t *testing.T) {
	v1 := []cgroupMount{
		{dir: "/sys/fs/cgroup/cpu,cpuacct", root: "/", controllers: []string{"rw", "cpu", "cpuacct"}},
		{dir: "/sys/fs/cgroup/memory", root: "/", controllers: []string{"rw", "memory"}},
		{dir: "/sys/fs/cgroup/unified", root: "/"},
	}
	v2 := []cgroupMount{{dir: "/sys/fs/cgroup", root: "/"}}
	for _, tc := range []struct {
		name       string
		mounts     []cgroupMount
		membership string
		want       cgroupFiles
		wantErr    bool
	}{
		{"v1 hybrid", v1, "4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n0::/docker/abc\n", cgroupFiles{
			cpu: "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpuacct.usage", peak: "/sys/fs/cgroup/memory/docker/abc/memory.max_usage_in_bytes",
			current: "/sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes"}, false},
		{"v2", v2, "0::/system.slice/docker-abc.scope\n", cgroupFiles{
			cpu: "/sys/fs/cgroup/system.slice/docker-abc.scope/cpu.stat", peak: "/sys/fs/cgroup/system.slice/docker-abc.scope/memory.peak",
			current: "/sys/fs/cgroup/system.slice/docker-abc.scope/memory.current", v2: true}, false},
		{"v1 without memory", v1[:1], "2:cpu,cpuacct:/docker/abc\n0::/\n", cgroupFiles{}, true},
		{"root cgroup only", v2, "0::/\n", cgroupFiles{}, true},
		{"path outside the mount's root", []cgroupMount{{dir: "/sys/fs/cgroup", root: "/mine"}}, "0::/docker/abc\n", cgroupFiles{}, true},
	} {
		got, err := resolveCgroup(tc.mounts, []byte(tc.membership))
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v (error %t)", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestReadCgroupFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v1 := cgroupFiles{cpu: write("cpuacct.usage", "2101344843\n"), peak: write("max", "119373824\n"), current: write("cur", "8000000\n")}
	st, err := v1.read()
	if err != nil || st.CPU != 2101344843 || st.PeakMemoryBytes != 119373824 || st.MemoryBytes != 8000000 {
		t.Errorf("v1: got %+v, %v", st, err)
	}
	v2 := cgroupFiles{cpu: write("cpu.stat", "usage_usec 1500000\nuser_usec 1000000\n"), peak: filepath.Join(dir, "absent"), current: write("current", "4096\n"), v2: true}
	st, err = v2.read()
	if err != nil || st.CPU.Seconds() != 1.5 || st.PeakMemoryBytes != 0 || st.MemoryBytes != 4096 {
		t.Errorf("v2 without memory.peak: got %+v, %v; want 1.5 s, no peak, 4096", st, err)
	}
	if _, err := (cgroupFiles{cpu: write("bad", "x\n"), peak: v1.peak, current: v1.current}).read(); err == nil {
		t.Error("a counter that is not a number: got no error")
	}
}
