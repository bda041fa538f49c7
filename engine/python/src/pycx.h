/*
 * pycx.h - what the files of the `cortex` Python extension (cortex._cortex)
 * share: the objects, the error mapping and argument conversion. The module
 * is a thin layer: every inference step is one call into the C library
 * (engine/include/cortex.h) made with the GIL released; Python only decides
 * what to call next.
 *
 * Files, one job each:
 *   module.c    the module: exception classes, constants, argument helpers
 *   model.c     Model: loading, info, tokenizer, chat templates, generate
 *               (whole or streamed) on a session of its own
 *   session.c   Session: eval, logits as a read-only view of the engine's
 *               buffer (the buffer protocol: numpy sees it without a copy)
 *   sched.c     Scheduler and Request: many requests on the C scheduler's
 *               thread, per-token callbacks, iteration, cancellation
 *   lora.c      LoRA: an adapter loaded beside a model
 *   spec.c      Drafter: speculative decoding's drafts (generate, Scheduler)
 *   tools.c     synth and quantize (cortex_tools.h)
 *
 * Lifetime (docs/python.md, "Lifetime"): every object that uses a model
 * (Session, Scheduler, LoRA, a stream) holds a reference to its Model, and a
 * logits view holds its Session, so C memory is freed only after its last
 * user. Model.close() (or leaving `with`) makes the Model refuse new work
 * and frees the C model at once when nothing else uses it, else when the
 * last user goes. Nothing Python can do reaches freed memory.
 *
 * Threads: the C calls run without the GIL. A Model, a Session and a
 * Request are each used by one thread at a time (the C API's rule); a
 * second thread entering one that is busy gets RuntimeError instead of a
 * race (pycx_enter/pycx_leave). A Scheduler is safe from any thread, as the
 * C scheduler is.
 */
#ifndef PYCX_H
#define PYCX_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "cortex.h"
#include "cortex_tools.h"

/* ---- Model (model.c) ----------------------------------------------------- */

typedef struct CxModel {
    PyObject_HEAD
    cx_model *m;          /* NULL once freed */
    int closed;           /* close() called: new work is refused */
    int busy;             /* generate/stream in progress (pycx_enter) */
    int threads;          /* default threads of sessions and generate */
    Py_ssize_t users;     /* live Sessions, Schedulers, LoRAs, streams of this model */
    PyObject *path;       /* str */
    cx_chat chat;         /* valid when chat_ok */
    int chat_ok;
    char chat_why[512];   /* why there is no chat template */
    /* generate's own session, kept between calls so a prompt sharing a
     * prefix with the last one reuses its KV (llama-cpp-python does too) */
    cx_session *gen;
    int gen_ctx;
    int32_t *gen_ids;     /* the tokens gen holds, [gen_cap] */
    int gen_n, gen_cap;
    const cx_lora *gen_lora; /* the adapter gen was evaluated with */
    float gen_lora_scale;
} CxModel;

extern PyTypeObject CxModel_Type;

/* The C model of `self` for new work, or NULL with ValueError set when it is closed. */
const cx_model *pycx_model_get(CxModel *self);
/* A user (Session, Scheduler, LoRA, stream) starts / stops holding the model:
 * the C model is freed at the last release after close(). acquire takes a
 * reference to the Python object too; release drops it. */
int pycx_model_acquire(CxModel *self);
void pycx_model_release(CxModel *self);

/* ---- Session (session.c) ------------------------------------------------- */

typedef struct CxSession {
    PyObject_HEAD
    CxModel *model;
    cx_session *s;        /* NULL once freed */
    int closed;           /* close() called: eval refused */
    int busy;
    int has_logits;       /* the last eval left logits of its last position */
    const float *logits;  /* the engine's buffer (one address for the session's life) */
    Py_ssize_t n_views;   /* live LogitsBuffers over `logits`: the C session outlives them */
    PyObject *weakview;   /* weak reference to the last numpy array over `logits`, or NULL */
    PyObject *lora;       /* the LoRA object attached (kept alive), or NULL */
} CxSession;

extern PyTypeObject CxSession_Type;

/* ---- LoRA (lora.c) -------------------------------------------------------- */

typedef struct CxLora {
    PyObject_HEAD
    CxModel *model;
    cx_lora *a;           /* NULL once freed */
    int closed;           /* close() called: new uses refused */
    Py_ssize_t users;     /* sessions it is attached to (each holds a reference) */
    PyObject *path;
} CxLora;

extern PyTypeObject CxLora_Type;

/* The C adapter of a LoRA object (or None: NULL with *ok = 1); NULL with an
 * exception naming `arg` when obj is neither, is closed, or belongs to
 * another model than `model`. */
const cx_lora *pycx_lora_arg(PyObject *obj, CxModel *model, const char *arg, int *ok);

/* ---- Drafter (spec.c) ----------------------------------------------------- */

typedef struct CxDrafter {
    PyObject_HEAD
    CxModel *model;
    cx_drafter *d;        /* NULL once freed */
    int closed;           /* close() called: new uses refused */
    Py_ssize_t users;     /* schedulers and generations speculating with it (each holds a reference) */
    int kind, draft_max;
} CxDrafter;

extern PyTypeObject CxDrafter_Type;

/* The C drafter of a Drafter object (or None: NULL with *ok = 1); NULL with
 * an exception naming `arg` when obj is neither, is closed, or was made for
 * another model than `model`. */
cx_drafter *pycx_drafter_arg(PyObject *obj, CxModel *model, const char *arg, int *ok);
/* A user (a Scheduler, a generation) starts / stops speculating with it: a
 * reference, and the C drafter freed at the last release after close(). */
static inline void pycx_drafter_acquire(CxDrafter *d) {
    d->users++;
    Py_INCREF(d);
}
void pycx_drafter_release(CxDrafter *d);
/* A sequence's speculation counters (cx_spec_stats) as a dict: steps (the
 * target passes of its decode), verified, drafted, accepted, tokens,
 * acceptance, mean_accepted, tokens_per_pass, draft_ms, verify_ms. */
PyObject *pycx_spec_stats_dict(const cx_spec_stats *st);

/* ---- Scheduler (sched.c) -------------------------------------------------- */

extern PyTypeObject CxScheduler_Type;
extern PyTypeObject CxRequest_Type;

/* ---- the module (module.c) ------------------------------------------------ */

/* Exception classes: cortex.Error and one subclass per CX_E* code. */
extern PyObject *pycx_Error;
/* Raise the class of err->code with the engine's message; returns NULL. */
PyObject *pycx_raise(const cx_err *err);
/* Raise the class of `code` with a formatted message; returns NULL. */
PyObject *pycx_raise_code(int code, const char *fmt, ...);

/* Enter an object that one thread at a time may use: 0, or -1 with
 * RuntimeError naming `what` when another thread is inside it. */
int pycx_enter(int *busy, const char *what);
static inline void pycx_leave(int *busy) { *busy = 0; }

/* Token ids: a sequence of ints or an object exporting a buffer of C ints
 * (numpy int32/int64 arrays). Each must be in [0, n_vocab) (n_vocab <= 0:
 * any non-negative int32). Fills *out (PyMem_Malloc'd; free with PyMem_Free)
 * and *n; 0, or -1 with TypeError/ValueError naming `arg`. */
int pycx_ids(PyObject *obj, int n_vocab, const char *arg, int32_t **out, int *n);

/* A prompt: str (encoded UTF-8, tokenized with BOS, control text matched
 * when `special`), bytes, or token ids (as pycx_ids). 0, or -1 with an
 * exception naming `arg`. *out is PyMem_Malloc'd. */
int pycx_prompt(const cx_model *m, PyObject *obj, int special, const char *arg, int32_t **out, int *n);

/* Sampling from keyword values (NULL or None: the default); every value is
 * checked and a bad one is ValueError naming it. */
typedef struct pycx_sampling {
    PyObject *temperature, *top_k, *top_p, *min_p, *repeat_penalty, *repeat_last_n, *presence_penalty,
        *frequency_penalty, *seed;
} pycx_sampling;
int pycx_sampling_params(const pycx_sampling *in, cx_sampler_params *out);
/* Stop strings: None, a str, or a sequence of str. Fills out[0..*n)
 * (UTF-8 copies, PyMem_Malloc'd; pycx_stops_free). */
int pycx_stops(PyObject *obj, const char *arg, char ***out, int *n);
void pycx_stops_free(char **s, int n);

/* A Python int in [lo, hi] from obj (None: dflt) into *out; -1 with
 * TypeError/ValueError naming arg. */
int pycx_int_arg(PyObject *obj, const char *arg, long long lo, long long hi, long long dflt, long long *out);
/* The same for a float (int accepted), finite, in [lo, hi]. */
int pycx_float_arg(PyObject *obj, const char *arg, double lo, double hi, double dflt, double *out);

/* Text of bytes t[0..n): str, invalid UTF-8 replaced (U+FFFD). */
PyObject *pycx_text(const char *t, size_t n);
/* How many bytes at the end of t[0..n) are an incomplete UTF-8 sequence
 * (0..3): a stream holds them back until the next token completes them. */
size_t pycx_utf8_partial(const char *t, size_t n);

/* numpy, imported on first use (the module itself does not need it):
 * numpy.frombuffer(obj, dtype=float32) reshaped to `shape` (n_dims 1 or 2). */
PyObject *pycx_frombuffer_f32(PyObject *obj, int n_dims, const Py_ssize_t *shape);

/* Registration hooks of each file, called from PyInit__cortex. */
int pycx_model_init(PyObject *mod);
int pycx_session_init(PyObject *mod);
int pycx_lora_init(PyObject *mod);
int pycx_spec_init(PyObject *mod);
int pycx_sched_init(PyObject *mod);
int pycx_tools_init(PyObject *mod);

#endif
