#!/usr/bin/python3
"""Independent numpy reference for the Llama forward pass (float64).

Also Llama 3 and Qwen 2 features: RoPE frequency factors (rope_freqs.weight),
linear RoPE scaling, NeoX-style RoPE (qwen2: dimension i pairs with i + d/2),
Q/K/V biases, and a head size other than dim / n_heads (attention.key_length).

Mixture of experts (GGUF only): architecture llama with experts (Mixtral-style)
and gpt-oss, as ik_llama.cpp reads and runs them: router (ffn_gate_inp, bias
for gpt-oss), top-k routing with llama's or gpt-oss's weighting (route), 3-D
expert tensors with optional biases, SwiGLU or GPT-OSS's clamped SwiGLU
(swiglu_oai), attention sinks (attend), gpt-oss's sliding-window layers, the
attention output bias, YaRN RoPE (yarn_params, rope), post_attention_norm.
Each function's docstring names the ggml / llama.cpp function it follows;
tests/test_moe_reference.py checks them and lists the sources.

Written from the math, in the spirit of llama2.c's run.c, to check the C engine.
It imports nothing from the C project. Two loaders produce the same in-memory
model: llama2.c `.bin` checkpoints and GGUF v3 files with F32 (or F16, or BF16:
the top 16 bits of a float32) tensors (or MXFP4 ones, dequantized to float32 by
mxfp4_ref.py, written from the spec).

LoRA adapters (--lora FILE[:SCALE], repeatable): each adapted matrix W becomes
W + (alpha / rank) * SCALE * B A before the forward pass. FILE is a llama.cpp GGUF
LoRA (general.type "adapter"; adapter.lora.alpha; "<name>.lora_a" [rank x in],
"<name>.lora_b" [out x rank]; F32, F16 or Q8_0; alpha 0: scale 1) or a PEFT
directory (adapter_config.json + adapter_model.safetensors, read by this file's own
safetensors reader; rank_pattern/alpha_pattern, use_rslora: alpha / sqrt(rank)),
whose Hugging Face module names map to GGUF names and whose Llama q/k rows are
reordered as the GGUF converters reorder Wq/Wk (not for qwen2).

CLI:
  llama_ref.py --model PATH --steps N [--tokens-in FILE] [--lora FILE[:SCALE]]... --out FILE
  llama_ref.py --model PATH --prompt-ids "1 400 79" --steps N
               [--repeat-penalty R] [--frequency-penalty F] [--presence-penalty P] [--repeat-last-n N]

Greedy mode (no --tokens-in): t_0 = 1 (BOS) at position 0; step i feeds t_i at
position i and records logits_i; t_{i+1} = argmax(logits_i) (ties -> lowest id).
Teacher forcing (--tokens-in FILE, a dump file as below): feeds the file's input
tokens instead. N is capped at the model's context length (and the file's length).

Continuation (--prompt-ids): feeds the given ids (BOS included, if wanted) at
positions 0.. then appends up to N greedy tokens, stopping before EOS (id 2) or
after the token the context's last position predicts, and prints prompt and continuation ids on one line,
space-separated (what `cortex generate --temp 0 --ids` prints). The penalty
options apply llama.cpp's penalties (see penalize) before each argmax.

Dump format (little endian):
  int32 magic 0x43584C47 ('GLXC'), int32 n_steps, int32 n_vocab,
  int32 input_tokens[n_steps], int32 greedy_next[n_steps] (argmax of each row),
  float32 logits[n_steps][n_vocab]
"""
import argparse
import struct
import sys
import time

import numpy as np

import mxfp4_ref

DUMP_MAGIC = 0x43584C47  # 'GLXC' as a little-endian int32
BOS_ID = 1
EOS_ID = 2


# ----------------------------------------------------------------------------
# Model description shared by both loaders
# ----------------------------------------------------------------------------

class Config:
    """Hyper-parameters of a Llama model (same meaning for .bin and .gguf)."""

    def __init__(self, dim, hidden_dim, n_layers, n_heads, n_kv_heads,
                 vocab_size, seq_len, rms_eps=1e-5, rope_base=10000.0,
                 rope_neox=False, rope_scale=1.0, rope_factors=None, head_dim=None,
                 rope_yarn=None, n_expert=0, n_expert_used=0, swa_window=0):
        self.dim = dim
        self.hidden_dim = hidden_dim
        self.n_layers = n_layers
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.vocab_size = vocab_size
        self.seq_len = seq_len
        self.rms_eps = rms_eps
        self.rope_base = rope_base
        self.rope_neox = rope_neox        # pairs (i, i + d/2) instead of (2i, 2i+1)
        self.rope_scale = rope_scale      # positions times this (linear scaling: 1/factor)
        self.rope_factors = rope_factors  # per-frequency divisors (head_dim/2,) or None
        self.head_dim = head_dim or dim // n_heads  # the file's attention.key_length, if it has one
        self.kv_dim = n_kv_heads * self.head_dim
        self.rope_yarn = rope_yarn        # Yarn (see yarn_params) or None
        self.n_expert = n_expert          # experts per MoE layer (0: dense feed-forward)
        self.n_expert_used = n_expert_used  # experts each token runs (top-k)
        self.swa_window = swa_window      # gpt-oss: even layers see the last swa_window positions

    def __repr__(self):
        return ("Config(dim=%d, hidden_dim=%d, n_layers=%d, n_heads=%d, n_kv_heads=%d, "
                "vocab_size=%d, seq_len=%d, rms_eps=%g, rope_base=%g)" % (
                    self.dim, self.hidden_dim, self.n_layers, self.n_heads,
                    self.n_kv_heads, self.vocab_size, self.seq_len, self.rms_eps,
                    self.rope_base))


class Layer:
    """Weights of one transformer block; every matrix is (out, in), every expert
    stack (n_expert, out, in). Optional parts are None when the file has none."""

    # Every attribute, in the order of __init__'s arguments (Transformer copies them all).
    FIELDS = ("rms_att", "wq", "wk", "wv", "wo", "rms_ffn", "w1", "w2", "w3", "bq", "bk", "bv",
              "bo", "sinks", "router", "router_b", "gate_exps", "up_exps", "down_exps",
              "gate_exps_b", "up_exps_b", "down_exps_b")

    def __init__(self, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, bq=None, bk=None, bv=None,
                 bo=None, sinks=None, router=None, router_b=None, gate_exps=None, up_exps=None,
                 down_exps=None, gate_exps_b=None, up_exps_b=None, down_exps_b=None):
        self.rms_att, self.wq, self.wk, self.wv, self.wo = rms_att, wq, wk, wv, wo
        self.rms_ffn, self.w1, self.w2, self.w3 = rms_ffn, w1, w2, w3
        self.bq, self.bk, self.bv = bq, bk, bv  # Q/K/V biases (qwen2, gpt-oss), or None
        self.bo = bo                            # attention output bias (gpt-oss), or None
        self.sinks = sinks                      # per-head sink logits (n_heads,) (gpt-oss), or None
        # Mixture of experts (w1/w2/w3 are None then): router (n_expert, dim) and its
        # bias (n_expert,); gate/up (n_expert, n_ff, dim), down (n_expert, dim, n_ff);
        # biases gate/up (n_expert, n_ff), down (n_expert, dim).
        self.router, self.router_b = router, router_b
        self.gate_exps, self.up_exps, self.down_exps = gate_exps, up_exps, down_exps
        self.gate_exps_b, self.up_exps_b, self.down_exps_b = gate_exps_b, up_exps_b, down_exps_b


class Model:
    """Config plus weights kept in their file dtype (float32) for exact comparisons."""

    def __init__(self, config, tok_emb, layers, rms_final, wcls, shared_cls, arch="llama"):
        self.config = config
        self.arch = arch              # general.architecture ("llama" for llama2.c checkpoints)
        self.tok_emb = tok_emb        # (vocab, dim)
        self.layers = layers          # list of Layer
        self.rms_final = rms_final    # (dim,)
        self.wcls = wcls              # (vocab, dim)
        self.shared_cls = shared_cls  # classifier is the embedding table
        # Matrices stored as MXFP4, as (layer index or -1 for the classifier, Layer
        # attribute or "wcls"): Transformer(act_q8=True) rounds their inputs.
        self.mxfp4 = set()

    def named_tensors(self):
        """All weights as (name, array) pairs in GGUF naming, for comparisons."""
        out = [("token_embd.weight", self.tok_emb)]
        for i, l in enumerate(self.layers):
            for short, arr in (("attn_norm", l.rms_att), ("attn_q", l.wq),
                               ("attn_k", l.wk), ("attn_v", l.wv),
                               ("attn_output", l.wo), ("ffn_norm", l.rms_ffn),
                               ("ffn_gate", l.w1), ("ffn_down", l.w2),
                               ("ffn_up", l.w3)):
                out.append(("blk.%d.%s.weight" % (i, short), arr))
        out.append(("output_norm.weight", self.rms_final))
        out.append(("output.weight", self.wcls))
        return out


# ----------------------------------------------------------------------------
# llama2.c .bin loader
# ----------------------------------------------------------------------------

def load_llama2c(path):
    """Read a llama2.c (legacy, version 0) checkpoint: 7 int32 header then float32 blobs."""
    with open(path, "rb") as f:
        data = f.read()
    dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len = struct.unpack_from("<7i", data, 0)
    shared = vocab > 0
    vocab = abs(vocab)
    cfg = Config(dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len,
                 rms_eps=1e-5, rope_base=10000.0)
    floats = np.frombuffer(data, dtype="<f4", offset=7 * 4)
    pos = [0]

    def take(*shape):
        """Consume the next prod(shape) floats from the file, in order."""
        n = int(np.prod(shape))
        if pos[0] + n > floats.size:
            raise ValueError("%s: truncated checkpoint" % path)
        arr = floats[pos[0]:pos[0] + n].reshape(shape)
        pos[0] += n
        return arr

    L, kv_dim, hd = n_layers, cfg.kv_dim, cfg.head_dim
    tok_emb = take(vocab, dim)
    rms_att = take(L, dim)
    wq = take(L, dim, dim)
    wk = take(L, kv_dim, dim)
    wv = take(L, kv_dim, dim)
    wo = take(L, dim, dim)
    rms_ffn = take(L, dim)
    w1 = take(L, hidden, dim)
    w2 = take(L, dim, hidden)
    w3 = take(L, hidden, dim)
    rms_final = take(dim)
    take(seq_len, hd // 2)  # freq_cis_real: skipped, RoPE angles are computed
    take(seq_len, hd // 2)  # freq_cis_imag
    wcls = tok_emb if shared else take(vocab, dim)
    layers = [Layer(rms_att[i], wq[i], wk[i], wv[i], wo[i], rms_ffn[i], w1[i], w2[i], w3[i])
              for i in range(L)]
    return Model(cfg, tok_emb, layers, rms_final, wcls, shared)


# ----------------------------------------------------------------------------
# GGUF v3 reader and loader
# ----------------------------------------------------------------------------

# GGUF metadata value types -> struct format (scalars only).
GGUF_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f",
               7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
GGUF_STRING, GGUF_ARRAY = 8, 9
# ggml tensor types we can read -> numpy dtype (Q8_0 is dequantized, see dequant_q8_0).
GGML_DTYPES = {0: np.dtype("<f4"), 1: np.dtype("<f2")}
GGML_Q8_0 = 8
GGML_BF16 = 30  # widened to float32, see widen_bf16
Q8_0_BLOCK = np.dtype([("d", "<f2"), ("qs", "i1", 32)])  # 34 bytes: f16 scale, 32 int8


def widen_bf16(data, offset, count):
    """count BF16 values from data[offset:] as float32: each is a float32's top 16 bits."""
    half = np.frombuffer(data, dtype="<u2", count=count, offset=offset)
    return (half.astype(np.uint32) << 16).view(np.float32)


def dequant_q8_0(data, offset, count):
    """count Q8_0 values from data[offset:]: each block of 32 is d * q (float32)."""
    blocks = np.frombuffer(data, dtype=Q8_0_BLOCK, count=count // 32, offset=offset)
    return (blocks["d"].astype(np.float32)[:, None] * blocks["qs"].astype(np.float32)).reshape(-1)


class _Reader:
    """Little-endian cursor over a bytes object, with bounds checks."""

    def __init__(self, data):
        self.data, self.pos = data, 0

    def unpack(self, fmt):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ValueError("GGUF: unexpected end of file")
        val = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += size
        return val

    def string(self):
        n = self.unpack("<Q")
        if self.pos + n > len(self.data):
            raise ValueError("GGUF: string past end of file")
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s.decode("utf-8", errors="surrogateescape")

    def value(self, vtype):
        """One metadata value of any type (arrays become Python lists)."""
        if vtype in GGUF_SCALAR:
            return self.unpack(GGUF_SCALAR[vtype])
        if vtype == GGUF_STRING:
            return self.string()
        if vtype == GGUF_ARRAY:
            etype = self.unpack("<I")
            n = self.unpack("<Q")
            return [self.value(etype) for _ in range(n)]
        raise ValueError("GGUF: unknown value type %d" % vtype)


def read_gguf(path, types=None):
    """Parse a GGUF v2/v3 file: returns (metadata dict, {name: numpy array (reversed dims)});
    fills `types` (a dict), when given, with each tensor's ggml type."""
    with open(path, "rb") as f:
        data = f.read()
    r = _Reader(data)
    if data[:4] != b"GGUF":
        raise ValueError("%s: not a GGUF file" % path)
    r.pos = 4
    version = r.unpack("<I")
    if version not in (2, 3):
        raise ValueError("%s: unsupported GGUF version %d" % (path, version))
    n_tensors = r.unpack("<Q")
    n_kv = r.unpack("<Q")
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        meta[key] = r.value(r.unpack("<I"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.unpack("<I")
        dims = [r.unpack("<Q") for _ in range(n_dims)]
        ttype = r.unpack("<I")
        offset = r.unpack("<Q")
        infos.append((name, dims, ttype, offset))
    align = int(meta.get("general.alignment", 32))
    data_start = (r.pos + align - 1) // align * align
    tensors = {}
    for name, dims, ttype, offset in infos:
        if ttype not in GGML_DTYPES and ttype not in (GGML_Q8_0, GGML_BF16, mxfp4_ref.TYPE_MXFP4):
            raise ValueError("%s: tensor %s has unsupported ggml type %d" % (path, name, ttype))
        count = int(np.prod(dims)) if dims else 1
        start = data_start + offset
        if ttype == mxfp4_ref.TYPE_MXFP4:
            nbytes = count // mxfp4_ref.QK * mxfp4_ref.BLOCK_BYTES
            if count % mxfp4_ref.QK or start + nbytes > len(data):
                raise ValueError("%s: tensor %s is not whole MXFP4 blocks inside the file" % (path, name))
            arr = mxfp4_ref.dequantize(data[start:start + nbytes], count)
        elif ttype == GGML_Q8_0:
            if dims[0] % 32:
                raise ValueError("%s: tensor %s: Q8_0 rows of %d values" % (path, name, dims[0]))
            nbytes = count // 32 * Q8_0_BLOCK.itemsize
            if start + nbytes > len(data):
                raise ValueError("%s: tensor %s runs past end of file" % (path, name))
            arr = dequant_q8_0(data, start, count)
        elif ttype == GGML_BF16:
            if start + count * 2 > len(data):
                raise ValueError("%s: tensor %s runs past end of file" % (path, name))
            arr = widen_bf16(data, start, count)
        else:
            dt = GGML_DTYPES[ttype]
            if start + count * dt.itemsize > len(data):
                raise ValueError("%s: tensor %s runs past end of file" % (path, name))
            arr = np.frombuffer(data, dtype=dt, count=count, offset=start)
        # ne[0] is the fastest-varying dimension, so numpy's shape is the reverse.
        tensors[name] = arr.reshape(tuple(reversed(dims)))
        if types is not None:
            types[name] = ttype
    return meta, tensors


def load_gguf(path):
    """Build a Model from a GGUF file: architecture llama (dense, or with experts:
    Mixtral-style), qwen2 or gpt-oss, with the <arch>.* hyper-parameters and the
    tensor names of llama.cpp (src/llama-arch.cpp, src/llama-load-tensors.cpp)."""
    types = {}
    meta, t = read_gguf(path, types)
    arch = meta.get("general.architecture", "llama")

    def hp(key, default=None):
        """Architecture-prefixed hyper-parameter lookup."""
        full = "%s.%s" % (arch, key)
        if full in meta:
            return meta[full]
        if default is None:
            raise ValueError("%s: missing metadata %s" % (path, full))
        return default

    def f32(name):
        """Tensor as float32 (F16 tensors are widened)."""
        return t[name].astype(np.float32, copy=False)

    def opt(name):
        """An optional tensor as float32, or None."""
        return f32(name) if name in t else None

    def shaped(name, shape):
        """A required tensor that must have this numpy shape (ggml ne reversed)."""
        if name not in t:
            raise ValueError("%s: missing tensor %s" % (path, name))
        if t[name].shape != tuple(shape):
            raise ValueError("%s: tensor %s has shape %s, expected %s" % (path, name, t[name].shape, tuple(shape)))
        return f32(name)

    if arch not in ("llama", "qwen2", "gpt-oss"):
        raise ValueError("%s: architecture %s not supported" % (path, arch))
    oss = arch == "gpt-oss"
    dim = int(hp("embedding_length"))
    n_heads = int(hp("attention.head_count"))
    tok_emb = f32("token_embd.weight")
    scaling = meta.get("%s.rope.scaling.type" % arch, "none")
    if scaling not in ("none", "linear", "yarn"):
        raise ValueError("%s: RoPE scaling %s not supported" % (path, scaling))
    scale = 1.0 / float(hp("rope.scaling.factor", 1.0)) if scaling in ("linear", "yarn") else 1.0
    n_expert = int(hp("expert_count", 0))
    n_used = int(hp("expert_used_count", 0))
    if oss and n_expert == 0:
        raise ValueError("%s: gpt-oss without %s.expert_count" % (path, arch))
    if n_expert and arch == "qwen2":
        raise ValueError("%s: qwen2 with experts not supported (that is architecture qwen2moe)" % path)
    if n_expert and not 0 < n_used <= n_expert:
        raise ValueError("%s: expert_used_count %d with expert_count %d" % (path, n_used, n_expert))
    # The experts' width: gpt-oss has its own key, llama's experts are feed_forward_length wide.
    n_ff = int(hp("expert_feed_forward_length")) if oss else int(hp("feed_forward_length"))
    cfg = Config(dim=dim,
                 hidden_dim=n_ff,
                 n_layers=int(hp("block_count")),
                 n_heads=n_heads,
                 n_kv_heads=int(hp("attention.head_count_kv", n_heads)),
                 vocab_size=tok_emb.shape[0],
                 seq_len=int(hp("context_length")),
                 rms_eps=float(hp("attention.layer_norm_rms_epsilon", 1e-5)),
                 rope_base=float(hp("rope.freq_base", 10000.0)),
                 rope_neox=(arch in ("qwen2", "gpt-oss")), rope_scale=scale,
                 rope_factors=f32("rope_freqs.weight") if "rope_freqs.weight" in t else None,
                 head_dim=int(hp("attention.key_length", dim // n_heads)),
                 n_expert=n_expert, n_expert_used=n_used,
                 swa_window=int(hp("attention.sliding_window")) if oss else 0)
    rope_dims = int(hp("rope.dimension_count", cfg.head_dim))
    if rope_dims != cfg.head_dim:
        raise ValueError("%s: partial RoPE (%d of %d dims) not supported" % (path, rope_dims, cfg.head_dim))
    if int(hp("attention.value_length", cfg.head_dim)) != cfg.head_dim:
        raise ValueError("%s: value heads of another width than key heads not supported" % path)
    if oss and cfg.swa_window < 1:
        raise ValueError("%s: %s.attention.sliding_window must be >= 1" % (path, arch))
    if scaling == "yarn":
        cfg.rope_yarn = yarn_params(cfg.head_dim, cfg.rope_base, scale,
                                    int(hp("rope.scaling.original_context_length", cfg.seq_len)),
                                    float(hp("rope.scaling.yarn_beta_fast", 32.0)),
                                    float(hp("rope.scaling.yarn_beta_slow", 1.0)),
                                    float(hp("rope.scaling.attn_factor", 1.0)))
    E, F, H, Q, KV = n_expert, n_ff, n_heads, n_heads * cfg.head_dim, cfg.kv_dim
    layers = []
    for i in range(cfg.n_layers):
        b = "blk.%d." % i
        bias = [opt(b + n + ".bias") for n in ("attn_q", "attn_k", "attn_v", "attn_output")]
        if oss and any(x is None for x in bias):
            raise ValueError("%s: gpt-oss layer %d lacks an attn_q/k/v/output bias" % (path, i))
        ffn_norm = b + ("post_attention_norm.weight" if oss else "ffn_norm.weight")
        attn = [f32(b + "attn_norm.weight"), shaped(b + "attn_q.weight", (Q, dim)),
                shaped(b + "attn_k.weight", (KV, dim)), shaped(b + "attn_v.weight", (KV, dim)),
                shaped(b + "attn_output.weight", (dim, Q)), f32(ffn_norm)]
        if not E:
            layers.append(Layer(*attn, f32(b + "ffn_gate.weight"), f32(b + "ffn_down.weight"),
                                f32(b + "ffn_up.weight"), *bias))
            continue
        moe = dict(router=shaped(b + "ffn_gate_inp.weight", (E, dim)),
                   gate_exps=shaped(b + "ffn_gate_exps.weight", (E, F, dim)),
                   up_exps=shaped(b + "ffn_up_exps.weight", (E, F, dim)),
                   down_exps=shaped(b + "ffn_down_exps.weight", (E, dim, F)))
        if oss:  # gpt-oss: sinks, router and expert biases are all required
            moe.update(sinks=shaped(b + "attn_sinks.weight", (H,)),
                       router_b=shaped(b + "ffn_gate_inp.bias", (E,)),
                       gate_exps_b=shaped(b + "ffn_gate_exps.bias", (E, F)),
                       up_exps_b=shaped(b + "ffn_up_exps.bias", (E, F)),
                       down_exps_b=shaped(b + "ffn_down_exps.bias", (E, dim)))
        layers.append(Layer(*attn, None, None, None, *bias, **moe))
    shared = "output.weight" not in t
    if oss and shared:
        raise ValueError("%s: gpt-oss needs output.weight" % path)
    wcls = tok_emb if shared else f32("output.weight")
    model = Model(cfg, tok_emb, layers, f32("output_norm.weight"), wcls, shared, arch)
    is_mx = lambda name: types.get(name) == mxfp4_ref.TYPE_MXFP4
    for i in range(cfg.n_layers):
        for attr, part in LAYER_MATRICES:
            if is_mx("blk.%d.%s.weight" % (i, part)):
                model.mxfp4.add((i, attr))
    if is_mx("token_embd.weight" if shared else "output.weight"):
        model.mxfp4.add((-1, "wcls"))
    return model


def load_model(path):
    """Pick the loader from the file's magic bytes."""
    with open(path, "rb") as f:
        magic = f.read(4)
    return load_gguf(path) if magic == b"GGUF" else load_llama2c(path)


# ----------------------------------------------------------------------------
# LoRA adapters: W + (alpha / rank) * scale * B A on each adapted matrix
# ----------------------------------------------------------------------------

# GGUF matrix name part -> the Layer attribute holding it.
LORA_GGUF_ATTR = {"attn_q": "wq", "attn_k": "wk", "attn_v": "wv", "attn_output": "wo",
                  "ffn_gate": "w1", "ffn_down": "w2", "ffn_up": "w3"}
# Hugging Face module (parent, name) -> GGUF matrix name part.
LORA_HF_GGUF = {("self_attn", "q_proj"): "attn_q", ("self_attn", "k_proj"): "attn_k",
                ("self_attn", "v_proj"): "attn_v", ("self_attn", "o_proj"): "attn_output",
                ("mlp", "gate_proj"): "ffn_gate", ("mlp", "up_proj"): "ffn_up", ("mlp", "down_proj"): "ffn_down"}
# safetensors dtypes this reader widens to float32.
ST_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2")}


def lora_target(model, name, path):
    """The (Layer, attribute) that GGUF matrix `name` (blk.L.<part>.weight) is in `model`."""
    parts = name.split(".")
    if (len(parts) != 4 or parts[0] != "blk" or not parts[1].isdigit() or parts[3] != "weight"
            or parts[2] not in LORA_GGUF_ATTR or int(parts[1]) >= len(model.layers)):
        raise ValueError("%s: tensor %s: not an adaptable matrix of the model" % (path, name))
    return model.layers[int(parts[1])], LORA_GGUF_ATTR[parts[2]]


def lora_gguf_deltas(path):
    """A llama.cpp GGUF LoRA: [(GGUF matrix name, (alpha/rank) B A float64)] (alpha 0 or absent: scale 1)."""
    meta, t = read_gguf(path)
    if meta.get("general.type") != "adapter" or meta.get("adapter.type") != "lora":
        raise ValueError("%s: not a LoRA adapter (general.type %r, adapter.type %r)" % (
            path, meta.get("general.type"), meta.get("adapter.type")))
    alpha = float(meta.get("adapter.lora.alpha", 0.0))
    out = []
    for name in sorted(n[:-len(".lora_a")] for n in t if n.endswith(".lora_a")):
        if name + ".lora_b" not in t:
            raise ValueError("%s: tensor %s.lora_a has no lora_b" % (path, name))
        a = np.asarray(t[name + ".lora_a"], dtype=np.float64)  # (rank, in)
        b = np.asarray(t[name + ".lora_b"], dtype=np.float64)  # (out, rank)
        if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[1]:
            raise ValueError("%s: tensor %s: lora_a %s and lora_b %s do not pair" % (path, name, a.shape, b.shape))
        rank = a.shape[0]
        out.append((name, (alpha / rank if alpha > 0 else 1.0) * (b @ a)))
    if len(out) * 2 != len(t):
        raise ValueError("%s: %d tensors, %d lora_a/lora_b pairs" % (path, len(t), len(out)))
    return out


def read_safetensors(path):
    """A safetensors file -> {name: float32 array}: 8-byte header length, JSON header, data buffer."""
    import json
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("%s: too short" % path)
    n = struct.unpack_from("<Q", data, 0)[0]
    if 8 + n > len(data):
        raise ValueError("%s: header runs past the end of the file" % path)
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in ST_DTYPES:
            raise ValueError("%s: tensor %s: dtype %s" % (path, name, info["dtype"]))
        dt = ST_DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        count = int(np.prod(info["shape"])) if info["shape"] else 1
        if not 0 <= begin <= end <= len(data) - base or end - begin != count * dt.itemsize:
            raise ValueError("%s: tensor %s: bad data_offsets" % (path, name))
        arr = np.frombuffer(data, dtype=dt, count=count, offset=base + begin)
        if info["dtype"] == "BF16":  # the top half of a float32
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        out[name] = arr.astype(np.float32).reshape(info["shape"])
    return out


def hf_to_gguf_rows(n_rows, n_head):
    """Row order of a Llama Wq/Wk in GGUF: GGUF row h*hd + 2i + j is Hugging Face row
    h*hd + j*hd/2 + i (rotate-half pairs (i, i + hd/2) become adjacent pairs (2i, 2i+1))."""
    hd = n_rows // n_head
    order = []
    for h in range(n_head):
        for i in range(hd // 2):
            order += [h * hd + i, h * hd + hd // 2 + i]
    return np.array(order)


def lora_peft_deltas(path, model):
    """A PEFT LoRA directory (or its adapter_model.safetensors) ->
    [(GGUF matrix name, scale B A float64)], Llama q/k rows in GGUF order."""
    import json
    import os
    import re
    st = os.path.join(path, "adapter_model.safetensors") if os.path.isdir(path) else path
    with open(os.path.join(os.path.dirname(st), "adapter_config.json")) as f:
        cfg = json.load(f)
    for key in ("fan_in_fan_out", "use_dora"):
        if cfg.get(key):
            raise ValueError("%s: %s is not supported" % (path, key))

    def pattern(patterns, key, default):
        """PEFT's rank_pattern/alpha_pattern lookup: the first key K with key ~ (.*\\.)?(K)$."""
        for k, v in (patterns or {}).items():
            if re.match(r"(.*\.)?(%s)$" % k, key):
                return v
        return default

    t = read_safetensors(st)
    out = []
    for name in sorted(t):
        m = re.fullmatch(r"base_model\.model\.(model\.layers\.(\d+)\.(\w+)\.(\w+))\.lora_A\.weight", name)
        if not m:
            if not re.fullmatch(r"base_model\.model\.model\.layers\.\d+\.\w+\.\w+\.lora_B\.weight", name):
                raise ValueError("%s: tensor %s: not a LoRA matrix of a layer" % (path, name))
            continue
        key, layer, parent, module = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        if (parent, module) not in LORA_HF_GGUF:
            raise ValueError("%s: tensor %s: module %s.%s not supported" % (path, name, parent, module))
        a = t[name].astype(np.float64)
        b = t[name[:-len("lora_A.weight")] + "lora_B.weight"].astype(np.float64)
        rank = a.shape[0]
        if b.shape[1] != rank or rank != pattern(cfg.get("rank_pattern"), key, cfg["r"]):
            raise ValueError("%s: tensor %s: rank %d does not match lora_B or the config" % (path, name, rank))
        alpha = float(pattern(cfg.get("alpha_pattern"), key, cfg["lora_alpha"]))
        scale = alpha / np.sqrt(rank) if cfg.get("use_rslora") else alpha / rank
        part = LORA_HF_GGUF[(parent, module)]
        if model.arch == "llama" and part in ("attn_q", "attn_k"):
            n_head = model.config.n_heads if part == "attn_q" else model.config.n_kv_heads
            b = b[hf_to_gguf_rows(b.shape[0], n_head)]
        out.append(("blk.%d.%s.weight" % (layer, part), scale * (b @ a)))
    return out


def apply_lora(model, path, scale=1.0):
    """Add scale * each delta of the adapter at path (a GGUF file or a PEFT directory /
    .safetensors file) to model's matrices, in place (they become float64)."""
    import os
    is_gguf = os.path.isfile(path) and open(path, "rb").read(4) == b"GGUF"
    deltas = lora_gguf_deltas(path) if is_gguf else lora_peft_deltas(path, model)
    for name, delta in deltas:
        layer, attr = lora_target(model, name, path)
        w = getattr(layer, attr)
        if delta.shape != w.shape:
            raise ValueError("%s: tensor %s: delta %s, the model's matrix is %s" % (path, name, delta.shape, w.shape))
        setattr(layer, attr, np.asarray(w, dtype=np.float64) + scale * delta)


def parse_lora_arg(arg):
    """FILE[:SCALE] -> (FILE, SCALE); the scale defaults to 1."""
    head, sep, tail = arg.rpartition(":")
    if sep:
        try:
            return head, float(tail)
        except ValueError:
            pass
    return arg, 1.0


# ----------------------------------------------------------------------------
# Forward pass (float64)
# ----------------------------------------------------------------------------

def rmsnorm(x, w, eps):
    """x / sqrt(mean(x^2) + eps) * w  (RMSNorm, no mean subtraction, no bias)."""
    return x / np.sqrt(np.mean(x * x) + eps) * w


def yarn_params(head_dim, base, freq_scale, n_ctx_orig, beta_fast, beta_slow, attn_factor):
    """YaRN's constants, as ggml computes them (ggml.c: ggml_rope_yarn_corr_dims and
    rope_yarn; ext_factor 1, llama.cpp's default when rope.scaling.type is yarn):
    the pair indices (low, high) between which rotations blend from extrapolated
    (unscaled) to interpolated (times freq_scale), and mscale, the factor on cos
    and sin: attn_factor * (1 + 0.1 ln(1 / freq_scale)).

    corr_dim(b) = head_dim * ln(n_ctx_orig / (2 pi b)) / (2 ln base), the pair
    that turns b times over n_ctx_orig positions; low = max(0, floor(corr_dim(
    beta_fast))), high = min(head_dim - 1, ceil(corr_dim(beta_slow)))."""
    def corr_dim(n_rot):
        return head_dim * np.log(n_ctx_orig / (n_rot * 2 * np.pi)) / (2 * np.log(base))
    low = max(0.0, np.floor(corr_dim(beta_fast)))
    high = min(head_dim - 1.0, np.ceil(corr_dim(beta_slow)))
    return {"low": low, "high": high, "ext_factor": 1.0,
            "mscale": attn_factor * (1.0 + 0.1 * np.log(1.0 / freq_scale))}


def rope(x, pos, head_dim, base, neox=False, scale=1.0, factors=None, yarn=None):
    """Rotate pairs of every head by theta_i = pos * scale * base^(-2i/head_dim) / factors[i].

    x has shape (n_heads, head_dim). Pairs are adjacent (x[2i], x[2i+1]):
    llama2.c's / llama.cpp's "normal" RoPE; or, with neox, (x[i], x[i + d/2]).
    With yarn (yarn_params), pair i blends the unscaled angle and the scaled one:
    theta_i = interp * (1 - mix) + extrap * mix, mix = 1 - clamp((i - low) /
    max(0.001, high - low), 0, 1) (1 below low: high frequencies keep their
    angle), and the rotated values are multiplied by mscale (ggml.c: rope_yarn).
    """
    i = np.arange(head_dim // 2, dtype=np.float64)
    if yarn is None:
        theta = pos * scale * base ** (-2.0 * i / head_dim)
        if factors is not None:
            theta = theta / np.asarray(factors, dtype=np.float64)
        c, s = np.cos(theta), np.sin(theta)
    else:
        extrap = pos * base ** (-2.0 * i / head_dim)
        if factors is not None:
            extrap = extrap / np.asarray(factors, dtype=np.float64)
        interp = scale * extrap
        ramp = 1.0 - np.clip((i - yarn["low"]) / max(0.001, yarn["high"] - yarn["low"]), 0.0, 1.0)
        mix = ramp * yarn["ext_factor"]
        theta = interp * (1.0 - mix) + extrap * mix
        c, s = np.cos(theta) * yarn["mscale"], np.sin(theta) * yarn["mscale"]
    if neox:
        x0, x1 = x[:, :head_dim // 2], x[:, head_dim // 2:]
    else:
        x0, x1 = x[:, 0::2], x[:, 1::2]
    out = np.empty_like(x)
    if neox:
        out[:, :head_dim // 2] = x0 * c - x1 * s
        out[:, head_dim // 2:] = x0 * s + x1 * c
    else:
        out[:, 0::2] = x0 * c - x1 * s
        out[:, 1::2] = x0 * s + x1 * c
    return out


def softmax(x):
    """Numerically stable softmax along the last axis."""
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def silu(x):
    """x * sigmoid(x)."""
    return x / (1.0 + np.exp(-x))


# GPT-OSS's clamped SwiGLU (ggml.c: ggml_compute_forward_swiglu_oai_f32, called
# by llm_build_moe_ffn with alpha 1.702 and limit 7).
SWIGLU_OAI_ALPHA = 1.702
SWIGLU_OAI_LIMIT = 7.0


def swiglu_oai(gate, up, alpha=SWIGLU_OAI_ALPHA, limit=SWIGLU_OAI_LIMIT):
    """g * sigmoid(alpha g) * (u + 1) with g = min(gate, limit), u = clamp(up, -limit, limit)."""
    g = np.minimum(gate, limit)
    u = np.clip(up, -limit, limit)
    return g / (1.0 + np.exp(-alpha * g)) * (u + 1.0)


def attend(q, keys, vals, sink=None):
    """One head's attention output: softmax(keys q / sqrt(head_dim)) vals (llama.cpp's
    kq_scale, 1 / sqrt(n_rot), with n_rot = head_dim here), where a sink
    (gpt-oss) is one more logit in the softmax, with no value: its exp joins the
    denominator only (ggml.c: ggml_compute_forward_soft_max_f32 with src[2], and
    the flash-attention path's sinks correction). sink -inf is plain softmax."""
    scores = keys @ q / np.sqrt(len(q))
    if sink is None:
        return softmax(scores) @ vals
    m = max(np.max(scores), sink)
    e = np.exp(scores - m)
    return (e / (np.sum(e) + np.exp(sink - m))) @ vals


def top_k(values, k):
    """Indices of the k largest values, largest first; ties go to the lower index
    (ggml_top_k sorts descending; exact ties do not occur in the tests)."""
    return np.array(sorted(range(len(values)), key=lambda j: (-values[j], j))[:k])


def route(logits, k, arch):
    """MoE routing: (expert indices, weights) from the router's logits (bias added).

    llama (Mixtral): probabilities = softmax over all experts, the k most
    probable, their probabilities divided by their sum (llm_build_moe_ffn with
    LLM_EXPERT_GATING_FUNC_SOFTMAX and norm_w, as build_llama calls it).
    gpt-oss: the k largest logits, softmax over those k alone
    (LLM_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT, no norm_w: build_openai_moe).
    The two agree in exact arithmetic; each is written as llama.cpp computes it."""
    if arch == "gpt-oss":
        sel = top_k(logits, k)
        return sel, softmax(logits[sel])
    probs = softmax(logits)
    sel = top_k(probs, k)
    return sel, probs[sel] / np.sum(probs[sel])


# Layer attributes of the matrices and their GGUF names (blk.N.<name>.weight).
LAYER_MATRICES = (("wq", "attn_q"), ("wk", "attn_k"), ("wv", "attn_v"), ("wo", "attn_output"),
                  ("w1", "ffn_gate"), ("w2", "ffn_down"), ("w3", "ffn_up"), ("router", "ffn_gate_inp"),
                  ("gate_exps", "ffn_gate_exps"), ("up_exps", "ffn_up_exps"), ("down_exps", "ffn_down_exps"))


def q8_32(x, eps=1e-4):
    """x rounded as the engine's activations for 32-weight blocks (KERN_ACT_Q8_32):
    per 32 values d = max|x| / 127, x -> round-half-even(x / d) * d. Also returns
    whether some x / d lies within eps of a rounding midpoint, where the engine's
    float32 activations may round the other way."""
    b = x.reshape(-1, 32)
    amax = np.max(np.abs(b), axis=1, keepdims=True)
    safe = np.where(amax > 0, amax, 1.0)
    r = b * (127.0 / safe)
    near = bool(np.any(np.abs(np.abs(r - np.floor(r)) - 0.5) < eps))
    return (np.rint(r) * (safe / 127.0)).reshape(x.shape), near


class Transformer:
    """A float64 copy of the model plus a KV cache; forward(token, pos) -> logits.

    act_q8: round the input of each MXFP4 matrix as the engine rounds its
    activations (q8_32), to compare with the engine's own arithmetic;
    first_near is then the first position where a value fell near a
    rounding midpoint (None while none has).

    stats (for the tests' checks that a model exercises its features):
    "experts" counts each (layer, expert) selection, "clamped" the gate/up
    values the clamped SwiGLU cut, "route_margin" the smallest gap between the
    k-th and (k+1)-th router logit seen (how near a routing tie came)."""

    def __init__(self, model, act_q8=False):
        self.cfg = c = model.config
        self.arch = model.arch
        self.q8 = model.mxfp4 if act_q8 else set()
        self.first_near = self.pos = None
        d = lambda a: np.asarray(a, dtype=np.float64)
        self.tok_emb = d(model.tok_emb)
        self.layers = [Layer(*(None if getattr(l, n, None) is None else d(getattr(l, n)) for n in Layer.FIELDS))
                       for l in model.layers]
        self.rms_final = d(model.rms_final)
        self.wcls = d(model.wcls)
        # KV cache: (layer, position, kv_head, head_dim)
        self.k_cache = np.zeros((c.n_layers, c.seq_len, c.n_kv_heads, c.head_dim))
        self.v_cache = np.zeros((c.n_layers, c.seq_len, c.n_kv_heads, c.head_dim))
        self.stats = {"experts": np.zeros((c.n_layers, max(c.n_expert, 1)), dtype=np.int64),
                      "clamped": 0, "route_margin": np.inf}

    def forward(self, token, pos):
        """Run one token at position pos (positions must be fed 0,1,2,...); returns logits (vocab,)."""
        c = self.cfg
        self.pos = pos
        x = self.tok_emb[token].copy()
        for li, l in enumerate(self.layers):
            x = x + self.attention(li, l, rmsnorm(x, l.rms_att, c.rms_eps), pos)
            xb = rmsnorm(x, l.rms_ffn, c.rms_eps)
            if l.router is None:  # dense SwiGLU feed-forward
                x = x + self.mm(li, "w2", silu(self.mm(li, "w1", xb)) * self.mm(li, "w3", xb))
            else:
                x = x + self.moe(li, l, xb)
        x = rmsnorm(x, self.rms_final, c.rms_eps)
        return self.mm(-1, "wcls", x)

    def attention(self, li, l, xb, pos):
        """Layer li's attention output (after Wo and its bias) for the normed input xb.

        gpt-oss (build_openai_moe): even layers attend to the last swa_window
        positions only (a key at p is masked when pos - p >= window: llama.cpp's
        SWA mask), each head's softmax has its sink; every layer adds bo."""
        c = self.cfg
        hd, nh, nkv = c.head_dim, c.n_heads, c.n_kv_heads
        group = nh // nkv  # query heads per kv head
        q, k, v = self.mm(li, "wq", xb), self.mm(li, "wk", xb), self.mm(li, "wv", xb)
        if l.bq is not None:
            q, k, v = q + l.bq, k + l.bk, v + l.bv
        q, k, v = q.reshape(nh, hd), k.reshape(nkv, hd), v.reshape(nkv, hd)
        q = rope(q, pos, hd, c.rope_base, c.rope_neox, c.rope_scale, c.rope_factors, c.rope_yarn)
        k = rope(k, pos, hd, c.rope_base, c.rope_neox, c.rope_scale, c.rope_factors, c.rope_yarn)
        self.k_cache[li, pos] = k
        self.v_cache[li, pos] = v
        first = 0
        if c.swa_window and li % 2 == 0:  # sliding_window_pattern 2: layers 0, 2, 4, ... slide
            first = max(0, pos - c.swa_window + 1)
        keys = self.k_cache[li, first:pos + 1]    # (T, nkv, hd)
        vals = self.v_cache[li, first:pos + 1]
        att_out = np.empty((nh, hd))
        for h in range(nh):
            kvh = h // group
            sink = None if l.sinks is None else l.sinks[h]
            att_out[h] = attend(q[h], keys[:, kvh, :], vals[:, kvh, :], sink)
        out = self.mm(li, "wo", att_out.reshape(-1))
        return out if l.bo is None else out + l.bo

    def moe(self, li, l, xb):
        """Mixture of experts on the normed input xb (llm_build_moe_ffn): route (see
        route), then each selected expert's gate/up products (plus biases), SwiGLU
        (llama) or clamped SwiGLU (gpt-oss), down product (plus bias), weighted sum."""
        c = self.cfg
        logits = self.mm(li, "router", xb)
        if l.router_b is not None:
            logits = logits + l.router_b
        if c.n_expert_used < c.n_expert:
            srt = np.sort(logits)[::-1]
            self.stats["route_margin"] = min(self.stats["route_margin"],
                                             srt[c.n_expert_used - 1] - srt[c.n_expert_used])
        sel, weights = route(logits, c.n_expert_used, self.arch)
        out = np.zeros(c.dim)
        for e, w in zip(sel, weights):
            self.stats["experts"][li, e] += 1
            gate, up = self.mm(li, "gate_exps", xb, e), self.mm(li, "up_exps", xb, e)
            if l.gate_exps_b is not None:
                gate, up = gate + l.gate_exps_b[e], up + l.up_exps_b[e]
            if self.arch == "gpt-oss":
                self.stats["clamped"] += int(np.sum(gate > SWIGLU_OAI_LIMIT) + np.sum(np.abs(up) > SWIGLU_OAI_LIMIT))
                act = swiglu_oai(gate, up)
            else:
                act = silu(gate) * up
            y = self.mm(li, "down_exps", act, e)
            if l.down_exps_b is not None:
                y = y + l.down_exps_b[e]
            out += w * y
        return out

    def mm(self, li, attr, x, expert=None):
        """Matrix `attr` of layer li (-1: the classifier; of one expert if given)
        times x, x rounded by q8_32 if the matrix is MXFP4 and act_q8 asked for it."""
        w = self.wcls if li < 0 else getattr(self.layers[li], attr)
        if expert is not None:
            w = w[expert]
        if (li, attr) in self.q8:
            x, near = q8_32(x)
            if near and self.first_near is None:
                self.first_near = self.pos
        return w @ x


def run(model, n_steps, tokens_in=None):
    """Greedy (or teacher-forced) run from position 0; returns (inputs, greedy_next, logits f64)."""
    n = min(n_steps, model.config.seq_len)
    if tokens_in is not None:
        n = min(n, len(tokens_in))
    tr = Transformer(model)
    inputs = np.zeros(n, dtype=np.int32)
    nexts = np.zeros(n, dtype=np.int32)
    logits = np.zeros((n, model.config.vocab_size))
    tok = BOS_ID if tokens_in is None else int(tokens_in[0])
    for pos in range(n):
        if tokens_in is not None:
            tok = int(tokens_in[pos])
        inputs[pos] = tok
        logits[pos] = tr.forward(tok, pos)
        nexts[pos] = int(np.argmax(logits[pos]))  # first maximum = lowest id on ties
        tok = int(nexts[pos])
    return inputs, nexts, logits


def penalize(logits, window, repeat=1.0, freq=0.0, presence=0.0):
    """llama.cpp's penalties sampler, written from its definition: for each
    distinct token t in `window` (the last N tokens) with count c, the logit is
    divided by `repeat` (multiplied if <= 0), then c * freq + presence is
    subtracted. Returns a new array."""
    out = np.array(logits, dtype=np.float64)
    counts = {}
    for t in window:
        counts[t] = counts.get(t, 0) + 1
    for t, c in counts.items():
        out[t] = out[t] * repeat if out[t] <= 0 else out[t] / repeat
        out[t] -= c * freq + presence
    return out


def continue_greedy(model, prompt, n_new, repeat=1.0, freq=0.0, presence=0.0, last_n=64):
    """prompt ids + up to n_new greedy ids (argmax of the penalised logits,
    lowest id on ties; the penalties look at the last `last_n` tokens, prompt
    included), stopping before EOS or after the token the last position of the
    context predicts (as llama2.c's run and cortex generate do)."""
    if not prompt:
        raise ValueError("the prompt has no tokens")
    if len(prompt) > model.config.seq_len:
        raise ValueError("the prompt (%d tokens) exceeds the context (%d)" % (len(prompt), model.config.seq_len))
    tr = Transformer(model)
    out = list(prompt)
    logits = None
    for pos, tok in enumerate(prompt):
        logits = tr.forward(int(tok), pos)
    for _ in range(n_new):
        window = out[-last_n:] if last_n > 0 else []
        nxt = int(np.argmax(penalize(logits, window, repeat, freq, presence)))
        if nxt == EOS_ID:
            break
        out.append(nxt)
        if len(out) > model.config.seq_len:  # predicted at the last position: printed, never fed
            break
        logits = tr.forward(nxt, len(out) - 1)
    return out


# ----------------------------------------------------------------------------
# Dump files
# ----------------------------------------------------------------------------

def write_dump(path, inputs, nexts, logits):
    """Write the GLXC dump (see module docstring)."""
    n, vocab = logits.shape
    with open(path, "wb") as f:
        f.write(struct.pack("<3i", DUMP_MAGIC, n, vocab))
        f.write(np.asarray(inputs, dtype="<i4").tobytes())
        f.write(np.asarray(nexts, dtype="<i4").tobytes())
        f.write(np.asarray(logits, dtype="<f4").tobytes())


def read_dump(path, need_logits=True):
    """Read a GLXC dump -> (inputs, nexts, logits float32 (n, vocab)); logits may be absent if not needed."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 12:
        raise ValueError("%s: too short for a dump header" % path)
    magic, n, vocab = struct.unpack_from("<3i", data, 0)
    if magic != DUMP_MAGIC:
        raise ValueError("%s: bad magic 0x%08X" % (path, magic & 0xFFFFFFFF))
    if n < 0 or vocab < 0:
        raise ValueError("%s: negative sizes in header" % path)
    inputs = np.frombuffer(data, dtype="<i4", count=n, offset=12)
    if not need_logits:
        return inputs, None, None
    want = 12 + 8 * n + 4 * n * vocab
    if len(data) != want:
        raise ValueError("%s: size %d, expected %d for n=%d vocab=%d" % (path, len(data), want, n, vocab))
    nexts = np.frombuffer(data, dtype="<i4", count=n, offset=12 + 4 * n)
    logits = np.frombuffer(data, dtype="<f4", count=n * vocab, offset=12 + 8 * n).reshape(n, vocab)
    return inputs, nexts, logits


def main(argv=None):
    """CLI entry point: generate or teacher-force, then write the dump."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help=".bin (llama2.c) or .gguf model file")
    ap.add_argument("--steps", type=int, default=None, help="number of steps (default/cap: context length)")
    ap.add_argument("--tokens-in", default=None, help="dump file whose input tokens are fed (teacher forcing)")
    ap.add_argument("--prompt-ids", default=None,
                    help="continue these ids (space-separated) greedily for --steps tokens; print all ids")
    ap.add_argument("--repeat-penalty", type=float, default=1.0, help="with --prompt-ids (default 1: off)")
    ap.add_argument("--frequency-penalty", type=float, default=0.0, help="with --prompt-ids (default 0: off)")
    ap.add_argument("--presence-penalty", type=float, default=0.0, help="with --prompt-ids (default 0: off)")
    ap.add_argument("--repeat-last-n", type=int, default=64, help="the penalties' window (default 64; 0: off)")
    ap.add_argument("--lora", action="append", default=[], metavar="FILE[:SCALE]",
                    help="apply a LoRA adapter (GGUF file or PEFT directory) times SCALE (default 1); repeatable")
    ap.add_argument("--out", default=None, help="output dump file (not with --prompt-ids)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print config and timing to stderr")
    a = ap.parse_args(argv)
    if (a.prompt_ids is None) == (a.out is None):
        ap.error("give --out (a dump) or --prompt-ids (a continuation), one of them")
    t0 = time.time()
    model = load_model(a.model)
    for arg in a.lora:
        apply_lora(model, *parse_lora_arg(arg))
    if a.prompt_ids is not None:
        try:
            prompt = [int(x) for x in a.prompt_ids.split()]
        except ValueError:
            ap.error("--prompt-ids: %r is not a list of integers" % a.prompt_ids)
        if not prompt or any(not 0 <= t < model.config.vocab_size for t in prompt):
            ap.error("--prompt-ids: need ids in [0, %d)" % model.config.vocab_size)
        if a.steps is None or a.steps < 0:
            ap.error("--prompt-ids needs --steps N >= 0")
        ids = continue_greedy(model, prompt, a.steps, a.repeat_penalty, a.frequency_penalty, a.presence_penalty,
                              a.repeat_last_n)
        print(" ".join(map(str, ids)))
        return 0
    steps = model.config.seq_len if a.steps is None else a.steps
    if steps < 1:
        ap.error("--steps must be >= 1")
    tokens_in = None
    if a.tokens_in:
        tokens_in, _, _ = read_dump(a.tokens_in, need_logits=False)
        if len(tokens_in) == 0:
            ap.error("--tokens-in file has no tokens")
        bad = [t for t in tokens_in if not 0 <= t < model.config.vocab_size]
        if bad:
            ap.error("--tokens-in has out-of-range token %d" % bad[0])
    inputs, nexts, logits = run(model, steps, tokens_in)
    write_dump(a.out, inputs, nexts, logits)
    if a.verbose:
        print("%r\n%d steps in %.2fs" % (model.config, len(inputs), time.time() - t0), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
