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
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUN=${BRIDGE_RUN:-$REPO/.run}
export BRIDGE_RUN=$RUN
export PATH=$REPO/.venv/bin:$PATH
export ANSIBLE_COLLECTIONS_PATH=${ANSIBLE_COLLECTIONS_PATH:-$REPO/.run/collections}
export ANSIBLE_PYTHON_INTERPRETER=${ANSIBLE_PYTHON_INTERPRETER:-$REPO/.venv/bin/python}
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

failed=()
for role in "${roles[@]}"; do
  dir=$REPO/roles/$role
  [[ -d $dir/molecule ]] || { echo "molecule: roles/$role has no molecule/ dir" >&2; exit 2; }
  echo "molecule: roles/$role" >&2
  t0=$SECONDS
  if (cd "$dir" && MOLECULE_EPHEMERAL_DIRECTORY=$RUN/molecule/$role molecule test --all); then
    echo "molecule: roles/$role passed in $((SECONDS - t0))s" >&2
  else
    echo "molecule: roles/$role FAILED after $((SECONDS - t0))s" >&2
    failed+=("$role")
  fi
done
((${#failed[@]} == 0)) || { echo "molecule: failed: ${failed[*]}" >&2; exit 1; }
