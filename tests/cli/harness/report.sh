#!/usr/bin/env bash
# tests/cli/harness/report.sh - `cortex-bench report` and `cortex-bench dashboard` end
# to end on real runs of a tiny synthetic model: the report's charts (PNG and
# SVG, valid files) with a baseline given by run id and by tag, the text-only
# report without gnuplot, the baseline refused (exit 2, one line) when it is
# INVALID, of another workload or RUN itself, an INVALID run's report
# (outcomes only, exit 4), the dashboard with and without gnuplot (only
# VALID runs green, charted and shown with figures; INVALID in red with its
# reasons; each verdict's own runs; a rate sweep as one item; an HTTP run's
# server), and the dashboard in headless Chromium: every chart image loads,
# and a screenshot lands in reports/dashboard.png. Without Chromium the
# browser checks print SKIP (and fail when CI=true). Run from the repository
# root (tests/run.sh).
set -u
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
. tests/cli/lib/common.sh
BENCH=$(cd "$(dirname "$BENCH")" && pwd)/$(basename "$BENCH")
skip() { echo "SKIP: $1"; }
is_png() { [ -s "$1" ] && [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }
is_svg() { [ -s "$1" ] && "$PY" -c 'import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); sys.exit(d.documentElement.tagName.split(":")[-1] != "svg")' "$1" 2>/dev/null; }
one_line() { [ "$(wc -l <"$1")" -eq 1 ] && grep -q "$2" "$1"; }
# Every image report.md links is a valid PNG with a valid SVG beside it, and
# every chart script in the directory was drawn.
charts_valid() { # dir
    local d=$1 n=0 png
    for png in $(grep -oE '!\[[^]]*\]\([^)]+\.png\)' "$d/report.md" | sed -E 's/.*\(([^)]+)\)$/\1/'); do
        is_png "$d/$png" && is_svg "$d/${png%.png}.svg" && [ -s "$d/${png%.png}.dat" ] || return 1
        n=$((n + 1))
    done
    [ "$n" -eq "$(ls "$d"/*.gp | wc -l)" ] && [ "$n" -gt 0 ]
}
chart_ok() { grep -qF "]($2.png)" "$1/report.md" && is_png "$1/$2.png" && is_svg "$1/$2.svg"; }
tables_ok() { grep -q '^## Summary' "$1" && grep -q '^| p01 |' "$1" && grep -q '^| cycles |' "$1"; }
no_images() { ! grep -q '!\[' "$1/report.md" && ! ls "$1"/*.png >/dev/null 2>&1; }
no_external() { ! grep -qiE '(src|href)="(https?:)?//' "$1"; }
fails_with() { [ "$1" -ne 0 ] && [ "$1" -lt 128 ] && one_line "$2" "$3"; }
exits_with() { [ "$1" -eq "$2" ] && one_line "$3" "$4"; } # rc want file pattern
trend_charts() { for m in "${@:2}"; do grep -qE "charts/trend_[^\"]*_$m\.svg" "$1" || return 1; done; }
page_svgs_ok() { # dir: every chart index.html shows is a valid SVG
    local f n=0
    for f in $(grep -oE 'charts/trend_[^"]+\.svg' "$1/index.html"); do is_svg "$1/$f" || return 1; n=$((n + 1)); done
    [ "$n" -gt 0 ]
}

# Charts need gnuplot: without it (outside CI) their checks are skipped.
have_gp=1
if ! command -v gnuplot >/dev/null 2>&1; then
    have_gp=0
    if [ "${CI:-}" = true ]; then check "gnuplot installed (apt-get install gnuplot-nox)" false
    else skip "gnuplot not installed (apt-get install gnuplot-nox): chart checks not run"; fi
fi
gcheck() { [ $have_gp = 1 ] && check "$@"; return 0; }

# A context of 1024 tokens: 8 of the 10 standard prompts fit, 2 fail (shown as failed; tolerated by
# --allow-failures 0.2, so the runs are VALID).
"$CORTEX" synth --shape test-tiny --type q8_0 -c 1024 -o "$tmp/tiny.gguf" 2>/dev/null
db=$tmp/b.db
run() { "$BENCH" run --model "$tmp/tiny.gguf" -t 1 --warmup 0 --no-progress --db "$db" "$@" >/dev/null 2>"$tmp/run.err"; }
run --workload standard --reps 2 --allow-failures 0.2 && run --workload standard --reps 2 --allow-failures 0.2
check "two standard runs" test $? -eq 0
run --workload "trace:prompts/traces/zipf-smoke.jsonl" --reps 1
check "trace replay of zipf-smoke" test $? -eq 0
run --workload pp32 --reps 2 && run --workload pp32 --reps 2
check "two pp32 runs" test $? -eq 0
std1=$(sql "$db" "select min(id) from runs where workload = 'standard'")
std2=$(sql "$db" "select max(id) from runs where workload = 'standard'")
trc=$(sql "$db" "select id from runs where workload like 'trace:%'")
pp=$(sql "$db" "select min(id) from runs where workload = 'pp32'")
pp2=$(sql "$db" "select max(id) from runs where workload = 'pp32'")
# Without --allow-failures the 2 prompts past the context make a standard run INVALID (exit 4).
run --workload standard --reps 1
check "a standard run with failed prompts is INVALID (exit 4)" test $? -eq 4
inv=$(sql "$db" "select max(id) from runs where workload = 'standard'")

# The standard run against the other as baseline: report.md and every chart.
r=$tmp/r-std
"$BENCH" report "$std2" --baseline "$std1" --db "$db" --out "$r" >"$tmp/rep.out" 2>"$tmp/rep.err"
check "report with a baseline exits 0" test $? -eq 0
check "report.md written" test -s "$r/report.md"
check "report names the baseline" grep -q "baseline: run $std1" "$r/report.md"
check "report has the summary, request and counter tables" tables_ok "$r/report.md"
check "failed prompts are listed as errors" grep -q "^| p10 .*error: prompt of" "$r/report.md"
for c in tps_per_prompt ttft_cdf itl_cdf counters; do
    gcheck "chart $c linked, its PNG and SVG valid" chart_ok "$r" "$c"
done
gcheck "every linked chart is a valid PNG + SVG with its data" charts_valid "$r"
gcheck "TPS chart clusters the baseline beside the run" grep -q "baseline: run $std1" "$r/tps_per_prompt.gp"
gcheck "TTFT CDF overlays the baseline" grep -q "index 1" "$r/ttft_cdf.gp"
replot() { (cd "$1" && rm -f itl_cdf.png && gnuplot itl_cdf.gp 2>/dev/null && is_png itl_cdf.png); }
gcheck "gnuplot scripts re-plot from their directory" replot "$r"

# The trace replay: latency over time and per-adapter charts.
r=$tmp/r-trace
"$BENCH" report "$trc" --db "$db" --out "$r" >/dev/null 2>&1
check "trace report exits 0" test $? -eq 0
gcheck "trace report: latency over time chart" chart_ok "$r" latency_time
gcheck "trace report: per-adapter TTFT chart" chart_ok "$r" adapter_ttft
gcheck "trace report's charts are valid" charts_valid "$r"
check "trace report has the per-adapter table" grep -q "^## Per adapter" "$r/report.md"

# A synthetic test, with the baseline given by tag.
sql "$db" "insert into tags (name, run_id, created_at) values ('smoke-base', $pp, '2026-01-01T00:00:00Z')" >/dev/null
r=$tmp/r-pp
"$BENCH" report "$pp2" --baseline smoke-base --db "$db" --out "$r" >/dev/null 2>&1
check "report --baseline TAG resolves the tag" grep -q "baseline: run $pp" "$r/report.md"
gcheck "synthetic report's charts are valid" charts_valid "$r"
check "missing counters listed with their reason" grep -qE '^- `[a-z-]+` \((prefill|decode|total)' "$r/report.md"

# Without gnuplot: one message, exit 0, the tables without images.
r=$tmp/r-text
CORTEX_GNUPLOT=/nonexistent "$BENCH" report "$std2" --baseline "$std1" --db "$db" --out "$r" >/dev/null 2>"$tmp/text.err"
check "report without gnuplot exits 0" test $? -eq 0
check "one stderr line mentioning gnuplot" one_line "$tmp/text.err" gnuplot
check "text-only report.md has the tables" grep -q '^| p01 |' "$r/report.md"
check "text-only report.md has no images" no_images "$r"

# Bad input.
"$BENCH" report 999 --db "$db" >/dev/null 2>"$tmp/bad.err"
check "report of a missing run fails with one line" fails_with $? "$tmp/bad.err" "no run 999"
"$BENCH" report "$std2" --baseline no-such-tag --db "$db" >/dev/null 2>"$tmp/bad.err"
check "unknown baseline tag: exit 2, one line naming it" exits_with $? 2 "$tmp/bad.err" no-such-tag

# The baseline is a VALID run comparable with RUN, else one line saying why (exit 2) and no report.
"$BENCH" report "$std2" --baseline "$inv" --db "$db" --out "$tmp/nb1" >/dev/null 2>"$tmp/bad.err"
check "an INVALID baseline: exit 2, one line" exits_with $? 2 "$tmp/bad.err" "run $inv is INVALID, not a measurement: 2 of 10 requests failed"
"$BENCH" report "$std2" --baseline "$pp" --db "$db" --out "$tmp/nb2" >/dev/null 2>"$tmp/bad.err"
check "a baseline of another workload: exit 2, one line naming what differs" \
    exits_with $? 2 "$tmp/bad.err" "run $pp is not comparable with run $std2: workload"
sql "$db" "insert into tags (name, run_id, created_at) values ('other-wl', $trc, '2026-01-01T00:00:00Z')" >/dev/null
"$BENCH" report "$std2" --baseline other-wl --db "$db" --out "$tmp/nb3" >/dev/null 2>"$tmp/bad.err"
check "a tag on another workload's run: exit 2, one line" exits_with $? 2 "$tmp/bad.err" "other-wl: run $trc is not comparable"
"$BENCH" report "$std2" --baseline "$std2" --db "$db" --out "$tmp/nb4" >/dev/null 2>"$tmp/bad.err"
check "the run as its own baseline: exit 2" exits_with $? 2 "$tmp/bad.err" "is run $std2 itself"
check "no report written for a refused baseline" sh -c "! ls '$tmp'/nb*/report.md >/dev/null 2>&1"

# An INVALID run's report: INVALID and why first, its outcomes, no figure (no summary, chart, counter); exit 4.
r=$tmp/r-inv
"$BENCH" report "$inv" --db "$db" --out "$r" >/dev/null 2>"$tmp/inv.err"
check "report of an INVALID run: exit 4, one line" exits_with $? 4 "$tmp/inv.err" "run $inv is INVALID"
check "INVALID and the reasons are its first statement" grep -q '^> \*\*INVALID\*\*: 2 of 10 requests failed' <(sed -n 3p "$r/report.md")
check "no summary, chart, counter or per-adapter figure" \
    sh -c "! grep -qE '^## (Summary|Charts|Counters|Per adapter)|TPS per prompt|tok/s' '$r/report.md' && ! ls '$r'/*.gp '$r'/*.dat >/dev/null 2>&1"
check "its outcomes: each request's, failures with the reason" grep -q '^| p10 |  | failed | [0-9]* | 0 / [0-9]* | | | | | error: prompt of' "$r/report.md"
"$BENCH" report "$std2" --db "$db" --colour >/dev/null 2>"$tmp/bad.err"
check "unknown flag rejected, named" fails_with $? "$tmp/bad.err" colour

# Dashboard, from a directory holding reports/<run>/ (linked from the runs table).
(cd "$tmp" && "$BENCH" report "$std2" --db "$db" >/dev/null 2>&1)
check "report defaults to reports/RUN/" test -s "$tmp/reports/$std2/report.md"
(cd "$tmp" && "$BENCH" dashboard --db "$db" --out site >/dev/null 2>"$tmp/dash.err")
check "dashboard exits 0" test $? -eq 0
site=$tmp/site
check "index.html written" test -s "$site/index.html"
check "no gates yet: says so" grep -q "No gate verdicts yet" "$site/index.html"
check "runs table links the existing report" grep -q "href=\"../reports/$std2/report.md\"" "$site/index.html"
check "trend charts for the headline metrics" \
    trend_charts "$site/index.html" output_tps decode_tps prefill_tps ttft_ms_p50 itl_ms_p99 tps
gcheck "every chart the page shows is a valid SVG" page_svgs_ok "$site"
check "no external resources" no_external "$site/index.html"
sql "$db" "insert into gates (id, created_at, base_run, cand_run, mode, verdict, summary) values (1, '2026-01-01T00:00:00Z', $std1, $std2, 'wallclock', 'regression', 'decode_tps regressed')" >/dev/null
sql "$db" "insert into verdicts (gate_id, metric, direction, threshold, base_median, cand_median, change, verdict, n_base, n_cand) values (1, 'standard/decode_tps', 'higher', 0.05, 100, 90, -0.1, 'regressed', 2, 2)" >/dev/null
(cd "$tmp" && "$BENCH" dashboard --db "$db" --out site >/dev/null 2>&1)
check "latest gate verdicts shown" grep -q '>standard/decode_tps<.*>regressed<' "$site/index.html"

CORTEX_GNUPLOT=/nonexistent "$BENCH" dashboard --db "$db" --out "$tmp/site-plain" >/dev/null 2>"$tmp/plain.err"
rc=$?
check "dashboard without gnuplot exits 0" test $rc -eq 0
check "one stderr line mentioning gnuplot" one_line "$tmp/plain.err" gnuplot
check "built-in SVG charts are valid" page_svgs_ok "$tmp/site-plain"

# Only measurements are green, charted or shown as figures; an INVALID run is red, with its reasons.
check "the header counts VALID and INVALID runs apart" grep -q '>5 VALID</span> <span class="badge bad">1 INVALID</span>' "$site/index.html"
check "the INVALID run: a red INVALID badge with its reasons" \
    grep -qE "<tr class=\"invalid\"><td class=\"num\">$inv</td>.*<span class=\"badge bad\" title=\"2 of 10 requests failed[^\"]*\">INVALID</span>" "$site/index.html"
check "... no figure of it, its reasons under it" sh -c "grep -A1 '<td class=\"num\">$inv</td>' '$site/index.html' | grep -q 'INVALID: not a measurement' && grep -A1 '<td class=\"num\">$inv</td>' '$site/index.html' | grep -q '<strong>INVALID</strong>: 2 of 10 requests failed'"
check "no VALID badge or figure for it" sh -c "! grep '<td class=\"num\">$inv</td>' '$site/index.html' | grep -qE 'badge good|class=\"num\">[0-9.]+</td><td class=\"num\">[0-9.]'"
in_chart() { # dir run: some trend chart of the page has a point of run
    grep -qE "^[0-9]+\s.*\s$2\$" "$1"/charts/trend_*.dat 2>/dev/null || grep -q "<title>run $2: " "$1"/charts/trend_*.svg
}
check "the VALID standard runs are trend points" in_chart "$tmp/site-plain" "$std2"
check "the INVALID run is no trend point (built-in SVG)" sh -c "$(declare -f in_chart); ! in_chart '$tmp/site-plain' $inv"
gcheck "the INVALID run is no trend point (gnuplot data)" sh -c "$(declare -f in_chart); ! in_chart '$site' $inv"

# Each verdict names the runs it judged: verdicts.base_run/cand_run (schema v12), the gate's for older rows.
sql "$db" "insert into verdicts (gate_id, metric, direction, threshold, base_median, cand_median, change, verdict, n_base, n_cand, base_run, cand_run) values (1, 'pp32/tps', 'higher', 0.05, 100, 101, 0.01, 'unchanged', 2, 2, $pp, $pp2)" >/dev/null
(cd "$tmp" && "$BENCH" dashboard --db "$db" --out site >/dev/null 2>&1)
check "a verdict with its own runs shows them" grep -q ">pp32/tps</code></td><td><span class=\"badge neutral\">unchanged</span></td><td class=\"num\">$pp → $pp2</td>" "$site/index.html"
check "an older verdict row falls back to the gate's runs" grep -q ">standard/decode_tps</code></td><td><span class=\"badge bad\">regressed</span></td><td class=\"num\">$std1 → $std2</td>" "$site/index.html"

# A rate sweep is one item (its saturation run in the trends, its rates with its chart); a run over HTTP
# shows its server, never "0 threads".
d2=$tmp/d2.db
cp "$db" "$d2"
run2() { "$BENCH" run --model "$tmp/tiny.gguf" -t 1 --warmup 0 --no-progress --db "$d2" "$@" >/dev/null 2>"$tmp/run.err"; }
run2 --workload "trace:prompts/traces/zipf-smoke.jsonl" --rate sweep --reps 1
check "a rate sweep of zipf-smoke" test $? -eq 0
sat=$(sql "$d2" "select max(sweep) from runs")
member=$(sql "$d2" "select max(id) from runs where sweep = $sat")
sql "$d2" "update runs set validity = 'invalid', validity_reasons = '1 of 16 requests timed out' where id = $member" >/dev/null
sql "$d2" "update runs set endpoint = 'http://127.0.0.1:9/v1', server = 'mock-server 1.0', threads = 0 where id = $trc" >/dev/null
CORTEX_GNUPLOT=/nonexistent "$BENCH" dashboard --db "$d2" --out "$tmp/site2" >/dev/null 2>&1
page2=$tmp/site2/index.html
groups() { grep -A1 -F '<div class="group">' "$1" | grep -cF "<h3><code>$2</code>"; } # page workload: trend groups
check "the sweep is one trend group (its saturation run), beside the plain replay's" \
    test "$(groups "$page2" "trace:prompts/traces/zipf-smoke.jsonl")" = 2
check "its rates are listed with the sweep" grep -q "rate sweep of run $sat</a> at [0-9.]* req/s" "$page2"
check "the sweep section has its anchor and chart" sh -c "grep -q 'id=\"sweep-$sat\"' '$page2' && grep -q 'charts/sweep-$sat.svg' '$page2'"
check "the sweep's INVALID run is named in red with its reason, not a point" \
    grep -q "<li><span class=\"badge bad\">INVALID</span> run $member (offered [0-9.]* req/s), not a measurement: 1 of 16 requests timed out</li>" "$page2"
check "the HTTP run shows its server" grep -q "server mock-server 1.0 at <code>http://127.0.0.1:9/v1</code>" "$page2"
check "no run reads \"0 threads\"" sh -c "! grep -qE '(^|[^0-9])0 threads' '$page2'"

# In a browser: the charts really load; a screenshot for people.
shot=dashboards/screenshot.sh
browser_ok=1
dashboards/screenshot.sh --dump-dom "$site/index.html" >"$tmp/dom.html" 2>"$tmp/dom.err"
case $? in
    0) ;;
    3) browser_ok=0 ;;
    *) check "headless Chromium loads the dashboard" false; browser_ok=2 ;;
esac
loaded() { # dom file -> "loaded total"
    local l t
    l=$(grep -oE 'data-charts-loaded="[0-9]+"' "$1" | grep -oE '[0-9]+')
    t=$(grep -oE 'data-charts-total="[0-9]+"' "$1" | grep -oE '[0-9]+')
    [ -n "$l" ] && [ -n "$t" ] && [ "$l" = "$t" ] && [ "$t" -gt 0 ]
}
if [ $browser_ok = 0 ]; then
    if [ "${CI:-}" = true ]; then
        check "chromium installed (apt-get install chromium)" false
    else
        skip "chromium not installed (apt-get install chromium): browser checks not run"
    fi
elif [ $browser_ok = 1 ]; then
    check "every chart image loads in Chromium (gnuplot SVG)" loaded "$tmp/dom.html"
    dashboards/screenshot.sh --dump-dom "$tmp/site-plain/index.html" >"$tmp/dom2.html" 2>/dev/null
    check "every chart image loads in Chromium (built-in SVG)" loaded "$tmp/dom2.html"
    mkdir -p reports
    SIZE=1280,2400 "$shot" "$site/index.html" reports/dashboard.png >/dev/null 2>"$tmp/shot.err"
    check "screenshot reports/dashboard.png is a PNG" is_png reports/dashboard.png
fi

finish
