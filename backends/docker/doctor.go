package docker

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxflow/sandboxflow/guard"
)

// minAPIVersion is the oldest Docker API that has every setting the backend uses (IPC mode none
// came with 1.32). The daemon of Debian 12 speaks 1.41.
const minAPIVersion = "1.32"

// probeCode reports, from inside a sandbox, what the hardening looks like to the code.
const probeCode = `import os
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return line.split()[1]
    return "?"
ifaces = []
for line in open("/proc/net/dev").read().splitlines()[2:]:
    ifaces.append(line.split(":")[0].strip())
try:
    open("/.sandboxflow-probe", "w").close()
    root = "writable"
except OSError:
    root = "read-only"
print("uid=%d gid=%d" % (os.getuid(), os.getgid()))
print("capeff=" + status("CapEff"))
print("seccomp=" + status("Seccomp"))
print("nonewprivs=" + status("NoNewPrivs"))
print("interfaces=" + ",".join(sorted(ifaces)))
print("root=" + root)
`

// Doctor checks that the Docker backend configured by cfg can run sandboxes here: the settings,
// the daemon, its API version, the image, the runtime, and a probe run with every hardening
// setting that reports from inside the container its uid, capabilities, seccomp mode, network
// interfaces and whether / is writable. A check that cannot run because an earlier one failed is
// reported as failed with the reason.
func Doctor(ctx context.Context, cfg Config) []guard.Check {
	var checks []guard.Check
	add := func(name string, ok bool, format string, args ...any) bool {
		checks = append(checks, guard.Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
		return ok
	}
	if err := cfg.Validate(); err != nil {
		add("docker config", false, "%v", err)
		return checks
	}
	cfg = cfg.WithDefaults()
	add("docker config", true, "image %s, runtime %s, cpus %g, memory %d, pids %d, network-when-asked %s, ipc %s, uids %s, deployment %s",
		cfg.Image, runtimeName(cfg.Runtime), cfg.CPUs, cfg.MemoryBytes, cfg.PidsLimit, cfg.Network, cfg.IPC, cfg.UIDs, cfg.Deployment)
	b, err := New(cfg)
	if err != nil {
		add("docker client", false, "%v", err)
		return checks
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.CleanupTimeout)
		defer cancel()
		_ = b.Close(cctx)
	}()
	return append(checks, b.doctor(ctx)...)
}

func runtimeName(r string) string {
	if r == "" {
		return "runc (daemon default)"
	}
	return r
}

func (b *Backend) doctor(ctx context.Context) []guard.Check {
	var checks []guard.Check
	add := func(name string, ok bool, format string, args ...any) bool {
		checks = append(checks, guard.Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
		return ok
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.eng.Ping(pctx); err != nil {
		add("docker daemon reachable", false, "%v", err)
		return checks
	}
	add("docker daemon reachable", true, "ping answered")
	v, err := b.eng.Version(pctx)
	if err != nil {
		add("docker API version", false, "%v", err)
		return checks
	}
	add("docker API version", versionAtLeast(v.ClientAPI, minAPIVersion),
		"engine %s speaks API %s (min %s); negotiated %s; the backend needs %s or newer",
		v.ServerVersion, v.APIVersion, v.MinAPIVersion, v.ClientAPI, minAPIVersion)

	checks = append(checks, hostChecks(v)...)
	img, err := b.resolveImage(pctx)
	present := err == nil
	if err != nil {
		add("docker image present", false, "%v", err)
	} else {
		add("docker image present", true, "%s is %s, no VOLUMEs", b.cfg.Image, img.ID)
	}

	runtime := b.cfg.Runtime
	if runtime == "" {
		runtime = "runc"
	}
	if slices.Contains(v.Runtimes, runtime) {
		add("docker runtime present", true, "%s (daemon runtimes: %s)", runtime, strings.Join(v.Runtimes, ", "))
	} else {
		add("docker runtime present", false, "the daemon has no runtime %q (it has: %s); register it in /etc/docker/daemon.json", runtime, strings.Join(v.Runtimes, ", "))
	}
	if !present {
		add("docker probe run", false, "skipped: the image is not usable")
		return checks
	}
	probe, res := b.probe(ctx)
	checks = append(checks, probe)
	if probe.OK {
		checks = append(checks, usageCheck(res.Usage))
	}
	return checks
}

// usageCheck judges the probe run's usage: the host must have read the sandbox's cgroup.
func usageCheck(u *guard.Usage) guard.Check {
	const name = "docker usage measured"
	if u == nil || u.MeasuredBy != guard.UsageByCgroup {
		return guard.Check{Name: name, Detail: "the probe run has no CPU or memory figures: the worker could not read the sandbox's cgroup counters (its log says why; see docs/usage.md)"}
	}
	return guard.Check{Name: name, OK: true, Detail: fmt.Sprintf("from the sandbox's cgroup: the probe used %s of CPU in %s, %d bytes of memory above its idle sandbox",
		time.Duration(u.CPUTime), time.Duration(u.WallTime), u.PeakMemoryBytes)}
}

// hostChecks report what the daemon's host adds to or takes from the sandbox: user-namespace
// remapping (container root is not host root), AppArmor (a second confinement of the
// sandbox's files) and the cgroup version (v2 gives every sandbox a private cgroup namespace).
// They are facts to know, not failures: each passes.
func hostChecks(v engineVersion) []guard.Check {
	has := func(name string) bool {
		for _, o := range v.SecurityOptions {
			if o == "name="+name || strings.HasPrefix(o, "name="+name+",") {
				return true
			}
		}
		return false
	}
	onOff := func(on bool, yes, no string) string {
		if on {
			return yes
		}
		return no
	}
	cg := v.CgroupVersion
	if cg == "" {
		cg = "unknown"
	}
	return []guard.Check{
		{Name: "docker user namespaces", OK: true, Detail: onOff(has("userns"),
			"remapped: uid 0 in a container is an unprivileged uid on the host",
			"not remapped: the sandbox's uids are the host's uids (the sandbox never runs as root; gVisor's supervisor is root only inside gVisor)")},
		{Name: "docker AppArmor", OK: true, Detail: onOff(has("apparmor"),
			"enabled: containers get Docker's default AppArmor profile",
			"not enabled on this host: seccomp, capabilities and the read-only root are the confinement")},
		{Name: "docker cgroup version", OK: true, Detail: "cgroup v" + cg + onOff(cg == "2",
			": each sandbox gets a private cgroup namespace",
			": no private cgroup namespace (the sandbox sees its cgroup paths)")},
	}
}

// probe runs probeCode in a sandbox with every hardening setting and judges what it reports;
// it returns the run's result too.
func (b *Backend) probe(ctx context.Context) (guard.Check, guard.Result) {
	const name = "docker probe run"
	c := guard.Probe(Name, probeCode, 1, 1)
	res, err := b.Run(ctx, c)
	if err != nil {
		return guard.Check{Name: name, Detail: err.Error()}, res
	}
	return judgeProbe(name, res), res
}

// judgeProbe judges what probeCode reported.
func judgeProbe(name string, res guard.Result) guard.Check {
	fail := func(format string, args ...any) guard.Check {
		return guard.Check{Name: name, Detail: fmt.Sprintf(format, args...)}
	}
	if res.ExitCode != 0 || res.TimedOut {
		return fail("probe exited %d (timed out %t): %q", res.ExitCode, res.TimedOut, clip(res.Stderr))
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	report := strings.ReplaceAll(strings.TrimSpace(string(res.Stdout)), "\n", " ")
	var problems []string
	if strings.HasPrefix(got["uid"], "0 ") || got["uid"] == "0" {
		problems = append(problems, "runs as root")
	}
	if got["capeff"] != "0000000000000000" {
		problems = append(problems, "has capabilities")
	}
	if got["seccomp"] != "2" {
		problems = append(problems, "no seccomp filter (under runsc, register it with --oci-seccomp)")
	}
	if got["nonewprivs"] == "0" {
		problems = append(problems, "no-new-privileges is off")
	}
	if got["interfaces"] != "lo" {
		problems = append(problems, "has network interfaces besides lo")
	}
	if got["root"] != "read-only" {
		problems = append(problems, "/ is writable")
	}
	if len(problems) > 0 {
		return fail("%s: %s", strings.Join(problems, "; "), report)
	}
	return guard.Check{Name: name, OK: true, Detail: report}
}

// versionAtLeast compares dotted API versions such as "1.41".
func versionAtLeast(v, min string) bool {
	vs, ms := strings.Split(v, "."), strings.Split(min, ".")
	for i := 0; i < len(ms); i++ {
		var a, b int
		if i < len(vs) {
			a, _ = strconv.Atoi(vs[i])
		}
		b, _ = strconv.Atoi(ms[i])
		if a != b {
			return a > b
		}
	}
	return true
}
