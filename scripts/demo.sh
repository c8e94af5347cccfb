#!/usr/bin/env bash
# The main job in one command (README.md: `make demo`): an embedded Temporal server with its Web UI, a
# worker with the hardened Docker backend, and a sample run that waits for a person. You read the
# code and its digest, then approve or deny it here; nothing approves it for you. Your decision is
# signed with the development reviewer key that worker --dev made in DATA_DIR/reviewer/ (the
# workers accept only decisions signed by a key in their reviewers file).
#
# Settings (environment): TEMPORAL_ADDRESS (default 127.0.0.1:7233), SANDBOXFLOW_UI_PORT (8233),
# SANDBOXFLOW_DATA_DIR (.sandboxflow), SANDBOXFLOW_DOCKER_IMAGE (the locally built data image,
# sandboxflow-data-python:bookworm: Debian's python3 with numpy, pandas and matplotlib),
# SANDBOXFLOW_DEMO_CODE (the file to run, examples/chart.py; examples/hello.py needs only python3).
set -euo pipefail
cd "$(dirname "$0")/.."

export TEMPORAL_ADDRESS=${TEMPORAL_ADDRESS:-127.0.0.1:7233}
UI_PORT=${SANDBOXFLOW_UI_PORT:-8233}
DATA_DIR=${SANDBOXFLOW_DATA_DIR:-.sandboxflow}
IMAGE=${SANDBOXFLOW_DOCKER_IMAGE:-${SANDBOXFLOW_DATA_PYTHON_IMAGE:-sandboxflow-data-python:bookworm}}
CODE_FILE=${SANDBOXFLOW_DEMO_CODE:-examples/chart.py}
mkdir -p "$DATA_DIR"
LOG="$DATA_DIR/worker.log"

say() { printf '\n== %s\n' "$*"; }

# The binaries build while Docker and the image are set up: on a new machine each takes minutes.
say "Building bin/worker and bin/starter (log: $DATA_DIR/build.log)"
go build -o bin/ ./worker ./starter >"$DATA_DIR/build.log" 2>&1 &
BUILD=$!
if ! docker info >/dev/null 2>&1 || ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    say "Setting up Docker, gVisor and the local image $IMAGE (first time only; only what the demo uses)"
    SANDBOXFLOW_SETUP_ONLY=demo scripts/setup-docker.sh
    docker image inspect "$IMAGE" >/dev/null 2>&1 \
      || { echo "demo: scripts/setup-docker.sh builds its own images only; build or load $IMAGE first" >&2; exit 1; }
  else
    echo "demo: Docker or the image $IMAGE is missing; run scripts/setup-docker.sh as root first" >&2
    exit 1
  fi
fi
wait "$BUILD" || { echo "demo: go build failed:" >&2; tail -n 30 "$DATA_DIR/build.log" >&2; exit 1; }

say "Starting the worker with an embedded Temporal server (log: $LOG)"
bin/worker --dev --data-dir "$DATA_DIR" --ui-port "$UI_PORT" \
  --backend docker --docker-image "$IMAGE" >"$LOG" 2>&1 &
WORKER=$!
cleanup() { kill "$WORKER" 2>/dev/null && wait "$WORKER" 2>/dev/null; }
trap cleanup EXIT
for _ in $(seq 1 120); do
  if grep -q "worker running" "$LOG"; then break; fi
  if ! kill -0 "$WORKER" 2>/dev/null; then echo "demo: the worker exited:" >&2; tail -n 20 "$LOG" >&2; exit 1; fi
  sleep 0.5
done
grep -q "worker running" "$LOG" || { echo "demo: the worker did not start in time:" >&2; tail -n 20 "$LOG" >&2; exit 1; }
REVIEWER_KEY="$DATA_DIR/reviewer/id_ed25519"
REVIEWER_NAME=$(cut -d' ' -f1 "$DATA_DIR/reviewer/allowed_signers")
export SANDBOXFLOW_REVIEWER_KEY="$REVIEWER_KEY"
echo "Reviewer key (made by worker --dev): $REVIEWER_KEY, listed for \"$REVIEWER_NAME\" in $DATA_DIR/reviewer/allowed_signers"
echo "Temporal: $TEMPORAL_ADDRESS   Web UI: http://127.0.0.1:$UI_PORT (runs waiting for a person: SandboxStatus=\"awaiting_approval\")"
echo "Reviewers' inbox: http://localhost:${SANDBOXFLOW_INBOX_PORT:-8235} (register a passkey there, add its line to $DATA_DIR/reviewer/allowed_signers)"

say "An agent asks to run $CODE_FILE"
STARTED=$(bin/starter run --file "$CODE_FILE" --agent demo)
echo "$STARTED"
ID=$(printf '%s' "$STARTED" | sed -n 's/.*"workflow_id":"\([^"]*\)".*/\1/p')
DIGEST=$(printf '%s' "$STARTED" | sed -n 's/.*"digest":"\([^"]*\)".*/\1/p')

say "What the reviewer sees (bin/starter show $ID)"
bin/starter show "$ID"

cat <<MSG

The run waits for a person. From another terminal you could also sign with the reviewer key:
  TEMPORAL_ADDRESS=$TEMPORAL_ADDRESS bin/starter approve $ID --digest $DIGEST --key $REVIEWER_KEY
or with nothing but OpenSSH and the temporal CLI (see docs/reviewing.md):
  bin/starter statement $ID > st && ssh-keygen -Y sign -n sandboxflow-approval -f $REVIEWER_KEY st
MSG
printf '\nApprove this exact code? Type your name to approve (signed with the key of "%s"), "deny" to deny, or press Enter to leave it waiting: ' "$REVIEWER_NAME"
ANSWER=""
read -r ANSWER || true
case "$ANSWER" in
  "")
    echo "Left waiting. It stays in $DATA_DIR; approve it later with bin/starter approve (the worker must run)."
    exit 0 ;;
  deny|n|no)
    bin/starter deny "$ID" --reason "denied in the demo" ;;
  *)
    if [ "$ANSWER" != "$REVIEWER_NAME" ]; then
      echo "Signing as $REVIEWER_NAME: the key in $DATA_DIR/reviewer belongs to that name (worker --dev made it for \$USER)."
    fi
    bin/starter approve "$ID" --digest "$DIGEST" ;;
esac

say "Result (bin/starter result $ID)"
bin/starter result "$ID" || true

if [ -t 0 ]; then
  say "The worker keeps running so you can look around the Web UI at http://127.0.0.1:$UI_PORT; Ctrl-C stops it"
  wait "$WORKER" || true
fi
