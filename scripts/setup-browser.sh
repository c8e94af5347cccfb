#!/usr/bin/env bash
# Installs what the tests need beside Docker and PostgreSQL, only when it is missing: Debian's
# chromium (the reviewers' inbox browser tests drive it headless through the DevTools protocol),
# openssh-client (ssh-keygen signs and verifies real SSH signatures in the approval tests),
# nodejs with npm (the TypeScript examples), jq (docs/reviewing.md's OpenSSH + temporal CLI recipe, run
# by a test), tmux (a real terminal for the test of what `starter show` draws), spin with a C
# compiler (the approval protocol's model check, promela/approval.pml; cc also builds an attack's
# native library), python3 (the tests that run python on the host: the egress proxy's urllib
# test, the local backend's, supervisor.py's parser, the reviewer views' agreement with Python's
# own reading) and patch (the check that the diffs reviewers see apply); and it turns the IPv6 loopback on where it is
# off (the embedded Temporal server's ::1 test). Run as root; `make setup` calls it. Each is one of
# internal/testkit/need's requirements, which fail their tests under make test when missing.
set -euo pipefail
if [ -w /proc/sys/net/ipv6/conf/lo/disable_ipv6 ] && [ "$(cat /proc/sys/net/ipv6/conf/lo/disable_ipv6)" = 1 ]; then
  echo 0 >/proc/sys/net/ipv6/conf/lo/disable_ipv6
  echo "setup-browser: turned the IPv6 loopback on" >&2
fi
need=()
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
command -v jq >/dev/null 2>&1 || need+=(jq)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v spin >/dev/null 2>&1 || need+=(spin)
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v patch >/dev/null 2>&1 || need+=(patch)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
echo "setup-browser: installed ${need[*]}" >&2
