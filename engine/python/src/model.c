/*
 * model.c - cortex.Model: a loaded model, its tokenizer and chat format,
 * and generation: generate() returns the whole text, generate(stream=True)
 * a Stream yielding pieces as they are sampled.
 *
 * Generation runs the same loop as `cortex generate` (engine/cli/cortex.c):
 * prefill the prompt with one cx_eval, then sample, stop on an
 * end-of-generation token, feed the token back. So greedy output equals the
 * command's token for token. The whole of generate() runs without the GIL;
 * a Stream releases it for each token's cx_eval.
 *
 * The model keeps one session for generation between calls. A new prompt
 * keeps the positions it shares with what that session holds (rolled back
 * to the common prefix with cx_session_truncate) and evaluates only the
 * rest: a chat that resends its history pays for the new turn only. That
 * session is the reason one generation at a time runs per Model (a
 * second thread gets RuntimeError); use a Scheduler, or one Session per
 * thread, for concurrency.
 *
 * A generation's states:
 *
 *     gen_begin --> RUNNING --gen_step--> RUNNING
 *                      |  EOG token / stop string ------> DONE("stop")
 *                      |  max_tokens / context full ----> DONE("length")
 *                      |  cx_eval fails ----------------> ERROR (exception)
 *
 * Text is kept as bytes; a stream hands out the bytes that can no longer
 * change: not a tail that could begin a stop string, nor an incomplete
 * UTF-8 sequence (gen_ready).
 */
#include "pycx.h"

#include <string.h>
#include <structmember.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the model's lifetime ------------------------------------------------- */

static void model_free_c(CxModel *self) {
    if (self->gen) cx_session_free(self->gen);
    self->gen = NULL;
    PyMem_Free(self->gen_ids);
    self->gen_ids = NULL;
    self->gen_n = self->gen_cap = 0;
    if (self->m) cx_model_free(self->m);
    self->m = NULL;
}

/* See pycx.h. */
const cx_model *pycx_model_get(CxModel *self) {
    if (!self->m || self->closed) {
        PyErr_SetString(PyExc_ValueError, self->m || self->closed ? "the model is closed" : "the model is not loaded");
        return NULL;
    }
    return self->m;
}

/* See pycx.h. */
int pycx_model_acquire(CxModel *self) {
    if (!pycx_model_get(self)) return -1;
    self->users++;
    Py_INCREF(self);
    return 0;
}

/* See pycx.h. */
void pycx_model_release(CxModel *self) {
    assert(self->users > 0 && "a release without its acquire");
    if (--self->users == 0 && self->closed) model_free_c(self);
    Py_DECREF(self);
}

static void Model_dealloc(CxModel *self) {
    assert(self->users == 0 && "users hold a reference, so none is left at dealloc");
    model_free_c(self);
    Py_XDECREF(self->path);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Model_init(CxModel *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"path", "tokenizer", "threads", "isa", "weights", "repack", "chat_template", NULL};
    PyObject *path_o = NULL, *tok_o = Py_None, *threads_o = NULL;
    const char *isa = NULL, *weights = "auto", *tmpl = NULL;
    int repack = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|O$Ozzpz:Model", kwlist, PyUnicode_FSConverter, &path_o, &tok_o,
                                     &threads_o, &isa, &weights, &repack, &tmpl))
        return -1;
    int rc = -1;
    PyObject *tok_b = NULL;
    long long threads;
    cx_model_params p = cx_model_defaults();
    if (self->m || self->closed) {
        PyErr_SetString(PyExc_RuntimeError, "Model.__init__ called twice");
        goto out;
    }
    if (tok_o != Py_None && !PyUnicode_FSConverter(tok_o, &tok_b)) goto out;
    if (pycx_int_arg(threads_o, "threads", 1, 1024, 1, &threads)) goto out;
    if (!weights || !strcmp(weights, "auto")) p.weights = CX_WEIGHTS_AUTO;
    else if (!strcmp(weights, "mmap")) p.weights = CX_WEIGHTS_MMAP;
    else if (!strcmp(weights, "hugepages")) p.weights = CX_WEIGHTS_HUGEPAGES;
    else {
        PyErr_Format(PyExc_ValueError, "weights must be 'auto', 'mmap' or 'hugepages', not '%s'", weights);
        goto out;
    }
    p.repack = repack;
    p.isa = isa;
    const char *path = PyBytes_AS_STRING(path_o), *tok = tok_b ? PyBytes_AS_STRING(tok_b) : NULL;
    cx_err err = {0};
    cx_model *m = NULL;
    int lrc;
    Py_BEGIN_ALLOW_THREADS
    lrc = cx_model_load_ex(path, tok, &p, &m, &err);
    Py_END_ALLOW_THREADS
    if (lrc) {
        pycx_raise(&err);
        goto out;
    }
    self->m = m;
    self->threads = (int)threads;
    self->path = PyUnicode_DecodeFSDefault(path);
    if (!self->path) goto out;
    /* no chat format is not an error: apply_chat_template says why when asked */
    cx_err cerr = {0};
    self->chat_ok = cx_chat_init(m, tmpl, &self->chat, &cerr) == 0;
    if (!self->chat_ok) {
        if (tmpl && cerr.code == CX_EINVAL) { /* a name the user gave that does not exist */
            pycx_raise(&cerr);
            goto out;
        }
        snprintf(self->chat_why, sizeof self->chat_why, "%s", cerr.msg);
    }
    rc = 0;
out:
    Py_XDECREF(path_o);
    Py_XDECREF(tok_b);
    return rc;
}

static PyObject *Model_close(CxModel *self, PyObject *unused) {
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the model is generating (a stream is open): close the stream first");
        return NULL;
    }
    self->closed = 1;
    if (self->users == 0) model_free_c(self);
    Py_RETURN_NONE;
}

static PyObject *Model_enter(CxModel *self, PyObject *unused) {
    if (!pycx_model_get(self)) return NULL;
    return Py_NewRef(self);
}

static PyObject *Model_exit(CxModel *self, PyObject *args) { return Model_close(self, NULL); }

/* ---- info ------------------------------------------------------------------ */

#define SET(d, k, v)                                              \
    do {                                                          \
        PyObject *v_ = (v);                                       \
        if (!v_ || PyDict_SetItemString(d, k, v_)) {              \
            Py_XDECREF(v_);                                       \
            Py_DECREF(d);                                         \
            return NULL;                                          \
        }                                                         \
        Py_DECREF(v_);                                            \
    } while (0)

static PyObject *str_or_none(const char *s) { return s ? PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace") : Py_NewRef(Py_None); }

static PyObject *Model_info(CxModel *self, void *closure) {
    const cx_model *m = pycx_model_get(self);
    if (!m) return NULL;
    const cx_model_info *i = cx_model_get_info(m);
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    SET(d, "format", str_or_none(i->format));
    SET(d, "format_version", PyLong_FromUnsignedLong(i->format_version));
    SET(d, "name", str_or_none(i->name));
    SET(d, "arch", str_or_none(i->arch));
    SET(d, "n_embd", PyLong_FromLong(i->n_embd));
    SET(d, "n_ff", PyLong_FromLong(i->n_ff));
    SET(d, "n_layer", PyLong_FromLong(i->n_layer));
    SET(d, "n_head", PyLong_FromLong(i->n_head));
    SET(d, "n_head_kv", PyLong_FromLong(i->n_head_kv));
    SET(d, "n_vocab", PyLong_FromLong(i->n_vocab));
    SET(d, "n_ctx", PyLong_FromLong(i->n_ctx));
    SET(d, "head_dim", PyLong_FromLong(i->head_dim));
    SET(d, "rope_base", PyFloat_FromDouble(i->rope_base));
    SET(d, "rms_eps", PyFloat_FromDouble(i->rms_eps));
    SET(d, "tied_output", PyBool_FromLong(i->tied_output));
    SET(d, "n_tensors", PyLong_FromLong(i->n_tensors));
    SET(d, "n_params", PyLong_FromUnsignedLongLong(i->n_params));
    SET(d, "weight_bytes", PyLong_FromUnsignedLongLong(i->weight_bytes));
    SET(d, "file_bytes", PyLong_FromUnsignedLongLong(i->file_bytes));
    SET(d, "type", PyUnicode_FromString(cx_type_name(i->main_type)));
    SET(d, "weights_memory", str_or_none(i->weights_memory));
    SET(d, "isa", str_or_none(i->isa));
    SET(d, "vocab_only", PyBool_FromLong(i->vocab_only));
    SET(d, "tokenizer", str_or_none(i->tokenizer));
    SET(d, "tokenizer_pre", str_or_none(i->tokenizer_pre));
    SET(d, "rope_neox", PyBool_FromLong(i->rope_neox));
    SET(d, "rope_scaling", str_or_none(i->rope_scaling));
    SET(d, "qkv_bias", PyBool_FromLong(i->qkv_bias));
    SET(d, "n_expert", PyLong_FromLong(i->n_expert));
    SET(d, "n_expert_used", PyLong_FromLong(i->n_expert_used));
    SET(d, "sliding_window", PyLong_FromLong(i->sliding_window));
    SET(d, "attn_sinks", PyBool_FromLong(i->attn_sinks));
    SET(d, "chat_template", str_or_none(i->chat_template));
    return d;
}

static PyObject *Model_int(CxModel *self, void *which) {
    const cx_model *m = pycx_model_get(self);
    if (!m) return NULL;
    const cx_model_info *i = cx_model_get_info(m);
    switch ((int)(intptr_t)which) {
    case 0: return PyLong_FromLong(i->n_vocab);
    case 1: return PyLong_FromLong(i->n_ctx);
    default: {
        int t = (int)(intptr_t)which == 2 ? cx_token_bos(m) : (int)(intptr_t)which == 3 ? cx_token_eos(m) : cx_token_eot(m);
        return t < 0 ? Py_NewRef(Py_None) : PyLong_FromLong(t);
    }
    }
}

static PyObject *Model_closed(CxModel *self, void *closure) { return PyBool_FromLong(self->closed || !self->m); }
static PyObject *Model_path(CxModel *self, void *closure) { return Py_NewRef(self->path ? self->path : Py_None); }
static PyObject *Model_threads_get(CxModel *self, void *closure) { return PyLong_FromLong(self->threads); }
static int Model_threads_set(CxModel *self, PyObject *v, void *closure) {
    long long t;
    if (!v) {
        PyErr_SetString(PyExc_AttributeError, "threads cannot be deleted");
        return -1;
    }
    if (pycx_int_arg(v, "threads", 1, 1024, 1, &t)) return -1;
    self->threads = (int)t;
    return 0;
}
static PyObject *Model_chat_template(CxModel *self, void *closure) {
    if (!pycx_model_get(self)) return NULL;
    return self->chat_ok ? PyUnicode_FromString(cx_chat_name(self->chat.tmpl)) : Py_NewRef(Py_None);
}
static PyObject *Model_chat_stop(CxModel *self, void *closure) {
    if (!pycx_model_get(self)) return NULL;
    PyObject *l = PyList_New(0);
    for (int k = 0; l && self->chat_ok && k < CX_CHAT_MAX_END && self->chat.end[k]; k++) {
        PyObject *s = PyUnicode_FromString(self->chat.end[k]);
        if (!s || PyList_Append(l, s)) Py_CLEAR(l);
        Py_XDECREF(s);
    }
    return l;
}

/* ---- tokenizer ------------------------------------------------------------- */

static PyObject *Model_tokenize(CxModel *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"text", "add_bos", "special", NULL};
    PyObject *text;
    int add_bos = 1, special = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|pp:tokenize", kwlist, &text, &add_bos, &special)) return NULL;
    const cx_model *m = pycx_model_get(self);
    if (!m) return NULL;
    const char *t;
    Py_ssize_t len;
    if (PyUnicode_Check(text)) {
        if (!(t = PyUnicode_AsUTF8AndSize(text, &len))) return NULL;
    } else if (PyBytes_Check(text)) {
        t = PyBytes_AS_STRING(text);
        len = PyBytes_GET_SIZE(text);
    } else {
        return PyErr_Format(PyExc_TypeError, "text must be str or bytes, not %.100s", Py_TYPE(text)->tp_name);
    }
    if ((size_t)len > (size_t)INT32_MAX - 2) return PyErr_Format(PyExc_ValueError, "text is too long (%zd bytes)", len);
    int cap = (int)len + 2, n = 0, rc;
    int32_t *ids = PyMem_Malloc(sizeof(int32_t) * (size_t)cap);
    if (!ids) return PyErr_NoMemory();
    cx_err err = {0};
    Py_BEGIN_ALLOW_THREADS
    rc = cx_tokenize(m, t, (size_t)len, (add_bos ? CX_TOKENIZE_BOS : 0) | (special ? CX_TOKENIZE_SPECIAL : 0), ids,
                     cap, &n, &err);
    Py_END_ALLOW_THREADS
    PyObject *l = rc ? pycx_raise(&err) : PyList_New(n);
    for (int i = 0; l && i < n; i++) {
        PyObject *v = PyLong_FromLong(ids[i]);
        if (!v) Py_CLEAR(l);
        else PyList_SET_ITEM(l, i, v);
    }
    PyMem_Free(ids);
    return l;
}

static PyObject *Model_detokenize(CxModel *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"ids", NULL};
    PyObject *o;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:detokenize", kwlist, &o)) return NULL;
    const cx_model *m = pycx_model_get(self);
    if (!m) return NULL;
    int32_t *ids;
    int n;
    if (pycx_ids(o, cx_model_get_info(m)->n_vocab, "ids", &ids, &n)) return NULL;
    size_t need = cx_detokenize(m, ids, n, NULL, 0);
    char *buf = PyMem_Malloc(need + 1);
    PyObject *r = NULL;
    if (!buf) {
        PyErr_NoMemory();
    } else {
        cx_detokenize(m, ids, n, buf, need + 1);
        r = pycx_text(buf, need);
    }
    PyMem_Free(buf);
    PyMem_Free(ids);
    return r;
}

static int token_arg(const cx_model *m, PyObject *o, const char *arg, int allow_neg, int *out) {
    long long v;
    if (pycx_int_arg(o, arg, allow_neg ? -1 : 0, cx_model_get_info(m)->n_vocab - 1, -1, &v)) return -1;
    *out = (int)v;
    return 0;
}

static PyObject *Model_token_piece(CxModel *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"token", "prev", NULL};
    PyObject *tok_o, *prev_o = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:token_piece", kwlist, &tok_o, &prev_o)) return NULL;
    const cx_model *m = pycx_model_get(self);
    int tok, prev;
    if (!m || token_arg(m, tok_o, "token", 0, &tok) || token_arg(m, prev_o, "prev", 1, &prev)) return NULL;
    char tmp[2];
    const char *bytes;
    size_t n = cx_token_piece(m, prev, tok, tmp, &bytes);
    return PyBytes_FromStringAndSize(bytes, (Py_ssize_t)n);
}

static PyObject *Model_is_eog(CxModel *self, PyObject *arg) {
    const cx_model *m = pycx_model_get(self);
    int tok;
    if (!m || token_arg(m, arg, "token", 0, &tok)) return NULL;
    return PyBool_FromLong(cx_token_is_eog(m, tok));
}

/* ---- chat templates -------------------------------------------------------- */

/* One message's field as UTF-8 (borrowed from the str). */
static const char *msg_field(PyObject *msg, Py_ssize_t i, const char *key) {
    PyObject *v = PyMapping_Check(msg) && !PyUnicode_Check(msg) ? PyMapping_GetItemString(msg, key) : NULL;
    if (!v) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "messages[%zd] must be a mapping with a '%s' str", i, key);
        return NULL;
    }
    const char *s = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
    if (!PyUnicode_Check(v))
        PyErr_Format(PyExc_TypeError, "messages[%zd]['%s'] must be a str, not %.100s", i, key, Py_TYPE(v)->tp_name);
    Py_DECREF(v); /* the message (a dict the caller holds) keeps the str alive */
    return s;
}

static PyObject *Model_apply_chat_template(CxModel *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"messages", "date", NULL};
    PyObject *msgs_o;
    const char *date = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$z:apply_chat_template", kwlist, &msgs_o, &date)) return NULL;
    if (!pycx_model_get(self)) return NULL;
    if (!self->chat_ok) return pycx_raise_code(CX_EUNSUP, "%s", self->chat_why);
    if (date && (strlen(date) != 10 || date[4] != '-' || date[7] != '-'))
        return PyErr_Format(PyExc_ValueError, "date must be YYYY-MM-DD, not '%s'", date);
    PyObject *seq = PyUnicode_Check(msgs_o) ? NULL : PySequence_Fast(msgs_o, "");
    if (!seq) {
        PyErr_Clear();
        return PyErr_Format(PyExc_TypeError, "messages must be a sequence of {'role': str, 'content': str}, not %.100s",
                            Py_TYPE(msgs_o)->tp_name);
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    cx_chat_msg *m = PyMem_Calloc((size_t)n + 1, sizeof *m);
    PyObject *r = NULL;
    if (!m) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *msg = PySequence_Fast_GET_ITEM(seq, i);
        if (!(m[i].role = msg_field(msg, i, "role")) || !(m[i].content = msg_field(msg, i, "content"))) goto out;
    }
    char *text = NULL;
    cx_err err = {0};
    if (n > INT32_MAX || cx_chat_render(&self->chat, m, (int)n, date, &text, &err)) {
        pycx_raise(&err);
        goto out;
    }
    r = pycx_text(text, strlen(text));
    free(text);
out:
    PyMem_Free(m);
    Py_DECREF(seq);
    return r;
}

/* ---- generation ------------------------------------------------------------ */

static PyTypeObject Generation_Type;
static PyStructSequence_Field GEN_FIELDS[] = {
    {"text", "the generated text (a stop string that ended it excluded)"},
    {"tokens", "the generated token ids"},
    {"finish_reason", "'stop' (end-of-generation token or stop string) or 'length' (max_tokens or a full context)"},
    {"n_prompt", "prompt tokens"},
    {"n_cached", "prompt tokens whose keys and values the model's session already held (not recomputed)"},
    {"n_gen", "tokens generated"},
    {"ttft_ms", "from the call to the first sampled token (tokenizing and prefill included)"},
    {"prefill_ms", "evaluating the prompt tokens not cached"},
    {"decode_ms", "from the first sampled token to the last"},
    {"decode_tps", "(n_gen - 1) / decode time: tokens per second as `cortex generate` reports them (0 if n_gen < 2)"},
    {"speculation", "with generate(drafter=...): the decode's speculation counters (steps, verified, drafted, accepted, "
                    "tokens, acceptance, mean_accepted, tokens_per_pass, draft_ms, verify_ms) as a dict; else None. "
                    "An attribute only, not part of the tuple"},
    {NULL, NULL},
};
static PyStructSequence_Desc GEN_DESC = {"cortex.Generation", "The result of Model.generate(): text and statistics.",
                                         GEN_FIELDS, 10};
#define GEN_N_FIELDS 11

typedef struct gen_state {
    CxModel *model;
    cx_sampler *smp;
    int max_tokens, ignore_eos;
    char **stops;
    int n_stops;
    size_t max_stop;
    const cx_lora *lora; /* attached to the model's session for this generation */
    PyObject *lora_obj;  /* keeps it alive */
    const float *logits;
    CxDrafter *drafter;  /* generate(drafter=...): speculation (a user of it while the generation lives) */
    cx_spec *sp;         /* ... this generation's, made after the prefill */
    int32_t *toks;
    int n_gen, cap, prev, n_prompt, n_cached;
    char *text;
    size_t len, cap_text, emitted;
    int done;
    const char *reason;
    double t0, t_prefill0, t_prefill1, t_first, t_last;
    cx_err err;
} gen_state;

/* Release what a generation holds (not the state itself); detaches its
 * adapter so the model's session holds no reference to it. */
static void gen_free(gen_state *g) {
    if (g->smp) cx_sampler_free(g->smp);
    g->smp = NULL;
    cx_spec_free(g->sp);
    g->sp = NULL;
    if (g->drafter) pycx_drafter_release(g->drafter);
    g->drafter = NULL;
    if (g->lora && g->model->gen) {
        cx_session_truncate(g->model->gen, 0, NULL);
        cx_session_set_lora(g->model->gen, NULL, 0, NULL);
        g->model->gen_n = 0;
    }
    g->lora = NULL;
    Py_CLEAR(g->lora_obj);
    pycx_stops_free(g->stops, g->n_stops);
    g->stops = NULL;
    g->n_stops = 0;
    free(g->toks);
    free(g->text);
    g->toks = NULL;
    g->text = NULL;
}

/* Room in gen_ids for n tokens past the gen_n it holds. 0, or -1. */
static int gen_ids_reserve(CxModel *M, int n) {
    if (M->gen_n + n > M->gen_cap) {
        int cap = M->gen_cap ? M->gen_cap : 256;
        while (cap < M->gen_n + n) cap *= 2;
        int32_t *p = PyMem_RawRealloc(M->gen_ids, sizeof(int32_t) * (size_t)cap);
        if (!p) return -1;
        M->gen_ids = p;
        M->gen_cap = cap;
    }
    return 0;
}

/* Remember that the model's session now holds ids[0..n) (gen_ids mirrors it). */
static int gen_ids_push(CxModel *M, const int32_t *ids, int n) {
    if (gen_ids_reserve(M, n)) return -1;
    memcpy(M->gen_ids + M->gen_n, ids, sizeof(int32_t) * (size_t)n);
    M->gen_n += n;
    return 0;
}

/* Start: the model's session (made, or reused from its common prefix with
 * the prompt), the adapter attached. Runs without the GIL. */
static int gen_begin(gen_state *g, const int32_t *ids, int n, int n_ctx, float lora_scale) {
    CxModel *M = g->model;
    cx_err *err = &g->err;
    g->t0 = now_s();
    if (M->gen && (n_ctx > 0 && cx_session_n_ctx(M->gen) != n_ctx)) {
        cx_session_free(M->gen);
        M->gen = NULL;
    }
    if (!M->gen) {
        M->gen_n = 0;
        cx_session_params sp = cx_session_defaults();
        sp.n_ctx = n_ctx;
        sp.n_threads = M->threads;
        if (cx_session_new_ex(M->m, &sp, &M->gen, err)) return err->code;
    }
    if (n >= cx_session_n_ctx(M->gen)) {
        err->code = CX_ECTX;
        snprintf(err->msg, sizeof err->msg, "prompt is %d tokens, the context holds %d (pass n_ctx= up to the model's %d)",
                 n, cx_session_n_ctx(M->gen), cx_model_get_info(M->m)->n_ctx);
        return CX_ECTX;
    }
    /* keep the common prefix, but evaluate at least the last prompt token (its logits are needed) */
    int keep = 0;
    if (!g->lora)
        while (keep < M->gen_n && keep < n - 1 && M->gen_ids[keep] == ids[keep]) keep++;
    if (cx_session_truncate(M->gen, keep, err)) return err->code;
    M->gen_n = keep;
    if (g->lora) {
        cx_lora_use use = {g->lora, lora_scale};
        if (cx_session_set_lora(M->gen, &use, 1, err)) return err->code;
    }
    g->n_prompt = n;
    g->n_cached = keep;
    return 0;
}

/* The sampler primed with the prompt, the prompt's new tokens evaluated. */
static int gen_prefill(gen_state *g, const int32_t *ids, int n, const cx_sampler_params *sp) {
    CxModel *M = g->model;
    if (cx_sampler_new(cx_model_get_info(M->m)->n_vocab, sp, &g->smp, &g->err)) return g->err.code;
    for (int i = 0; i < n; i++) cx_sampler_accept(g->smp, ids[i]);
    g->t_prefill0 = now_s();
    int keep = g->n_cached;
    if (cx_eval(M->gen, ids + keep, n - keep, &g->logits, &g->err)) {
        cx_session_truncate(M->gen, keep, NULL);
        return g->err.code;
    }
    g->t_prefill1 = now_s();
    if (gen_ids_push(M, ids + keep, n - keep)) return g->err.code = CX_ENOMEM;
    g->prev = ids[n - 1];
    if (g->drafter && cx_spec_new(g->drafter->d, cx_session_n_ctx(M->gen), &g->sp, &g->err)) return g->err.code;
    return 0;
}

/* Append bytes to the text. */
static int gen_put(gen_state *g, const char *b, size_t n) {
    if (g->len + n + 1 > g->cap_text) {
        size_t cap = g->cap_text ? g->cap_text : 256;
        while (cap < g->len + n + 1) cap *= 2;
        char *p = realloc(g->text, cap);
        if (!p) return -1;
        g->text = p;
        g->cap_text = cap;
    }
    memcpy(g->text + g->len, b, n);
    g->len += n;
    g->text[g->len] = 0;
    return 0;
}

/* A stop string in the text since `from` bytes: cut the text there, 1. */
static int gen_stop_found(gen_state *g, size_t from) {
    size_t start = from > g->max_stop ? from - g->max_stop : 0;
    size_t best = SIZE_MAX;
    for (int k = 0; k < g->n_stops; k++) {
        const char *hit = g->len > start ? memmem(g->text + start, g->len - start, g->stops[k], strlen(g->stops[k])) : NULL;
        if (hit && (size_t)(hit - g->text) < best) best = (size_t)(hit - g->text);
    }
    if (best == SIZE_MAX) return 0;
    g->len = best;
    g->text[best] = 0;
    return 1;
}

/* Take token tok, chosen at time t for position pos (accept: tell the
 * sampler; a speculative step's rule has told it already): the end at an
 * end-of-generation token, else the text, then the end at a stop string,
 * max_tokens or a full context (no room to evaluate it at pos). 0, or a
 * CX_E* code. */
static int gen_take(gen_state *g, int tok, double t, int pos, int accept) {
    CxModel *M = g->model;
    if (g->n_gen == 0) g->t_first = t;
    g->t_last = t;
    if (!g->ignore_eos && cx_token_is_eog(M->m, tok)) {
        g->done = 1;
        g->reason = "stop";
        return 0;
    }
    if (g->n_gen == g->cap) {
        int cap = g->cap ? g->cap * 2 : 64;
        int32_t *p = realloc(g->toks, sizeof(int32_t) * (size_t)cap);
        if (!p) return g->err.code = CX_ENOMEM;
        g->toks = p;
        g->cap = cap;
    }
    g->toks[g->n_gen++] = tok;
    char tmp[2];
    const char *piece;
    size_t k = cx_token_piece(M->m, g->prev, tok, tmp, &piece);
    size_t before = g->len;
    if (gen_put(g, piece, k)) return g->err.code = CX_ENOMEM;
    if (accept) cx_sampler_accept(g->smp, tok);
    g->prev = tok;
    if (g->n_stops && gen_stop_found(g, before)) {
        g->done = 1;
        g->reason = "stop";
        return 0;
    }
    if (g->n_gen >= g->max_tokens || pos >= cx_session_n_ctx(M->gen)) {
        g->done = 1;
        g->reason = "length";
    }
    return 0;
}

/* A speculative step (cx_spec_step): the model's session holds every token
 * but the last chosen one, which the step evaluates with its draft; the
 * tokens it keeps are taken in order (gen_ids mirrors what the session then
 * holds: the last chosen token and all but the last of the new ones). */
static int gen_spec_step(gen_state *g) {
    CxModel *M = g->model;
    int P = cx_session_pos(M->gen), last = g->toks[g->n_gen - 1];
    assert(P == M->gen_n && "gen_ids mirrors the session");
    if (gen_ids_reserve(M, CX_SPEC_MAX_DRAFT + 1)) return g->err.code = CX_ENOMEM;
    M->gen_ids[P] = last; /* the history's last token: chosen, not evaluated yet */
    int32_t out[CX_SPEC_MAX_DRAFT + 1];
    int n = cx_spec_step(g->sp, M->gen, g->smp, M->gen_ids, P + 1, g->max_tokens - g->n_gen, out, &g->err);
    if (n < 0) return g->err.code;
    for (int i = 0; i + 1 < n; i++) M->gen_ids[P + 1 + i] = out[i];
    M->gen_n = P + n;
    assert(cx_session_pos(M->gen) == M->gen_n && "the step keeps the last chosen token and all but its last new one");
    double t = now_s();
    int rc = 0;
    for (int i = 0; i < n && !g->done && !rc; i++) rc = gen_take(g, out[i], t, P + 1 + i, 0);
    return rc;
}

/* One step: sample a token, end or feed it back (with a drafter after the
 * first token: a speculative step, 1..draft + 1 tokens). Runs without the
 * GIL. 0, or a CX_E* code. */
static int gen_step(gen_state *g) {
    CxModel *M = g->model;
    if (g->sp && g->n_gen > 0) return gen_spec_step(g);
    int tok = cx_sampler_sample(g->smp, g->logits);
    int rc = gen_take(g, tok, now_s(), cx_session_pos(M->gen), 1);
    if (rc || g->done || g->sp) return rc; /* speculating: the token is the next step's to evaluate */
    if (cx_eval(M->gen, &tok, 1, &g->logits, &g->err)) return g->err.code;
    if (gen_ids_push(M, &tok, 1)) return g->err.code = CX_ENOMEM;
    return 0;
}

/* Bytes of the text that can no longer change: all once done; else not a
 * tail that could begin a stop string, nor an incomplete UTF-8 sequence. */
static size_t gen_ready(const gen_state *g) {
    if (g->done) return g->len;
    size_t hold = 0;
    for (int k = 0; k < g->n_stops; k++) {
        size_t sl = strlen(g->stops[k]);
        for (size_t h = sl - 1 < g->len ? sl - 1 : g->len; h > hold; h--)
            if (!memcmp(g->text + g->len - h, g->stops[k], h)) {
                hold = h;
                break;
            }
    }
    size_t end = g->len - hold;
    end -= pycx_utf8_partial(g->text, end);
    return end > g->emitted ? end : g->emitted;
}

static PyObject *gen_result(const gen_state *g) {
    PyObject *r = PyStructSequence_New(&Generation_Type);
    PyObject *toks = PyList_New(g->n_gen);
    if (!r || !toks) {
        Py_XDECREF(r);
        Py_XDECREF(toks);
        return NULL;
    }
    for (int i = 0; i < g->n_gen; i++) {
        PyObject *v = PyLong_FromLong(g->toks[i]);
        if (!v) {
            Py_DECREF(r);
            Py_DECREF(toks);
            return NULL;
        }
        PyList_SET_ITEM(toks, i, v);
    }
    double decode = g->n_gen > 0 ? g->t_last - g->t_first : 0;
    cx_spec_stats ss = {0};
    if (g->sp) cx_spec_get_stats(g->sp, &ss);
    PyObject *items[GEN_N_FIELDS] = {
        pycx_text(g->text ? g->text : "", g->len),
        toks,
        PyUnicode_FromString(g->reason ? g->reason : "length"),
        PyLong_FromLong(g->n_prompt),
        PyLong_FromLong(g->n_cached),
        PyLong_FromLong(g->n_gen),
        PyFloat_FromDouble(g->t_first > 0 ? (g->t_first - g->t0) * 1e3 : 0),
        PyFloat_FromDouble((g->t_prefill1 - g->t_prefill0) * 1e3),
        PyFloat_FromDouble(decode * 1e3),
        PyFloat_FromDouble(g->n_gen > 1 && decode > 0 ? (g->n_gen - 1) / decode : 0),
        g->sp ? pycx_spec_stats_dict(&ss) : Py_NewRef(Py_None),
    };
    for (int i = 0; i < GEN_N_FIELDS; i++) {
        if (!items[i]) {
            for (int j = i + 1; j < GEN_N_FIELDS; j++) Py_XDECREF(items[j]);
            Py_DECREF(r);
            return NULL;
        }
        PyStructSequence_SET_ITEM(r, i, items[i]);
    }
    return r;
}

/* ---- Stream ------------------------------------------------------------------ */

typedef struct CxStream {
    PyObject_HEAD
    gen_state g;
    int open;          /* holds the model (busy, a user) */
    PyObject *result;  /* the Generation once finished */
} CxStream;

static PyTypeObject CxStream_Type;

static void stream_end(CxStream *st) {
    if (!st->open) return;
    st->open = 0;
    CxModel *M = st->g.model;
    gen_free(&st->g);
    pycx_leave(&M->busy);
    pycx_model_release(M);
}

static void Stream_dealloc(CxStream *st) {
    stream_end(st);
    Py_XDECREF(st->result);
    Py_TYPE(st)->tp_free((PyObject *)st);
}

static PyObject *Stream_next(CxStream *st) {
    gen_state *g = &st->g;
    while (st->open) {
        size_t ready = gen_ready(g);
        if (ready > g->emitted) {
            PyObject *piece = pycx_text(g->text + g->emitted, ready - g->emitted);
            g->emitted = ready;
            return piece;
        }
        if (g->done) {
            st->result = gen_result(g);
            stream_end(st);
            return NULL; /* StopIteration (or the error gen_result set) */
        }
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = gen_step(g);
        Py_END_ALLOW_THREADS
        if (rc) {
            cx_err e = g->err;
            stream_end(st);
            return pycx_raise(&e);
        }
    }
    return NULL;
}

static PyObject *Stream_close(CxStream *st, PyObject *unused) {
    stream_end(st);
    Py_RETURN_NONE;
}

static PyObject *Stream_result(CxStream *st, void *closure) { return Py_NewRef(st->result ? st->result : Py_None); }

static PyMethodDef STREAM_METHODS[] = {
    {"close", (PyCFunction)Stream_close, METH_NOARGS,
     "close()\n\nStop generating now and free the model for the next generate() (also when the stream is dropped)."},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef STREAM_GETSET[] = {
    {"result", (getter)Stream_result, NULL, "The Generation (text and statistics) once the stream is exhausted, else None.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CxStream_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cortex.Stream",
    .tp_basicsize = sizeof(CxStream),
    .tp_dealloc = (destructor)Stream_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An iterator of text pieces, from Model.generate(..., stream=True).\n\n"
              "Each next() samples tokens (the GIL released while the engine works) until some text is final: "
              "bytes that could still begin a stop string, or an incomplete UTF-8 character, wait for the next token. "
              "Joined, the pieces equal generate()'s text. The model runs one generation at a time: another "
              "generate() on it raises RuntimeError until this stream is exhausted, closed or dropped.",
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)Stream_next,
    .tp_methods = STREAM_METHODS,
    .tp_getset = STREAM_GETSET,
};

/* ---- generate() ---------------------------------------------------------------- */

/* Tokens generate() runs between two looks at the signals (one GIL round
 * trip each: well under a microsecond against tens of microseconds a token). */
#define GEN_SIGNAL_EVERY 16

static PyObject *Model_generate(CxModel *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"prompt", "max_tokens", "stream", "temperature", "top_k", "top_p", "min_p",
                             "repeat_penalty", "repeat_last_n", "presence_penalty", "frequency_penalty", "seed",
                             "stop", "ignore_eos", "lora", "lora_scale", "n_ctx", "special", "drafter", NULL};
    PyObject *prompt, *max_o = NULL, *stop_o = NULL, *lora_o = Py_None, *scale_o = NULL, *ctx_o = NULL,
                      *drafter_o = Py_None;
    int stream = 0, ignore_eos = 0, special = 1;
    pycx_sampling s = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$pOOOOOOOOOOpOOOpO:generate", kwlist, &prompt, &max_o, &stream,
                                     &s.temperature, &s.top_k, &s.top_p, &s.min_p, &s.repeat_penalty,
                                     &s.repeat_last_n, &s.presence_penalty, &s.frequency_penalty, &s.seed, &stop_o,
                                     &ignore_eos, &lora_o, &scale_o, &ctx_o, &special, &drafter_o))
        return NULL;
    const cx_model *m = pycx_model_get(self);
    if (!m) return NULL;
    const cx_model_info *mi = cx_model_get_info(m);
    if (mi->vocab_only) return pycx_raise_code(CX_EINVAL, "%s: a vocabulary-only model cannot generate", mi->name);
    long long max_tokens, n_ctx;
    double scale;
    cx_sampler_params sp;
    int lora_none = 0;
    if (pycx_int_arg(max_o, "max_tokens", 1, INT32_MAX, 16, &max_tokens) ||
        pycx_int_arg(ctx_o, "n_ctx", 0, INT32_MAX, 0, &n_ctx) ||
        pycx_float_arg(scale_o, "lora_scale", -1e3, 1e3, 1.0, &scale) || pycx_sampling_params(&s, &sp))
        return NULL;
    const cx_lora *lora = pycx_lora_arg(lora_o, self, "lora", &lora_none);
    if (!lora && !lora_none) return NULL;
    int drafter_none = 0;
    if (!pycx_drafter_arg(drafter_o, self, "drafter", &drafter_none) && !drafter_none) return NULL;
    gen_state g0 = {0}, *g = &g0;
    g->model = self;
    g->max_tokens = (int)max_tokens;
    g->ignore_eos = ignore_eos;
    g->lora = lora;
    if (pycx_stops(stop_o, "stop", &g->stops, &g->n_stops)) return NULL;
    for (int k = 0; k < g->n_stops; k++)
        if (strlen(g->stops[k]) > g->max_stop) g->max_stop = strlen(g->stops[k]);
    int32_t *ids = NULL;
    int n = 0;
    if (pycx_prompt(m, prompt, special, "prompt", &ids, &n)) {
        pycx_stops_free(g->stops, g->n_stops);
        return NULL;
    }
    if (pycx_enter(&self->busy, "the model's generate()")) {
        PyMem_Free(ids);
        pycx_stops_free(g->stops, g->n_stops);
        return NULL;
    }
    if (lora) g->lora_obj = Py_NewRef(lora_o);
    if (!drafter_none) pycx_drafter_acquire(g->drafter = (CxDrafter *)drafter_o);
    int rc, interrupted = 0;
    Py_BEGIN_ALLOW_THREADS
    rc = gen_begin(g, ids, n, (int)n_ctx, (float)scale);
    if (!rc) rc = gen_prefill(g, ids, n, &sp);
    Py_END_ALLOW_THREADS
    PyMem_Free(ids);
    /* GEN_SIGNAL_EVERY tokens at a time without the GIL, then a look at the
     * signals: Ctrl-C stops a long generation (KeyboardInterrupt), the model
     * stays usable (its session holds the tokens fed so far). */
    while (!rc && !stream && !g->done && !interrupted) {
        Py_BEGIN_ALLOW_THREADS
        for (int k = 0; k < GEN_SIGNAL_EVERY && !g->done && !(rc = gen_step(g)); k++) {}
        Py_END_ALLOW_THREADS
        interrupted = !rc && PyErr_CheckSignals() < 0;
    }
    PyObject *r = NULL;
    if (interrupted) {
        gen_free(g);
        pycx_leave(&self->busy);
        return NULL;
    }
    if (rc) {
        cx_err e = g->err;
        gen_free(g);
        pycx_leave(&self->busy);
        if (!e.code) e.code = rc;
        return pycx_raise(&e);
    }
    if (!stream) {
        r = gen_result(g);
        gen_free(g);
        pycx_leave(&self->busy);
        return r;
    }
    CxStream *st = PyObject_New(CxStream, &CxStream_Type);
    if (st) { /* nothing of it is live yet: its dealloc must not end a generation it does not hold */
        st->open = 0;
        st->result = NULL;
    }
    if (!st || pycx_model_acquire(self)) {
        Py_XDECREF(st);
        gen_free(g);
        pycx_leave(&self->busy);
        return NULL;
    }
    st->g = *g;
    st->open = 1;
    st->result = NULL;
    return (PyObject *)st;
}

/* Model.session(...) and Model.load_lora(...): the Session and LoRA constructors with this model. */
static PyObject *with_model(CxModel *self, PyTypeObject *t, PyObject *args, PyObject *kw) {
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *a = PyTuple_New(n + 1);
    if (!a) return NULL;
    PyTuple_SET_ITEM(a, 0, Py_NewRef(self));
    for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(a, i + 1, Py_NewRef(PyTuple_GET_ITEM(args, i)));
    PyObject *r = PyObject_Call((PyObject *)t, a, kw);
    Py_DECREF(a);
    return r;
}
static PyObject *Model_session(CxModel *self, PyObject *args, PyObject *kw) { return with_model(self, &CxSession_Type, args, kw); }
static PyObject *Model_load_lora(CxModel *self, PyObject *args, PyObject *kw) { return with_model(self, &CxLora_Type, args, kw); }

#define KW (PyCFunction)(void (*)(void))
static PyMethodDef MODEL_METHODS[] = {
    {"close", (PyCFunction)Model_close, METH_NOARGS,
     "close()\n\nRefuse new work and free the model: at once when nothing uses it, else when its last Session, "
     "Scheduler, LoRA or stream goes (they keep working until then)."},
    {"__enter__", (PyCFunction)Model_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Model_exit, METH_VARARGS, NULL},
    {"tokenize", KW Model_tokenize, METH_VARARGS | METH_KEYWORDS,
     "tokenize(text, add_bos=True, special=True) -> list[int]\n\nThe token ids of text (str or bytes). add_bos: start "
     "with BOS when the vocabulary asks for it. special: text of control tokens ('<|eot_id|>') becomes them."},
    {"detokenize", KW Model_detokenize, METH_VARARGS | METH_KEYWORDS,
     "detokenize(ids) -> str\n\nThe text of a token id sequence (invalid UTF-8 replaced by U+FFFD)."},
    {"token_piece", KW Model_token_piece, METH_VARARGS | METH_KEYWORDS,
     "token_piece(token, prev=-1) -> bytes\n\nThe bytes token adds after token prev (-1: at the start)."},
    {"is_eog", (PyCFunction)Model_is_eog, METH_O, "is_eog(token) -> bool\n\nWhether token ends generation (EOS or EOT)."},
    {"apply_chat_template", KW Model_apply_chat_template, METH_VARARGS | METH_KEYWORDS,
     "apply_chat_template(messages, *, date=None) -> str\n\nThe prompt for messages ([{'role': ..., 'content': ...}]) "
     "in the model's chat format (see chat_template), ending with the assistant's turn opened. date: YYYY-MM-DD for "
     "formats that state it (gpt-oss), None: today (UTC). UnsupportedError when the model has no known format "
     "(pass Model(chat_template=NAME))."},
    {"generate", KW Model_generate, METH_VARARGS | METH_KEYWORDS,
     "generate(prompt, max_tokens=16, *, stream=False, temperature=0.8, top_k=40, top_p=0.95, min_p=0.05,\n"
     "         repeat_penalty=1.0, repeat_last_n=64, presence_penalty=0.0, frequency_penalty=0.0, seed=42,\n"
     "         stop=None, ignore_eos=False, lora=None, lora_scale=1.0, n_ctx=0, special=True, drafter=None)\n"
     "  -> Generation | Stream\n\n"
     "Generate up to max_tokens tokens after prompt (str, bytes or token ids; text is tokenized with BOS). Sampling "
     "is llama.cpp's chain (penalties, top-k, top-p, min-p, temperature); temperature=0 is greedy, equal to "
     "`cortex generate --temp 0` token for token. Ends at the model's end-of-generation token (unless ignore_eos), "
     "at a stop string (not part of the text), at max_tokens or when the context (n_ctx, 0: min(model's, 4096)) is "
     "full. lora: a LoRA of this model applied to this generation. drafter: a Drafter of this model: decode by "
     "speculative decoding (the same tokens, greedy or sampled with the same seed; "
     "Generation.speculation has its counters). stream=True returns a Stream of text pieces.\n\n"
     "The model keeps its session between calls: positions a new prompt shares with the last one are not "
     "recomputed (Generation.n_cached). One generation runs at a time per Model."},
    {"session", KW Model_session, METH_VARARGS | METH_KEYWORDS, "session(...) -> Session\n\nSession(self, ...)."},
    {"load_lora", KW Model_load_lora, METH_VARARGS | METH_KEYWORDS, "load_lora(path, *, type=None) -> LoRA\n\nLoRA(self, path, type=type)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef MODEL_GETSET[] = {
    {"info", (getter)Model_info, NULL, "The model's description (cortex.h cx_model_info) as a dict.", NULL},
    {"n_vocab", (getter)Model_int, NULL, "Tokens in the vocabulary.", (void *)0},
    {"n_ctx", (getter)Model_int, NULL, "The context length the model was trained with.", (void *)1},
    {"bos", (getter)Model_int, NULL, "The BOS token id, or None.", (void *)2},
    {"eos", (getter)Model_int, NULL, "The EOS token id, or None.", (void *)3},
    {"eot", (getter)Model_int, NULL, "The end-of-turn token id of a chat model, or None.", (void *)4},
    {"closed", (getter)Model_closed, NULL, "Whether close() was called.", NULL},
    {"path", (getter)Model_path, NULL, "The file it was loaded from.", NULL},
    {"threads", (getter)Model_threads_get, (setter)Model_threads_set, "Threads of generate() and of new Sessions.", NULL},
    {"chat_template", (getter)Model_chat_template, NULL,
     "The chat format's name ('chatml', 'llama2', 'llama3', 'zephyr', 'phi3', 'gemma', 'gpt-oss'), or None.", NULL},
    {"chat_stop", (getter)Model_chat_stop, NULL, "The texts that end an assistant turn in the chat format (stop strings).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject CxModel_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cortex._cortex.Model",
    .tp_basicsize = sizeof(CxModel),
    .tp_dealloc = (destructor)Model_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Model(path, tokenizer=None, *, threads=1, isa=None, weights='auto', repack=True, chat_template=None)\n\n"
              "A model loaded from a GGUF file or a llama2.c checkpoint (then `tokenizer` is its tokenizer.bin). "
              "threads: for generate() and new Sessions. isa: force a kernel set ('scalar', 'avx2', 'avx512', ...; "
              "None: the best here). weights: 'mmap' maps the file, 'hugepages' copies it into 2 MiB pages, 'auto' "
              "decides by size. chat_template: a format name when the model's own is missing or unknown.\n\n"
              "Errors: FileError (cannot read), FormatError (not a valid file), UnsupportedError, "
              "InvalidArgumentError (bad isa).",
    .tp_methods = MODEL_METHODS,
    .tp_getset = MODEL_GETSET,
    .tp_init = (initproc)Model_init,
    .tp_new = PyType_GenericNew,
};

/* See pycx.h. */
int pycx_model_init(PyObject *mod) {
    if (PyType_Ready(&CxModel_Type) || PyType_Ready(&CxStream_Type)) return -1;
    if (!Generation_Type.tp_name && PyStructSequence_InitType2(&Generation_Type, &GEN_DESC)) return -1;
    if (PyModule_AddObjectRef(mod, "Model", (PyObject *)&CxModel_Type) ||
        PyModule_AddObjectRef(mod, "Stream", (PyObject *)&CxStream_Type) ||
        PyModule_AddObjectRef(mod, "Generation", (PyObject *)&Generation_Type))
        return -1;
    return 0;
}
