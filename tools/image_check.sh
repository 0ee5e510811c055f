#!/usr/bin/env bash
# Carry out deploy/Containerfile's recipe without a container engine, then check that what the
# image would hold can run the way deploy/deployment.yaml runs it.
#
#   tools/image_check.sh     (IMAGE_CHECK_CONTAINERFILE, IMAGE_CHECK_DEPLOYMENT: check other files)
#
# THIS IS NOT AN IMAGE BUILD. This machine has no container engine (a docker client, no daemon) and
# reaches no image registry, so the python:3.11-slim base image cannot be pulled. Instead:
#   - each stage's root is a temp dir; its /usr/local is a venv of this machine's python3.11 (the
#     base image's Python line, not its build, its Debian libraries or its /etc);
#   - COPY lines are parsed and exactly their sources are copied (a missing COPY line, or a source
#     that does not exist, fails here as the build would); COPY --from copies between stage roots;
#   - ENV, WORKDIR and RUN are carried out with every absolute path mapped under the stage root;
#     RUN commands are split at `&&` and only known ones are run (pip, ansible-galaxy, rm, mkdir, ln,
#     chown, chmod); groupadd/useradd are only compared with USER and the Deployment (they would
#     change this machine); anything else fails, to be taught here, rather than being skipped.
#     pip keeps its cache in ~/.cache/pip although the image sets PIP_NO_CACHE_DIR, so reruns are fast.
# Then, with the image's ENV (mapped), the Deployment's env and args, and the Deployment's volumes
# as fresh dirs owned by its runAsUser (everything else in the root stays root-owned, so, like
# readOnlyRootFilesystem, the controller's user can write nowhere else), as that uid when root:
#   1. `bridge-controller --help` runs (the ENTRYPOINT);
#   2. main.parse_args(<Deployment args>) yields a playbook dir that holds bridgejob_{submit,poll,
#      cancel}.yml, a runner dir, HOME and ANSIBLE_* temp dirs on mounted volumes, the EXPOSEd port;
#   3. ansible-playbook --syntax-check of those playbooks sees the installed collection only;
#   4. the installed controller's AnsibleRunner, built as main.py builds it, runs bridgejob_poll.yml
#      (bridge.hpc.job_info) against a stub of Ray's GET /api/jobs/ started here (a stub, not Ray),
#      with the token handed to the module through the named pipe, as the controller does.
# Not checked: the base image's own content, kubelet/runtime behaviour, in-cluster config, the
# Lease, probes over the network. Needs PyPI (pip cache makes reruns fast); cleans up after itself.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
CONTAINERFILE="${IMAGE_CHECK_CONTAINERFILE:-$REPO/deploy/Containerfile}"
DEPLOYMENT="${IMAGE_CHECK_DEPLOYMENT:-$REPO/deploy/deployment.yaml}"
PIP_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/pip"
# The interpreter for the stage venvs. /usr/bin's first: the non-root checks need one that uid
# 65532 can execute (pyenv's lives under /root, which is 0700).
PY=""
for candidate in /usr/bin/python3.11 "$(command -v python3.11 || true)"; do
  if [[ -n "$candidate" && -x "$candidate" ]] && "$candidate" -c 'import venv, ensurepip' 2>/dev/null; then
    PY="$candidate"; break
  fi
done
[[ -n "$PY" ]] || { echo "image_check: needs python3.11 with venv and ensurepip" >&2; exit 1; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/bridge-image-check.XXXXXX")"
STUB_PID=""
cleanup() {
  if [[ -n "$STUB_PID" ]]; then kill "$STUB_PID" 2>/dev/null || true; wait "$STUB_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
chmod 0755 "$WORK"

say() { printf "image_check: [%3ds] %s\n" "$SECONDS" "$*"; }
fail() { printf 'image_check: FAIL: %s\n' "$*" >&2; exit 1; }

# ------------------------------------------------------------------ parse the Containerfile
# One instruction per line: "<INSTR> <shell-quoted words>"; RUN yields one line per `&&` command.
"$PY" - "$CONTAINERFILE" >"$WORK/recipe" <<'EOF'
import json, shlex, sys

text = open(sys.argv[1]).read()
logical, current = [], ""
for line in text.splitlines():
    if not current and (not line.strip() or line.lstrip().startswith("#")):
        continue
    if current and line.lstrip().startswith("#"):
        continue  # a comment inside a continued instruction
    if line.rstrip().endswith("\\"):
        current += line.rstrip()[:-1] + " "
        continue
    logical.append(current + line)
    current = ""
for instruction in logical:
    word, _, rest = instruction.strip().partition(" ")
    word, rest = word.upper(), rest.strip()
    if word == "RUN":
        lexer = shlex.shlex(rest, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        command = []
        for token in list(lexer) + ["&&"]:
            if token == "&&":
                print("RUN", shlex.join(command))
                command = []
            elif token and set(token) <= set("|;&<>()"):
                sys.exit("image_check: RUN uses %r; only `&&` chains are emulated: %s" % (token, rest))
            else:
                command.append(token)
    elif word in ("ENTRYPOINT", "CMD") and rest.startswith("["):
        print(word, shlex.join(json.loads(rest)))
    elif word == "ENV" and "=" not in rest.split()[0]:
        key, _, value = rest.partition(" ")
        print(word, shlex.join(["%s=%s" % (key, value.strip())]))
    else:
        print(word, shlex.join(shlex.split(rest)))
EOF

# ------------------------------------------------------------------ carry out the recipe
declare -A STAGE_ROOT=()
ROOT="" CWD="" STAGE="" USER_SPEC="" ENTRYPOINT=() EXPOSED=() USERADD_UID="" USERADD_HOME="/" GROUPADD_GID=""
declare -a ENVV=()
map() {  # an image path under the current stage root; relative paths stay as they are
  local p="$1"
  [[ "$p" != *..* ]] || fail "path with '..' not emulated: $p"
  if [[ "$p" == /* ]]; then printf '%s%s' "$ROOT" "$p"; else printf '%s' "$p"; fi
}
map_arg() {  # a command argument: a path, --opt=/path, or anything else
  local a="$1"
  if [[ "$a" == /* ]]; then map "$a"
  elif [[ "$a" == --*=/* ]]; then printf '%s=%s' "${a%%=*}" "$(map "${a#*=}")"
  else printf '%s' "$a"; fi
}
stage_env() {  # the stage's environment for env -i; pip's cache on although the image turns it off
  printf '%s\n' "PATH=$ROOT/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "LANG=C.UTF-8" \
    "HOME=$ROOT/root" "PIP_CACHE_DIR=$PIP_CACHE" "${ENVV[@]}" | grep -v '^PIP_NO_CACHE_DIR='
}
set_env() {  # KEY=VALUE from ENV, absolute values mapped, replacing an earlier value
  local key="${1%%=*}" value="${1#*=}" i
  [[ "$value" == /* ]] && value="$(map "$value")"
  for i in "${!ENVV[@]}"; do [[ "${ENVV[$i]}" == "$key="* ]] && unset 'ENVV[i]'; done
  ENVV+=("$key=$value")
}

stage_no=0
while IFS= read -r line; do
  instr="${line%% *}"; rest="${line#* }"
  eval "words=($rest)"  # shlex.join output: quoted words, no expansions
  case "$instr" in
    FROM)
      stage_no=$((stage_no + 1))
      base="${words[0]}"; STAGE="${words[2]:-stage$stage_no}"
      [[ "$base" == python:3.11* ]] || fail "FROM $base: only python:3.11 bases are emulated (by $PY)"
      ROOT="$WORK/$STAGE"; STAGE_ROOT[$STAGE]="$ROOT"; CWD="$ROOT"; ENVV=()
      mkdir -p "$ROOT/root" "$ROOT/tmp"
      "$PY" -m venv "$ROOT/usr/local"
      say "FROM $base AS $STAGE: root $ROOT, /usr/local = venv of $PY ($("$PY" -V))" ;;
    ENV)
      for kv in "${words[@]}"; do set_env "$kv"; done ;;
    WORKDIR)
      CWD="$(map "${words[0]}")"; mkdir -p "$CWD" ;;
    COPY)
      from=""
      if [[ "${words[0]}" == --from=* ]]; then from="${words[0]#--from=}"; words=("${words[@]:1}"); fi
      [[ "${words[0]}" != --* ]] || fail "COPY option ${words[0]} not emulated"
      dest="${words[-1]}"; [[ "$dest" == /* ]] || dest="${CWD#"$ROOT"}/$dest"
      dest="$(map "$dest")"
      for src in "${words[@]:0:${#words[@]}-1}"; do
        if [[ -n "$from" ]]; then
          [[ -n "${STAGE_ROOT[$from]:-}" ]] || fail "COPY --from=$from: no such stage"
          path="${STAGE_ROOT[$from]}$src"
        else
          [[ "$src" != /* && "$src" != *..* ]] || fail "COPY source outside the context: $src"
          path="$REPO/$src"
        fi
        [[ -e "$path" ]] || fail "COPY ${from:+--from=$from }$src: no such file or directory"
        # A directory source copies its contents; a file goes into dest/ when dest ends in /.
        if [[ -d "$path" ]]; then mkdir -p "$dest"; cp -a "$path/." "$dest/"
        elif [[ "$dest" == */ ]]; then mkdir -p "$dest"; cp -a "$path" "$dest"
        else mkdir -p "$(dirname "$dest")"; cp -a "$path" "$dest"; fi
      done
      say "COPY ${from:+--from=$from }${words[*]}" ;;
    RUN)
      cmd="${words[0]}"; args=()
      for a in "${words[@]:1}"; do
        a="$(map_arg "$a")"
        if [[ "$a" == *[*?]* ]]; then
          mapfile -t matches < <(compgen -G "$a" || true)
          ((${#matches[@]})) || fail "RUN $cmd: $a matches nothing"
          args+=("${matches[@]}")
        else args+=("$a"); fi
      done
      case "$cmd" in
        pip|ansible-galaxy|rm|mkdir|ln|chown|chmod)
          say "RUN ${words[*]}"
          mapfile -t envlist < <(stage_env)
          (cd "$CWD" && env -i "${envlist[@]}" "$cmd" "${args[@]}") >"$WORK/run.log" 2>&1 || {
            tail -40 "$WORK/run.log" >&2; fail "RUN ${words[*]}"; } ;;
        groupadd)
          for i in "${!words[@]}"; do [[ "${words[$i]}" == --gid ]] && GROUPADD_GID="${words[$((i + 1))]}"; done
          say "RUN ${words[*]}: not run (it would change this machine); gid $GROUPADD_GID noted" ;;
        useradd)
          for i in "${!words[@]}"; do
            case "${words[$i]}" in
              --uid) USERADD_UID="${words[$((i + 1))]}" ;;
              --home-dir) USERADD_HOME="${words[$((i + 1))]}" ;;
            esac
          done
          say "RUN ${words[*]}: not run (it would change this machine); uid $USERADD_UID noted" ;;
        *) fail "RUN $cmd: not emulated; teach tools/image_check.sh what it does" ;;
      esac ;;
    USER) USER_SPEC="${words[0]}" ;;
    EXPOSE) EXPOSED+=("${words[@]%/*}") ;;
    ENTRYPOINT) ENTRYPOINT=("${words[@]}") ;;
    LABEL|ARG|CMD) ;;
    *) fail "instruction $instr not emulated" ;;
  esac
done <"$WORK/recipe"
[[ "$STAGE" != "" ]] || fail "no FROM in $CONTAINERFILE"
say "recipe carried out: final stage '$STAGE' at $ROOT"

# ------------------------------------------------------------------ the image as the Deployment runs it
# KEY=shell-quoted value lines for bash; env entries with valueFrom get a stand-in value.
# Read with the final stage's Python, which has PyYAML (an ansible-core dependency).
"$ROOT/usr/local/bin/python" - "$DEPLOYMENT" >"$WORK/deployment.sh" <<'EOF'
import shlex, sys, yaml

docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d.get("kind") == "Deployment"]
pod = docs[0]["spec"]["template"]["spec"]
container = pod["containers"][0]
pod_sc, sc = pod.get("securityContext") or {}, container.get("securityContext") or {}
env = ["%s=%s" % (e["name"], e["value"] if "value" in e else "image-check-" + e["name"].lower().replace("_", "-"))
       for e in container.get("env") or []]
def out(name, value):
    print("%s=%s" % (name, shlex.quote(str(value))))
def out_array(name, values):
    print("%s=(%s)" % (name, " ".join(shlex.quote(str(v)) for v in values)))
out("D_IMAGE", container["image"])
out_array("D_ARGS", (container.get("command") or []) + (container.get("args") or []))
out_array("D_ENV", env)
out_array("D_MOUNTS", [m["mountPath"] for m in container.get("volumeMounts") or []])
out_array("D_PORTS", [p["containerPort"] for p in container.get("ports") or []])
out("D_UID", sc.get("runAsUser", pod_sc.get("runAsUser", "")))
out("D_GID", sc.get("runAsGroup", pod_sc.get("runAsGroup", "")))
out("D_FSGROUP", pod_sc.get("fsGroup", ""))
out("D_READONLY_ROOT", str(bool(sc.get("readOnlyRootFilesystem"))).lower())
EOF
# shellcheck source=/dev/null
. "$WORK/deployment.sh"
say "deployment: image $D_IMAGE, uid $D_UID:$D_GID (fsGroup $D_FSGROUP), readOnlyRootFilesystem $D_READONLY_ROOT, volumes ${D_MOUNTS[*]}, args ${D_ARGS[*]}"

[[ "$USER_SPEC" == "$D_UID:$D_GID" ]] || fail "USER $USER_SPEC, but the Deployment runs as $D_UID:$D_GID"
[[ -z "$USERADD_UID" || "$USERADD_UID" == "$D_UID" ]] || fail "useradd --uid $USERADD_UID, Deployment runAsUser $D_UID"
[[ -z "$GROUPADD_GID" || "$GROUPADD_GID" == "$D_GID" ]] || fail "groupadd --gid $GROUPADD_GID, Deployment runAsGroup $D_GID"
say "ok: USER $USER_SPEC = Deployment runAsUser:runAsGroup (= useradd/groupadd ids)"
for port in "${D_PORTS[@]}"; do
  printf '%s\n' "${EXPOSED[@]}" | grep -qx "$port" || fail "containerPort $port is not EXPOSEd (${EXPOSED[*]})"
done
[[ ${#ENTRYPOINT[@]} -gt 0 && -x "$ROOT/usr/local/bin/${ENTRYPOINT[0]}" ]] ||
  fail "ENTRYPOINT ${ENTRYPOINT[*]} is not an installed command"

# The Deployment's volumes: fresh, owned by the pod's user (fsGroup); the rest stays root's.
for mount in "${D_MOUNTS[@]}"; do
  rm -rf "${ROOT:?}$mount"; mkdir -p "$ROOT$mount"
  chown "$D_UID:${D_FSGROUP:-$D_GID}" "$ROOT$mount" 2>/dev/null || true
  chmod 0770 "$ROOT$mount"
done
on_volume() {
  local path="$1" mount
  for mount in "${D_MOUNTS[@]}"; do [[ "$path" == "$mount" || "$path" == "$mount"/* ]] && return 0; done
  return 1
}
# The container's environment: HOME from the user's passwd entry (useradd --home-dir), the image's
# ENV, then the Deployment's env; absolute values mapped.
for kv in "${D_ENV[@]}"; do set_env "$kv"; done
mapfile -t RUN_ENV < <(printf '%s\n' "PATH=$ROOT/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "LANG=C.UTF-8" \
  "HOME=$(map "$USERADD_HOME")" "${ENVV[@]}")
D_ARGS_MAPPED=()
for a in "${D_ARGS[@]}"; do D_ARGS_MAPPED+=("$(map_arg "$a")"); done
AS_USER=()
if ((EUID != 0)); then
  who="uid $EUID (not root: cannot switch to $D_UID)"
elif ! setpriv --reuid "$D_UID" --regid "$D_GID" --clear-groups "$ROOT/usr/local/bin/python" -c '' 2>/dev/null; then
  who="root (uid $D_UID cannot execute $PY)"
else
  AS_USER=(setpriv --reuid "$D_UID" --regid "$D_GID" --clear-groups)
  who="uid $D_UID:$D_GID"
fi
in_image() { (cd "$ROOT/tmp" && env -i "${RUN_ENV[@]}" "${AS_USER[@]}" "$@"); }

# 1. the ENTRYPOINT
in_image "${ENTRYPOINT[@]}" --help >"$WORK/help.txt" 2>&1 || { cat "$WORK/help.txt" >&2; fail "${ENTRYPOINT[*]} --help"; }
grep -q -- '--playbook-dir' "$WORK/help.txt" || fail "${ENTRYPOINT[*]} --help printed no --playbook-dir"
say "ok: ${ENTRYPOINT[*]} --help runs as $who"

# 2. what the Deployment's args resolve to, by the installed controller's own parser
in_image python - "${D_ARGS_MAPPED[@]}" >"$WORK/args.sh" <<'EOF'
import shlex, sys
from bridge_controller.main import parse_args
args = parse_args(sys.argv[1:])
for name in ("playbook_dir", "work_dir", "collections_path", "port", "python"):
    print("A_%s=%s" % (name.upper(), shlex.quote(str(getattr(args, name)))))
EOF
# shellcheck source=/dev/null
. "$WORK/args.sh"
for playbook in bridgejob_submit.yml bridgejob_poll.yml bridgejob_cancel.yml; do
  [[ -f "$A_PLAYBOOK_DIR/$playbook" ]] ||
    fail "--playbook-dir resolves to ${A_PLAYBOOK_DIR#"$ROOT"}, which has no $playbook"
done
say "ok: --playbook-dir resolves to ${A_PLAYBOOK_DIR#"$ROOT"}, which holds bridgejob_submit/poll/cancel.yml"
printf '%s\n' "${D_PORTS[@]}" | grep -qx "$A_PORT" || fail "--http-port resolves to $A_PORT, containerPort ${D_PORTS[*]}"
say "ok: --http-port $A_PORT = containerPort = EXPOSE"
[[ "$A_PYTHON" == "$ROOT/usr/local/bin/python"* ]] || fail "--python resolves to $A_PYTHON, not the image's"
writable=("--runner-dir=${A_WORK_DIR#"$ROOT"}")
declare -A effective=()
for kv in "${RUN_ENV[@]}"; do effective[${kv%%=*}]="${kv#*=}"; done  # the last value wins, as in env(1)
for key in HOME ANSIBLE_HOME ANSIBLE_LOCAL_TEMP ANSIBLE_REMOTE_TEMP; do
  [[ -n "${effective[$key]:-}" ]] && writable+=("$key=${effective[$key]#"$ROOT"}")
done
if [[ "$D_READONLY_ROOT" == true ]]; then
  for w in "${writable[@]}"; do on_volume "${w#*=}" || fail "readOnlyRootFilesystem, but $w is on no volume (${D_MOUNTS[*]})"; done
  say "ok: readOnlyRootFilesystem: ${writable[*]} on volumes"
fi

# 3. syntax of the playbooks, with the installed collection only
for playbook in bridgejob_submit.yml bridgejob_poll.yml bridgejob_cancel.yml; do
  in_image env ANSIBLE_COLLECTIONS_PATH="$A_COLLECTIONS_PATH" ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false \
    ANSIBLE_LOCALHOST_WARNING=0 ANSIBLE_INVENTORY_UNPARSED_WARNING=0 \
    ansible-playbook --syntax-check -i localhost, "$A_PLAYBOOK_DIR/$playbook" >"$WORK/syntax.log" 2>&1 || {
    cat "$WORK/syntax.log" >&2; fail "ansible-playbook --syntax-check $playbook"; }
done
say "ok: ansible-playbook --syntax-check of the 3 playbooks, collections from ${A_COLLECTIONS_PATH#"$ROOT"} only"

# 4. a real run: AnsibleRunner as main.py builds it, bridgejob_poll.yml against a stub Ray Jobs API
TOKEN="image-check-$RANDOM$RANDOM"
"$PY" - "$WORK/stub.port" "$WORK/stub.log" "$TOKEN" <<'EOF' &
import http.server, json, sys
port_file, log_file, token = sys.argv[1:]
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        with open(log_file, "a") as log:
            log.write("%s %s\n" % (self.path, self.headers.get("Authorization") == "Bearer " + token))
        if self.headers.get("Authorization") != "Bearer " + token:
            code, body = 401, "missing token"
        elif self.path.split("?")[0] == "/api/jobs/":
            code, body = 200, "[]"
        else:
            code, body = 404, "not found"
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as handle:
    handle.write(str(server.server_port))
import os; os.rename(port_file + ".tmp", port_file)
server.serve_forever()
EOF
STUB_PID=$!
for _ in $(seq 100); do [[ -s "$WORK/stub.port" ]] && break; sleep 0.05; done
[[ -s "$WORK/stub.port" ]] || fail "the stub Ray API did not start"
STUB_URL="http://127.0.0.1:$(cat "$WORK/stub.port")"
in_image python - "$STUB_URL" "$TOKEN" "${D_ARGS_MAPPED[@]}" >"$WORK/poll.json" 2>"$WORK/poll.err" <<'EOF' || {
import json, sys
from bridge_controller.main import parse_args
from bridge_controller.runner import AnsibleRunner
url, token, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
args = parse_args(argv)
runner = AnsibleRunner(args.playbook_dir, args.work_dir, collections_path=args.collections_path,
                       rotate_artifacts=args.rotate_artifacts, python=args.python)
print(json.dumps(runner.run("poll", {"type": "ray", "url": url}, {"token": token},
                            identities=["00000000-image-check"])))
EOF
  cat "$WORK/poll.err" >&2; fail "AnsibleRunner poll"; }
"$PY" - "$WORK/poll.json" "$WORK/stub.log" <<'EOF' || { cat "$WORK/poll.json" "$WORK/poll.err" >&2; fail "the poll's result"; }
import json, sys
res = json.load(open(sys.argv[1]))
seen = open(sys.argv[2]).read().split("\n")
assert not res.get("failed"), res
assert res.get("jobs") == {} and res.get("missing") == ["00000000-image-check"], res
assert "/api/jobs/ True" in seen, seen
EOF
artifacts="$(find "$A_WORK_DIR/poll/artifacts" -mindepth 1 -maxdepth 1 -type d | wc -l)"
say "ok: AnsibleRunner ran bridgejob_poll.yml (bridge.hpc.job_info) as $who against a stub Ray API:" \
  "token handed over through the pipe, result missing=[00000000-image-check], $artifacts artifact dir in" \
  "${A_WORK_DIR#"$ROOT"}"
say "passed in ${SECONDS} s (not an image build: see the header of tools/image_check.sh)"
