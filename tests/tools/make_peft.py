#!/usr/bin/python3
"""make_peft.py - write a PEFT LoRA adapter for a GGUF base model, and its GGUF twin.

    /usr/bin/python3 tests/tools/make_peft.py --model ../shared/models/stories260K.gguf --out DIR
        [--gguf FILE [--gguf-type f32|f16|q8_0]] [--seed N] [--rank R] [--alpha A] [--rslora]
        [--modules q_proj,k_proj,...] [--layers 0,2] [--dtype f32|f16|bf16]
        [--rank-pattern KEY=R]... [--alpha-pattern KEY=A]... [--target-regex RE]
        [--defect NAME]

DIR gets adapter_config.json and adapter_model.safetensors as PEFT saves them
(base_model.model.model.layers.L.self_attn.q_proj.lora_A.weight [r x in], lora_B
[out x r]) with random A and B (numpy, seeded), shaped for the base model's
matrices (read with tests/reference/llama_ref.py). --gguf also writes the same
adapter as llama.cpp's convert_lora_to_gguf.py would: general.type "adapter",
adapter.lora.alpha, "blk.L.attn_q.weight.lora_a" / ".lora_b", lora_b's rows of
Llama q/k permuted per head as the converter permutes Wq/Wk (reshape(n_head, 2,
hd/2, r).swapaxes(1, 2)); a module whose PEFT scale differs from lora_alpha/r
has the ratio folded into its lora_b. Its values are the PEFT file's values
(rounded to --dtype first), so a reader's output can be compared exactly; Q8_0
is used for the tensors whose rows are a multiple of 32 long, F32 for the rest.

--defect NAME breaks the PEFT directory in one way, for the error tests:
  truncated   the file ends inside the JSON header
  hlen        the header length runs past the end of the file
  badjson     the header is not valid JSON
  offsets     one tensor's data_offsets end past the data buffer
  overlap     two tensors share the same bytes
  rank        one lora_B has rank r+1 (differs from its lora_A)
  cfgrank     adapter_config.json says r+1
  shape       one lora_A has one column too many for the base matrix
  module      an extra pair for an unknown module (self_attn.qkv_proj)
  lmhead      an extra pair for lm_head
  embedding   an extra lora_embedding_A tensor
  lonely      one lora_B is missing
  layer       an extra pair for a layer the base does not have
  dtype       one tensor stored as F64
  untargeted  target_modules leaves out one module the file has
  dora        adapter_config.json has use_dora: true
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "reference"))
sys.dont_write_bytecode = True
import llama_ref  # noqa: E402

# PEFT module -> (parent, GGUF part, Layer attribute of llama_ref)
MODULES = {"q_proj": ("self_attn", "attn_q", "wq"), "k_proj": ("self_attn", "attn_k", "wk"),
           "v_proj": ("self_attn", "attn_v", "wv"), "o_proj": ("self_attn", "attn_output", "wo"),
           "gate_proj": ("mlp", "ffn_gate", "w1"), "up_proj": ("mlp", "ffn_up", "w3"),
           "down_proj": ("mlp", "ffn_down", "w2")}
ST_NP = {"f32": ("F32", "<f4"), "f16": ("F16", "<f2")}


def st_bytes(arr, dtype):
    """(safetensors dtype, bytes, the values as float32 after rounding) of a float32 array."""
    if dtype == "bf16":  # round to nearest even on the top 16 bits
        u = arr.astype("<f4").view("<u4").astype(np.uint64)
        u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")
        return "BF16", u.tobytes(), (u.astype(np.uint32) << 16).view(np.float32).reshape(arr.shape)
    name, np_dt = ST_NP[dtype]
    stored = arr.astype(np_dt)
    return name, stored.tobytes(), stored.astype(np.float32)


def write_safetensors(path, tensors):
    """tensors: [(name, dtype name, shape, bytes)] -> a safetensors file (names sorted, no gaps)."""
    header, blobs, pos = {}, [], 0
    for name, dt, shape, data in sorted(tensors):
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [pos, pos + len(data)]}
        blobs.append(data)
        pos += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def gguf_str(s):
    """A GGUF string: u64 length + UTF-8 bytes."""
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def q8_0(arr):
    """ggml's Q8_0 blocks of a float32 array whose rows are multiples of 32 long."""
    x = arr.astype(np.float32).reshape(-1, 32)
    d = np.abs(x).max(axis=1) / 127.0
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0).astype(np.float32)
    q = np.clip(np.round(x * inv[:, None]), -127, 127).astype(np.int8)
    out = np.zeros(x.shape[0], dtype=llama_ref.Q8_0_BLOCK)
    out["d"], out["qs"] = d.astype(np.float16), q
    return out.tobytes()


def write_gguf_lora(path, arch, alpha, tensors, ttype):
    """A GGUF v3 LoRA adapter: tensors [(name, float32 array)] stored as ttype."""
    kv = [("general.architecture", 8, gguf_str(arch)), ("general.type", 8, gguf_str("adapter")),
          ("adapter.type", 8, gguf_str("lora")), ("adapter.lora.alpha", 6, struct.pack("<f", alpha))]
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    head += b"".join(gguf_str(k) + struct.pack("<I", t) + v for k, t, v in kv)
    datas, off = [], 0
    for name, arr in tensors:
        if ttype == "q8_0" and arr.shape[-1] % 32 == 0:
            code, data = 8, q8_0(arr)
        elif ttype == "f16":
            code, data = 1, arr.astype("<f2").tobytes()
        else:
            code, data = 0, arr.astype("<f4").tobytes()
        dims = list(reversed(arr.shape))
        head += gguf_str(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        head += struct.pack("<IQ", code, off)
        datas.append(data + b"\0" * (-len(data) % 32))
        off += len(datas[-1])
    head += b"\0" * (-len(head) % 32)
    with open(path, "wb") as f:
        f.write(head + b"".join(datas))


def gguf_permute(b, n_head):
    """Rows of b permuted as llama.cpp's converter permutes Llama's Wq/Wk."""
    return b.reshape(n_head, 2, b.shape[0] // n_head // 2, *b.shape[1:]).swapaxes(1, 2).reshape(b.shape)


def pattern(patterns, key, default):
    """PEFT's pattern lookup (first KEY with key ~ (.*\\.)?(KEY)$)."""
    import re
    for k, v in patterns.items():
        if re.match(r"(.*\.)?(%s)$" % k, key):
            return v
    return default


def kv_list(items, conv):
    """["KEY=V", ...] -> {KEY: conv(V)} in order."""
    out = {}
    for it in items:
        k, _, v = it.partition("=")
        out[k] = conv(v)
    return out


def main(argv=None):
    """Write the directory (and the GGUF twin) as the flags say."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--gguf")
    ap.add_argument("--gguf-type", default="f32", choices=("f32", "f16", "q8_0"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--alpha", type=float, default=8.0)
    ap.add_argument("--rslora", action="store_true")
    ap.add_argument("--modules", default=",".join(MODULES))
    ap.add_argument("--layers", default=None, help="comma-separated (default: all)")
    ap.add_argument("--dtype", default="f32", choices=("f32", "f16", "bf16"))
    ap.add_argument("--rank-pattern", action="append", default=[])
    ap.add_argument("--alpha-pattern", action="append", default=[])
    ap.add_argument("--target-regex", default=None)
    ap.add_argument("--defect", default=None)
    a = ap.parse_args(argv)
    model = llama_ref.load_model(a.model)
    cfg_model = model.config
    mods = a.modules.split(",")
    layers = [int(x) for x in a.layers.split(",")] if a.layers else list(range(cfg_model.n_layers))
    rank_pat = kv_list(a.rank_pattern, int)
    alpha_pat = kv_list(a.alpha_pattern, float)
    rng = np.random.default_rng(a.seed)
    st, gguf = [], []
    # The GGUF's one alpha: lora_alpha (times sqrt(r) for rsLoRA, so alpha/r is alpha/sqrt(r)).
    g_alpha = a.alpha * np.sqrt(a.rank) if a.rslora else a.alpha
    for layer in layers:
        for mod in mods:
            parent, part, attr = MODULES[mod]
            w = getattr(model.layers[layer], attr)
            key = "model.layers.%d.%s.%s" % (layer, parent, mod)
            r = pattern(rank_pat, key, a.rank)
            alpha = pattern(alpha_pat, key, a.alpha)
            A = (rng.standard_normal((r, w.shape[1])) * 0.2).astype(np.float32)
            B = (rng.standard_normal((w.shape[0], r)) * 0.2).astype(np.float32)
            prefix = "base_model.model." + key
            dt, data, A = st_bytes(A, a.dtype)
            st.append((prefix + ".lora_A.weight", dt, A.shape, data))
            dt, data, B = st_bytes(B, a.dtype)
            st.append((prefix + ".lora_B.weight", dt, B.shape, data))
            scale = alpha / np.sqrt(r) if a.rslora else alpha / r
            bg = B if scale == g_alpha / r else (B.astype(np.float64) * (scale / (g_alpha / r))).astype(np.float32)
            if model.arch == "llama" and part in ("attn_q", "attn_k"):
                bg = gguf_permute(bg, cfg_model.n_heads if part == "attn_q" else cfg_model.n_kv_heads)
            name = "blk.%d.%s.weight" % (layer, part)
            gguf += [(name + ".lora_a", A), (name + ".lora_b", bg)]
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": os.path.basename(a.model),
              "r": a.rank, "lora_alpha": a.alpha, "lora_dropout": 0.0, "bias": "none", "fan_in_fan_out": False,
              "use_rslora": a.rslora, "use_dora": False, "rank_pattern": rank_pat, "alpha_pattern": alpha_pat,
              "target_modules": a.target_regex if a.target_regex else sorted(mods)}
    defect(a.defect, st, config, cfg_model, a.rank, rng)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "adapter_config.json"), "w") as f:
        json.dump(config, f, indent=2)
    st_path = os.path.join(a.out, "adapter_model.safetensors")
    write_safetensors(st_path, st)
    defect_bytes(a.defect, st_path)
    if a.gguf:
        write_gguf_lora(a.gguf, model.arch, float(g_alpha), gguf, a.gguf_type)
    return 0


def defect(name, st, config, cfg_model, rank, rng):
    """Apply a --defect that changes tensors or the config (before writing)."""
    if name is None or name in ("truncated", "hlen", "badjson", "offsets", "overlap"):
        return
    first = st[0][0]  # ...layers.0.mlp.down_proj.lora_A.weight or the like
    prefix = first[:first.index(".lora_")]

    def extra(p):
        """An extra A/B pair under module path p."""
        for ab, shape in (("A", (rank, 64)), ("B", (64, rank))):
            st.append((p + ".lora_%s.weight" % ab, "F32", shape, np.zeros(shape, np.float32).tobytes()))

    if name == "rank":
        i = next(i for i, t in enumerate(st) if t[0].endswith("lora_B.weight"))
        n, dt, shape, _ = st[i]
        st[i] = (n, "F32", (shape[0], shape[1] + 1), np.zeros((shape[0], shape[1] + 1), np.float32).tobytes())
    elif name == "cfgrank":
        config["r"] = rank + 1
    elif name == "shape":
        i = next(i for i, t in enumerate(st) if t[0].endswith("lora_A.weight"))
        n, dt, shape, _ = st[i]
        st[i] = (n, "F32", (shape[0], shape[1] + 1), np.zeros((shape[0], shape[1] + 1), np.float32).tobytes())
    elif name == "module":
        extra("base_model.model.model.layers.0.self_attn.qkv_proj")
        config["target_modules"] = "all-linear"
    elif name == "lmhead":
        extra("base_model.model.lm_head")
        config["target_modules"] = "all-linear"
    elif name == "embedding":
        st.append(("base_model.model.model.embed_tokens.lora_embedding_A", "F32", (rank, 8),
                   np.zeros((rank, 8), np.float32).tobytes()))
    elif name == "lonely":
        i = next(i for i, t in enumerate(st) if t[0].endswith("lora_B.weight"))
        del st[i]
    elif name == "layer":
        extra("base_model.model.model.layers.%d.self_attn.v_proj" % cfg_model.n_layers)
    elif name == "dtype":
        n, dt, shape, _ = st[0]
        st[0] = (n, "F64", shape, np.zeros(shape, np.float64).tobytes())
    elif name == "untargeted":
        mod = prefix.rsplit(".", 1)[1]
        config["target_modules"] = [m for m in MODULES if m != mod]
    elif name == "dora":
        config["use_dora"] = True
    else:
        sys.exit("make_peft.py: unknown --defect %s" % name)


def defect_bytes(name, path):
    """Apply a --defect that breaks the safetensors bytes (after writing)."""
    if name not in ("truncated", "hlen", "badjson", "offsets", "overlap"):
        return
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack_from("<Q", data)[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    if name == "truncated":
        data = data[:8 + n // 2]
    elif name == "hlen":
        data = struct.pack("<Q", len(data)) + data[8:]
    else:
        if name == "badjson":
            text = json.dumps(header)[:-1].encode()  # no closing brace
        else:
            names = sorted(k for k in header if k != "__metadata__")
            if name == "offsets":
                b, e = header[names[0]]["data_offsets"]
                header[names[0]]["data_offsets"] = [b + len(body), e + len(body)]
            else:  # overlap: a tensor takes the bytes of the first one of its shape and dtype
                first = {}
                for k in names:
                    sig = (header[k]["dtype"], tuple(header[k]["shape"]))
                    if sig in first:
                        header[k]["data_offsets"] = header[first[sig]]["data_offsets"]
                        break
                    first[sig] = k
            text = json.dumps(header).encode()
        data = struct.pack("<Q", len(text)) + text + body
    with open(path, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    sys.exit(main())
