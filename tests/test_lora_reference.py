#!/usr/bin/python3
"""Self-check of the numpy reference's LoRA support (tests/reference/llama_ref.py --lora).

On stories260K (Llama, 8 query heads over 4 kv heads), with adapters written by
tests/tools/make_peft.py (a PEFT directory and its GGUF twin), over 24 greedy
positions from BOS:

- scale 0 gives exactly the base model's logits, and the adapter at scale 1 moves
  them (so the checks below cannot pass with an adapter that does nothing);
- the PEFT directory and its F32 GGUF twin give the same logits (the reference's
  own safetensors reader, name mapping and q/k row order against the twin, whose
  rows the writer permuted with llama.cpp's converter formula);
- the F16 twin of an F16 adapter gives the same logits; the Q8_0 twin's deltas
  (alpha/rank) B A are within 2% of the PEFT adapter's (its quantization error);
- scale is linear: scale 2 with alpha 8 equals scale 1 with alpha 16;
- the q/k row order is the right one, checked through RoPE rather than against
  any permutation formula: the base model with Wq/Wk rows put back in Hugging
  Face's rotate-half order (written here as index pairs) and NeoX RoPE gives the
  base logits; that model with the PEFT adapter applied unpermuted (as to a
  qwen2 base) gives the logits of the GGUF-order model with the adapter permuted;
- `llama_ref.py --lora DIR:0.5` (the CLI) writes the logits of apply_lora at 0.5.

Models come from $CORTEX_MODELS, else <repo>/../shared/models; without them the
test prints SKIP and exits 0, except under CI=true. Output: `ok - name` /
`FAIL - name: detail` lines and a last line `N passed, M failed`.
"""
import copy
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != "/usr/bin/python3":
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "reference"))
sys.dont_write_bytecode = True
import llama_ref  # noqa: E402

MAKE_PEFT = os.path.join(HERE, "tools", "make_peft.py")
STEPS = 24
passed = failed = 0


def check(name, ok, detail=""):
    """Record one result line."""
    global passed, failed
    if ok:
        passed += 1
        print("ok - %s" % name)
    else:
        failed += 1
        print("FAIL - %s: %s" % (name, detail))


def logits(model, loras=()):
    """Teacher-forced logits over the base model's greedy tokens, with (path, scale) adapters applied to a copy."""
    m = copy.deepcopy(model)
    for path, scale in loras:
        llama_ref.apply_lora(m, path, scale)
    return llama_ref.run(m, STEPS, TOKENS)[2]


def make(out, *args):
    """Run make_peft.py for stories260K into out (and out.gguf)."""
    subprocess.run([sys.executable, MAKE_PEFT, "--model", MODEL, "--out", out, "--gguf", out + ".gguf"] + list(args),
                   check=True)


def hf_order(w, n_head):
    """Wq/Wk rows from GGUF order back to Hugging Face's: per head, GGUF rows 2i and 2i+1 hold the
    rotate-half pair (i, i + hd/2)."""
    hd = w.shape[0] // n_head
    out = np.empty_like(w)
    for h in range(n_head):
        for i in range(hd // 2):
            out[h * hd + i] = w[h * hd + 2 * i]
            out[h * hd + hd // 2 + i] = w[h * hd + 2 * i + 1]
    return out


def main():
    global MODEL, TOKENS
    models = os.environ.get("CORTEX_MODELS") or os.path.join(os.path.dirname(HERE), "..", "shared", "models")
    MODEL = os.path.join(models, "stories260K.gguf")
    if not os.path.exists(MODEL):
        if os.environ.get("CI") == "true":
            print("FAIL - %s missing in CI\n0 passed, 1 failed" % MODEL)
            return 1
        print("SKIP: %s not found (set CORTEX_MODELS)" % MODEL)
        return 0
    base = llama_ref.load_model(MODEL)
    TOKENS = llama_ref.run(base, STEPS)[0]
    ref = logits(base)
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "a")
        make(d, "--seed", "7")
        peft = logits(base, [(d, 1.0)])
        check("scale 0 equals no adapter", np.array_equal(logits(base, [(d, 0.0)]), ref))
        effect = np.abs(peft - ref).max()
        check("the adapter moves the logits", effect > 0.05, "max change %g" % effect)
        diff = np.abs(logits(base, [(d + ".gguf", 1.0)]) - peft).max()
        check("PEFT directory == its F32 GGUF twin", diff < 1e-9, "max diff %g" % diff)
        diff = np.abs(logits(base, [(os.path.join(d, "adapter_model.safetensors"), 1.0)]) - peft).max()
        check("the .safetensors file == its directory", diff == 0, "max diff %g" % diff)

        h = os.path.join(tmp, "h")
        make(h, "--seed", "7", "--dtype", "f16", "--gguf-type", "f16")
        diff = np.abs(logits(base, [(h + ".gguf", 1.0)]) - logits(base, [(h, 1.0)])).max()
        check("F16 PEFT == its F16 GGUF twin", diff < 1e-9, "max diff %g" % diff)
        q = os.path.join(tmp, "q")
        make(q, "--seed", "7", "--rank", "32", "--alpha", "64", "--gguf-type", "q8_0")
        exact, quant = dict(llama_ref.lora_peft_deltas(q, base)), dict(llama_ref.lora_gguf_deltas(q + ".gguf"))
        err = max(np.abs(quant[k] - exact[k]).max() / np.abs(exact[k]).max() for k in exact)
        check("Q8_0 GGUF twin's deltas within 2% of its PEFT adapter's", sorted(quant) == sorted(exact) and err < 0.02,
              "relative error %g" % err)
        d32 = dict(llama_ref.lora_gguf_deltas(d + ".gguf"))
        check("F32 twin's deltas are the PEFT adapter's", all(np.array_equal(d32[k], v)
                                                                for k, v in llama_ref.lora_peft_deltas(d, base)))

        a16 = os.path.join(tmp, "a16")
        make(a16, "--seed", "7", "--alpha", "16")
        diff = np.abs(logits(base, [(d, 2.0)]) - logits(base, [(a16, 1.0)])).max()
        check("scale 2 at alpha 8 == scale 1 at alpha 16", diff < 1e-9, "max diff %g" % diff)

        hf = copy.deepcopy(base)
        hf.arch = "qwen2"  # Hugging Face's row order: PEFT deltas apply unpermuted
        hf.config.rope_neox = True
        for layer in hf.layers:
            layer.wq = hf_order(layer.wq, hf.config.n_heads)
            layer.wk = hf_order(layer.wk, hf.config.n_kv_heads)
        diff = np.abs(logits(hf) - ref).max()
        check("HF row order + NeoX RoPE == GGUF order + pairwise RoPE", diff < 1e-9, "max diff %g" % diff)
        diff = np.abs(logits(hf, [(d, 1.0)]) - peft).max()
        check("PEFT on the HF-order model == PEFT permuted on the GGUF model", diff < 1e-9, "max diff %g" % diff)
        unpermuted = copy.deepcopy(base)
        unpermuted.arch = "qwen2"
        diff = np.abs(logits(unpermuted, [(d, 1.0)]) - peft).max()
        check("without the permutation the logits differ", diff > 1e-3, "max diff %g" % diff)

        dump = os.path.join(tmp, "cli.dump")
        llama_ref.write_dump(os.path.join(tmp, "in.dump"), TOKENS, TOKENS, np.zeros((len(TOKENS), 1)))
        llama_ref.main(["--model", MODEL, "--steps", str(STEPS), "--tokens-in", os.path.join(tmp, "in.dump"),
                        "--lora", d + ":0.5", "--out", dump])
        cli = llama_ref.read_dump(dump)[2]
        diff = np.abs(cli - logits(base, [(d, 0.5)]).astype(np.float32)).max()
        check("--lora DIR:0.5 on the command line", diff == 0, "max diff %g" % diff)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
