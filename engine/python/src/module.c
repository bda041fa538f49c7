/*
 * module.c - the cortex._cortex extension module: its exception classes
 * (one per CX_E* code, each under cortex.Error and the Python built-in it
 * refines), the argument conversions every type shares, and PyInit.
 *
 * Argument conversion is where Python reaches C, so it trusts nothing: a
 * token id is range-checked against the vocabulary before the engine sees
 * it, a number is checked for type, finiteness and range, and every
 * refusal is TypeError or ValueError naming the argument
 * (tests/python/test_errors.py fuzzes these paths).
 */
#include "pycx.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

PyObject *pycx_Error;

/* The exception class of each CX_E* code: its name, the built-in it also
 * derives from (so `except OSError` catches a missing file), its doc. */
static struct {
    int code;
    const char *name;
    PyObject **base;
    const char *doc;
    PyObject *cls;
} ERRS[] = {
    {CX_EIO, "cortex.FileError", &PyExc_OSError, "A file cannot be opened, read, written or mapped (CX_EIO).", NULL},
    {CX_EFORMAT, "cortex.FormatError", &PyExc_ValueError, "The bytes are not a valid model, tokenizer or adapter file (CX_EFORMAT).", NULL},
    {CX_ERANGE, "cortex.RangeError", &PyExc_ValueError, "A size, offset or dimension is out of range (CX_ERANGE).", NULL},
    {CX_EUNSUP, "cortex.UnsupportedError", NULL, "Valid, but a feature this engine does not support (CX_EUNSUP).", NULL},
    {CX_EINVAL, "cortex.InvalidArgumentError", &PyExc_ValueError, "The engine refused an argument (CX_EINVAL).", NULL},
    {CX_ENOMEM, "cortex.OutOfMemoryError", &PyExc_MemoryError, "An allocation failed (CX_ENOMEM).", NULL},
    {CX_ECTX, "cortex.ContextFullError", NULL, "The sequence would exceed the context length (CX_ECTX).", NULL},
    {CX_EBUSY, "cortex.BusyError", NULL, "The scheduler's queue is full or it is stopping: try later (CX_EBUSY).", NULL},
};
#define N_ERRS (sizeof ERRS / sizeof ERRS[0])

/* See pycx.h. */
PyObject *pycx_raise_code(int code, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    PyObject *cls = pycx_Error;
    for (size_t i = 0; i < N_ERRS; i++)
        if (ERRS[i].code == code) cls = ERRS[i].cls;
    PyObject *args = Py_BuildValue("(s)", msg);
    PyObject *exc = args ? PyObject_Call(cls, args, NULL) : NULL;
    Py_XDECREF(args);
    if (!exc) return NULL;
    PyObject *c = PyLong_FromLong(code);
    if (c) PyObject_SetAttrString(exc, "code", c);
    Py_XDECREF(c);
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
    return NULL;
}

/* See pycx.h. */
PyObject *pycx_raise(const cx_err *err) {
    return pycx_raise_code(err->code ? err->code : CX_EINVAL, "%s", err->msg[0] ? err->msg : "engine call failed");
}

/* See pycx.h. The flag is read and set with the GIL held, so two threads
 * cannot both see it clear. */
int pycx_enter(int *busy, const char *what) {
    if (*busy) {
        PyErr_Format(PyExc_RuntimeError, "%s is in use by another thread (or by a stream still open): one call at a time", what);
        return -1;
    }
    *busy = 1;
    return 0;
}

/* See pycx.h. */
int pycx_int_arg(PyObject *obj, const char *arg, long long lo, long long hi, long long dflt, long long *out) {
    if (!obj || obj == Py_None) {
        *out = dflt;
        return 0;
    }
    if (PyBool_Check(obj) || !PyLong_Check(obj)) {
        if (!PyIndex_Check(obj) || PyBool_Check(obj)) {
            PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", arg, Py_TYPE(obj)->tp_name);
            return -1;
        }
    }
    int overflow = 0;
    PyObject *i = PyNumber_Index(obj);
    if (!i) return -1;
    long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
    Py_DECREF(i);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow || v < lo || v > hi) {
        PyErr_Format(PyExc_ValueError, "%s must be in [%lld, %lld]", arg, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* See pycx.h. */
int pycx_float_arg(PyObject *obj, const char *arg, double lo, double hi, double dflt, double *out) {
    if (!obj || obj == Py_None) {
        *out = dflt;
        return 0;
    }
    if (PyBool_Check(obj) || !(PyFloat_Check(obj) || PyLong_Check(obj) || PyIndex_Check(obj) ||
                               (Py_TYPE(obj)->tp_as_number && Py_TYPE(obj)->tp_as_number->nb_float))) {
        PyErr_Format(PyExc_TypeError, "%s must be a number, not %.100s", arg, Py_TYPE(obj)->tp_name);
        return -1;
    }
    double v = PyFloat_AsDouble(obj);
    if (v == -1.0 && PyErr_Occurred()) return -1;
    if (!isfinite(v) || v < lo || v > hi) {
        PyErr_Format(PyExc_ValueError, "%s must be a finite number in [%g, %g]", arg, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* One id of a sequence into *out, range-checked. */
static int one_id(PyObject *o, int n_vocab, const char *arg, Py_ssize_t i, int32_t *out) {
    if (PyBool_Check(o) || !PyIndex_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s[%zd] must be an int token id, not %.100s", arg, i, Py_TYPE(o)->tp_name);
        return -1;
    }
    PyObject *x = PyNumber_Index(o);
    if (!x) return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
    Py_DECREF(x);
    if (v == -1 && PyErr_Occurred()) return -1;
    long long hi = n_vocab > 0 ? n_vocab - 1 : INT32_MAX;
    if (overflow || v < 0 || v > hi) {
        if (overflow)
            PyErr_Format(PyExc_ValueError, "%s[%zd] is not a token id of this model (0..%lld)", arg, i, hi);
        else
            PyErr_Format(PyExc_ValueError, "%s[%zd] = %lld is not a token id of this model (0..%lld)", arg, i, v, hi);
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

/* Ids from a buffer of C integers (numpy arrays): no per-item objects. */
static int ids_from_buffer(Py_buffer *b, int n_vocab, const char *arg, int32_t *out, Py_ssize_t n) {
    char f = b->format ? b->format[b->format[0] == '<' || b->format[0] == '=' || b->format[0] == '@'] : 'B';
    long long hi = n_vocab > 0 ? n_vocab - 1 : INT32_MAX;
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *p = (const char *)b->buf + i * b->itemsize;
        long long v;
        switch (b->itemsize == 1 ? 1 : f) {
        case 1: v = f == 'b' ? *(const int8_t *)p : *(const uint8_t *)p; break;
        case 'h': v = *(const int16_t *)p; break;
        case 'H': v = *(const uint16_t *)p; break;
        case 'i': v = *(const int32_t *)p; break;
        case 'I': v = *(const uint32_t *)p; break;
        case 'l': case 'q': v = b->itemsize == 8 ? (long long)*(const int64_t *)p : *(const int32_t *)p; break;
        case 'L': case 'Q': {
            uint64_t u = b->itemsize == 8 ? *(const uint64_t *)p : *(const uint32_t *)p;
            v = u > (uint64_t)INT64_MAX ? -1 : (long long)u;
            break;
        }
        default:
            PyErr_Format(PyExc_TypeError, "%s must hold integers, not items of format '%s'", arg, b->format);
            return -1;
        }
        if (v < 0 || v > hi) {
            PyErr_Format(PyExc_ValueError, "%s[%zd] = %lld is not a token id of this model (0..%lld)", arg, i, v, hi);
            return -1;
        }
        out[i] = (int32_t)v;
    }
    return 0;
}

/* See pycx.h. */
int pycx_ids(PyObject *obj, int n_vocab, const char *arg, int32_t **out, int *n) {
    *out = NULL;
    *n = 0;
    if (PyUnicode_Check(obj) || PyBytes_Check(obj) || PyByteArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be token ids (a sequence of ints), not %.100s", arg, Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (PyObject_CheckBuffer(obj)) {
        Py_buffer b;
        if (PyObject_GetBuffer(obj, &b, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
        int rc = -1;
        Py_ssize_t cnt = b.itemsize ? b.len / b.itemsize : 0;
        if (b.ndim > 1) {
            PyErr_Format(PyExc_ValueError, "%s must be one-dimensional, not %d-dimensional", arg, b.ndim);
        } else if (cnt > INT32_MAX / 2) {
            PyErr_Format(PyExc_ValueError, "%s: too many tokens (%zd)", arg, cnt);
        } else if ((*out = PyMem_Malloc(sizeof(int32_t) * (size_t)(cnt ? cnt : 1))) == NULL) {
            PyErr_NoMemory();
        } else if (ids_from_buffer(&b, n_vocab, arg, *out, cnt) == 0) {
            *n = (int)cnt;
            rc = 0;
        }
        PyBuffer_Release(&b);
        if (rc) {
            PyMem_Free(*out);
            *out = NULL;
        }
        return rc;
    }
    PyObject *seq = PySequence_Fast(obj, "");
    if (!seq) {
        PyErr_Format(PyExc_TypeError, "%s must be token ids (a sequence of ints), not %.100s", arg, Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t cnt = PySequence_Fast_GET_SIZE(seq);
    int rc = -1;
    if (cnt > INT32_MAX / 2) {
        PyErr_Format(PyExc_ValueError, "%s: too many tokens (%zd)", arg, cnt);
    } else if ((*out = PyMem_Malloc(sizeof(int32_t) * (size_t)(cnt ? cnt : 1))) == NULL) {
        PyErr_NoMemory();
    } else {
        rc = 0;
        for (Py_ssize_t i = 0; i < cnt && rc == 0; i++)
            rc = one_id(PySequence_Fast_GET_ITEM(seq, i), n_vocab, arg, i, &(*out)[i]);
        if (rc == 0) *n = (int)cnt;
    }
    Py_DECREF(seq);
    if (rc) {
        PyMem_Free(*out);
        *out = NULL;
    }
    return rc;
}

/* See pycx.h. */
int pycx_prompt(const cx_model *m, PyObject *obj, int special, const char *arg, int32_t **out, int *n) {
    const char *text;
    Py_ssize_t len;
    *out = NULL;
    *n = 0;
    if (PyUnicode_Check(obj)) {
        text = PyUnicode_AsUTF8AndSize(obj, &len);
        if (!text) return -1;
    } else if (PyBytes_Check(obj)) {
        text = PyBytes_AS_STRING(obj);
        len = PyBytes_GET_SIZE(obj);
    } else {
        if (pycx_ids(obj, cx_model_get_info(m)->n_vocab, arg, out, n)) return -1;
        if (*n == 0) {
            PyMem_Free(*out);
            *out = NULL;
            PyErr_Format(PyExc_ValueError, "%s is empty", arg);
            return -1;
        }
        return 0;
    }
    if (len == 0) {
        PyErr_Format(PyExc_ValueError, "%s is empty", arg);
        return -1;
    }
    int flags = CX_TOKENIZE_BOS | (special ? CX_TOKENIZE_SPECIAL : 0);
    /* A token holds at least one byte except BOS and control tokens matched
     * from their text (each longer than one byte): len + 2 always fits. */
    if ((size_t)len > (size_t)INT32_MAX - 2) {
        PyErr_Format(PyExc_ValueError, "%s is too long (%zd bytes)", arg, len);
        return -1;
    }
    int cap = (int)len + 2, got = 0;
    int32_t *ids = PyMem_Malloc(sizeof(int32_t) * (size_t)cap);
    if (!ids) {
        PyErr_NoMemory();
        return -1;
    }
    cx_err err = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cx_tokenize(m, text, (size_t)len, flags, ids, cap, &got, &err);
    Py_END_ALLOW_THREADS
    if (rc) {
        PyMem_Free(ids);
        pycx_raise(&err);
        return -1;
    }
    *out = ids;
    *n = got;
    return 0;
}

/* See pycx.h. */
int pycx_sampling_params(const pycx_sampling *in, cx_sampler_params *out) {
    cx_sampler_params p = cx_sampler_defaults();
    double t, tp, mp, rp, pp, fp;
    long long k, rl;
    if (pycx_float_arg(in->temperature, "temperature", 0, 1e6, p.temperature, &t) ||
        pycx_int_arg(in->top_k, "top_k", -1, INT32_MAX, p.top_k, &k) ||
        pycx_float_arg(in->top_p, "top_p", 0, 1, p.top_p, &tp) ||
        pycx_float_arg(in->min_p, "min_p", 0, 1, p.min_p, &mp) ||
        pycx_float_arg(in->repeat_penalty, "repeat_penalty", 1e-6, 1e6, p.repeat_penalty, &rp) ||
        pycx_int_arg(in->repeat_last_n, "repeat_last_n", 0, INT32_MAX, p.repeat_last_n, &rl) ||
        pycx_float_arg(in->presence_penalty, "presence_penalty", -1e6, 1e6, p.presence_penalty, &pp) ||
        pycx_float_arg(in->frequency_penalty, "frequency_penalty", -1e6, 1e6, p.frequency_penalty, &fp))
        return -1;
    if (in->seed && in->seed != Py_None) {
        /* any int: taken modulo 2^64, as a seed only names a stream */
        if (PyBool_Check(in->seed) || !PyLong_Check(in->seed)) {
            PyErr_Format(PyExc_TypeError, "seed must be an int, not %.100s", Py_TYPE(in->seed)->tp_name);
            return -1;
        }
        unsigned long long u = PyLong_AsUnsignedLongLongMask(in->seed);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) return -1;
        p.seed = (uint64_t)u;
    }
    p.temperature = (float)t;
    p.top_k = (int)k;
    p.top_p = (float)tp;
    p.min_p = (float)mp;
    p.repeat_penalty = (float)rp;
    p.repeat_last_n = (int)rl;
    p.presence_penalty = (float)pp;
    p.frequency_penalty = (float)fp;
    *out = p;
    return 0;
}

/* See pycx.h. */
void pycx_stops_free(char **s, int n) {
    for (int i = 0; s && i < n; i++) PyMem_Free(s[i]);
    PyMem_Free(s);
}

/* See pycx.h. */
int pycx_stops(PyObject *obj, const char *arg, char ***out, int *n) {
    *out = NULL;
    *n = 0;
    if (!obj || obj == Py_None) return 0;
    PyObject *seq = PyUnicode_Check(obj) ? PyTuple_Pack(1, obj) : PySequence_Fast(obj, "");
    if (!seq) {
        PyErr_Format(PyExc_TypeError, "%s must be a str or a sequence of str, not %.100s", arg, Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t cnt = PySequence_Fast_GET_SIZE(seq);
    if (cnt > 64) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s: at most 64 stop strings, not %zd", arg, cnt);
        return -1;
    }
    char **s = PyMem_Calloc((size_t)cnt + 1, sizeof *s);
    int rc = s ? 0 : -1;
    if (!s) PyErr_NoMemory();
    Py_ssize_t i = 0;
    for (; rc == 0 && i < cnt; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        Py_ssize_t len;
        const char *t = PyUnicode_Check(o) ? PyUnicode_AsUTF8AndSize(o, &len) : NULL;
        if (!PyUnicode_Check(o)) {
            PyErr_Format(PyExc_TypeError, "%s[%zd] must be a str, not %.100s", arg, i, Py_TYPE(o)->tp_name);
            rc = -1;
        } else if (!t) {
            rc = -1;
        } else if (len == 0 || len > 1024 || memchr(t, 0, (size_t)len)) {
            PyErr_Format(PyExc_ValueError, "%s[%zd] must be 1 to 1024 bytes long, without NUL", arg, i);
            rc = -1;
        } else if ((s[i] = PyMem_Malloc((size_t)len + 1)) == NULL) {
            PyErr_NoMemory();
            rc = -1;
        } else {
            memcpy(s[i], t, (size_t)len + 1);
        }
    }
    Py_DECREF(seq);
    if (rc) {
        pycx_stops_free(s, (int)cnt);
        return -1;
    }
    *out = s;
    *n = (int)cnt;
    return 0;
}

/* See pycx.h. */
PyObject *pycx_text(const char *t, size_t n) { return PyUnicode_DecodeUTF8(t, (Py_ssize_t)n, "replace"); }

/* See pycx.h. A lead byte announces 2..4 bytes; the tail is incomplete when
 * fewer follow it. Invalid bytes are not held (the decoder replaces them). */
size_t pycx_utf8_partial(const char *t, size_t n) {
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = (unsigned char)t[n - k];
        if ((c & 0xc0) == 0x80) continue; /* continuation: look further back */
        size_t need = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1;
        return need > k ? k : 0;
    }
    return 0;
}

/* See pycx.h. */
PyObject *pycx_frombuffer_f32(PyObject *obj, int n_dims, const Py_ssize_t *shape) {
    static PyObject *frombuffer; /* numpy.frombuffer, kept for the module's life */
    if (!frombuffer) {
        PyObject *np = PyImport_ImportModule("numpy");
        if (!np) return NULL;
        frombuffer = PyObject_GetAttrString(np, "frombuffer");
        Py_DECREF(np);
        if (!frombuffer) return NULL;
    }
    PyObject *arr = PyObject_CallFunction(frombuffer, "Os", obj, "float32");
    if (!arr || n_dims == 1) return arr;
    PyObject *shaped = PyObject_CallMethod(arr, "reshape", "nn", shape[0], shape[1]);
    Py_DECREF(arr);
    return shaped;
}

/* ---- module functions ------------------------------------------------------ */

static PyObject *mod_cpu_features(PyObject *self, PyObject *unused) { return PyUnicode_FromString(cx_cpu_features()); }

static PyObject *mod_isa(PyObject *self, PyObject *args) {
    const char *name = NULL;
    if (!PyArg_ParseTuple(args, "|z:isa", &name)) return NULL;
    cx_err err = {0};
    const char *r = cx_isa_resolve(name, &err);
    return r ? PyUnicode_FromString(r) : pycx_raise(&err);
}

static PyMethodDef METHODS[] = {
    {"cpu_features", mod_cpu_features, METH_NOARGS,
     "cpu_features() -> str\n\nWhat CPUID reports that the kernels care about, e.g. 'avx2 fma f16c avx512f ...'."},
    {"isa", mod_isa, METH_VARARGS,
     "isa(name=None) -> str\n\nThe kernel instruction set a Model(isa=name) would run with here ('scalar', 'avx2', "
     "'avxvnni', 'avx512', 'avx512vnni', 'avx512bf16'); None or 'auto': the best this CPU offers. Raises "
     "InvalidArgumentError when name is unknown or not available on this CPU."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "cortex._cortex",
    "The Cortex inference engine's C core. Import `cortex`, not this module: see help(cortex).", -1, METHODS,
    NULL, NULL, NULL, NULL,
};

/* Make cortex.Error and its subclasses. */
static int add_errors(PyObject *mod) {
    pycx_Error = PyErr_NewExceptionWithDoc("cortex.Error",
                                           "An error the engine reported. `code` is its CX_E* value (negative); the "
                                           "message names the thing and the problem.",
                                           NULL, NULL);
    if (!pycx_Error || PyModule_AddObjectRef(mod, "Error", pycx_Error)) return -1;
    for (size_t i = 0; i < N_ERRS; i++) {
        PyObject *bases = ERRS[i].base ? PyTuple_Pack(2, pycx_Error, *ERRS[i].base) : PyTuple_Pack(1, pycx_Error);
        if (!bases) return -1;
        ERRS[i].cls = PyErr_NewExceptionWithDoc(ERRS[i].name, ERRS[i].doc, bases, NULL);
        Py_DECREF(bases);
        if (!ERRS[i].cls) return -1;
        PyObject *code = PyLong_FromLong(ERRS[i].code);
        int rc = code ? PyObject_SetAttrString(ERRS[i].cls, "code", code) : -1;
        Py_XDECREF(code);
        if (rc || PyModule_AddObjectRef(mod, strchr(ERRS[i].name, '.') + 1, ERRS[i].cls)) return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__cortex(void) {
    PyObject *mod = PyModule_Create(&MODULE);
    if (!mod) return NULL;
    if (add_errors(mod) || pycx_model_init(mod) || pycx_session_init(mod) || pycx_lora_init(mod) || pycx_spec_init(mod) ||
        pycx_sched_init(mod) || pycx_tools_init(mod)) {
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
