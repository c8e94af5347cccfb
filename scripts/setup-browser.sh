#!/usr/bin/env bash
# Installs Debian's chromium when it is missing: the reviewers' inbox browser tests
# (inbox/browser_test.go) drive it headless through the DevTools protocol. Run as root; `make
# setup` calls it.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium >/dev/null
chromium --version
