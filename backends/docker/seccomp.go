package docker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// seccompOpt returns the security option that applies profile under runtime.
//
// Under runsc, gVisor (Debian's 20221219 release) answers every SCMP_ACT_ERRNO with EPERM,
// whatever errno the profile names. glibc falls back from clone3 to clone only on ENOSYS, so a
// clone3 refused with EPERM breaks every new thread, os.system, subprocess and
// multiprocessing. Under runsc a rule that makes clone3 fail is therefore turned into an allow:
// clone3 then runs in gVisor's own kernel, where namespace flags need capabilities the sandbox
// does not have.
func seccompOpt(profile []byte, runtime string) (string, error) {
	if IsGVisor(runtime) {
		var err error
		if profile, err = allowClone3(profile); err != nil {
			return "", err
		}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, profile); err != nil {
		return "", fmt.Errorf("seccomp profile: %w", err)
	}
	return "seccomp=" + compact.String(), nil
}

// allowClone3 rewrites the rules of profile that name clone3 so that clone3 is allowed.
func allowClone3(profile []byte) ([]byte, error) {
	var p map[string]any
	if err := json.Unmarshal(profile, &p); err != nil {
		return nil, fmt.Errorf("seccomp profile: %w", err)
	}
	rules, _ := p["syscalls"].([]any)
	var kept []any
	for _, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok {
			kept = append(kept, r)
			continue
		}
		names, _ := rule["names"].([]any)
		if !slices.Contains(names, any("clone3")) || rule["action"] == "SCMP_ACT_ALLOW" {
			kept = append(kept, r)
			continue
		}
		rest := slices.DeleteFunc(slices.Clone(names), func(n any) bool { return n == "clone3" })
		if len(rest) > 0 {
			rule["names"] = rest
			kept = append(kept, rule)
		}
	}
	kept = append(kept, map[string]any{"names": []any{"clone3"}, "action": "SCMP_ACT_ALLOW"})
	p["syscalls"] = kept
	return json.Marshal(p)
}
