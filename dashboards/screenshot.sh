#!/usr/bin/env bash
# dashboards/screenshot.sh - render a page in headless Chromium.
#
#   dashboards/screenshot.sh URL OUT.png      screenshot (PNG) of the page
#   dashboards/screenshot.sh --dump-dom URL   the page's DOM after load, on stdout
#
# URL: a file:// URL or a path to a local file. The page gets 5 s of virtual
# time to load (VIRTUAL_TIME_MS), the window is 1280x2400 (SIZE=W,H), and the
# browser runs with a fresh throw-away profile and no network chatter, so it
# works as root, offline and in CI. The browser is $CHROMIUM, else chromium,
# chromium-browser or google-chrome from PATH. Exit status: 0 done, 1 the
# browser failed or wrote nothing, 2 usage, 3 no browser installed.
set -u
usage() { echo "usage: $0 URL OUT.png | $0 --dump-dom URL" >&2; exit 2; }
mode=screenshot
if [ "${1:-}" = "--dump-dom" ]; then mode=dom; shift; [ $# -eq 1 ] || usage
else [ $# -eq 2 ] || usage; fi
url=$1
out=${2:-}
case "$url" in
    *://*) ;;
    *) [ -e "$url" ] || { echo "$0: $url: no such file" >&2; exit 2; }
       url="file://$(cd "$(dirname "$url")" && pwd)/$(basename "$url")" ;;
esac

browser=${CHROMIUM:-}
if [ -z "$browser" ]; then
    for b in chromium chromium-browser google-chrome; do
        if command -v "$b" >/dev/null 2>&1; then browser=$b; break; fi
    done
fi
if [ -z "$browser" ] || ! command -v "$browser" >/dev/null 2>&1; then
    echo "$0: no headless browser found${browser:+ ($browser)} (apt-get install chromium)" >&2
    exit 3
fi

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --disable-default-apps --disable-extensions
       --hide-scrollbars --mute-audio --user-data-dir="$profile"
       --virtual-time-budget="${VIRTUAL_TIME_MS:-5000}" --window-size="${SIZE:-1280,2400}")

if [ "$mode" = dom ]; then
    # Chromium prints its own warnings on stderr; keep them out of the DOM.
    timeout 60 "$browser" "${flags[@]}" --dump-dom "$url" 2>"$profile/stderr.log"
    rc=$?
    [ $rc -eq 0 ] || { tail -5 "$profile/stderr.log" >&2; exit 1; }
    exit 0
fi

case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
mkdir -p "$(dirname "$out")"
rm -f "$out"
timeout 60 "$browser" "${flags[@]}" --screenshot="$out" "$url" >"$profile/stdout.log" 2>"$profile/stderr.log"
rc=$?
if [ $rc -ne 0 ] || [ ! -s "$out" ]; then
    echo "$0: $browser failed (exit $rc) to screenshot $url:" >&2
    tail -5 "$profile/stderr.log" >&2
    exit 1
fi
echo "wrote $out"
