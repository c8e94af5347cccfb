#!/usr/bin/env bash
# Installs what the tests need beside Docker and PostgreSQL, only when it is missing: Debian's
# chromium (the reviewers' inbox browser tests drive it headless through the DevTools protocol),
# openssh-client (ssh-keygen signs and verifies real SSH signatures in the approval tests), and
# nodejs with npm (the TypeScript examples), and jq (the README's OpenSSH + temporal CLI recipe, run
# by a test). Run as root; `make setup` calls it.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
command -v jq >/dev/null 2>&1 || need+=(jq)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
echo "setup-browser: installed ${need[*]}" >&2
