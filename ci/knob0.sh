#!/bin/sh
# ci/knob0.sh - the knob build (make KNOBS=1) with the injected slowdown off:
# the baseline side of the injected-regression experiments in docs/gates.md,
# e.g. CORTEX_SLOWDOWN_PCT=15 build-knob/cortex-bench gate --baseline-bin ci/knob0.sh ...
CORTEX_SLOWDOWN_PCT=0 exec "$(dirname "$0")/../build-knob/cortex-bench" "$@"
