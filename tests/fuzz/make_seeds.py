#!/usr/bin/env python3
"""make_seeds.py - write the small seed corpora of the fuzz targets.

    python3 tests/fuzz/make_seeds.py            # from the repo root

tests/fuzz/corpus/gguf/ gets hand-built GGUF v3 files, each well under 20 KB
(a synthesised test-tiny model is ~500 KB, too big to be a useful seed):
  kitchen_sink.gguf   one kv of every value type, arrays of several element
                      types, an empty and a nested array, general.alignment,
                      and f32/f16/q8_0/q4_0 tensors
  tiny_llama_f32.gguf a complete 1-layer llama model (embd 8) that loads, so
                      the fuzzer starts inside model_from_gguf's deep paths
  tiny_llama_q8.gguf  the same with q8_0/q4_0/f16 weights, a separate
                      output.weight and grouped-query attention (embd 32)
  aidreams_head.gguf  the first 16 KB of the real aidreams260K.gguf, when
                      ../shared/models (or $CORTEX_MODELS) has it
tests/fuzz/corpus/lora/ gets GGUF LoRA adapters for the test-tiny shape
(embd 64, ff 192, kv 32): an f32 one on q and down, and a q8_0/f16 one on
v and gate (fuzz_lora.c loads them against a synthetic test-tiny).
tests/fuzz/corpus/tokenizer/ gets a few short texts (ASCII, UTF-8, invalid
bytes, byte-token look-alikes). tests/fuzz/corpus/safetensors/ gets small
safetensors files (every supported dtype, a scalar, an empty tensor, a PEFT
LoRA pair) and tests/fuzz/corpus/peft_config/ adapter_config.json texts (list
and regex target_modules, rank/alpha patterns, rsLoRA). The output is
deterministic.
"""
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")

# GGUF metadata value types and ggml tensor types.
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B",
          U64: "<Q", I64: "<q", F64: "<d"}
T_F32, T_F16, T_Q4_0, T_Q8_0 = 0, 1, 2, 8


def gstr(s):
    """A GGUF string: u64 length + bytes."""
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def value(t, v):
    """The bytes of a value of type t (arrays: (element type, list))."""
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(value(et, x) for x in items)
    return struct.pack(SCALAR[t], v)


def tensor_bytes(ttype, ne, rng):
    """Deterministic tensor data of a ggml type and shape (small values)."""
    n = 1
    for d in ne:
        n *= d
    if ttype == T_F32:
        return b"".join(struct.pack("<f", ((rng(i) % 200) - 100) / 1000.0) for i in range(n))
    if ttype == T_F16:
        return b"".join(struct.pack("<e", ((rng(i) % 200) - 100) / 1000.0) for i in range(n))
    if ttype == T_Q8_0:
        return b"".join(struct.pack("<e", 0.01) + bytes((rng(b * 32 + j) % 256) for j in range(32))
                        for b in range(n // 32))
    if ttype == T_Q4_0:
        return b"".join(struct.pack("<e", 0.01) + bytes((rng(b * 16 + j) % 256) for j in range(16))
                        for b in range(n // 32))
    raise ValueError(ttype)


def ones_f32(n):
    """n float32 ones: RMS-norm weights."""
    return struct.pack("<%df" % n, *([1.0] * n))


def gguf(kvs, tensors, alignment=32):
    """A GGUF v3 image from [(key, type, value)] and [(name, type, ne, data)]."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for k, t, v in kvs:
        head += gstr(k) + struct.pack("<I", t) + value(t, v)
    off, blobs = 0, []
    for name, ttype, ne, data in tensors:
        head += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        head += struct.pack("<IQ", ttype, off)
        pad = (-len(data)) % alignment
        blobs.append(data + b"\0" * pad)
        off += len(data) + pad
    head += b"\0" * ((-len(head)) % alignment)
    return head + b"".join(blobs)


def rng_for(seed):
    """A tiny deterministic integer stream keyed by (seed, index)."""
    return lambda i: (i * 2654435761 + seed * 40503) % 4294967291


def kitchen_sink():
    """Every metadata value type, nested and empty arrays, four tensor types."""
    kvs = [
        ("general.architecture", STR, "fuzz"),
        ("general.alignment", U32, 32),
        ("k.u8", U8, 200), ("k.i8", I8, -5), ("k.u16", U16, 60000), ("k.i16", I16, -30000),
        ("k.u32", U32, 4000000000), ("k.i32", I32, -2000000000), ("k.f32", F32, 1.5),
        ("k.bool", BOOL, 1), ("k.str", STR, "h\u00e9llo \u2581world"), ("k.u64", U64, 2 ** 63),
        ("k.i64", I64, -(2 ** 62)), ("k.f64", F64, -2.25),
        ("a.u8", ARR, (U8, [1, 2, 3])), ("a.i32", ARR, (I32, [-1, 0, 7])),
        ("a.f32", ARR, (F32, [0.5, -0.25])), ("a.f64", ARR, (F64, [1e300])),
        ("a.bool", ARR, (BOOL, [0, 1])), ("a.str", ARR, (STR, ["a", "", "\u65e5\u672c"])),
        ("a.empty", ARR, (I64, [])),
        ("a.nested", ARR, (ARR, [(U16, [1, 2]), (STR, ["x", "yz"]), (ARR, [(I8, [-1])])])),
    ]
    r = rng_for(1)
    tensors = [
        ("t.f32", T_F32, [4], tensor_bytes(T_F32, [4], r)),
        ("t.f16", T_F16, [8, 2], tensor_bytes(T_F16, [8, 2], r)),
        ("t.q8_0", T_Q8_0, [32], tensor_bytes(T_Q8_0, [32], r)),
        ("t.q4_0", T_Q4_0, [32, 2], tensor_bytes(T_Q4_0, [32, 2], r)),
    ]
    return gguf(kvs, tensors)


def tiny_llama(E, F, H, HKV, pieces, wtype, separate_output):
    """A complete 1-layer llama model the engine loads (weights of type wtype)."""
    V = len(pieces)
    hd = E // H
    types = [2 if p == "<unk>" else 3 if p in ("<s>", "</s>") else
             6 if p.startswith("<0x") else 1 for p in pieces]
    kvs = [
        ("general.architecture", STR, "llama"), ("general.name", STR, "fuzz-seed"),
        ("llama.context_length", U32, 16), ("llama.embedding_length", U32, E),
        ("llama.feed_forward_length", U32, F), ("llama.block_count", U32, 1),
        ("llama.attention.head_count", U32, H), ("llama.attention.head_count_kv", U32, HKV),
        ("llama.rope.dimension_count", U32, hd), ("llama.rope.freq_base", F32, 10000.0),
        ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
        ("tokenizer.ggml.model", STR, "llama"),
        ("tokenizer.ggml.tokens", ARR, (STR, pieces)),
        ("tokenizer.ggml.scores", ARR, (F32, [-float(i) for i in range(V)])),
        ("tokenizer.ggml.token_type", ARR, (I32, types)),
        ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2),
        ("tokenizer.ggml.unknown_token_id", U32, 0), ("tokenizer.ggml.add_space_prefix", BOOL, 1),
    ]
    r = rng_for(E)
    KV = HKV * hd

    def mat(name, cols, rows, t=None):
        t = wtype if t is None else t
        return (name, t, [cols, rows], tensor_bytes(t, [cols, rows], r))

    def norm(name):
        return (name, T_F32, [E], ones_f32(E))

    tensors = [mat("token_embd.weight", E, V, T_F16 if wtype != T_F32 else T_F32), norm("output_norm.weight")]
    if separate_output:
        tensors.append(mat("output.weight", E, V))
    tensors += [norm("blk.0.attn_norm.weight"), mat("blk.0.attn_q.weight", E, E),
                mat("blk.0.attn_k.weight", E, KV), mat("blk.0.attn_v.weight", E, KV, T_Q4_0 if wtype != T_F32 else None),
                mat("blk.0.attn_output.weight", E, E), norm("blk.0.ffn_norm.weight"),
                mat("blk.0.ffn_gate.weight", E, F), mat("blk.0.ffn_up.weight", E, F),
                mat("blk.0.ffn_down.weight", F, E)]
    return gguf(kvs, tensors)


SP = "\u2581"
PIECES = ["<unk>", "<s>", "</s>", "<0x20>", "<0x41>", "<0xC3>", SP, "a", "b", "e", "h", "l", "o",
          SP + "h", "he", "ll", "lo", SP + "he", "hel", SP + "hello", "\u00e9", SP + "a", "", "ab"]


def texts():
    """Tokenizer seeds: name -> bytes."""
    return {
        "ascii.txt": b"hello world, the quick brown fox",
        "utf8.txt": "h\u00e9llo w\u00f6rld \u65e5\u672c\u8a9e \u00f1and\u00fa \U0001F600".encode(),
        "invalid.txt": b"\xff\xfe a\xc3 \xe2\x96 \x80\x80 \xf0\x9f\x98",
        "spaces.txt": b"  lead  two\tspaces \n\n trail ",
        "pieces.txt": b"<0x41><s></s><unk> \xe2\x96\x81x",
        "one.txt": b"a",
    }


def safetensors(tensors, meta=None):
    """A safetensors image: tensors [(name, dtype, shape, bytes)] laid out in order."""
    import json
    header, pos = {}, 0
    for name, dt, shape, data in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [pos, pos + len(data)]}
        pos += len(data)
    if meta is not None:
        header["__metadata__"] = meta
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors)


def safetensors_seeds():
    """safetensors seeds: name -> bytes (every supported dtype, a scalar, an empty tensor, a LoRA pair)."""
    f32 = b"".join(struct.pack("<f", x / 8.0) for x in range(-6, 6))
    f16 = b"".join(struct.pack("<e", x / 4.0) for x in range(8))
    bf16 = bytes([0x80, 0x3F, 0xC0, 0x3F, 0x00, 0xC0, 0x80, 0x7F])
    pre = "base_model.model.model.layers.0.self_attn.q_proj."
    return {
        "dtypes.safetensors": safetensors([("a", "F32", [3, 4], f32), ("h", "F16", [2, 4], f16),
                                           ("b", "BF16", [4], bf16), ("e", "F32", [0, 3], b""),
                                           ("s", "F32", [], f32[:4])], {"format": "pt"}),
        "lora_pair.safetensors": safetensors([(pre + "lora_A.weight", "F32", [2, 4], f32[:32]),
                                              (pre + "lora_B.weight", "F16", [4, 2], f16)]),
        "empty.safetensors": safetensors([]),
    }


def peft_config_seeds():
    """adapter_config.json seeds: name -> bytes (list and regex targets, patterns, rsLoRA)."""
    return {
        "list.json": b'{"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"], '
                     b'"fan_in_fan_out": false, "use_dora": false, "bias": "none"}',
        "regex.json": b'{"r": 4, "lora_alpha": 8.5, "use_rslora": true, '
                      b'"target_modules": ".*\\\\.(q|k)_proj"}',
        "patterns.json": b'{"r": 4, "lora_alpha": 8, "target_modules": "all-linear", '
                         b'"rank_pattern": {"layers.0.self_attn.q_proj": 2, "mlp\\\\..*": 16}, '
                         b'"alpha_pattern": {"down_proj": 3.5}}',
    }


def write(path, data):
    """Write one seed, refusing anything that would be too big to commit."""
    assert len(data) < 20 * 1024, (path, len(data))
    with open(path, "wb") as f:
        f.write(data)
    print("%6d  %s" % (len(data), os.path.relpath(path, ROOT)))


def lora(pairs, alpha, rank):
    """A GGUF LoRA adapter: pairs = [(base name, n_in, n_out, A type, B type)]."""
    rng = rng_for(7)
    kvs = [("general.architecture", STR, "llama"), ("general.type", STR, "adapter"),
           ("adapter.type", STR, "lora"), ("adapter.lora.alpha", F32, alpha)]
    tensors = []
    for name, n_in, n_out, ta, tb in pairs:
        tensors.append((name + ".lora_a", ta, [n_in, rank], tensor_bytes(ta, [n_in, rank], rng)))
        tensors.append((name + ".lora_b", tb, [rank, n_out], tensor_bytes(tb, [rank, n_out], rng)))
    return gguf(kvs, tensors)


def main():
    ldir = os.path.join(OUT, "lora")
    os.makedirs(ldir, exist_ok=True)
    write(os.path.join(ldir, "q_down_f32.gguf"),
          lora([("blk.0.attn_q.weight", 64, 64, T_F32, T_F32), ("blk.1.ffn_down.weight", 192, 64, T_F32, T_F32)],
               8.0, 2))
    write(os.path.join(ldir, "v_gate_q8.gguf"),
          lora([("blk.0.attn_v.weight", 64, 32, T_Q8_0, T_F16), ("blk.1.ffn_gate.weight", 64, 192, T_Q8_0, T_F16)],
               4.0, 4))
    gdir, tdir = os.path.join(OUT, "gguf"), os.path.join(OUT, "tokenizer")
    os.makedirs(gdir, exist_ok=True)
    os.makedirs(tdir, exist_ok=True)
    write(os.path.join(gdir, "kitchen_sink.gguf"), kitchen_sink())
    write(os.path.join(gdir, "tiny_llama_f32.gguf"), tiny_llama(8, 16, 2, 2, PIECES, T_F32, False))
    write(os.path.join(gdir, "tiny_llama_q8.gguf"), tiny_llama(32, 32, 4, 2, PIECES, T_Q8_0, True))
    models = os.environ.get("CORTEX_MODELS") or os.path.join(ROOT, "..", "shared", "models")
    real = os.path.join(models, "aidreams260K.gguf")
    if os.path.exists(real):
        with open(real, "rb") as f:
            write(os.path.join(gdir, "aidreams_head.gguf"), f.read(16 * 1024))
    else:
        print("note: %s not found; aidreams_head.gguf not written" % real, file=sys.stderr)
    for name, data in texts().items():
        write(os.path.join(tdir, name), data)
    for sub, seeds in (("safetensors", safetensors_seeds()), ("peft_config", peft_config_seeds())):
        os.makedirs(os.path.join(OUT, sub), exist_ok=True)
        for name, data in seeds.items():
            write(os.path.join(OUT, sub, name), data)


if __name__ == "__main__":
    main()
