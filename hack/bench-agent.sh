#!/usr/bin/env bash
# Measures the standalone agent on fakecri served over a unix socket: time
# until N static pods are Running, CPU seconds and peak RSS until then,
# and idle CPU afterwards, for the generic and the evented PLEG.
#
#   hack/bench-agent.sh                       # 100 and 1000 pods, 60 s idle window
#   hack/bench-agent.sh -pods 200 -idle 30s   # any flags of hack/benchagent
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./hack/benchagent -pods 100,1000 -idle 60s "$@"
