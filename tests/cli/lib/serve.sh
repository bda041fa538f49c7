# tests/cli/lib/serve.sh - helpers for the tests that drive `cortex serve`
# over HTTP (engine/serve.sh, engine/serve_harmony.sh); source after common.sh.

# Extra curl arguments for /metrics (serve_api.sh: an Authorization header).
K=()
# metric NAME: the value of one /metrics line (name with labels, as written).
metric() { curl -s "${K[@]}" "$URL/metrics" | awk -v k="$1" '$1 == k { print $2 }'; }
# wait_metric NAME VALUE: poll /metrics (10 s at most) until NAME is VALUE.
wait_metric() {
    for _ in $(seq 200); do [ "$(metric "$1")" = "$2" ] && return 0; sleep 0.05; done
    return 1
}

# start LOG ARGS...: run cortex serve --port 0 ARGS in the background; sets PID and URL.
start() {
    local log=$1; shift
    "$CORTEX" serve --port 0 "$@" 2>"$log" &
    PID=$!
    URL=
    for _ in $(seq 200); do
        URL=$(grep -o 'http://[0-9.]*:[0-9]*' "$log" | head -1)
        [ -n "$URL" ] && return 0
        kill -0 $PID 2>/dev/null || break
        sleep 0.05
    done
    echo "server did not start:"; cat "$log"
    return 1
}
# post PATH JSON [CURL ARGS...]: the body to $tmp/body, the HTTP status to stdout.
post() {
    local path=$1 json=$2; shift 2
    curl -s -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$json" "$@" "$URL$path"
}
# jq-like access with python: field FILE EXPR (python over `d`, the JSON in FILE).
field() { "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
