#!/usr/bin/env bash
# dashboards/build.sh - build the static benchmark dashboard (dashboards/site/)
# from the benchmark database. Builds cortex-bench first when needed.
#   DB=reports/cortex.db   the database to read (default)
#   BUILD=build            where cortex-bench lives (default)
# Open dashboards/site/index.html in a browser; no server needed.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
DB=${DB:-reports/cortex.db}
make --no-print-directory BUILD="$BUILD" "$BUILD/cortex-bench" >/dev/null
"$BUILD/cortex-bench" dashboard --db "$DB" --out dashboards/site
