/*
 * tools.c - the module's tools (cortex_tools.h): synthetic models in real
 * shapes, and quantization of a file into another weight type. Both write
 * files and run without the GIL.
 */
#include "pycx.h"

static PyObject *tools_shapes(PyObject *self, PyObject *unused) {
    PyObject *l = PyList_New(0);
    for (const cx_shape *s = cx_shapes(); l && s->name; s++) {
        PyObject *n = PyUnicode_FromString(s->name);
        if (!n || PyList_Append(l, n)) Py_CLEAR(l);
        Py_XDECREF(n);
    }
    return l;
}

/* A weight type name into its id; ValueError naming arg. */
static int type_arg(const char *name, const char *arg, int *out) {
    int t = cx_type_from_name(name);
    if (t < 0) {
        PyErr_Format(PyExc_ValueError, "%s: unknown weight type '%s' (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, q4_k_m, mxfp4)",
                     arg, name);
        return -1;
    }
    *out = t;
    return 0;
}

static PyObject *tools_synth(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"shape", "path", "type", "seed", "n_ctx", "n_vocab", "vocab", NULL};
    const char *shape_name, *type_name = "q8_0";
    PyObject *path_o = NULL, *seed_o = NULL, *ctx_o = NULL, *nv_o = NULL, *vocab_o = Py_None, *vocab_b = NULL, *r = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO&|s$OOOO:synth", kwlist, &shape_name, PyUnicode_FSConverter, &path_o,
                                     &type_name, &seed_o, &ctx_o, &nv_o, &vocab_o))
        return NULL;
    const cx_shape *found = cx_shape_find(shape_name);
    cx_shape shape;
    int type;
    long long seed, n_ctx, n_vocab;
    if (!found) {
        PyErr_Format(PyExc_ValueError, "shape: unknown shape '%s' (cortex.shapes() lists them)", shape_name);
        goto out;
    }
    shape = *found;
    if (type_arg(type_name, "type", &type) || pycx_int_arg(seed_o, "seed", 0, INT64_MAX, 1, &seed) ||
        pycx_int_arg(ctx_o, "n_ctx", 0, INT32_MAX, 0, &n_ctx) || pycx_int_arg(nv_o, "n_vocab", 0, 1 << 20, 0, &n_vocab))
        goto out;
    if (n_ctx) shape.n_ctx = (int)n_ctx; /* the context the file states, as `cortex synth -c` */
    if (n_vocab) {
        if (vocab_o != Py_None) {
            PyErr_SetString(PyExc_ValueError, "n_vocab: a copied vocabulary (vocab=) sets the size itself");
            goto out;
        }
        shape.n_vocab = (int)n_vocab; /* e.g. a small model with gpt-oss's 201,088 tokens */
    }
    if (vocab_o != Py_None && !PyUnicode_FSConverter(vocab_o, &vocab_b)) goto out;
    cx_err err = {0};
    int rc;
    const char *path = PyBytes_AS_STRING(path_o), *vocab = vocab_b ? PyBytes_AS_STRING(vocab_b) : NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = cx_synth_write_ex(&shape, type, (uint64_t)seed, vocab, path, &err);
    Py_END_ALLOW_THREADS
    r = rc ? pycx_raise(&err) : Py_NewRef(Py_None);
out:
    Py_XDECREF(path_o);
    Py_XDECREF(vocab_b);
    return r;
}

static PyObject *tools_quantize(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"src", "dst", "type", "tokenizer", NULL};
    PyObject *src_o = NULL, *dst_o = NULL, *tok_o = Py_None, *tok_b = NULL, *r = NULL;
    const char *type_name;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O&s|$O:quantize", kwlist, PyUnicode_FSConverter, &src_o,
                                     PyUnicode_FSConverter, &dst_o, &type_name, &tok_o))
        goto out;
    int type;
    if (type_arg(type_name, "type", &type)) goto out;
    if (tok_o != Py_None && !PyUnicode_FSConverter(tok_o, &tok_b)) goto out;
    cx_quantize_stats st;
    cx_err err = {0};
    int rc;
    const char *src = PyBytes_AS_STRING(src_o), *dst = PyBytes_AS_STRING(dst_o), *tok = tok_b ? PyBytes_AS_STRING(tok_b) : NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = cx_quantize_file(src, tok, dst, type, &st, &err);
    Py_END_ALLOW_THREADS
    if (rc) {
        pycx_raise(&err);
        goto out;
    }
    PyObject *types = PyDict_New();
    for (int t = 0; types && t < CX_QUANT_NTYPES; t++) {
        if (!st.count[t]) continue;
        PyObject *v = Py_BuildValue("{s:i,s:K}", "tensors", st.count[t], "bytes", (unsigned long long)st.bytes[t]);
        if (!v || PyDict_SetItemString(types, cx_type_name(t), v)) Py_CLEAR(types);
        Py_XDECREF(v);
    }
    if (types)
        r = Py_BuildValue("{s:s,s:i,s:K,s:K,s:K,s:K,s:i,s:N}", "input_format", st.input_format, "n_tensors", st.n_tensors,
                          "in_file_bytes", (unsigned long long)st.in_file_bytes, "out_file_bytes",
                          (unsigned long long)st.out_file_bytes, "in_weight_bytes", (unsigned long long)st.in_weight_bytes,
                          "out_weight_bytes", (unsigned long long)st.out_weight_bytes, "n_fallback", st.n_fallback,
                          "types", types);
out:
    Py_XDECREF(src_o);
    Py_XDECREF(dst_o);
    Py_XDECREF(tok_b);
    return r;
}

static PyObject *tools_harmony_split(PyObject *self, PyObject *arg) {
    const char *t;
    Py_ssize_t n;
    if (!PyUnicode_Check(arg)) return PyErr_Format(PyExc_TypeError, "text must be a str, not %.100s", Py_TYPE(arg)->tp_name);
    if (!(t = PyUnicode_AsUTF8AndSize(arg, &n))) return NULL;
    cx_harmony_parts p;
    int rc = cx_harmony_split(t, (size_t)n, &p);
    if (rc < 0) return PyErr_NoMemory();
    if (rc == 0) return Py_BuildValue("(OO)", Py_None, Py_None);
    PyObject *c = p.content ? pycx_text(p.content, p.n_content) : Py_NewRef(Py_None);
    PyObject *r = p.reasoning ? pycx_text(p.reasoning, p.n_reasoning) : Py_NewRef(Py_None);
    cx_harmony_parts_free(&p);
    PyObject *out = c && r ? PyTuple_Pack(2, c, r) : NULL;
    Py_XDECREF(c);
    Py_XDECREF(r);
    return out;
}

#define KW (PyCFunction)(void (*)(void))
static PyMethodDef TOOLS[] = {
    {"harmony_split", tools_harmony_split, METH_O,
     "harmony_split(text) -> (content, reasoning)\n\nA gpt-oss answer in the harmony format split into its final "
     "channel's text and its analysis channel's (either None when absent); (None, None) when text does not follow "
     "the format."},
    {"shapes", tools_shapes, METH_NOARGS, "shapes() -> list[str]\n\nThe model shapes synth() knows (stories15m, tinyllama, llama3-8b, gpt-oss-20b, ...)."},
    {"synth", KW tools_synth, METH_VARARGS | METH_KEYWORDS,
     "synth(shape, path, type='q8_0', *, seed=1, n_ctx=0, n_vocab=0, vocab=None)\n\nWrite a GGUF model of a real shape with "
     "deterministic pseudo-random weights (no download): same arguments, same bytes. type: f32, f16, bf16, q8_0, "
     "q4_0, q4_k, q6_k, q4_k_m or mxfp4. n_ctx: the context length the file states (0: the shape's). n_vocab: a synthetic vocabulary of that many tokens (0: the shape's). vocab: a GGUF whose vocabulary to copy (None: a synthetic one)."},
    {"quantize", KW tools_quantize, METH_VARARGS | METH_KEYWORDS,
     "quantize(src, dst, type, *, tokenizer=None) -> dict\n\nConvert an F32/F16/BF16 GGUF (or a llama2.c "
     "checkpoint with its tokenizer) into a GGUF of weight type `type`; returns the counts per type. On failure "
     "no file is left."},
    {NULL, NULL, 0, NULL},
};

/* See pycx.h. */
int pycx_tools_init(PyObject *mod) { return PyModule_AddFunctions(mod, TOOLS); }
