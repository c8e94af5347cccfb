#!/usr/bin/env bash
# Builds the worker image here without a registry: static binaries from this checkout in an image
# FROM scratch (deploy/scratch.Dockerfile), tagged sandboxflow-worker:local unless $1 names a tag.
set -euo pipefail
cd "$(dirname "$0")/.."
TAG=${1:-sandboxflow-worker:local}
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$ctx/" ./worker ./starter
cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
cp deploy/scratch.Dockerfile "$ctx/Dockerfile"
DOCKER_BUILDKIT=0 docker build -q -t "$TAG" "$ctx" >/dev/null 2>&1 || DOCKER_BUILDKIT=0 docker build -t "$TAG" "$ctx"
echo "$TAG"
