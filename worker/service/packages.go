package service

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"

	"github.com/sandboxflow/sandboxflow/guard"
	"github.com/sandboxflow/sandboxflow/wheels"
)

// packagesDir is where, under DataDir, a sandbox host caches wheels and environments by default.
const packagesDir = "packages"

// validatePackages checks --package-index once, at start-up.
func (o *Options) validatePackages() error {
	if o.PackageIndex == "" {
		if o.PackageCache != "" || o.PackageRefuseHooks {
			return &guard.ConfigError{Msg: "--package-cache and --package-refuse-hooks need --package-index"}
		}
		return nil
	}
	u, err := url.Parse(o.PackageIndex)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return &guard.ConfigError{Msg: fmt.Sprintf("--package-index %q: want an http(s) URL of a PEP 503 simple index, without credentials (a private index's go in --secrets-file)", o.PackageIndex)}
	}
	return nil
}

// packageInstaller is the sandbox host's installer of requests' packages, nil without
// --package-index. A private index's credentials are the secrets file's: a secret whose host
// pattern matches the index host (or a host its pages link to) adds its header to fetches over
// https; they never reach a sandbox.
func (o *Options) packageInstaller() (*wheels.Installer, error) {
	if o.PackageIndex == "" {
		return nil, nil
	}
	cache := o.PackageCache
	if cache == "" {
		cache = filepath.Join(o.DataDir, packagesDir)
	}
	cfg := wheels.Config{Index: o.PackageIndex, CacheDir: cache, RefuseHooks: o.PackageRefuseHooks}
	if o.secrets != nil {
		secrets := o.secrets
		cfg.Header = func(u *url.URL) (http.Header, []string) {
			if u.Scheme != "https" {
				return nil, nil
			}
			port, _ := strconv.ParseUint(u.Port(), 10, 16)
			if port == 0 {
				port = 443
			}
			return secrets.HeadersFor(u.Hostname(), uint16(port))
		}
	}
	in, err := wheels.New(cfg)
	if err != nil {
		return nil, &guard.ConfigError{Msg: "--package-index: " + err.Error()}
	}
	return in, nil
}
