#!/usr/bin/python3
"""make_moe_models.py - write the tiny mixture-of-experts test models (GGUF v3), numpy only.

    /usr/bin/python3 tests/tools/make_moe_models.py --out DIR [--vocab GGUF] [--seed N]

Writes four files into DIR, deterministic from the seed:

  mixtral-f32.gguf    architecture llama with experts (Mixtral-style): 2 layers,
  mixtral-mxfp4.gguf  d_model 64, 4 query / 2 KV heads of 16, 4 experts of width
                      96 with 2 used, tied classifier, context 64; normal RoPE.
  gptoss-f32.gguf     architecture gpt-oss: 3 layers (0 and 2 slide, window 8),
  gptoss-mxfp4.gguf   d_model 64, 4 query / 2 KV heads of 32 (wider than 64 / 4),
                      Q/K/V/O biases, per-head sinks, router bias, expert biases,
                      4 experts of width 64 with 2 used, YaRN (factor 4, original
                      context 256, freq_base 10000), post_attention_norm, context 64.

The -mxfp4 files hold the three expert tensors as MXFP4 (ggml type 39); the
-f32 twins hold those tensors' dequantized values (tests/reference/mxfp4_ref.py),
so a twin differs from its MXFP4 file only in how the engine rounds the experts'
inputs. Every other tensor is F32.

Names, shapes and keys are llama.cpp's (ik_llama.cpp: gguf-py/gguf/constants.py
for the keys; src/llama-model.cpp for the tensor names; src/llama-load-tensors.cpp,
create_llama_tensors and create_openai_moe_tensors, for the shapes: ggml ne
[n_embd, n_ff, n_expert] for ffn_gate_exps/ffn_up_exps, [n_ff, n_embd, n_expert]
for ffn_down_exps, [n_embd, n_expert] for ffn_gate_inp, [n_ff, n_expert] and
[n_embd, n_expert] for the expert biases, [n_head] for attn_sinks). GPT-OSS keys
follow the published GGUFs: expert_feed_forward_length, attention.sliding_window,
attention.key_length/value_length, rope.scaling.type yarn with factor and
original_context_length (the YaRN betas are left out: llama.cpp uses 32 and 1 for
gpt-oss whatever a file says, and so does the reference without the keys).

The vocabulary (tokenizer.ggml.* keys) is copied from --vocab (default
../shared/models/stories260K.gguf: a 512-token llama SPM vocabulary, BOS 1, EOS
2) for both architectures: the real gpt-oss uses a gpt2/o200k BPE vocabulary, but
the logits comparison needs only a vocabulary the engine loads, and this one is
small and already checked against the SPM reference.

The MXFP4 quantizer is written here from the OCP MX spec (one E8M0 exponent per
32 values: floor(log2(max|x|)) - 2, so the largest value lands in [4, 8); each
value the nearest E2M1 number, clipped at 6); the layout (u8 e, then 16 bytes,
value j in the low nibble of byte j, value j + 16 in the high one) is ggml's
block_mxfp4. Weight scales are chosen so that routing varies (several experts
per layer over a 64-token greedy run) and the clamped SwiGLU's limit is reached;
tests/test_moe_reference.py checks both.
"""
import argparse
import os
import struct
import sys

try:
    import numpy as np
except ImportError:  # only Debian's python has numpy here: re-exec with it
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != "/usr/bin/python3":
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "reference"))
sys.dont_write_bytecode = True
import llama_ref  # noqa: E402 (reads the vocabulary's GGUF)
import mxfp4_ref  # noqa: E402 (dequantizes the f32 twins' expert tensors)

# GGUF metadata value types.
T_U32, T_I32, T_F32, T_STR, T_ARR = 4, 5, 6, 8, 9
GGML_F32 = 0
ALIGN = 32
VOCAB_KEYS = ("tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
              "tokenizer.ggml.token_type", "tokenizer.ggml.unknown_token_id",
              "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id")
E2M1 = mxfp4_ref.E2M1  # the 16 values by code


# ----------------------------------------------------------------------------
# GGUF writer
# ----------------------------------------------------------------------------

def gguf_str(s):
    """A GGUF string: u64 length, bytes."""
    b = s.encode("utf-8", "surrogateescape")
    return struct.pack("<Q", len(b)) + b


def gguf_value(vtype, v):
    """The bytes of one metadata value: (type, value); arrays are (T_ARR, (elem type, list))."""
    if vtype == T_STR:
        return gguf_str(v)
    if vtype == T_ARR:
        etype, items = v
        return struct.pack("<IQ", etype, len(items)) + b"".join(gguf_value(etype, x) for x in items)
    return struct.pack({T_U32: "<I", T_I32: "<i", T_F32: "<f"}[vtype], v)


def write_gguf(path, kv, tensors):
    """GGUF v3: kv is [(key, type, value)], tensors [(name, numpy shape, ggml type, raw bytes)];
    ggml's ne is the numpy shape reversed; data aligned to 32 bytes."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    head += b"".join(gguf_str(k) + struct.pack("<I", t) + gguf_value(t, v) for k, t, v in kv)
    data, offsets = b"", []
    for _, _, _, raw in tensors:
        data += b"\0" * (-len(data) % ALIGN)
        offsets.append(len(data))
        data += raw
    for (name, shape, ttype, _), off in zip(tensors, offsets):
        ne = list(reversed(shape))
        head += gguf_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        head += struct.pack("<IQ", ttype, off)
    head += b"\0" * (-len(head) % ALIGN)
    with open(path, "wb") as f:
        f.write(head + data)


def quantize_mxfp4(x):
    """float array (size % 32 == 0, blocks along the last axis) -> MXFP4 bytes."""
    b = np.asarray(x, np.float64).reshape(-1, mxfp4_ref.QK)
    amax = np.max(np.abs(b), axis=1)
    e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 2 + 127, 0)
    e = np.clip(e, 0, 254).astype(np.int64)
    scaled = b / np.ldexp(1.0, e - 127)[:, None]
    codes = np.argmin(np.abs(scaled[:, :, None] - E2M1[None, None, :]), axis=2)  # nearest; clips at +-6
    out = np.zeros((len(b), mxfp4_ref.BLOCK_BYTES), np.uint8)
    out[:, 0] = e
    out[:, 1:] = codes[:, :16] | (codes[:, 16:] << 4)
    return out.tobytes()


def read_vocab(path):
    """The tokenizer.ggml.* metadata of a GGUF file, as writer kv entries."""
    meta, _ = llama_ref.read_gguf(path)
    missing = [k for k in VOCAB_KEYS if k not in meta]
    if missing:
        raise ValueError("%s: no %s" % (path, ", ".join(missing)))
    return [("tokenizer.ggml.model", T_STR, meta["tokenizer.ggml.model"]),
            ("tokenizer.ggml.tokens", T_ARR, (T_STR, meta["tokenizer.ggml.tokens"])),
            ("tokenizer.ggml.scores", T_ARR, (T_F32, meta["tokenizer.ggml.scores"])),
            ("tokenizer.ggml.token_type", T_ARR, (T_I32, meta["tokenizer.ggml.token_type"]))] + \
           [(k, T_U32, int(meta[k])) for k in VOCAB_KEYS[4:]], len(meta["tokenizer.ggml.tokens"])


# ----------------------------------------------------------------------------
# The two models
# ----------------------------------------------------------------------------

MIXTRAL = dict(arch="llama", dim=64, n_layers=2, n_heads=4, n_kv=2, head_dim=16, n_expert=4, n_used=2,
               n_ff=96, ctx=64, base=10000.0, emb_std=0.1)
GPTOSS = dict(arch="gpt-oss", dim=64, n_layers=3, n_heads=4, n_kv=2, head_dim=32, n_expert=4, n_used=2,
              n_ff=64, ctx=64, base=10000.0, window=8, yarn_factor=4.0, yarn_orig=256, emb_std=0.3)


def weights(s, vocab, rng):
    """Every tensor of shape s's model as {GGUF name: float32 array (numpy shape)}."""
    D, E, F, H = s["dim"], s["n_expert"], s["n_ff"], s["n_heads"]
    Q, KV = H * s["head_dim"], s["n_kv"] * s["head_dim"]
    oss = s["arch"] == "gpt-oss"
    g = lambda std, *shape: (rng.standard_normal(shape) * std).astype(np.float32)
    norm = lambda: (1.0 + g(0.1, D)).astype(np.float32)
    w = {"token_embd.weight": g(s["emb_std"], vocab, D), "output_norm.weight": norm()}
    if oss:
        w["output.weight"] = g(D ** -0.5, vocab, D)
    for i in range(s["n_layers"]):
        b = "blk.%d." % i
        w[b + "attn_norm.weight"] = norm()
        w[b + "attn_q.weight"] = g(D ** -0.5, Q, D)
        w[b + "attn_k.weight"] = g(D ** -0.5, KV, D)
        w[b + "attn_v.weight"] = g(D ** -0.5, KV, D)
        w[b + "attn_output.weight"] = g(0.5 * Q ** -0.5, D, Q)
        w[b + ("post_attention_norm.weight" if oss else "ffn_norm.weight")] = norm()
        w[b + "ffn_gate_inp.weight"] = g(2.0 * D ** -0.5, E, D)   # router logits of std ~2
        # gpt-oss: gate/up values of std ~3, so the limit 7 is crossed now and then
        std_in = (3.0 if oss else 1.0) * D ** -0.5
        w[b + "ffn_gate_exps.weight"] = g(std_in, E, F, D)
        w[b + "ffn_up_exps.weight"] = g(std_in, E, F, D)
        w[b + "ffn_down_exps.weight"] = g((0.05 if oss else 0.5) * F ** -0.5, E, D, F)
        if oss:
            for n, n_out in (("attn_q", Q), ("attn_k", KV), ("attn_v", KV), ("attn_output", D)):
                w[b + n + ".bias"] = g(0.1, n_out)
            w[b + "attn_sinks.weight"] = g(1.0, H)
            w[b + "ffn_gate_inp.bias"] = g(0.5, E)
            w[b + "ffn_gate_exps.bias"] = g(0.5, E, F)
            w[b + "ffn_up_exps.bias"] = g(0.5, E, F)
            w[b + "ffn_down_exps.bias"] = g(0.05, E, D)
    return w


def metadata(s, vocab_kv, name):
    """The model's metadata: general.*, <arch>.* hyper-parameters, then the vocabulary."""
    a = s["arch"]
    kv = [("general.architecture", T_STR, a), ("general.name", T_STR, name),
          (a + ".context_length", T_U32, s["ctx"]), (a + ".embedding_length", T_U32, s["dim"]),
          (a + ".feed_forward_length", T_U32, s["n_ff"]), (a + ".block_count", T_U32, s["n_layers"]),
          (a + ".attention.head_count", T_U32, s["n_heads"]), (a + ".attention.head_count_kv", T_U32, s["n_kv"]),
          (a + ".attention.layer_norm_rms_epsilon", T_F32, 1e-5), (a + ".rope.freq_base", T_F32, s["base"]),
          (a + ".expert_count", T_U32, s["n_expert"]), (a + ".expert_used_count", T_U32, s["n_used"])]
    if a == "llama":
        kv.append((a + ".rope.dimension_count", T_U32, s["head_dim"]))
    else:
        kv += [(a + ".expert_feed_forward_length", T_U32, s["n_ff"]),
               (a + ".attention.key_length", T_U32, s["head_dim"]),
               (a + ".attention.value_length", T_U32, s["head_dim"]),
               (a + ".attention.sliding_window", T_U32, s["window"]),
               (a + ".rope.scaling.type", T_STR, "yarn"), (a + ".rope.scaling.factor", T_F32, s["yarn_factor"]),
               (a + ".rope.scaling.original_context_length", T_U32, s["yarn_orig"])]
    return kv + vocab_kv


# The default seed: with it every expert of every layer is picked several times over a
# 64-token greedy run, no routing or greedy choice is a near-tie, and the reference's
# first MXFP4 activation rounding next to a midpoint comes at position 6 or later
# (tests/test_moe_reference.py checks all of these).
SEED = 5
EXPERT_TENSORS = ("ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight")


def write_pair(out_dir, stem, s, vocab_kv, n_vocab, seed):
    """Write <stem>-mxfp4.gguf and its f32 twin; returns their paths."""
    w = weights(s, n_vocab, np.random.default_rng(seed))
    kv = metadata(s, vocab_kv, stem)
    quant = {n: quantize_mxfp4(a) for n, a in w.items() if n.endswith(EXPERT_TENSORS)}
    paths = []
    for variant in ("f32", "mxfp4"):
        tensors = []
        for n, a in w.items():
            if n in quant:
                if variant == "mxfp4":
                    tensors.append((n, a.shape, mxfp4_ref.TYPE_MXFP4, quant[n]))
                    continue
                a = mxfp4_ref.dequantize(quant[n], a.size).reshape(a.shape)
            tensors.append((n, a.shape, GGML_F32, np.ascontiguousarray(a, "<f4").tobytes()))
        path = os.path.join(out_dir, "%s-%s.gguf" % (stem, variant))
        write_gguf(path, kv, tensors)
        paths.append(path)
    return paths


def write_all(out_dir, vocab_path, seed=None):
    """All four models; returns {file stem: path} (mixtral-f32, mixtral-mxfp4, gptoss-f32, gptoss-mxfp4)."""
    seed = SEED if seed is None else seed
    vocab_kv, n_vocab = read_vocab(vocab_path)
    paths = write_pair(out_dir, "mixtral", MIXTRAL, vocab_kv, n_vocab, seed)
    paths += write_pair(out_dir, "gptoss", GPTOSS, vocab_kv, n_vocab, seed + 1)
    return {os.path.basename(p)[:-len(".gguf")]: p for p in paths}


def main(argv=None):
    """CLI: write the models and print their paths."""
    repo = os.path.dirname(os.path.dirname(HERE))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for the four .gguf files")
    ap.add_argument("--vocab", default=os.path.join(repo, "..", "shared", "models", "stories260K.gguf"),
                    help="GGUF whose tokenizer.ggml.* keys are copied (default: stories260K.gguf)")
    ap.add_argument("--seed", type=int, default=SEED)
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    for p in write_all(a.out, a.vocab, a.seed).values():
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
