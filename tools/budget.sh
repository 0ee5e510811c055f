#!/usr/bin/env bash
# The wall time of each stage of `make test` (or `make check`), reported against its budget.
#
#   tools/budget.sh start NAME WARM COLD   begin a report for NAME (test, check) whose budget is WARM
#                                          minutes with the build cache filled, COLD without it
#   tools/budget.sh begin STAGE            a stage begins (and the one before it ends); a no-op
#                                          outside a report, so `make unit` alone records nothing
#   tools/budget.sh time STAGE -- CMD...    run CMD, a stage that runs beside the others, and record
#                                          its own seconds; its exit status is CMD's
#   tools/budget.sh report                 each stage's seconds and CPU share, the total, and a warning line
#                                          when the total passes the budget (a report, not a failure)
#
# Stages run one after the other (make without -j), so a stage lasts from its `begin` to the next
# one's, and the last to `report`. Under `make test` some run in the background instead
# (tools/background.sh): the image checks and the services' start beside the unit tests, the static
# checks (sanity, lint, docs) beside the integration tests. A stage that waits for them lasts as
# long as what was left to wait for; what they took themselves is reported under "beside". The
# report lives in .run/budget/ and is named in the environment variable BRIDGE_BUDGET, which
# `start` prints for the Makefile to export.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/bridge"

now() { date +%s.%N; }
# The machine's busy and total CPU time so far (jiffies, /proc/stat): a stage's share of busy CPU
# says whether it waits (low) or computes (near 100: more workers would not make it shorter).
cpu() { awk '$1 == "cpu" { idle = $5 + $6; total = 0; for (i = 2; i <= 9; i++) total += $i; print total - idle "\t" total; exit }' /proc/stat; }

case "${1:-}" in
  start)
    name=$2 warm=$3 cold=$4
    mkdir -p "$REPO/.run/budget"
    file="$REPO/.run/budget/$name.tsv"
    # Cold: nothing built yet (no chroots, no Kubernetes or S3 build, no wheels), as on a new machine.
    if [[ -n "$(ls -A "$CACHE" 2>/dev/null)" ]]; then cache=warm budget=$warm; else cache=cold budget=$cold; fi
    printf 'name\t%s\ncache\t%s\nbudget_minutes\t%s\nstart\t%s\t%s\n' "$name" "$cache" "$budget" "$(now)" "$(cpu)" >"$file"
    echo "$file"
    ;;
  begin)
    [[ -n "${BRIDGE_BUDGET:-}" && -f "$BRIDGE_BUDGET" ]] || exit 0
    printf 'stage\t%s\t%s\t%s\n' "$2" "$(now)" "$(cpu)" >>"$BRIDGE_BUDGET"
    ;;
  time)
    stage=${2:?usage: tools/budget.sh time STAGE -- CMD...}
    shift 2
    [[ ${1:-} == -- ]] && shift
    t0=$(now) status=0
    "$@" || status=$?
    if [[ -n "${BRIDGE_BUDGET:-}" && -f "$BRIDGE_BUDGET" ]]; then
      printf 'beside\t%s\t%s\t%s\n' "$stage" "$t0" "$(now)" >>"$BRIDGE_BUDGET"
    fi
    exit "$status"
    ;;
  report)
    [[ -n "${BRIDGE_BUDGET:-}" && -f "$BRIDGE_BUDGET" ]] || exit 0
    read -r end_busy end_total < <(cpu)
    awk -F'\t' -v end="$(now)" -v end_busy="$end_busy" -v end_total="$end_total" '
      $1 == "name" { name = $2 } $1 == "cache" { cache = $2 } $1 == "budget_minutes" { budget = $2 }
      $1 == "start" { start = $2; previous = $2; busy0 = $3; total0 = $4 }
      $1 == "beside" { besides[++beside] = $2; beside_seconds[beside] = $4 - $3 }
      $1 == "stage" {
        if (count) { seconds[count] = $3 - previous; cpu_busy[count] = share($4 - busy0, $5 - total0) }
        stages[++count] = $2; previous = $3; busy0 = $4; total0 = $5
      }
      function share(busy, total) { return total > 0 ? sprintf("CPU %3.0f%% busy", 100 * busy / total) : "" }
      END {
        if (count) { seconds[count] = end - previous; cpu_busy[count] = share(end_busy - busy0, end_total - total0) }
        printf "budget: make %s, %s cache\n", name, cache
        for (i = 1; i <= count; i++) printf "budget: %-12s %7.0f s  %s\n", stages[i], seconds[i], cpu_busy[i]
        for (i = 1; i <= beside; i++) printf "budget: %-12s %7.0f s beside the stages above\n", besides[i], beside_seconds[i]
        total = end - start
        printf "budget: %-12s %7.0f s (%.1f min; budget %s min)\n", "total", total, total / 60, budget
        if (total > budget * 60)
          printf "budget: WARNING: make %s took %.1f min, over its %s-cache budget of %s min\n", name, total / 60, cache, budget
      }' "$BRIDGE_BUDGET"
    ;;
  *)
    sed -n '2,13p' "${BASH_SOURCE[0]}" >&2
    exit 2
    ;;
esac
