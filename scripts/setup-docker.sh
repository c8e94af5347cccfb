#!/usr/bin/env bash
# Installs and starts what the Docker tests need on a Debian machine, doing only what is missing:
# Debian's docker.io, runsc and docker-compose (to validate docker-compose.yml), a dockerd (no bridge, no iptables, runsc registered with
# --network=none), and the two locally built test images. It never pulls from a registry.
set -euo pipefail

PY_IMAGE=${SANDBOXFLOW_TEST_PYTHON_IMAGE:-sandboxflow-test-python:bookworm-full}
SH_IMAGE=${SANDBOXFLOW_TEST_SH_IMAGE:-sandboxflow-test-busybox:latest}
STATE=${SANDBOXFLOW_DOCKER_STATE:-/var/lib/sandboxflow-docker}

log() { printf 'setup-docker: %s\n' "$*" >&2; }

need_pkgs=()
command -v dockerd >/dev/null 2>&1 || need_pkgs+=(docker.io)
[ -x /usr/bin/runsc ] || need_pkgs+=(runsc)
command -v debootstrap >/dev/null 2>&1 || need_pkgs+=(debootstrap)
[ -x /bin/busybox ] || [ -x /usr/bin/busybox ] || need_pkgs+=(busybox-static)
command -v docker-compose >/dev/null 2>&1 || need_pkgs+=(docker-compose)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  log "installing ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

mkdir -p /etc/docker
want='{"runtimes":{"runsc":{"path":"/usr/bin/runsc","runtimeArgs":["--network=none","--oci-seccomp"]}}}'
if [ "$(cat /etc/docker/daemon.json 2>/dev/null)" != "$want" ]; then
  printf '%s\n' "$want" >/etc/docker/daemon.json
  if docker info >/dev/null 2>&1; then
    log "runsc was not registered with the running dockerd; reloading its configuration"
    pkill -HUP -x dockerd || true
    sleep 1
  fi
fi

if ! docker info >/dev/null 2>&1; then
  log "starting dockerd --bridge=none --iptables=false"
  mkdir -p "$STATE"
  nohup dockerd --bridge=none --iptables=false --ip-masq=false --ip-forward=false \
    >"$STATE/dockerd.log" 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { log "dockerd did not start; see $STATE/dockerd.log"; tail -n 30 "$STATE/dockerd.log" >&2; exit 1; }
fi
docker info --format '{{json .Runtimes}}' | grep -q runsc || { log "dockerd does not list the runsc runtime"; exit 1; }

if ! docker image inspect "$SH_IMAGE" >/dev/null 2>&1; then
  log "building $SH_IMAGE from busybox-static"
  ctx=$(mktemp -d)
  bb=$(command -v busybox)
  cp "$bb" "$ctx/busybox"
  cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
ENV PATH=/bin
DOCKERFILE
  DOCKER_BUILDKIT=0 docker build -q -t "$SH_IMAGE" "$ctx" >/dev/null
  rm -rf "$ctx"
fi

if ! docker image inspect "$PY_IMAGE" >/dev/null 2>&1; then
  log "building $PY_IMAGE with debootstrap (about a minute)"
  root=$(mktemp -d)
  debootstrap --variant=minbase --include=python3 bookworm "$root" >"$STATE.debootstrap.log" 2>&1 \
    || { log "debootstrap failed; see $STATE.debootstrap.log"; tail -n 30 "$STATE.debootstrap.log" >&2; exit 1; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import -c 'ENV PATH=/usr/local/bin:/usr/bin:/bin' - "$PY_IMAGE" >/dev/null
  rm -rf "$root"
fi
log "ready: $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})'), images $PY_IMAGE and $SH_IMAGE"
