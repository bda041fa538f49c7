/*
 * session.c - cortex.Session: one sequence and its KV cache, for low-level
 * work (scoring, custom sampling, speculative loops), and its logits as a
 * numpy array over the engine's own buffer.
 *
 * Zero copy: cx_eval leaves the logits of the last position in the
 * session's workspace (the same n_vocab floats for the session's life).
 * Session.logits exports that memory through the buffer protocol
 * (LogitsBuffer, read-only) and numpy.frombuffer wraps it: no byte is
 * copied, and the array's data address is the engine's buffer. The session
 * remembers the array weakly, so reading .logits again while an array is
 * alive returns that same array (nothing allocated); the array sees each
 * later eval's logits (np.array(s.logits) keeps a copy).
 *
 * Lifetime: a LogitsBuffer holds a reference to its Session, and the array
 * holds the LogitsBuffer, so the memory outlives every array over it.
 * close() frees the C session at once when no array is alive, else when
 * the last one goes; a closed session refuses eval. No reference cycle:
 * the session holds its array only weakly.
 *
 *   Session(model) --eval--> has logits --truncate/reset--> no logits
 *        |                        |
 *        +------ close() ---------+--> closed (C session freed when views == 0)
 */
#include "pycx.h"

#include <string.h>

/* ---- the exporter -------------------------------------------------------- */

typedef struct LogitsBuffer {
    PyObject_HEAD
    CxSession *sess;   /* strong: keeps the workspace alive */
    Py_ssize_t shape;
} LogitsBuffer;

static void session_free_c(CxSession *self);

static int LogitsBuffer_getbuffer(LogitsBuffer *b, Py_buffer *view, int flags) {
    if (flags & PyBUF_WRITABLE) {
        PyErr_SetString(PyExc_BufferError, "the logits are read-only (the engine's buffer): copy them to write");
        return -1;
    }
    view->obj = Py_NewRef(b);
    view->buf = (void *)b->sess->logits;
    view->len = b->shape * (Py_ssize_t)sizeof(float);
    view->readonly = 1;
    view->itemsize = sizeof(float);
    view->format = flags & PyBUF_FORMAT ? "f" : NULL;
    view->ndim = 1;
    view->shape = flags & PyBUF_ND ? &b->shape : NULL;
    view->strides = flags & PyBUF_STRIDES ? &view->itemsize : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    return 0;
}

static PyBufferProcs LOGITS_BUFFER = {(getbufferproc)LogitsBuffer_getbuffer, NULL};

static void LogitsBuffer_dealloc(LogitsBuffer *b) {
    CxSession *s = b->sess;
    s->n_views--;
    if (s->n_views == 0 && s->closed) session_free_c(s);
    Py_DECREF(s);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static PyTypeObject LogitsBuffer_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cortex._cortex.LogitsBuffer",
    .tp_basicsize = sizeof(LogitsBuffer),
    .tp_dealloc = (destructor)LogitsBuffer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The engine's logits buffer of a Session, exported read-only through the buffer protocol.",
    .tp_as_buffer = &LOGITS_BUFFER,
};

/* ---- the session ------------------------------------------------------------ */

static void session_free_c(CxSession *self) {
    if (self->s) {
        cx_session_free(self->s);
        self->s = NULL;
        self->logits = NULL;
        if (self->lora) {
            ((CxLora *)self->lora)->users--;
            Py_CLEAR(self->lora);
        }
        pycx_model_release(self->model);
    }
}

static cx_session *session_get(CxSession *self) {
    if (!self->s || self->closed) {
        PyErr_SetString(PyExc_ValueError, "the session is closed");
        return NULL;
    }
    return self->s;
}

static void Session_dealloc(CxSession *self) {
    assert(self->n_views == 0 && "every view holds a reference to its session");
    if (self->weakview) Py_CLEAR(self->weakview);
    session_free_c(self);
    Py_XDECREF(self->model);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Attach lora (NULL: none) at position 0; keeps the Python object alive. */
static int session_attach(CxSession *self, PyObject *lora_o, const cx_lora *lora, double scale) {
    cx_err err = {0};
    cx_lora_use use = {lora, (float)scale};
    if (cx_session_set_lora(self->s, &use, lora ? 1 : 0, &err)) {
        pycx_raise(&err);
        return -1;
    }
    if (self->lora) ((CxLora *)self->lora)->users--;
    Py_XSETREF(self->lora, lora ? Py_NewRef(lora_o) : NULL);
    if (self->lora) ((CxLora *)self->lora)->users++;
    return 0;
}

static int Session_init(CxSession *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"model", "n_ctx", "threads", "kv_type", "prefix_cache", "batch", "lora", "lora_scale", NULL};
    PyObject *model_o, *ctx_o = NULL, *thr_o = NULL, *batch_o = NULL, *lora_o = Py_None, *scale_o = NULL;
    const char *kv_type = "f32";
    int prefix = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|OO$spOOO:Session", kwlist, &CxModel_Type, &model_o, &ctx_o, &thr_o,
                                     &kv_type, &prefix, &batch_o, &lora_o, &scale_o))
        return -1;
    if (self->model) {
        PyErr_SetString(PyExc_RuntimeError, "Session.__init__ called twice");
        return -1;
    }
    CxModel *M = (CxModel *)model_o;
    const cx_model *m = pycx_model_get(M);
    if (!m) return -1;
    long long n_ctx, threads, batch;
    double scale;
    int none = 0;
    if (pycx_int_arg(ctx_o, "n_ctx", 0, INT32_MAX, 0, &n_ctx) ||
        pycx_int_arg(thr_o, "threads", 1, 1024, M->threads, &threads) ||
        pycx_int_arg(batch_o, "batch", 0, 256, 0, &batch) ||
        pycx_float_arg(scale_o, "lora_scale", -1e3, 1e3, 1.0, &scale))
        return -1;
    const cx_lora *lora = pycx_lora_arg(lora_o, M, "lora", &none);
    if (!lora && !none) return -1;
    cx_session_params sp = cx_session_defaults();
    sp.n_ctx = (int)n_ctx;
    sp.n_threads = (int)threads;
    sp.batch = (int)batch;
    sp.kv.prefix_cache = prefix;
    if ((sp.kv.type = cx_kv_type_from_name(kv_type)) < 0 || sp.kv.type == CX_KV_Q4) {
        PyErr_Format(PyExc_ValueError, "kv_type must be 'f32', 'f16' or 'q8', not '%s'", kv_type);
        return -1;
    }
    if (cx_model_get_info(m)->vocab_only) {
        pycx_raise_code(CX_EINVAL, "%s: a vocabulary-only model has no layers to evaluate", cx_model_get_info(m)->name);
        return -1;
    }
    cx_err err = {0};
    cx_session *s = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cx_session_new_ex(m, &sp, &s, &err);
    Py_END_ALLOW_THREADS
    if (rc) {
        pycx_raise(&err);
        return -1;
    }
    if (pycx_model_acquire(M)) {
        cx_session_free(s);
        return -1;
    }
    self->model = (CxModel *)Py_NewRef(M);
    self->s = s;
    if (lora && session_attach(self, lora_o, lora, scale)) return -1;
    return 0;
}

static PyObject *Session_eval(CxSession *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"ids", "all_logits", NULL};
    PyObject *ids_o;
    int all = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$p:eval", kwlist, &ids_o, &all)) return NULL;
    cx_session *s = session_get(self);
    if (!s) return NULL;
    const cx_model_info *mi = cx_model_get_info(self->model->m);
    int32_t *ids;
    int n;
    if (pycx_ids(ids_o, mi->n_vocab, "ids", &ids, &n)) return NULL;
    PyObject *r = NULL, *arr = NULL;
    Py_buffer out = {0};
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "ids is empty");
        goto out;
    }
    if (cx_session_pos(s) + n > cx_session_n_ctx(s)) {
        pycx_raise_code(CX_ECTX, "%d tokens at position %d exceed the session's context of %d", n, cx_session_pos(s),
                        cx_session_n_ctx(s));
        goto out;
    }
    if (all) { /* the engine writes every row straight into a new array */
        Py_ssize_t shape[2] = {n, mi->n_vocab};
        PyObject *np = PyImport_ImportModule("numpy");
        arr = np ? PyObject_CallMethod(np, "empty", "((nn)s)", shape[0], shape[1], "float32") : NULL;
        Py_XDECREF(np);
        if (!arr || PyObject_GetBuffer(arr, &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto out;
    }
    if (pycx_enter(&self->busy, "the session")) goto out;
    cx_err err = {0};
    const float *logits = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = all ? cx_eval_all(s, ids, n, (float *)out.buf, &err) : cx_eval(s, ids, n, &logits, &err);
    Py_END_ALLOW_THREADS
    pycx_leave(&self->busy);
    if (rc) {
        self->has_logits = 0;
        pycx_raise(&err);
        goto out;
    }
    if (all) {
        /* the last row is also the session's "next token" logits: cx_eval_all
         * writes only the caller's array, so .logits has none now */
        self->has_logits = 0;
        r = Py_NewRef(arr);
    } else {
        assert((!self->logits || self->logits == logits) && "the workspace's logits stay at one address");
        self->logits = logits;
        self->has_logits = 1;
        r = Py_NewRef(Py_None);
    }
out:
    if (out.obj) PyBuffer_Release(&out);
    Py_XDECREF(arr);
    PyMem_Free(ids);
    return r;
}

static PyObject *Session_logits(CxSession *self, void *closure) {
    if (!session_get(self)) return NULL;
    if (!self->has_logits) Py_RETURN_NONE;
    PyObject *a = self->weakview ? PyWeakref_GetObject(self->weakview) : NULL;
    if (a && a != Py_None) return Py_NewRef(a);
    LogitsBuffer *b = PyObject_New(LogitsBuffer, &LogitsBuffer_Type);
    if (!b) return NULL;
    b->sess = (CxSession *)Py_NewRef(self);
    b->shape = cx_model_get_info(self->model->m)->n_vocab;
    self->n_views++;
    Py_ssize_t shape[1] = {b->shape};
    a = pycx_frombuffer_f32((PyObject *)b, 1, shape);
    Py_DECREF(b);
    if (!a) return NULL;
    Py_XSETREF(self->weakview, PyWeakref_NewRef(a, NULL));
    if (!self->weakview) PyErr_Clear(); /* no cache: still correct, one array per read */
    return a;
}

static PyObject *Session_logits_address(CxSession *self, void *closure) {
    if (!session_get(self)) return NULL;
    return PyLong_FromVoidPtr((void *)self->logits);
}

static PyObject *Session_truncate(CxSession *self, PyObject *arg) {
    cx_session *s = session_get(self);
    long long n;
    if (!s || pycx_int_arg(arg, "n_pos", 0, cx_session_pos(s), 0, &n)) return NULL;
    if (pycx_enter(&self->busy, "the session")) return NULL;
    cx_err err = {0};
    int rc = cx_session_truncate(s, (int)n, &err);
    pycx_leave(&self->busy);
    if (rc) return pycx_raise(&err);
    self->has_logits = 0;
    Py_RETURN_NONE;
}

static PyObject *Session_reset(CxSession *self, PyObject *unused) {
    cx_session *s = session_get(self);
    if (!s || pycx_enter(&self->busy, "the session")) return NULL;
    cx_session_reset(s);
    pycx_leave(&self->busy);
    self->has_logits = 0;
    Py_RETURN_NONE;
}

static PyObject *Session_set_lora(CxSession *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"lora", "scale", NULL};
    PyObject *lora_o, *scale_o = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:set_lora", kwlist, &lora_o, &scale_o)) return NULL;
    double scale;
    int none = 0;
    if (!session_get(self) || pycx_float_arg(scale_o, "scale", -1e3, 1e3, 1.0, &scale)) return NULL;
    const cx_lora *lora = pycx_lora_arg(lora_o, self->model, "lora", &none);
    if (!lora && !none) return NULL;
    if (pycx_enter(&self->busy, "the session")) return NULL;
    int rc = session_attach(self, lora_o, lora, scale);
    pycx_leave(&self->busy);
    if (rc) return NULL;
    Py_RETURN_NONE;
}

#define SETI(d, k, v) if (set_item(d, k, PyLong_FromLongLong((long long)(v)))) goto fail
#define SETF(d, k, v) if (set_item(d, k, PyFloat_FromDouble(v))) goto fail
static int set_item(PyObject *d, const char *k, PyObject *v) {
    int rc = v ? PyDict_SetItemString(d, k, v) : -1;
    Py_XDECREF(v);
    return rc;
}

static PyObject *Session_kv_stats(CxSession *self, PyObject *unused) {
    cx_session *s = session_get(self);
    if (!s) return NULL;
    cx_kv_stats st;
    cx_session_kv_stats(s, &st);
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    static const char *const TIER[CX_KV_TIERS] = {"hot", "warm", "cold"};
    if (set_item(d, "type", PyUnicode_FromString(cx_kv_type_name(st.type))) ||
        set_item(d, "warm_type", PyUnicode_FromString(cx_kv_type_name(st.warm_type))) ||
        set_item(d, "policy", PyUnicode_FromString(cx_kv_policy_name(st.policy))) ||
        set_item(d, "prefix_cache", PyBool_FromLong(st.prefix_cache)))
        goto fail;
    for (int t = 0; t < CX_KV_TIERS; t++) {
        char k[32];
        snprintf(k, sizeof k, "bytes_%s", TIER[t]);
        SETI(d, k, st.bytes[t]);
        snprintf(k, sizeof k, "blocks_%s", TIER[t]);
        SETI(d, k, st.blocks[t]);
        snprintf(k, sizeof k, "hits_%s", TIER[t]);
        SETI(d, k, st.hits[t]);
    }
    SETI(d, "pos", cx_session_pos(s));
    SETI(d, "n_ctx", cx_session_n_ctx(s));
    SETI(d, "blocks_used", st.blocks_used);
    SETI(d, "blocks_max", st.blocks_max);
    SETI(d, "demotions", st.demotions);
    SETI(d, "promotions", st.promotions);
    SETI(d, "prefix_lookups", st.prefix_lookups);
    SETI(d, "prefix_hits", st.prefix_hits);
    SETI(d, "prefix_tokens", st.prefix_tokens);
    SETF(d, "prefix_hit_rate", st.prefix_hit_rate);
    SETI(d, "cow_copies", st.cow_copies);
    SETI(d, "last_reused", st.last_reused);
    SETF(d, "zip_ratio", st.zip_ratio);
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

static PyObject *Session_close(CxSession *self, PyObject *unused) {
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the session is in use by another thread");
        return NULL;
    }
    self->closed = 1;
    self->has_logits = 0;
    if (self->n_views == 0) session_free_c(self); /* else the last view's dealloc frees it */
    Py_RETURN_NONE;
}

static PyObject *Session_enter(CxSession *self, PyObject *unused) {
    if (!session_get(self)) return NULL;
    return Py_NewRef(self);
}
static PyObject *Session_exit(CxSession *self, PyObject *args) { return Session_close(self, NULL); }

static PyObject *Session_int(CxSession *self, void *which) {
    cx_session *s = session_get(self);
    if (!s) return NULL;
    return PyLong_FromLong(which ? cx_session_n_ctx(s) : cx_session_pos(s));
}
static PyObject *Session_closed(CxSession *self, void *closure) { return PyBool_FromLong(self->closed); }
static PyObject *Session_model(CxSession *self, void *closure) { return Py_NewRef(self->model ? (PyObject *)self->model : Py_None); }

#define KW (PyCFunction)(void (*)(void))
static PyMethodDef SESSION_METHODS[] = {
    {"eval", KW Session_eval, METH_VARARGS | METH_KEYWORDS,
     "eval(ids, *, all_logits=False) -> None | numpy.ndarray\n\nFeed token ids at the current position (in passes "
     "of up to the session's batch). Afterwards .logits holds the logits after the last one. all_logits=True returns "
     "instead a new (len(ids), n_vocab) float32 array of the logits after every token (row i predicts token i+1), "
     "written by the engine straight into it (cx_eval_all), and leaves .logits None. ContextFullError past n_ctx."},
    {"truncate", (PyCFunction)Session_truncate, METH_O,
     "truncate(n_pos)\n\nKeep the first n_pos positions and forget the rest (rejected draft tokens, a regenerated "
     "reply). Evaluating on gives what a fresh session fed the kept tokens gives. .logits becomes None."},
    {"reset", (PyCFunction)Session_reset, METH_NOARGS, "reset()\n\nForget the whole sequence (truncate(0))."},
    {"set_lora", KW Session_set_lora, METH_VARARGS | METH_KEYWORDS,
     "set_lora(lora, scale=1.0)\n\nApply a LoRA of the session's model (None: none) to every token evaluated from "
     "now on. The session must be empty (position 0)."},
    {"kv_stats", (PyCFunction)Session_kv_stats, METH_NOARGS, "kv_stats() -> dict\n\nThe KV cache's counters (cx_kv_stats)."},
    {"close", (PyCFunction)Session_close, METH_NOARGS,
     "close()\n\nFree the session: at once, or when the last logits array over its buffer goes."},
    {"__enter__", (PyCFunction)Session_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Session_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef SESSION_GETSET[] = {
    {"logits", (getter)Session_logits, NULL,
     "The logits after the last token eval() fed: a read-only float32 numpy array of n_vocab over the engine's own "
     "buffer (no copy). It shows each later eval's logits: np.array(s.logits) keeps a copy. None before the first "
     "eval and after truncate/reset/eval(all_logits=True).",
     NULL},
    {"_logits_address", (getter)Session_logits_address, NULL, "The engine buffer's address (for tests of zero copy).", NULL},
    {"pos", (getter)Session_int, NULL, "Positions held (tokens evaluated and kept).", (void *)0},
    {"n_ctx", (getter)Session_int, NULL, "The session's context length.", (void *)1},
    {"closed", (getter)Session_closed, NULL, "Whether close() was called.", NULL},
    {"model", (getter)Session_model, NULL, "The Model.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject CxSession_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cortex._cortex.Session",
    .tp_basicsize = sizeof(CxSession),
    .tp_dealloc = (destructor)Session_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Session(model, n_ctx=0, threads=None, *, kv_type='f32', prefix_cache=False, batch=0, lora=None, "
              "lora_scale=1.0)\n\n"
              "One sequence and its KV cache. n_ctx: 0 is min(model's, 4096). threads: None is the model's. kv_type: "
              "'f32', 'f16' or 'q8' blocks. batch: tokens per pass (0: 256). One thread at a time uses a session "
              "(another gets RuntimeError); the GIL is released while it evaluates.",
    .tp_methods = SESSION_METHODS,
    .tp_getset = SESSION_GETSET,
    .tp_init = (initproc)Session_init,
    .tp_new = PyType_GenericNew,
};

/* See pycx.h. */
int pycx_session_init(PyObject *mod) {
    if (PyType_Ready(&CxSession_Type) || PyType_Ready(&LogitsBuffer_Type)) return -1;
    return PyModule_AddObjectRef(mod, "Session", (PyObject *)&CxSession_Type);
}
