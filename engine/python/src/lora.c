/*
 * lora.c - cortex.LoRA: an adapter (llama.cpp GGUF LoRA or a PEFT
 * directory) loaded beside its model, which it never modifies. Sessions
 * attach it (Session(lora=...), set_lora) and generate() applies it per
 * call; the Scheduler loads adapters by name itself (add_adapter).
 *
 * Lifetime: a session it is attached to holds a reference to it, so the C
 * adapter outlives every session using it. close() frees it at once when no
 * session uses it, else makes it refuse new uses and leaves the freeing to
 * the last reference.
 */
#include "pycx.h"

static void lora_free_c(CxLora *self) {
    if (!self->a) return;
    cx_lora_free(self->a);
    self->a = NULL;
    pycx_model_release(self->model);
}

/* See pycx.h. */
const cx_lora *pycx_lora_arg(PyObject *obj, CxModel *model, const char *arg, int *ok) {
    *ok = 0;
    if (!obj || obj == Py_None) {
        *ok = 1;
        return NULL;
    }
    if (!PyObject_TypeCheck(obj, &CxLora_Type)) {
        PyErr_Format(PyExc_TypeError, "%s must be a cortex.LoRA or None, not %.100s", arg, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    CxLora *l = (CxLora *)obj;
    if (!l->a || l->closed) {
        PyErr_Format(PyExc_ValueError, "%s: the adapter is closed", arg);
        return NULL;
    }
    if (l->model != model) {
        PyErr_Format(PyExc_ValueError, "%s: the adapter was loaded for another Model", arg);
        return NULL;
    }
    return l->a;
}

static void Lora_dealloc(CxLora *self) {
    assert(self->users == 0 && "an attached session holds a reference");
    lora_free_c(self);
    Py_XDECREF(self->model);
    Py_XDECREF(self->path);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Lora_init(CxLora *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"model", "path", "type", NULL};
    PyObject *model_o, *path_o = NULL;
    const char *type = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O&|$z:LoRA", kwlist, &CxModel_Type, &model_o, PyUnicode_FSConverter,
                                     &path_o, &type))
        return -1;
    int rc = -1;
    CxModel *M = (CxModel *)model_o;
    const cx_model *m = pycx_model_get(M);
    cx_lora_params p = cx_lora_defaults();
    if (self->model) {
        PyErr_SetString(PyExc_RuntimeError, "LoRA.__init__ called twice");
        goto out;
    }
    if (!m) goto out;
    if (type) {
        p.type = cx_type_from_name(type);
        if (p.type != CX_TYPE_F32 && p.type != CX_TYPE_Q8_0 && p.type != CX_TYPE_Q4_0) {
            PyErr_Format(PyExc_ValueError, "type must be 'f32', 'q8_0', 'q4_0' or None, not '%s'", type);
            goto out;
        }
    }
    cx_err err = {0};
    cx_lora *a = NULL;
    int lrc;
    const char *path = PyBytes_AS_STRING(path_o);
    Py_BEGIN_ALLOW_THREADS
    lrc = cx_lora_load(m, path, &p, &a, &err);
    Py_END_ALLOW_THREADS
    if (lrc) {
        pycx_raise(&err);
        goto out;
    }
    if (pycx_model_acquire(M)) {
        cx_lora_free(a);
        goto out;
    }
    self->a = a;
    self->model = (CxModel *)Py_NewRef(M);
    self->path = PyUnicode_DecodeFSDefault(path);
    rc = self->path ? 0 : -1;
out:
    Py_XDECREF(path_o);
    return rc;
}

static PyObject *Lora_close(CxLora *self, PyObject *unused) {
    self->closed = 1;
    if (self->users == 0) lora_free_c(self);
    Py_RETURN_NONE;
}

static PyObject *Lora_info(CxLora *self, void *closure) {
    if (!self->a) return PyErr_Format(PyExc_ValueError, "the adapter is closed");
    cx_lora_info i;
    cx_lora_get_info(self->a, &i);
    return Py_BuildValue("{s:s,s:i,s:i,s:i,s:d,s:s,s:n,s:K,s:d}", "path", i.path, "n_matrices", i.n_matrices,
                         "rank_min", i.rank_min, "rank_max", i.rank_max, "alpha", (double)i.alpha, "type",
                         cx_type_name(i.type), "bytes", (Py_ssize_t)i.bytes, "id", (unsigned long long)i.id,
                         "load_ms", (double)i.load_ns / 1e6);
}

static PyObject *Lora_closed(CxLora *self, void *closure) { return PyBool_FromLong(self->closed || !self->a); }
static PyObject *Lora_path(CxLora *self, void *closure) { return Py_NewRef(self->path ? self->path : Py_None); }
static PyObject *Lora_model(CxLora *self, void *closure) { return Py_NewRef(self->model ? (PyObject *)self->model : Py_None); }

static PyMethodDef LORA_METHODS[] = {
    {"close", (PyCFunction)Lora_close, METH_NOARGS,
     "close()\n\nFree the adapter: at once when no session uses it, else when the last one lets it go (new uses "
     "are refused meanwhile)."},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef LORA_GETSET[] = {
    {"info", (getter)Lora_info, NULL, "The adapter's description (cx_lora_info) as a dict.", NULL},
    {"closed", (getter)Lora_closed, NULL, "Whether close() was called.", NULL},
    {"path", (getter)Lora_path, NULL, "The file or directory it was loaded from.", NULL},
    {"model", (getter)Lora_model, NULL, "The Model it adapts.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject CxLora_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cortex._cortex.LoRA",
    .tp_basicsize = sizeof(CxLora),
    .tp_dealloc = (destructor)Lora_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "LoRA(model, path, *, type=None)\n\n"
              "A LoRA adapter for model: llama.cpp's GGUF LoRA, or a PEFT directory (adapter_config.json + "
              "adapter_model.safetensors) or its .safetensors file. type: the in-memory type of its matrices ('f32', "
              "'q8_0', 'q4_0'; None: q8_0 over a quantized model, else f32). A mismatch with the model is FormatError "
              "naming the tensor. Attach it with Session(lora=...), Session.set_lora or generate(lora=...).",
    .tp_methods = LORA_METHODS,
    .tp_getset = LORA_GETSET,
    .tp_init = (initproc)Lora_init,
    .tp_new = PyType_GenericNew,
};

/* See pycx.h. */
int pycx_lora_init(PyObject *mod) {
    if (PyType_Ready(&CxLora_Type)) return -1;
    return PyModule_AddObjectRef(mod, "LoRA", (PyObject *)&CxLora_Type);
}
