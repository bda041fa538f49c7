/*
 * spec.c - cortex.Drafter: where speculative decoding's drafts come from
 * (a cx_drafter, docs/speculative.md), made once for its model and used by
 * Model.generate(drafter=...) and Scheduler(drafter=...): the n-gram lookup,
 * a self-draft (the model quantized at load) or a draft model file with the
 * model's vocabulary. Greedy and seeded sampled output are the model's own,
 * token for token.
 *
 * Lifetime: it holds its Model (a user of it); a Scheduler that speculates
 * with it holds a reference and counts as a user, so the C drafter outlives
 * every C scheduler using it. close() frees it at once when nothing uses it,
 * else makes it refuse new uses and leaves the freeing to the last user.
 */
#include <stdlib.h>

#include "pycx.h"

static void drafter_free_c(CxDrafter *self) {
    if (!self->d) return;
    cx_drafter_free(self->d);
    self->d = NULL;
    pycx_model_release(self->model);
}

/* See pycx.h. */
cx_drafter *pycx_drafter_arg(PyObject *obj, CxModel *model, const char *arg, int *ok) {
    *ok = 0;
    if (!obj || obj == Py_None) {
        *ok = 1;
        return NULL;
    }
    if (!PyObject_TypeCheck(obj, &CxDrafter_Type)) {
        PyErr_Format(PyExc_TypeError, "%s must be a cortex.Drafter or None, not %.100s", arg, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    CxDrafter *d = (CxDrafter *)obj;
    if (!d->d || d->closed) {
        PyErr_Format(PyExc_ValueError, "%s: the drafter is closed", arg);
        return NULL;
    }
    if (d->model != model) {
        PyErr_Format(PyExc_ValueError, "%s: the drafter was made for another Model", arg);
        return NULL;
    }
    return d->d;
}

/* See pycx.h. */
void pycx_drafter_release(CxDrafter *self) {
    if (--self->users == 0 && self->closed) drafter_free_c(self);
    Py_DECREF(self);
}

static void Drafter_dealloc(CxDrafter *self) {
    assert(self->users == 0 && "a user holds a reference");
    drafter_free_c(self);
    Py_XDECREF(self->model);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Drafter_init(CxDrafter *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"model", "spec", "draft", "draft_tokenizer", "draft_max", "draft_min", "p_min", "adaptive",
                             "threads", NULL};
    PyObject *model_o, *draft_o = NULL, *dtok_o = NULL, *max_o = NULL, *min_o = NULL, *pmin_o = NULL,
                       *threads_o = Py_None;
    const char *spec = NULL;
    int adaptive = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|z$O&O&OOOpO:Drafter", kwlist, &CxModel_Type, &model_o, &spec,
                                     PyUnicode_FSConverter, &draft_o, PyUnicode_FSConverter, &dtok_o, &max_o, &min_o,
                                     &pmin_o, &adaptive, &threads_o))
        return -1;
    int rc = -1;
    CxModel *M = (CxModel *)model_o;
    const cx_model *m = pycx_model_get(M);
    cx_spec_params p = cx_spec_defaults();
    cx_err err = {0};
    long long dmax, dmin, threads;
    double pmin;
    if (self->model) {
        PyErr_SetString(PyExc_RuntimeError, "Drafter.__init__ called twice");
        goto out;
    }
    if (!m) goto out;
    /* as `cortex generate` takes them: a draft file alone means spec='model' */
    if (!spec) spec = draft_o ? "model" : "ngram";
    if (cx_spec_parse(spec, &p, &err) || p.kind == CX_SPEC_NONE) {
        if (p.kind == CX_SPEC_NONE && !err.code)
            PyErr_SetString(PyExc_ValueError, "spec 'none' makes no drafter (pass drafter=None to decode plainly)");
        else pycx_raise(&err);
        goto out;
    }
    if (p.kind == CX_SPEC_MODEL && !draft_o) {
        PyErr_SetString(PyExc_ValueError, "spec='model' needs draft= (the draft model's file)");
        goto out;
    }
    if (draft_o && p.kind != CX_SPEC_MODEL) {
        PyErr_Format(PyExc_ValueError, "draft= applies to spec='model', not spec='%s'", spec);
        goto out;
    }
    if (pycx_int_arg(max_o, "draft_max", 1, CX_SPEC_MAX_DRAFT, p.draft_max, &dmax) ||
        pycx_int_arg(min_o, "draft_min", 0, CX_SPEC_MAX_DRAFT, 0, &dmin) ||
        pycx_float_arg(pmin_o, "p_min", 0, 1, 0, &pmin) ||
        pycx_int_arg(threads_o, "threads", 1, 1024, M->threads > 0 ? M->threads : 1, &threads))
        goto out;
    if (dmin > dmax) {
        PyErr_Format(PyExc_ValueError, "draft_min (%lld) is above draft_max (%lld): no draft would be checked", dmin,
                     dmax);
        goto out;
    }
    p.draft_max = (int)dmax;
    p.draft_min = (int)dmin;
    p.p_min = (float)pmin;
    p.adapt = adaptive;
    p.n_threads = (int)threads;
    p.draft_path = draft_o ? PyBytes_AS_STRING(draft_o) : NULL;
    p.draft_tokenizer = dtok_o ? PyBytes_AS_STRING(dtok_o) : NULL;
    p.tmp_dir = getenv("TMPDIR"); /* a self-draft's quantized copy: written, loaded and unlinked */
    cx_drafter *d = NULL;
    int drc;
    if (pycx_model_acquire(M)) goto out; /* before the GIL goes: Model.close() cannot free it meanwhile */
    Py_BEGIN_ALLOW_THREADS
    drc = cx_drafter_new(m, &p, &d, &err); /* a self-draft quantizes the model: seconds per GiB */
    Py_END_ALLOW_THREADS
    if (drc) {
        pycx_model_release(M);
        pycx_raise(&err);
        goto out;
    }
    self->d = d;
    self->model = (CxModel *)Py_NewRef(M);
    self->kind = p.kind;
    self->draft_max = p.draft_max;
    rc = 0;
out:
    Py_XDECREF(draft_o);
    Py_XDECREF(dtok_o);
    return rc;
}

static PyObject *Drafter_close(CxDrafter *self, PyObject *unused) {
    self->closed = 1;
    if (self->users == 0) drafter_free_c(self);
    Py_RETURN_NONE;
}

static PyObject *Drafter_enter(CxDrafter *self, PyObject *unused) { return Py_NewRef(self); }
static PyObject *Drafter_exit(CxDrafter *self, PyObject *args) { return Drafter_close(self, NULL); }

static PyObject *Drafter_description(CxDrafter *self, void *closure) {
    if (!self->d) return PyErr_Format(PyExc_ValueError, "the drafter is closed");
    return PyUnicode_FromString(cx_drafter_describe(self->d));
}

static PyObject *Drafter_kind(CxDrafter *self, void *closure) {
    const char *k = cx_spec_kind_name(self->kind);
    return k ? PyUnicode_FromString(k) : Py_NewRef(Py_None);
}

static PyObject *Drafter_draft_bytes(CxDrafter *self, void *closure) {
    if (!self->d) return PyErr_Format(PyExc_ValueError, "the drafter is closed");
    const cx_model *dm = cx_drafter_model(self->d);
    return PyLong_FromLongLong(dm ? (long long)cx_model_get_info(dm)->weight_bytes : 0);
}

static PyObject *Drafter_closed(CxDrafter *self, void *closure) { return PyBool_FromLong(self->closed || !self->d); }
static PyObject *Drafter_model(CxDrafter *self, void *closure) {
    return Py_NewRef(self->model ? (PyObject *)self->model : Py_None);
}
static PyObject *Drafter_draft_max(CxDrafter *self, void *closure) { return PyLong_FromLong(self->draft_max); }

static PyMethodDef DRAFTER_METHODS[] = {
    {"close", (PyCFunction)Drafter_close, METH_NOARGS,
     "close()\n\nFree the drafter (and a draft model it loaded): at once when no scheduler uses it, else when the "
     "last one is closed (new uses are refused meanwhile)."},
    {"__enter__", (PyCFunction)Drafter_enter, METH_NOARGS, "__enter__($self, /)\n--\n\nThe drafter itself."},
    {"__exit__", (PyCFunction)Drafter_exit, METH_VARARGS, "__exit__($self, *args, /)\n--\n\nclose()."},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef DRAFTER_GETSET[] = {
    {"kind", (getter)Drafter_kind, NULL, "'ngram', 'self' or 'model'.", NULL},
    {"description", (getter)Drafter_description, NULL,
     "What the engine made (cx_drafter_describe), e.g. 'self:q4_0 (590 MiB, quantized at load)'.", NULL},
    {"draft_bytes", (getter)Drafter_draft_bytes, NULL, "The draft model's weight bytes (0 for the lookup).", NULL},
    {"draft_max", (getter)Drafter_draft_max, NULL, "Most tokens drafted per pass of the model.", NULL},
    {"closed", (getter)Drafter_closed, NULL, "Whether close() was called.", NULL},
    {"model", (getter)Drafter_model, NULL, "The Model its drafts are checked by.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject CxDrafter_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cortex._cortex.Drafter",
    .tp_basicsize = sizeof(CxDrafter),
    .tp_dealloc = (destructor)Drafter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Drafter(model, spec=None, *, draft=None, draft_tokenizer=None, draft_max=8, draft_min=0, p_min=0.0, "
              "adaptive=True, threads=None)\n\n"
              "Speculative decoding's drafts for model (docs/speculative.md): spec 'ngram' (the default: the last "
              "tokens looked up earlier in the prompt and text, no model), 'self' or 'self:TYPE' (the model's own "
              "weights quantized to TYPE, q4_0 by default, when the Drafter is made: an f32, f16 or bf16 model), "
              "'model' (draft=: a GGUF or llama2.c file with the model's vocabulary; draft= alone implies it). "
              "draft_max: most tokens drafted per pass; draft_min: shorter drafts are not checked; p_min: a draft "
              "model stops at a token it gives less; adaptive: each draft's length from the measured acceptance and "
              "times (False: always draft_max); threads: the draft model's passes (the Model's by default). Pass it "
              "to Model.generate(drafter=...) or Scheduler(drafter=...): greedy output does not change.",
    .tp_methods = DRAFTER_METHODS,
    .tp_getset = DRAFTER_GETSET,
    .tp_init = (initproc)Drafter_init,
    .tp_new = PyType_GenericNew,
};

/* See pycx.h. */
PyObject *pycx_spec_stats_dict(const cx_spec_stats *st) {
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L,s:d,s:d,s:d,s:d,s:d}", "steps", (long long)st->steps, "verified",
                         (long long)st->verified, "drafted", (long long)st->drafted, "accepted", (long long)st->accepted,
                         "tokens", (long long)st->tokens, "acceptance", st->acceptance, "mean_accepted",
                         st->mean_accepted, "tokens_per_pass", st->tokens_per_pass, "draft_ms",
                         (double)st->draft_ns / 1e6, "verify_ms", (double)st->verify_ns / 1e6);
}

/* See pycx.h. */
int pycx_spec_init(PyObject *mod) {
    if (PyType_Ready(&CxDrafter_Type)) return -1;
    return PyModule_AddObjectRef(mod, "Drafter", (PyObject *)&CxDrafter_Type);
}
