package main

import (
	"flag"
	"os"

	"github.com/sandboxflow/sandboxflow/backends/e2b"
	"github.com/sandboxflow/sandboxflow/worker/service"
)

// hostedFlags adds the flags of the hosted backends. There is no flag for the E2B API key on
// purpose: a key on a command line shows in ps and shell history.
func hostedFlags(fs *flag.FlagSet, c *service.Options) {
	fs.StringVar(&c.HTTPURL, "http-url", "", "--backend http: URL that receives one POST per run")
	fs.StringVar(&c.HTTPHeaderFile, "http-header-file", "", "--backend http: file of 'Name: value' lines sent with every request (secrets; never logged)")
	fs.StringVar(&c.E2BAPIKeyFile, "e2b-api-key-file", "", "--backend e2b: file holding the API key (default: the "+e2b.EnvAPIKey+" environment variable)")
	fs.StringVar(&c.E2BTemplate, "e2b-template", e2b.DefaultTemplate, "--backend e2b: template with python3 and sh")
	fs.StringVar(&c.E2BDomain, "e2b-domain", envOr(e2b.EnvDomain, e2b.DefaultDomain), "--backend e2b: E2B domain ["+e2b.EnvDomain+"]")
	fs.StringVar(&c.E2BAPIURL, "e2b-api-url", os.Getenv(e2b.EnvAPIURL), "--backend e2b, advanced and tests: API base URL ["+e2b.EnvAPIURL+"] (default https://api.DOMAIN)")
	fs.StringVar(&c.E2BSandboxURL, "e2b-sandbox-url", os.Getenv(e2b.EnvSandboxURL), "--backend e2b, advanced and tests: envd base URL ["+e2b.EnvSandboxURL+"]")
}

// envOr returns the environment variable name, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
