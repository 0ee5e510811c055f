#!/usr/bin/env bash
# Build, start, stop and inspect a real S3 server for tests and the demo: versitygw (an S3 gateway
# over a POSIX directory, github.com/versity/versitygw), built here from the Go module proxy.
#
#   tools/s3.sh build|start|stop|status|env
#
# `build` compiles versitygw once into ${XDG_CACHE_HOME:-~/.cache}/bridge/s3/<version>-<go version>
# (`start` builds when needed). One server per run dir (${BRIDGE_RUN:-<repo>/.run}/s3), on 127.0.0.1
# only, over TLS: the script makes once per run dir a CA (tls/ca.pem) and a server certificate for
# IP 127.0.0.1 and localhost, and a random root access key and secret (0600 files, handed to
# versitygw in its environment, not on its command line). Objects live as plain files under
# <run>/s3/data/<bucket>/<key>. The env file <run>/s3/env (mode 0600) holds BRIDGE_S3_ENDPOINT
# (https://127.0.0.1:PORT), AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION
# (us-east-1), AWS_CA_BUNDLE (the CA's path: clients keep TLS verification on) and BRIDGE_S3_DATA
# (the data dir). Read by `start` only: BRIDGE_S3_PORT (7070, versitygw's default).
# <run>/s3/log/access.log has one line per request; versitygw's own output: <run>/s3/log/versitygw.out.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUN_BASE=${BRIDGE_RUN:-$REPO/.run}
RUN=$RUN_BASE/s3
PID_DIR=$RUN/pids
TIMEOUT=${BRIDGE_S3_TIMEOUT:-20}
VERSITYGW_MODULE=github.com/versity/versitygw
VERSITYGW_VERSION=v1.8.0
REGION=us-east-1
CACHE_BASE=$(realpath -m "${XDG_CACHE_HOME:-$HOME/.cache}/bridge/s3")
TLS=$RUN/tls
DATA=$RUN/data

SERVICE_PROCESS=versitygw
die() { echo "s3: $*" >&2; exit 1; }
log() { echo "s3: $*" >&2; }
# shellcheck source=tools/lib/procs.sh
source "$REPO/tools/lib/procs.sh"
# shellcheck source=tools/lib/service.sh
source "$REPO/tools/lib/service.sh"

PORT=${BRIDGE_S3_PORT:-7070}
# `start` writes the settings it started with; the other commands read them back.
SETTINGS=$RUN/settings
if [[ ${1:-} != start && -f $SETTINGS ]]; then
  # shellcheck source=/dev/null
  source "$SETTINGS"
fi
URL=https://127.0.0.1:$PORT

# ---------------------------------------------------------------------------------------------
# Build: once per versitygw and Go version
# ---------------------------------------------------------------------------------------------
cache_dir() {
  command -v go >/dev/null || die "go is not on PATH"
  local gov
  gov=$(go env GOVERSION)
  echo "$CACHE_BASE/versitygw-$VERSITYGW_VERSION-$gov"
}

built() { [[ -f $1/.complete && -x $1/bin/versitygw ]]; }

# Into a temp dir renamed into place when done, so a half-built entry is never taken as complete;
# one build at a time (flock).
build() {
  local dir
  dir=$(cache_dir)
  if built "$dir"; then log "versitygw $VERSITYGW_VERSION up to date in $dir/bin"; return 0; fi
  mkdir -p "$CACHE_BASE"
  exec 7>"$CACHE_BASE/.build.lock"
  flock 7
  if built "$dir"; then exec 7>&-; log "versitygw $VERSITYGW_VERSION up to date in $dir/bin"; return 0; fi
  local tmp blog t0=$SECONDS
  tmp=$(mktemp -d "$dir.build.XXXXXX")
  blog=$tmp.log
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" EXIT
  chmod 0755 "$tmp"
  log "building versitygw $VERSITYGW_VERSION from the Go module proxy (cold: ~2.5 min on 2 cores; log: $blog)"
  # GOTOOLCHAIN=local: the module asks for go 1.25; the Go on PATH builds it rather than fetching one.
  GOTOOLCHAIN=local GOBIN=$tmp/bin CGO_ENABLED=0 nice -n 10 \
    go install -trimpath -buildvcs=false -ldflags "-s -w" "$VERSITYGW_MODULE/cmd/versitygw@$VERSITYGW_VERSION" \
    >"$blog" 2>&1 || { tail -n 30 "$blog" >&2; die "build failed (log: $blog)"; }
  echo "versitygw $VERSITYGW_VERSION, $(go env GOVERSION), built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $((SECONDS - t0))s" >"$tmp/.complete"
  rm -rf "$dir"
  mv -T "$tmp" "$dir"
  trap - EXIT
  rm -f "$blog"
  exec 7>&-
  log "built versitygw $VERSITYGW_VERSION in $dir/bin in $((SECONDS - t0))s"
}

settings() { printf '%s\n' "PORT=$PORT" "VERSITYGW=$(cache_dir)/bin/versitygw"; }

# ---------------------------------------------------------------------------------------------
# Credentials and TLS: made once per run dir
# ---------------------------------------------------------------------------------------------
# AWS access key ids are 20 upper-case characters; secrets 40.
access_key() { secret access_key 10 | tr '[:lower:]' '[:upper:]'; }
secret_key() { secret secret_key 20; }

ensure_tls() {
  mkdir -p "$TLS"
  chmod 755 "$TLS"
  [[ -s $TLS/server.pem && -s $TLS/ca.pem ]] && return 0
  (umask 077
   openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
     -subj "/CN=bridge test S3 CA" -keyout "$TLS/ca-key.pem" -out "$TLS/ca.pem" \
     -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
   openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=127.0.0.1" \
     -keyout "$TLS/server-key.pem" -out "$TLS/server.csr" 2>/dev/null
   openssl x509 -req -in "$TLS/server.csr" -CA "$TLS/ca.pem" -CAkey "$TLS/ca-key.pem" -CAcreateserial \
     -days 3650 -out "$TLS/server.pem.tmp" -extfile <(printf '%s\n' \
       "subjectAltName=IP:127.0.0.1,DNS:localhost" "extendedKeyUsage=serverAuth" \
       "keyUsage=critical,digitalSignature,keyEncipherment" "basicConstraints=critical,CA:FALSE") 2>/dev/null
  ) || die "openssl could not make the CA and server certificate in $TLS"
  rm -f "$TLS/server.csr"
  chmod 644 "$TLS/ca.pem"
  mv -f "$TLS/server.pem.tmp" "$TLS/server.pem"
}

# ---------------------------------------------------------------------------------------------
# Health and env
# ---------------------------------------------------------------------------------------------
# Any HTTP answer over TLS verified against our CA (an anonymous ListBuckets gets 403 AccessDenied).
answers() {
  [[ -s $TLS/ca.pem ]] || return 1
  [[ "$(curl -s -o /dev/null -m 5 --cacert "$TLS/ca.pem" -w '%{http_code}' "$URL/" 2>/dev/null || true)" =~ ^[1-5][0-9][0-9]$ ]]
}
# Something on the port at all, TLS or not, ours or not.
port_taken() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null; }
same_settings() { [[ -f $SETTINGS && "$(cat "$SETTINGS")" == "$(settings)" ]]; }
healthy() { recorded_alive versitygw && same_settings && answers; }

write_env() {
  (umask 077
   cat >"$RUN/env.tmp" <<EOF
BRIDGE_S3_ENDPOINT=$URL
AWS_ACCESS_KEY_ID=$(access_key)
AWS_SECRET_ACCESS_KEY=$(secret_key)
AWS_DEFAULT_REGION=$REGION
AWS_CA_BUNDLE=$TLS/ca.pem
BRIDGE_S3_DATA=$DATA
EOF
  )
  mv -f "$RUN/env.tmp" "$RUN/env"
}

stop_processes() {
  recorded_alive versitygw || { rm -f "$PID_DIR/versitygw.pid"; return 0; }
  terminate 10 "$(recorded_pid versitygw)"
  rm -f "$PID_DIR/versitygw.pid"
}

# Started by simulator_start (tools/lib/service.sh), under the run dir's lock.
launch() {
  port_taken && die "something else listens on 127.0.0.1:$PORT; not starting versitygw there (BRIDGE_S3_PORT)"
  ensure_tls
  # An IAM dir (no users but root) rather than versitygw's single-account mode, which answers an
  # unknown access key with its own XAdminUserNotFound where S3 (and boto3's callers) expect
  # InvalidAccessKeyId.
  mkdir -p "$DATA" "$RUN/iam"
  chmod 700 "$RUN/iam"
  local bin
  bin=$(cache_dir)/bin/versitygw
  # The root credentials reach versitygw in its environment (readable by root only), not in argv.
  setsid env --chdir="$RUN" ROOT_ACCESS_KEY_ID="$(access_key)" ROOT_SECRET_ACCESS_KEY="$(secret_key)" \
    "$bin" --port "127.0.0.1:$PORT" --cert "$TLS/server.pem" --key "$TLS/server-key.pem" \
    --region "$REGION" --access-log "$RUN/log/access.log" --iam-dir "$RUN/iam" posix "$DATA" \
    </dev/null >>"$RUN/log/versitygw.out" 2>&1 7>&- 9>&- &
  LAUNCHED=$!
}

start() {
  build
  simulator_start
}

stop() { simulator_stop; }
status() { simulator_status; }

if [[ ${1:-} == build && $# == 1 ]]; then build; exit; fi
service_main 5,5 "$@"
