#!/usr/bin/env bash
# Installs Debian's spin (the model checker of the approval protocol's model, model/approval.pml)
# and a C compiler for the verifiers it generates, only when they are missing. Run as root;
# `make setup` calls it.
set -euo pipefail
need=()
command -v spin >/dev/null 2>&1 || need+=(spin)
command -v cc >/dev/null 2>&1 || need+=(gcc)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
echo "setup-spin: installed ${need[*]}" >&2
