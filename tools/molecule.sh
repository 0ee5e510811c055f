#!/usr/bin/env bash
# Run the roles' molecule scenarios against the local services that `make services` started.
#
#   tools/molecule.sh [ROLE...]      (default: every role under roles/ that has a molecule/ dir)
#
# Each scenario uses molecule's default (delegated, unmanaged) driver on localhost and reads the
# services from the environment: this script exports the env files of every running service of
# ${BRIDGE_RUN:-<repo>/.run} (Slurm 22.05, Ray, the Kubernetes node, the LSF and Qiskit Runtime
# simulators, sshd, the S3 server) before it runs `molecule test --all` in each role's dir. Their
# variable names do not overlap (SLURM_*, RAY_*, KUBE*, LSF_*, QUANTUM_*, BRIDGE_SSH_*, S3/AWS_*).
# A role's scenario that needs a service which is not running fails and says which.
#
# The roles run at once, each `molecule test --all` with its own log ($RUN/molecule/ROLE.log) and
# ephemeral dir; the log of each role that failed is shown. What they share is the services: their
# jobs have names of their own (stage-molecule, ksi-molecule, the workflow's run id) and the Slurm
# partition queues them. molecule's prerun is off (tools/lib/molecule-base.yml), its installs into
# ~/.ansible would race.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUN=${BRIDGE_RUN:-$REPO/.run}
export BRIDGE_RUN=$RUN
export PATH=${BRIDGE_VENV:-$REPO/.venv}/bin:$PATH
export ANSIBLE_COLLECTIONS_PATH=${ANSIBLE_COLLECTIONS_PATH:-$REPO/.run/collections}
export ANSIBLE_PYTHON_INTERPRETER=${ANSIBLE_PYTHON_INTERPRETER:-${BRIDGE_VENV:-$REPO/.venv}/bin/python}
export ANSIBLE_LOCALHOST_WARNING=0 ANSIBLE_INVENTORY_UNPARSED_WARNING=0
# molecule keeps its ephemeral state under ~/.ansible/tmp by default; one dir per run dir and role
# lets clones and worktrees run scenarios side by side (set below, per role).
# Colour codes make CI logs unreadable.
export NO_COLOR=1 ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0

for env_file in slurm-22.05/env ray/env kube/node/env lsf/env quantum/env sshd/env s3/env; do
  if [[ -r $RUN/$env_file ]]; then
    set -a
    # shellcheck disable=SC1090
    . "$RUN/$env_file"
    set +a
  fi
done

if (($#)); then
  roles=("$@")
else
  roles=()
  for dir in "$REPO"/roles/*/molecule; do
    [[ -d $dir ]] && roles+=("$(basename "$(dirname "$dir")")")
  done
fi
((${#roles[@]})) || { echo "molecule: no role has a molecule/ dir" >&2; exit 0; }

for role in "${roles[@]}"; do
  [[ -d $REPO/roles/$role/molecule ]] || { echo "molecule: roles/$role has no molecule/ dir" >&2; exit 2; }
done

mkdir -p "$RUN/molecule"
pids=()
for role in "${roles[@]}"; do
  echo "molecule: roles/$role started (log: $RUN/molecule/$role.log)" >&2
  (
    t0=$SECONDS status=0
    cd "$REPO/roles/$role"
    MOLECULE_EPHEMERAL_DIRECTORY=$RUN/molecule/$role \
      molecule --base-config "$REPO/tools/lib/molecule-base.yml" test --all || status=$?
    echo "molecule: roles/$role ended with status $status after $((SECONDS - t0))s"
    exit "$status"
  ) </dev/null >"$RUN/molecule/$role.log" 2>&1 &
  pids+=($!)
done

failed=()
for i in "${!roles[@]}"; do
  role=${roles[$i]}
  if wait "${pids[$i]}"; then
    tail -n 1 "$RUN/molecule/$role.log" >&2
  else
    echo "molecule: roles/$role FAILED; its log, $RUN/molecule/$role.log:" >&2
    sed 's/^/  | /' "$RUN/molecule/$role.log" >&2
    failed+=("$role")
  fi
done
((${#failed[@]} == 0)) || { echo "molecule: failed: ${failed[*]}" >&2; exit 1; }
