#!/usr/bin/python3
"""Mixture of experts and GPT-OSS: the numpy reference's self-test, and the engine against it.

The models are written by tests/tools/make_moe_models.py (a Mixtral-style
`llama` with experts and a `gpt-oss`, each as F32 and with MXFP4 experts); the
reference is tests/reference/llama_ref.py. Where each formula comes from (by
file and function name in ik_llama.cpp / ggml):

  routing        src/llama-build-context.cpp llm_build_moe_ffn: llama (build_llama)
                 softmax over all experts, top-k, weights renormalised (norm_w);
                 gpt-oss (build_openai_moe) router bias, top-k of the logits,
                 softmax over the k (SOFTMAX_WEIGHT); expert biases by ggml_add_id,
                 the down bias before the weighting -> llama_ref.route, Transformer.moe
  clamped SwiGLU ggml/src/ggml.c ggml_compute_forward_swiglu_oai_f32 (alpha 1.702,
                 limit 7: gate min(g, 7), up clamp(u, -7, 7), times (u + 1))
                 -> llama_ref.swiglu_oai
  sinks          ggml.c ggml_compute_forward_soft_max_f32 (src[2]) and the flash
                 attention's sinks correction: the sink joins max and denominator
                 -> llama_ref.attend
  sliding window src/graphs/build_openai.cpp (pattern 2: layer il slides when il % 2
                 == 0), src/llama.cpp's KQ mask (masked when pos - p >= n_swa),
                 window from gpt-oss.attention.sliding_window -> Transformer.attention
  YaRN RoPE      ggml.c ggml_rope_yarn_corr_dims, rope_yarn_ramp, rope_yarn;
                 src/llama.cpp (ext_factor 1 for yarn; attn_factor from
                 rope.scaling.attn_factor); NeoX pairs for gpt-oss (llama_rope_type)
                 -> llama_ref.yarn_params, rope
  shapes, names  src/llama-load-tensors.cpp create_llama_tensors,
                 create_openai_moe_tensors; src/llama-model.cpp tensor names
                 (post_attention_norm, attn_sinks, ffn_*_exps) -> llama_ref.load_gguf

Part 1, the reference alone (always runs): each operator against its
definition (sinks of -inf are plain softmax; a window as long as the context is
full attention; YaRN with factor 1 is plain RoPE and its ramp keeps the high
frequencies and scales the low ones; top-k with k = n_expert and the Mixtral
weighting is the dense mixture; both weightings agree; the clamped SwiGLU at
chosen points); the MXFP4 expert tensors (written here, read through
mxfp4_ref.dequantize) equal their F32 twins bit for bit and give the same
logits; the models exercise what they must (every expert picked in every layer,
the clamp reached, no routing or greedy near-tie, the window crossed); each
gpt-oss feature moves the logits by far more than the comparison's tolerance;
malformed files (missing sinks, wrong expert count or shape) get a clear error.

Part 2, the engine (`build/tests/dump_logits`, env DUMP_LOGITS) on each model,
greedy over the 64-token context, at 1 and 2 threads: F32 models within 1e-4
of the reference with the same greedy tokens (test_reference.compare_dumps);
MXFP4 models by mxfp4_ref.compare_logits (the reference teacher-forced on the
engine's tokens, rounding the experts' inputs as the engine rounds activations
for 32-weight blocks: within 1e-4 up to the first ambiguous rounding, within
MXFP4_TOL after it; MXFP4_TOL is about three times what rounding every
ambiguous value the other way does, measured on these models). The engine
refusing a model is a failure.

Checked once by hand against ik_llama.cpp itself (its build in
/work/peers/ik/build, driven through libllama by a throwaway program, flash
attention with its f16 KV cache; not part of the tests): gptoss-f32 greedy
logits within 3.7e-3 of the reference (the f16 cache's noise), while window 7
or 9, odd layers sliding, YaRN without mscale or without the ramp each put it
1 to 4 away; gptoss-mxfp4 within 0.06 (ik's own activation rounding). For
mixtral-f32 the reference matches within 4.8e-3 only after emulating two
things of that checkout: its first lone-BOS evaluation is a warm-up that runs
every expert (llm_build_context, is_warming_up), and build_llama's MoE branch
adds the normed input instead of the residual (llm_build_moe_ffn with
add_input while `cur + ffn_inp` is commented out), which we take for a bug:
the reference keeps the residual x + moe(norm(x)), as for dense layers.

Needs ../shared/models/stories260K.gguf (its vocabulary), else $CORTEX_MODELS;
without it prints SKIP (CI=true: a failure). Output: `ok - name` / `FAIL - name:
detail` lines, a last line `N passed, M failed`; exit 1 on any failure.
"""
import copy
import os
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != "/usr/bin/python3":
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
for d in (os.path.join(HERE, "reference"), os.path.join(HERE, "tools"), HERE):
    sys.path.insert(0, d)
sys.dont_write_bytecode = True
import llama_ref          # noqa: E402
import make_moe_models as mm  # noqa: E402
import mxfp4_ref          # noqa: E402
import test_reference     # noqa: E402 (Results, run_cmd, compare_dumps)

DUMP_LOGITS = os.environ.get("DUMP_LOGITS") or os.path.join(REPO, os.environ.get("BUILD", "build"), "tests",
                                                              "dump_logits")
TOL = 1e-4
MXFP4_TOL = {"mixtral": 0.05, "gptoss": 0.1}  # rounding all ambiguous codes the other way: 0.018, 0.030
FEATURE_STEPS = 24


def forced(model, tokens):
    """Reference logits (float64) teacher-forced on tokens, and the Transformer (for its stats)."""
    tr = llama_ref.Transformer(model)
    return np.array([tr.forward(int(t), i) for i, t in enumerate(tokens)]), tr


# ----------------------------------------------------------------------------
# Part 1: the reference alone
# ----------------------------------------------------------------------------

def check_operators(res):
    """Each new operator against its definition, on random inputs."""
    rng = np.random.default_rng(3)
    q, keys, vals = rng.standard_normal(32), rng.standard_normal((9, 32)), rng.standard_normal((9, 32))
    plain = llama_ref.attend(q, keys, vals)
    res.check("attend: a sink of -inf is plain softmax", np.allclose(llama_ref.attend(q, keys, vals, -np.inf), plain,
                                                                     rtol=0, atol=1e-15))
    scores = keys @ q / np.sqrt(32)
    for sink in (-2.0, 0.5, 30.0):
        p = llama_ref.softmax(np.append(scores, sink))[:-1]  # the sink's own share goes to no value
        res.check("attend: sink %g is one more softmax logit with no value" % sink,
                  np.allclose(llama_ref.attend(q, keys, vals, sink), p @ vals, rtol=0, atol=1e-14))

    # YaRN
    x = rng.standard_normal((3, 32))
    for neox in (False, True):
        y1 = llama_ref.yarn_params(32, 10000.0, 1.0, 256, 32.0, 1.0, 1.0)
        d = np.abs(llama_ref.rope(x, 37, 32, 10000.0, neox, 1.0, None, y1) - llama_ref.rope(x, 37, 32, 10000.0, neox))
        res.check("YaRN with factor 1 is plain RoPE (neox %s; max diff %.2g)" % (neox, d.max()), d.max() < 1e-12)
    y = llama_ref.yarn_params(32, 10000.0, 0.25, 256, 32.0, 1.0, 1.0)
    res.check("YaRN corr dims for d 32, base 1e4, orig 256: pairs 0..7 blend (low %g, high %g)" % (y["low"], y["high"]),
              y["low"] == 0 and y["high"] == 7)
    g = llama_ref.yarn_params(64, 150000.0, 1 / 32.0, 4096, 32.0, 1.0, 1.0)  # the real gpt-oss-20b's values
    res.check("YaRN corr dims for gpt-oss-20b (d 64, base 1.5e5, orig 4096): low %g, high %g, mscale %.4f"
              % (g["low"], g["high"], g["mscale"]), g["low"] == 8 and g["high"] == 18 and
              abs(g["mscale"] - (1 + 0.1 * np.log(32))) < 1e-15)
    unit = np.zeros((1, 32))
    unit[0, 0::2] = 1.0  # every pair (2i, 2i+1) = (1, 0): the output pair is mscale (cos t_i, sin t_i)
    out = llama_ref.rope(unit, 50, 32, 10000.0, False, 0.25, None, y)
    theta = np.arctan2(out[0, 1::2], out[0, 0::2])
    base_t = 50 * 10000.0 ** (-2.0 * np.arange(16) / 32)
    res.check("YaRN: pair 0 keeps its angle, pairs past high are scaled by 1/factor, rotations scaled by mscale",
              abs(theta[0] - np.angle(np.exp(1j * base_t[0]))) < 1e-12 and
              np.allclose(theta[8:], base_t[8:] * 0.25, rtol=1e-12) and
              np.allclose(np.hypot(out[0, 0::2], out[0, 1::2]), 1 + 0.1 * np.log(4), rtol=1e-14))

    # routing
    logits = rng.standard_normal(6) * 2
    sel, w = llama_ref.route(logits, 6, "llama")
    res.check("top-k with k = n_expert, softmax over all: the dense mixture's weights",
              np.allclose(w, llama_ref.softmax(logits)[sel], rtol=0, atol=1e-15) and sorted(sel) == list(range(6)))
    ok = True
    for k in (1, 2, 3, 5):
        sa, wa = llama_ref.route(logits, k, "llama")
        sb, wb = llama_ref.route(logits, k, "gpt-oss")
        ok &= list(sa) == list(sb) == list(np.argsort(-logits)[:k]) and np.allclose(wa, wb, rtol=0, atol=1e-15)
    res.check("Mixtral weighting (softmax, top-k, renormalise) == gpt-oss weighting (top-k, softmax) for k 1..5", ok)

    # clamped SwiGLU
    sig = lambda v: 1 / (1 + np.exp(-v))
    got = llama_ref.swiglu_oai(np.array([10.0, 2.0, -3.0, 7.0]), np.array([-9.0, 0.0, 8.0, 6.5]))
    want = np.array([7 * sig(1.702 * 7) * -6, 2 * sig(1.702 * 2) * 1, -3 * sig(-1.702 * 3) * 8, 7 * sig(1.702 * 7) * 7.5])
    res.check("clamped SwiGLU: gate min 7, up clamp +-7, times (up + 1), sigmoid(1.702 gate)",
              np.allclose(got, want, rtol=1e-15, atol=0))


def check_models(res, paths):
    """The written models: MXFP4 against twins, what the models exercise, each feature's effect."""
    for stem in ("mixtral", "gptoss"):
        _, tq = llama_ref.read_gguf(paths[stem + "-mxfp4"])
        _, tf = llama_ref.read_gguf(paths[stem + "-f32"])
        names = [n for n in tq if n.endswith(mm.EXPERT_TENSORS)]
        same = all(np.array_equal(tq[n].view(np.uint32), tf[n].view(np.uint32)) for n in tf)
        res.check("%s: MXFP4 expert tensors (%d, 3-D) dequantize to the f32 twin's, bit for bit" % (stem, len(names)),
                  same and len(names) == 3 * (2 if stem == "mixtral" else 3) and tq[names[0]].ndim == 3)
        mq, mf = llama_ref.load_model(paths[stem + "-mxfp4"]), llama_ref.load_model(paths[stem + "-f32"])
        res.check("%s: the reference marks the MXFP4 expert matrices" % stem,
                  {a for _, a in mq.mxfp4} == {"gate_exps", "up_exps", "down_exps"} and not mf.mxfp4)
        toks, _, lf = llama_ref.run(mf, 16)
        lq = llama_ref.run(mq, 16, toks)[2]
        res.check("%s: MXFP4 file == f32 twin's logits without activation rounding" % stem, np.array_equal(lf, lq))
    # the quantizer against the dequantizer
    x = np.random.default_rng(4).standard_normal(32 * 64) * np.repeat(np.exp(np.linspace(-8, 8, 64)), 32)
    back = mxfp4_ref.dequantize(mm.quantize_mxfp4(x), x.size).astype(np.float64)
    amax = np.repeat(np.abs(x).reshape(-1, 32).max(axis=1), 32)
    res.check("MXFP4 writer: each value within a quarter of its block's max after dequantization",
              np.all(np.abs(back - x) <= 0.25 * amax) and np.all(np.abs(back).reshape(-1, 32).max(axis=1) > 0))

    for stem in ("mixtral", "gptoss"):
        m = llama_ref.load_model(paths[stem + "-f32"])
        c = m.config
        toks, nexts, logits = llama_ref.run(m, c.seq_len)
        _, tr = forced(m, toks)
        used = tr.stats["experts"]
        top2 = np.sort(logits, axis=1)[:, -2:]
        res.check("%s: every expert of every layer picked over the greedy run (min %d of %d tokens)"
                  % (stem, used.min(), c.seq_len), used.shape == (c.n_layers, 4) and used.min() >= 3)
        res.check("%s: no routing near-tie (k-th vs (k+1)-th logit >= %.3g)" % (stem, tr.stats["route_margin"]),
                  tr.stats["route_margin"] > 1e-3)
        # within TOL of the reference, an engine cannot pick another greedy token
        res.check("%s: no greedy near-tie (top-2 margin %.3g > 2 x %g)" % (stem, (top2[:, 1] - top2[:, 0]).min(), TOL),
                  (top2[:, 1] - top2[:, 0]).min() > 2 * TOL)
        res.check("%s: the greedy run varies (%d distinct tokens)" % (stem, len(set(toks.tolist()))),
                  len(set(toks.tolist())) >= 6)
        if stem == "gptoss":
            res.check("gptoss: the clamped SwiGLU cuts %d gate/up values" % tr.stats["clamped"],
                      tr.stats["clamped"] >= 50)
            res.check("gptoss: heads of %d over d_model %d / %d heads; window %d < context %d"
                      % (c.head_dim, c.dim, c.n_heads, c.swa_window, c.seq_len),
                      c.head_dim != c.dim // c.n_heads and c.swa_window < c.seq_len and c.rope_neox and
                      c.rope_yarn is not None)
            check_features(res, m, toks[:FEATURE_STEPS])


def check_features(res, model, toks):
    """Each gpt-oss feature, taken away, moves the logits by > 100 x TOL (so the
    engine comparison sees it); a window as long as the context is full attention."""
    base, _ = forced(model, toks)

    def without(name, change):
        m = copy.deepcopy(model)
        undo = change(m)
        d = np.abs(forced(m, toks)[0] - base).max()
        if undo:
            undo()
        res.check("gptoss: without %s the logits move by %.3g > %g" % (name, d, 100 * TOL), d > 100 * TOL)

    def layers(**attrs):
        def change(m):
            for l in m.layers:
                for k, v in attrs.items():
                    setattr(l, k, v)
        return change

    def patch_swiglu(fn):
        def change(m):
            orig = llama_ref.swiglu_oai
            llama_ref.swiglu_oai = fn
            return lambda: setattr(llama_ref, "swiglu_oai", orig)
        return change

    sig = lambda v: 1 / (1 + np.exp(-v))
    without("sinks", layers(sinks=None))
    without("the sliding window", lambda m: setattr(m.config, "swa_window", 0))
    without("YaRN (plain RoPE)", lambda m: m.config.__dict__.update(rope_yarn=None, rope_scale=1.0))
    without("NeoX pairs", lambda m: setattr(m.config, "rope_neox", False))
    without("Q/K/V biases", layers(bq=None, bk=None, bv=None))
    without("the output bias", layers(bo=None))
    without("the router bias", layers(router_b=None))
    without("expert biases", layers(gate_exps_b=None, up_exps_b=None, down_exps_b=None))
    without("the clamp", patch_swiglu(lambda g, u: g * sig(1.702 * g) * (u + 1)))
    without("the +1 on up", patch_swiglu(lambda g, u: np.minimum(g, 7) * sig(1.702 * np.minimum(g, 7))
                                         * np.clip(u, -7, 7)))
    m = copy.deepcopy(model)
    m.config.swa_window = m.config.seq_len
    full = copy.deepcopy(model)
    full.config.swa_window = 0
    res.check("gptoss: a window as long as the context is full attention",
              np.array_equal(forced(m, toks)[0], forced(full, toks)[0]))


def check_errors(res, tmp, vocab):
    """Malformed gpt-oss / Mixtral files: the reference's loader names the problem."""
    vocab_kv, n_vocab = mm.read_vocab(vocab)

    def write(name, shape, edit_w=None, edit_kv=None):
        w = mm.weights(shape, n_vocab, np.random.default_rng(1))
        kv = mm.metadata(shape, vocab_kv, name)
        if edit_w:
            edit_w(w)
        if edit_kv:
            kv = edit_kv(kv)
        path = os.path.join(tmp, name + ".gguf")
        mm.write_gguf(path, kv, [(n, a.shape, mm.GGML_F32, np.ascontiguousarray(a, "<f4").tobytes())
                                 for n, a in w.items()])
        return path

    def kv_set(key, value):
        return lambda kv: [(k, t, value if k == key else v) for k, t, v in kv]

    cases = [
        ("no-sinks", mm.GPTOSS, lambda w: w.pop("blk.1.attn_sinks.weight"), None, "blk.1.attn_sinks.weight"),
        ("three-experts", mm.GPTOSS, lambda w: w.update({"blk.0.ffn_up_exps.weight": w["blk.0.ffn_up_exps.weight"][:3]}),
         None, "blk.0.ffn_up_exps.weight has shape (3, 64, 64), expected (4, 64, 64)"),
        ("down-transposed", mm.MIXTRAL, lambda w: w.update(
            {"blk.1.ffn_down_exps.weight": np.ascontiguousarray(w["blk.1.ffn_down_exps.weight"].transpose(0, 2, 1))}),
         None, "blk.1.ffn_down_exps.weight has shape (4, 96, 64), expected (4, 64, 96)"),
        ("used-too-many", mm.MIXTRAL, None, kv_set("llama.expert_used_count", 5), "expert_used_count 5 with expert_count 4"),
        ("no-window", mm.GPTOSS, None, lambda kv: [e for e in kv if e[0] != "gpt-oss.attention.sliding_window"],
         "missing metadata gpt-oss.attention.sliding_window"),
        ("no-router-bias", mm.GPTOSS, lambda w: w.pop("blk.2.ffn_gate_inp.bias"), None, "blk.2.ffn_gate_inp.bias"),
    ]
    for name, shape, ew, ekv, want in cases:
        path = write(name, shape, ew, ekv)
        try:
            llama_ref.load_model(path)
            msg = "loaded"
        except ValueError as e:
            msg = str(e)
        res.check("reference refuses %s: %s" % (name, msg.replace(path, "FILE")), want in msg and path in msg, msg)


# ----------------------------------------------------------------------------
# Part 2: the engine
# ----------------------------------------------------------------------------

def check_engine(res, tmp, paths):
    """dump_logits on each model at 1 and 2 threads against the reference."""
    for stem in ("mixtral-f32", "gptoss-f32", "mixtral-mxfp4", "gptoss-mxfp4"):
        path = paths[stem]
        model = llama_ref.load_model(path)
        n_ctx = model.config.seq_len
        ref = llama_ref.run(model, n_ctx) if stem.endswith("f32") else None
        for threads in (1, 2):
            out = os.path.join(tmp, "%s-t%d.c.dump" % (stem, threads))
            rc, _, err = test_reference.run_cmd([DUMP_LOGITS, path, "-n", str(n_ctx), "-o", out, "-t", str(threads)])
            label = "%s (%d thread%s)" % (stem, threads, "s" if threads > 1 else "")
            if not res.check("%s: dump_logits runs" % label, rc == 0 and os.path.exists(out),
                             "exit %d: %s" % (rc, test_reference.short(err))):
                continue
            if ref is not None:
                test_reference.compare_dumps(res, label, llama_ref.read_dump(out), ref, n_ctx,
                                             model.config.vocab_size)
            else:
                mxfp4_ref.compare_logits(res.check, llama_ref, label, None, model, out,
                                         MXFP4_TOL[stem.split("-")[0]])


def main():
    """Write the models, run both parts, print the tally."""
    models = os.environ.get("CORTEX_MODELS") or os.path.normpath(os.path.join(REPO, "..", "shared", "models"))
    vocab = os.path.join(models, "stories260K.gguf")
    res = test_reference.Results()
    check_operators(res)
    if not os.path.exists(vocab):
        if os.environ.get("CI") == "true":
            res.check("vocabulary model present (%s)" % vocab, False, "required when CI=true")
        else:
            print("SKIP: %s not found (set CORTEX_MODELS); model checks skipped" % vocab)
        print("%d passed, %d failed" % (res.passed, res.failed))
        return 1 if res.failed else 0
    with tempfile.TemporaryDirectory(prefix="cortex-moe-") as tmp:
        paths = mm.write_all(tmp, vocab)
        check_models(res, paths)
        check_errors(res, tmp, vocab)
        check_engine(res, tmp, paths)
    print("%d passed, %d failed" % (res.passed, res.failed))
    return 1 if res.failed else 0


if __name__ == "__main__":
    sys.exit(main())
