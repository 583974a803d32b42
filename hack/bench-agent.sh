#!/usr/bin/env bash
# Measures the standalone agent (live table on) on fakecri served over a
# unix socket, for the generic and the evented PLEG: time until N static
# pods are Running, CPU seconds until then, idle CPU (% of a core, from the
# threads' schedstat run time) and wake-ups per second over an idle window,
# and peak RSS (VmHWM). Prints a Markdown table; see hack/benchagent.
#
#   hack/bench-agent.sh                       # 100 and 1000 pods, 60 s idle window
#   hack/bench-agent.sh -pods 200 -idle 30s   # any flags of hack/benchagent
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./hack/benchagent -pods 100,1000 -idle 60s "$@"
