#!/usr/bin/python3
"""tests/cli/lib/serve_faults.py - the hostile clients of serve_faults.sh,
one scenario per call: `serve_faults.py SCENARIO PORT [ARGS]`. Each prints
"ok - WHAT" or "FAIL - WHAT" lines (the shell counts them) and, for the
figures the suite reports, "figure - NAME VALUE" lines. Standard library
only (sockets and threads), 127.0.0.x addresses only: every 127.0.0.0/8
address is this machine's loopback on Linux, so a source address per
simulated client tests the per-address limit without a network.

Timing bounds are the issue's own ("/health within 1 s") and deadlines of
the server's flags plus a margin wide enough for a loaded 2-core machine."""
import json
import resource
import socket
import sys
import threading
import time

HOST = "127.0.0.1"


def run_all(fn, n):
    """fn(0) .. fn(n - 1), each on its own thread, all started before any is joined."""
    ths = [threading.Thread(target=fn, args=(i,)) for i in range(n)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()

def check(ok, what):
    print(("ok - " if ok else "FAIL - ") + what, flush=True)
    return ok


def figure(name, value):
    print("figure - %s %s" % (name, value), flush=True)


def connect(port, src="127.0.0.1", timeout=30.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect((HOST, port))
    return s


def request(method, path, body=b"", extra=""):
    head = "%s %s HTTP/1.1\r\nHost: x\r\n%s" % (method, path, extra)
    if body or method == "POST":
        head += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
    return head.encode() + b"\r\n" + body


def read_response(s):
    """The whole response (headers, then Content-Length bytes or chunks up to
    the end of the connection): (status, headers dict, body), or None when
    the connection ended before a status line (a dropped connection)."""
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            d = s.recv(65536)
        except (ConnectionResetError, socket.timeout, OSError):
            return None
        if not d:
            return None
        data += d
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hdr = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
    n = int(hdr.get("content-length", "-1"))
    while n < 0 or len(rest) < n:
        try:
            d = s.recv(65536)
        except (ConnectionResetError, socket.timeout, OSError):
            break
        if not d:
            break
        rest += d
    return status, hdr, rest[:n] if n >= 0 else rest


def get(port, path, src="127.0.0.1", timeout=10.0):
    s = connect(port, src, timeout)
    s.sendall(request("GET", path, extra="Connection: close\r\n"))
    r = read_response(s)
    s.close()
    return r


def post(port, path, obj, src="127.0.0.1", timeout=30.0, raw=None):
    s = connect(port, src, timeout)
    s.sendall(request("POST", path, raw if raw is not None else json.dumps(obj).encode(), "Connection: close\r\n"))
    r = read_response(s)
    s.close()
    return r


def metric(port, name):
    r = get(port, "/metrics")
    for line in (r[2].decode() if r else "").splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def closed_by_server(s, within):
    """True if the server ends connection s (EOF or reset, no response) within `within` seconds."""
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except (socket.timeout, OSError):
        return False


def raise_nofile(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def health_latency(port, n=5):
    worst, codes = 0.0, []
    for _ in range(n):
        t = time.monotonic()
        r = get(port, "/health", timeout=5)
        worst = max(worst, time.monotonic() - t)
        codes.append(r[0] if r else None)
        time.sleep(0.1)
    return worst, codes


def flood(port, read_timeout, busy_timeout):
    """Idle and trickling (slowloris) connections from 8 addresses, past
    both --max-conns and --max-conns-per-ip; /health must answer within 1 s,
    a completion gets a fast 503; then every flooding connection is closed by
    its deadline."""
    raise_nofile(4096)
    socks = []
    for a in range(2, 10):
        for _ in range(40):
            socks.append(connect(port, "127.0.0.%d" % a))
    slow = []
    for _ in range(20):
        s = connect(port, "127.0.0.10")
        s.sendall(b"GET /health HTTP/1.1\r\n")
        slow.append(s)
    stop = threading.Event()

    def trickle():  # one header byte per connection every 0.3 s: never a whole request
        while not stop.wait(0.3):
            for s in slow:
                try:
                    s.sendall(b"X")
                except OSError:
                    pass
    th = threading.Thread(target=trickle)
    th.start()
    time.sleep(0.3)
    worst, codes = health_latency(port)
    figure("health_latency_idle_flood_s", "%.3f" % worst)
    check(codes == [200] * 5 and worst < 1.0,
          "%d idle and 20 trickling connections past the limits: GET /health answers 200 within 1 s (worst %.3f s, %s)"
          % (len(socks), worst, codes))
    t = time.monotonic()
    r = post(port, "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 4})
    dt = time.monotonic() - t
    check(r is not None and r[0] == 503 and json.loads(r[2])["error"]["code"] == "server_busy"
          and r[1].get("connection") == "close" and "retry-after" in r[1] and dt < 1.0,
          "a completion past --max-conns: a fast 503 server_busy with Connection: close and Retry-After (%s in %.3f s)"
          % (r and r[0], dt))
    busy = metric(port, "cortex_http_connections_busy_total")
    check(busy is not None and busy >= len(socks) - 64, "/metrics counts the busy connections (%s)" % busy)
    # every flooding connection is closed by the server: served ones at --read-timeout, busy ones at --busy-timeout
    deadline = time.monotonic() + read_timeout + 5
    closed = sum(closed_by_server(s, max(0.05, deadline - time.monotonic())) for s in socks)
    stop.set()
    th.join()
    closed_slow = sum(closed_by_server(s, max(0.05, deadline - time.monotonic())) for s in slow)
    check(closed == len(socks), "idle connections closed by the server within --read-timeout %gs (+5 s): %d of %d"
          % (read_timeout, closed, len(socks)))
    check(closed_slow == len(slow), "trickling connections closed too (a request must be whole in time): %d of %d"
          % (closed_slow, len(slow)))
    for s in socks + slow:
        s.close()
    time.sleep(0.3)
    n_open = metric(port, "cortex_http_connections_open")
    check(n_open is not None and n_open <= 2, "every connection freed: cortex_http_connections_open %s" % n_open)
    tmo = metric(port, "cortex_http_connections_timed_out_total")
    check(tmo is not None and tmo >= len(socks) + len(slow), "/metrics counts them: timed_out_total %s" % tmo)


def fairness(port):
    """One address holding more than its share does not shut out another."""
    socks = [connect(port, "127.0.0.2") for _ in range(60)]
    time.sleep(0.2)
    r = post(port, "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 4}, src="127.0.0.3")
    check(r is not None and r[0] == 200, "60 idle connections from 127.0.0.2 (--max-conns-per-ip 16): a client at "
          "127.0.0.3 still gets 200 (%s)" % (r and r[0]))
    r = post(port, "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 4}, src="127.0.0.2")
    check(r is not None and r[0] == 503, "... and 127.0.0.2's next request gets 503 (%s)" % (r and r[0]))
    for s in socks:
        s.close()


def truncated(port, read_timeout):
    """Content-Length 100, 29 bytes sent: the connection is closed at the deadline."""
    s = connect(port)
    body = b'{"prompt": "Once upon a time"'  # 29 bytes
    s.sendall(request("POST", "/v1/completions", b"")[:-2].replace(b"Content-Length: 0", b"Content-Length: 100")
              + b"\r\n" + body)
    t = time.monotonic()
    ok = closed_by_server(s, read_timeout + 5)
    dt = time.monotonic() - t
    check(ok and dt < read_timeout + 5, "a truncated body (Content-Length 100, 29 bytes sent) is closed within "
          "--read-timeout %gs (+5 s): after %.2f s" % (read_timeout, dt))
    s.close()
    time.sleep(0.3)
    n_open = metric(port, "cortex_http_connections_open")
    check(n_open is not None and n_open <= 1, "... and its connection is freed (open %s)" % n_open)


def burst(port, n, n_addr):
    """n clients at once from n_addr addresses: each gets 200 or 503, none a dropped connection."""
    have = raise_nofile(n + 256)
    if have < n + 64:
        n = have - 64
        print("# the file limit (%d) allows only %d clients" % (have, n))
    results = [None] * n
    go = threading.Barrier(n)

    def one(i):
        try:
            s = connect(port, "127.0.0.%d" % (1 + i % n_addr), timeout=60)
        except OSError as e:
            results[i] = "connect: %s" % e
            go.wait()
            return
        go.wait()
        try:
            s.sendall(request("POST", "/v1/completions", json.dumps({"prompt": "Once upon a time", "max_tokens": 2})
                              .encode(), "Connection: close\r\n"))
            r = read_response(s)
            results[i] = r[0] if r else "dropped"
        except OSError as e:
            results[i] = "error: %s" % e
        s.close()
    run_all(one, n)
    counts = {}
    for r in results:
        counts[r] = counts.get(r, 0) + 1
    figure("burst_counts", json.dumps({str(k): v for k, v in counts.items()}, sort_keys=True))
    check(set(counts) <= {200, 503} and counts.get(200, 0) > 0,
          "%d concurrent clients: each got 200 or 503, none a dropped connection (%s)" % (n, counts))


def rss(pid, key="VmRSS"):
    for line in open("/proc/%d/status" % pid):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def big_prompts(port, pid, n, size, bound_mb, asan=False):
    """n concurrent prompts of `size` bytes, each refused with 400 before it
    is tokenized; peak RSS within the bound over the start, and back after."""
    before = rss(pid)
    peak = [before]
    stop = threading.Event()

    def sample():
        while not stop.wait(0.005):
            try:
                peak[0] = max(peak[0], rss(pid))
            except OSError:
                return
    sm = threading.Thread(target=sample)
    sm.start()
    text = ("Once upon a time " * (size // 17 + 1))[:size]
    out = [None] * n

    def one(i):
        r = post(port, "/v1/completions", {"prompt": text, "max_tokens": 4}, timeout=60)
        out[i] = (r[0], json.loads(r[2])["error"]) if r else None
    run_all(one, n)
    time.sleep(0.5)
    stop.set()
    sm.join()
    after = rss(pid)
    figure("rss_mb_before", "%.1f" % before)
    figure("rss_mb_peak", "%.1f" % peak[0])
    figure("rss_mb_after", "%.1f" % after)
    ok = all(o and o[0] == 400 and o[1]["code"] == "context_length_exceeded" and "bytes" in o[1]["message"] for o in out)
    check(ok, "%d concurrent %d-byte prompts: 400 context_length_exceeded naming the limit in bytes (%s)"
          % (n, size, out[0] and out[0][1]["message"]))
    if asan:
        print("# RSS not checked under AddressSanitizer")
    else:
        check(peak[0] - before < bound_mb, "RSS peak %.1f MB over a start of %.1f MB: within the bound of %d MB"
              % (peak[0], before, bound_mb))
        check(after - before < 16, "RSS after the load %.1f MB (start %.1f MB): the memory is returned (< 16 MB kept)"
              % (after, before))
    r = [None] * n

    def huge(i):  # as curl sends a large body: Expect: 100-continue, so the 413 comes before the body is sent
        s = connect(port, timeout=60)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n"
                  % (3 << 20))
        r[i] = read_response(s)
        s.close()
    run_all(huge, n)
    check(all(x and x[0] == 413 for x in r), "%d concurrent 3 MB bodies past --max-body: 413 (%s)"
          % (n, [x and x[0] for x in r][:4]))


def half_close(port, n):
    """The client sends its request and shuts its sending side (`nc -N`): it gets its answer."""
    ok = 0
    for _ in range(n):
        s = connect(port)
        s.sendall(request("POST", "/v1/completions", json.dumps({"prompt": "Once upon a time", "max_tokens": 30,
                                                                  "ignore_eos": True}).encode()))
        s.shutdown(socket.SHUT_WR)
        r = read_response(s)
        s.close()
        ok += bool(r and r[0] == 200 and json.loads(r[2])["usage"]["completion_tokens"] == 30)
    check(ok == n, "half-closed clients (shutdown(SHUT_WR) after the request) get their whole answer: %d of %d" % (ok, n))


def drain(port, pid_file, n_req, n_idle, drain_timeout):
    """SIGTERM under load: admitted requests complete, idle and uploading
    connections are closed at once, the process exits within --drain-timeout."""
    import os
    import signal
    pid = int(open(pid_file).read())
    res = [None] * n_req

    def one(i):
        res[i] = post(port, "/v1/completions", {"prompt": "hello", "max_tokens": 200, "ignore_eos": True}, timeout=60)
    ths = [threading.Thread(target=one, args=(i,)) for i in range(n_req)]
    for t in ths:
        t.start()
    idle = [connect(port) for _ in range(n_idle)]
    up = connect(port)  # a stalled upload: 10 of 1000 bytes
    up.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"prompt\":")
    for _ in range(200):  # until every request runs or waits
        m = (metric(port, "cortex_requests_running") or 0) + (metric(port, "cortex_requests_waiting") or 0)
        if m >= n_req:
            break
        time.sleep(0.02)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    closed = sum(closed_by_server(s, 1.0) for s in idle + [up])
    t_closed = time.monotonic() - t0
    check(closed == n_idle + 1, "SIGTERM: %d idle connections and a stalled upload closed at once (%d in %.2f s)"
          % (n_idle, closed, t_closed))
    for t in ths:
        t.join()
    # the shell waits for the process and checks its exit status
    t_done = time.monotonic() - t0
    figure("drain_s", "%.2f" % t_done)
    ok = sum(bool(r and r[0] == 200 and json.loads(r[2])["usage"]["completion_tokens"] == 200) for r in res)
    check(ok == n_req, "the %d admitted requests complete with 200 and all their tokens (%d); drained in %.2f s "
          "(--drain-timeout %g)" % (n_req, ok, t_done, drain_timeout))
    for s in idle + [up]:
        s.close()


def drain_cut(port, pid_file, drain_timeout):
    """A request longer than --drain-timeout is cancelled at it: the drain is bounded."""
    import os
    import signal
    pid = int(open(pid_file).read())
    res = [None]

    def one():
        res[0] = post(port, "/v1/completions", {"prompt": "hello", "max_tokens": 100000, "ignore_eos": True},
                      timeout=60)
    th = threading.Thread(target=one)
    th.start()
    for _ in range(200):
        if (metric(port, "cortex_requests_running") or 0) >= 1:
            break
        time.sleep(0.02)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    th.join()
    dt = time.monotonic() - t0
    figure("drain_cut_s", "%.2f" % dt)
    check(res[0] is not None and dt < drain_timeout + 3,
          "a request running past --drain-timeout %gs is cancelled: answered (%s) %.2f s after SIGTERM"
          % (drain_timeout, res[0] and res[0][0], dt))


if __name__ == "__main__":
    sc, port, args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    if sc == "flood":
        flood(port, float(args[0]), float(args[1]))
    elif sc == "fairness":
        fairness(port)
    elif sc == "truncated":
        truncated(port, float(args[0]))
    elif sc == "burst":
        burst(port, int(args[0]), int(args[1]))
    elif sc == "big":
        big_prompts(port, int(args[0]), int(args[1]), int(args[2]), int(args[3]), len(args) > 4 and args[4] == "asan")
    elif sc == "halfclose":
        half_close(port, int(args[0]))
    elif sc == "drain":
        drain(port, args[0], int(args[1]), int(args[2]), float(args[3]))
    elif sc == "drain_cut":
        drain_cut(port, args[0], float(args[1]))
