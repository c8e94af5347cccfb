#!/usr/bin/env bash
# Installs and starts what the Docker tests need on a Debian machine, doing only what is missing:
# Debian's docker.io, runsc and docker-compose (to validate docker-compose.yml); a current gVisor
# built from the Go module proxy (the release scripts/gvisor/go.mod pins) as runsc-current, next to
# Debian's runsc (20221219); a dockerd (no bridge, no iptables, both gVisors registered with
# --network=none); the two locally built test images and the data-science image (Debian's numpy,
# pandas and matplotlib). It never pulls from a registry.
#
# SANDBOXFLOW_SETUP_ONLY=demo does only what `make demo` uses: Docker, Debian's runsc and the data
# image (no current gVisor, no test images); a later full run adds the rest.
set -euo pipefail
ONLY=${SANDBOXFLOW_SETUP_ONLY:-}

PY_IMAGE=${SANDBOXFLOW_TEST_PYTHON_IMAGE:-sandboxflow-test-python:bookworm-full}
SH_IMAGE=${SANDBOXFLOW_TEST_SH_IMAGE:-sandboxflow-test-busybox:latest}
DATA_IMAGE=${SANDBOXFLOW_DATA_PYTHON_IMAGE:-sandboxflow-data-python:bookworm}
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

# runsc-current: gVisor's go branch at the version scripts/gvisor/go.mod pins, built static
# (CGO_ENABLED=0: its sandbox re-executes itself after pivot_root, where no dynamic loader is).
GVISOR_MOD=$(cd "$(dirname "$0")/gvisor" && pwd)
GVISOR_VERSION=$(cd "$GVISOR_MOD" && go list -m -f '{{.Version}}' gvisor.dev/gvisor)
RUNSC_CURRENT=/usr/local/bin/runsc-current
# The version is read whole before grep looks at it: piped, grep -q's early exit can kill runsc
# with SIGPIPE before its second line, and pipefail then reads a match as a miss (5 in 30 here).
RUNSC_CURRENT_VERSION=$("$RUNSC_CURRENT" --version 2>/dev/null || true)
if [ "$ONLY" != demo ] && ! grep -qF "version $GVISOR_VERSION" <<<"$RUNSC_CURRENT_VERSION"; then
  log "building gVisor $GVISOR_VERSION from the Go module proxy as $RUNSC_CURRENT (a few minutes cold)"
  (cd "$GVISOR_MOD" && CGO_ENABLED=0 go build -trimpath -o "$RUNSC_CURRENT.new" \
    -ldflags "-X gvisor.dev/gvisor/runsc/version.version=$GVISOR_VERSION" gvisor.dev/gvisor/runsc)
  mv "$RUNSC_CURRENT.new" "$RUNSC_CURRENT"
fi

mkdir -p /etc/docker
args='"runtimeArgs":["--network=none","--oci-seccomp"]'
want='{"runtimes":{"runsc":{"path":"/usr/bin/runsc",'$args'},"runsc-current":{"path":"'$RUNSC_CURRENT'",'$args'}}}'
runtimes="runsc runsc-current"
if [ ! -x "$RUNSC_CURRENT" ]; then # the demo's setup: registered once it is built
  want='{"runtimes":{"runsc":{"path":"/usr/bin/runsc",'$args'}}}'
  runtimes=runsc
fi
if [ "$(cat /etc/docker/daemon.json 2>/dev/null)" != "$want" ]; then
  printf '%s\n' "$want" >/etc/docker/daemon.json
  if docker info >/dev/null 2>&1; then
    log "the gVisor runtimes were not registered with the running dockerd; reloading its configuration"
    pkill -HUP -x dockerd || true
    sleep 1
  fi
fi

if ! docker info >/dev/null 2>&1; then
  log "starting dockerd --bridge=none --iptables=false"
  mkdir -p "$STATE"
  # In a session of its own: a Ctrl-C in the terminal that ran this (make demo) does not reach it.
  setsid nohup dockerd --bridge=none --iptables=false --ip-masq=false --ip-forward=false \
    >"$STATE/dockerd.log" 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { log "dockerd did not start; see $STATE/dockerd.log"; tail -n 30 "$STATE/dockerd.log" >&2; exit 1; }
fi
for rt in $runtimes; do
  docker info --format '{{json .Runtimes}}' | grep -q "\"$rt\"" || { log "dockerd does not list the $rt runtime"; exit 1; }
done

if [ "$ONLY" != demo ] && ! docker image inspect "$SH_IMAGE" >/dev/null 2>&1; then
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

if [ "$ONLY" != demo ] && ! docker image inspect "$PY_IMAGE" >/dev/null 2>&1; then
  log "building $PY_IMAGE with debootstrap (about a minute)"
  root=$(mktemp -d)
  debootstrap --variant=minbase --include=python3 bookworm "$root" >"$STATE.debootstrap.log" 2>&1 \
    || { log "debootstrap failed; see $STATE.debootstrap.log"; tail -n 30 "$STATE.debootstrap.log" >&2; exit 1; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import -c 'ENV PATH=/usr/local/bin:/usr/bin:/bin' - "$PY_IMAGE" >/dev/null
  rm -rf "$root"
fi
# The data-science image: Debian's own numpy, pandas and matplotlib on the same minbase python3 as
# the test image, installed by apt in the new root without recommends. Not by debootstrap's
# --include: its resolver takes the first of each "a | b" dependency, and python3-fonttools'
# "python3-scipy | python3-munkres" then brings scipy, pythran, gcc and boost (1.25 GB in all);
# naming python3-munkres lets apt take the small one. matplotlib's hard dependency on
# python3-pil.imagetk still brings tk and a few X libraries. numpy gets Debian's reference BLAS
# (libblas3), which starts no threads against the sandbox's process limit. Debian's
# /etc/matplotlibrc names TkAgg (matplotlib 3.6 tries Tk, and falls back to Agg when no display
# answers; a request's env may set DISPLAY); ours names Agg, so nothing tries one. The image sets
# no MPLBACKEND (the supervisor fixes the code's environment anyway), and matplotlib keeps its
# font cache and config under HOME=/tmp, which every sandbox has writable: no MPLCONFIGDIR.
if ! docker image inspect "$DATA_IMAGE" >/dev/null 2>&1; then
  log "building $DATA_IMAGE with debootstrap and apt (about two minutes)"
  root=$(mktemp -d)
  dlog=$STATE.debootstrap-data.log
  debootstrap --variant=minbase --include=python3 bookworm "$root" >"$dlog" 2>&1 \
    || { log "debootstrap failed; see $dlog"; tail -n 30 "$dlog" >&2; exit 1; }
  DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -q --no-install-recommends \
    python3-numpy python3-pandas python3-matplotlib fonts-dejavu-core python3-munkres >>"$dlog" 2>&1 \
    || { log "apt-get install in the new root failed; see $dlog"; tail -n 30 "$dlog" >&2; exit 1; }
  printf '# sandboxflow: no display in a sandbox; figures render with Agg.\nbackend: Agg\n' >"$root/etc/matplotlibrc"
  rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import -c 'ENV PATH=/usr/local/bin:/usr/bin:/bin' - "$DATA_IMAGE" >/dev/null
  rm -rf "$root"
fi
if [ "$ONLY" = demo ]; then
  log "ready for the demo: $(docker version --format '{{.Server.Version}}'), image $DATA_IMAGE"
else
  log "ready: $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})'), images $PY_IMAGE, $SH_IMAGE and $DATA_IMAGE"
fi
