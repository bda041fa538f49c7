#!/usr/bin/python3
"""Independent check of the Q4_K / Q6_K byte layouts against the ggml spec.

A numpy dequantizer written from ggml's ggml-common.h / dequantize_row_q4_K /
dequantize_row_q6_K (QK_K = 256), compared with what the C engine makes of the
same bytes: `build/tests/kquant_dump` (env KQUANT_DUMP overrides; tests/tools/
kquant_dump.c) writes random valid blocks, the engine's dequantized floats, an
activation row and the engine's scalar dot; here the floats must match bit for
bit (same float32 operations in the same order) and the dot must equal the
float64 dot of these weights with the activations within 1e-5 of
sum |w parts| * |x|.

Output: `ok - name` / `FAIL - name: detail` lines, a last line `N passed, M
failed`; exit status 1 on any failure.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:  # only Debian's python has numpy here: re-exec with it
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != "/usr/bin/python3":
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

QK_K = 256
MAGIC = 0x5044514B
TYPES = {12: ("q4_K", 144), 14: ("q6_K", 210)}
F32 = np.float32


def q4_k_parts(blocks):
    """Q4_K blocks (nb x 144 uint8) -> (d*sc*q, dmin*m) per weight, each (nb, 256) float32.

    Layout: f16 d, f16 dmin, u8 scales[12], u8 qs[128]. Sub-block j < 4: scale =
    scales[j] & 63, min = scales[j+4] & 63; j >= 4: scale = (scales[j+4] & 15) |
    (scales[j-4] >> 6) << 4, min = (scales[j+4] >> 4) | (scales[j] >> 6) << 4.
    qs chunk c (32 bytes) holds sub-block 2c in low nibbles, 2c+1 in high nibbles.
    """
    d = blocks[:, 0:2].copy().view("<f2").astype(F32)      # (nb, 1)
    dmin = blocks[:, 2:4].copy().view("<f2").astype(F32)
    s = blocks[:, 4:16].astype(np.int32)
    sc = np.zeros((len(blocks), 8), np.int32)
    mn = np.zeros((len(blocks), 8), np.int32)
    for j in range(8):
        if j < 4:
            sc[:, j] = s[:, j] & 63
            mn[:, j] = s[:, j + 4] & 63
        else:
            sc[:, j] = (s[:, j + 4] & 0xF) | ((s[:, j - 4] >> 6) << 4)
            mn[:, j] = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
    qs = blocks[:, 16:144].reshape(-1, 4, 32)
    q = np.empty((len(blocks), 8, 32), np.int32)
    q[:, 0::2, :] = qs & 0xF
    q[:, 1::2, :] = qs >> 4
    d1 = (d * sc.astype(F32)).astype(F32)                  # (nb, 8): d * scale, rounded to float32
    m1 = (dmin * mn.astype(F32)).astype(F32)
    wq = (d1[:, :, None] * q.astype(F32)).astype(F32).reshape(-1, QK_K)
    wm = np.repeat(m1, 32, axis=1).astype(F32)
    return wq, wm


def q6_k_parts(blocks):
    """Q6_K blocks (nb x 210 uint8) -> (d*scale*(q-32), 0) per weight.

    Layout: u8 ql[128], u8 qh[64], i8 scales[16], f16 d. Half h (128 weights) uses
    ql[64h:64h+64], qh[32h:32h+32]; for l < 32:
      y[l]    = ql[l] & 15    | ((qh[l] >> 0) & 3) << 4
      y[l+32] = ql[l+32] & 15 | ((qh[l] >> 2) & 3) << 4
      y[l+64] = ql[l] >> 4    | ((qh[l] >> 4) & 3) << 4
      y[l+96] = ql[l+32] >> 4 | ((qh[l] >> 6) & 3) << 4
    minus 32, times d * scales[i // 16].
    """
    nb = len(blocks)
    ql = blocks[:, 0:128].astype(np.int32)
    qh = blocks[:, 128:192].astype(np.int32)
    scales = blocks[:, 192:208].copy().view(np.int8).astype(F32)
    d = blocks[:, 208:210].copy().view("<f2").astype(F32)
    q = np.empty((nb, QK_K), np.int32)
    for h in range(2):
        L, H = ql[:, 64 * h:64 * h + 64], qh[:, 32 * h:32 * h + 32]
        base = 128 * h
        q[:, base + 0:base + 32] = (L[:, 0:32] & 15) | (((H >> 0) & 3) << 4)
        q[:, base + 32:base + 64] = (L[:, 32:64] & 15) | (((H >> 2) & 3) << 4)
        q[:, base + 64:base + 96] = (L[:, 0:32] >> 4) | (((H >> 4) & 3) << 4)
        q[:, base + 96:base + 128] = (L[:, 32:64] >> 4) | (((H >> 6) & 3) << 4)
    ds = (d * scales).astype(F32)                          # (nb, 16)
    wq = (np.repeat(ds, 16, axis=1) * (q - 32).astype(F32)).astype(F32)
    return wq, np.zeros_like(wq)


def read_sections(path):
    """Parse a kquant_dump file into a list of dicts."""
    raw = open(path, "rb").read()
    pos = 0

    def take(n, dtype, count):
        nonlocal pos
        a = np.frombuffer(raw, dtype=dtype, count=count, offset=pos)
        pos += n
        return a

    magic, nsec = take(8, "<u4", 2)
    if magic != MAGIC:
        raise ValueError("bad magic %#x" % magic)
    out = []
    for _ in range(nsec):
        typ, nb = (int(v) for v in take(8, "<u4", 2))
        name, bs = TYPES[typ]
        n = nb * QK_K
        sec = {"type": typ, "name": name}
        sec["blocks"] = take(nb * bs, np.uint8, nb * bs).reshape(nb, bs)
        sec["w"] = take(4 * n, "<f4", n)
        sec["codes"] = take(n, np.int8, n)
        sec["ad"] = take(4 * nb, "<f4", nb)
        sec["dot"] = float(take(4, "<f4", 1)[0])
        out.append(sec)
    if pos != len(raw):
        raise ValueError("%d trailing bytes" % (len(raw) - pos))
    return out


def main():
    """Run the dump tool, dequantize its blocks here, compare."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    tool = os.environ.get("KQUANT_DUMP") or os.path.join(repo, os.environ.get("BUILD", "build"), "tests", "kquant_dump")
    passed = failed = 0

    def check(name, ok, detail=""):
        nonlocal passed, failed
        if ok:
            passed += 1
            print("ok - %s" % name)
        else:
            failed += 1
            print("FAIL - %s: %s" % (name, detail))
        return ok

    with tempfile.TemporaryDirectory(prefix="cortex-kquant-") as tmp:
        for seed in (1, 2, 3):
            out = os.path.join(tmp, "dump%d.bin" % seed)
            try:
                p = subprocess.run([tool, out, str(seed)], stderr=subprocess.PIPE, timeout=120)
                rc, err = p.returncode, p.stderr.decode("utf-8", "replace").strip()
            except OSError as e:
                rc, err = 127, str(e)
            if not check("kquant_dump seed %d runs" % seed, rc == 0, "%s: exit %d: %s" % (tool, rc, err)):
                continue
            for sec in read_sections(out):
                label = "%s seed %d (%d blocks)" % (sec["name"], seed, len(sec["blocks"]))
                parts = q4_k_parts if sec["type"] == 12 else q6_k_parts
                wq, wm = parts(sec["blocks"])
                ref = (wq - wm).astype(F32).reshape(-1)    # q4_K: d*sc*q - dmin*m, one rounding
                got = sec["w"]
                same = ref.view(np.uint32) == got.view(np.uint32)
                bad = np.nonzero(~same)[0]
                check("%s: dequantized weights bit-identical" % label, len(bad) == 0,
                      "%d differ, first at %d: C %r, ref %r" % (len(bad), bad[0], got[bad[0]], ref[bad[0]])
                      if len(bad) else "")
                x = np.repeat(sec["ad"].astype(np.float64), QK_K) * sec["codes"].astype(np.float64)
                want = float(np.dot(wq.reshape(-1).astype(np.float64) - wm.reshape(-1).astype(np.float64), x))
                mag = float(np.dot(np.abs(wq.reshape(-1)).astype(np.float64) + np.abs(wm.reshape(-1)), np.abs(x)))
                check("%s: scalar dot within 1e-5 of the magnitude" % label,
                      abs(sec["dot"] - want) <= 1e-5 * mag,
                      "C %r, ref %r, magnitude %r" % (sec["dot"], want, mag))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
