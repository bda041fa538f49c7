/*
 * quantize.c - convert a model file into a GGUF v3 file of another weight type
 * (`cortex quantize`).
 *
 * Inputs:
 *   - an F32/F16/BF16 GGUF: every metadata key/value is copied byte for byte except
 *     general.file_type and general.quantization_version, which are rewritten;
 *     tensors are copied in file order;
 *   - a llama2.c checkpoint + tokenizer.bin: the metadata and tensor order are
 *     the ones llama.cpp's convert-llama2c-to-ggml writes (tokens with U+2581
 *     for spaces, "<unk>"/"<s>"/"</s>" for ids 0..2, token types, an explicit
 *     output.weight), so the file means the same model. Q/K are not permuted:
 *     llama2.c, that converter and this engine all rotate adjacent pairs.
 * Every 2-D matrix and 3-D stack of experts' matrices is stored as
 * quant_tensor_type() decides (with its fallbacks for row lengths a block
 * does not divide; biases and routers stay f32); 1-D tensors (norms) become f32;
 * anything else is copied. Already-quantized inputs are refused: quantizing
 * them again only loses quality.
 *
 * The conversion streams: one row at a time is read from the mapped input,
 * converted and appended to OUT.tmp, so memory stays at a couple of rows
 * whatever the model size. OUT.tmp is loaded back through the ordinary model
 * loader as a check and only then renamed to OUT: a failure at any point
 * leaves neither OUT nor OUT.tmp behind.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "cortex_tools.h"
#include "gguf.h"
#include "gguf_write.h"
#include "model.h"
#include "model_map.h"
#include "quant.h"
#include "util.h"

#define QZ_NAME_MAX 128            /* longest tensor name accepted (llama.cpp: 64) */
#define QZ_QUANT_VERSION 2         /* general.quantization_version, as ggml writes */

/* ---- the conversion job --------------------------------------------------- */

/* One output tensor: where its input rows are and what it becomes. */
typedef struct qz_tensor {
    char name[QZ_NAME_MAX];
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint32_t in_type, out_type, wanted; /* wanted: the mixture rule's type had the row fit every block */
    const uint8_t *data;                /* first input row, inside a mapping */
    uint64_t in_bytes, out_bytes, offset;
} qz_tensor;

typedef struct qz_job {
    const char *in, *tok, *out;
    int ftype;               /* CX_TYPE_* or CX_FTYPE_Q4_K_M */
    int tied;                /* no output.weight: token_embd is also the classifier */
    cx_err *err;
    const uint8_t *map;      /* GGUF input: our mapping (llama2.c: the model's) */
    size_t map_size;
    gguf_ctx g;              /* GGUF input: the parsed header */
    int have_g;
    cx_model *model;         /* the input, loaded and validated by the ordinary loader */
    qz_tensor *t;
    int n_t;
    gguf_writer *w;          /* the output's header, built while planning */
    const cx_row_edit *edit; /* rows changed on the way (merge-lora), or NULL */
} qz_job;

/* ---- raw copy of GGUF metadata ---- */

/* Copy every metadata entry of the input except the two this conversion
 * rewrites, byte for byte: any value type, nested arrays included. */
static void copy_gguf_metadata(qz_job *j) {
    for (uint64_t i = 0; i < j->g.n_kv; i++) {
        const gguf_kv *kv = &j->g.kv[i];
        if (gguf_str_eq(kv->key, "general.file_type") || gguf_str_eq(kv->key, "general.quantization_version")) continue;
        const uint8_t *entry;
        size_t n = gguf_kv_entry(kv, &entry);
        gguf_w_entry_raw(j->w, entry, n);
    }
}

/* ---- llama2.c metadata, as convert-llama2c-to-ggml stores it ---- */

/* Tokenizer metadata from the vocabulary the llama2.c loader built out of
 * tokenizer.bin: pieces with spaces turned back into U+2581, ids 0..2 named
 * <unk>, <s>, </s>, types unknown/control/byte/normal (empty pieces control). */
static void l2c_tokenizer_metadata(qz_job *j) {
    const tok_vocab *v = &j->model->vocab;
    gguf_writer *w = j->w;
    gguf_w_str(j->w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_begin(w, "tokenizer.ggml.tokens", GGUF_STR, (uint64_t)v->n);
    for (int i = 0; i < v->n; i++) {
        static const char *special[3] = {"<unk>", "<s>", "</s>"};
        if (i < 3) {
            gguf_w_elem_str(w, special[i], strlen(special[i]));
            continue;
        }
        const char *s = v->text + v->off[i];
        uint64_t n = v->len[i], spaces = 0;
        for (uint64_t k = 0; k < n; k++) spaces += s[k] == ' ';
        gguf_w_elem_u64(w, n + 2 * spaces); /* each space becomes 3 bytes */
        for (uint64_t k = 0; k < n; k++) gguf_w_elem_bytes(w, s[k] == ' ' ? "\xE2\x96\x81" : &s[k], s[k] == ' ' ? 3 : 1);
    }
    gguf_w_arr_begin(w, "tokenizer.ggml.scores", GGUF_F32, (uint64_t)v->n);
    for (int i = 0; i < v->n; i++) gguf_w_elem_f32(w, v->score[i]);
    gguf_w_arr_begin(w, "tokenizer.ggml.token_type", GGUF_I32, (uint64_t)v->n);
    for (int i = 0; i < v->n; i++) {
        uint32_t type = i == 0 ? TOK_UNKNOWN : i < 3 || v->len[i] == 0 ? TOK_CONTROL
                      : v->type[i] == TOK_BYTE ? TOK_BYTE : TOK_NORMAL;
        gguf_w_elem_u32(w, type);
    }
    gguf_w_u32(j->w, "tokenizer.ggml.unknown_token_id", 0);
    gguf_w_u32(j->w, "tokenizer.ggml.bos_token_id", 1);
    gguf_w_u32(j->w, "tokenizer.ggml.eos_token_id", 2);
    gguf_w_u32(j->w, "tokenizer.ggml.seperator_token_id", UINT32_MAX); /* sic: llama.cpp's key spelling */
    gguf_w_u32(j->w, "tokenizer.ggml.padding_token_id", UINT32_MAX);
}

/* Architecture metadata of a llama2.c checkpoint. The context length is the
 * checkpoint's seq_len (llama.cpp's converter writes its default 128 instead). */
static void l2c_model_metadata(qz_job *j) {
    const cx_model_info *h = &j->model->info;
    char name[128];
    snprintf(name, sizeof name, "%s", cx_basename(j->in));
    char *dot = strrchr(name, '.');
    if (dot && dot != name) *dot = 0;
    gguf_w_str(j->w, "general.architecture", "llama");
    gguf_w_str(j->w, "general.name", name);
    gguf_w_u32(j->w, "llama.context_length", (uint32_t)h->n_ctx);
    gguf_w_u32(j->w, "llama.embedding_length", (uint32_t)h->n_embd);
    gguf_w_u32(j->w, "llama.feed_forward_length", (uint32_t)h->n_ff);
    gguf_w_u32(j->w, "llama.attention.head_count", (uint32_t)h->n_head);
    gguf_w_u32(j->w, "llama.attention.head_count_kv", (uint32_t)h->n_head_kv);
    gguf_w_u32(j->w, "llama.block_count", (uint32_t)h->n_layer);
    gguf_w_u32(j->w, "llama.rope.dimension_count", (uint32_t)h->head_dim);
    gguf_w_f32(j->w, "llama.rope.freq_base", h->rope_base);
    gguf_w_f32(j->w, "llama.attention.layer_norm_rms_epsilon", h->rms_eps);
}

/* ---- tensor planning ---- */

/* Layer number of a "blk.N.*" tensor name, -1 for tensors outside the layers. */
static int layer_of(const char *name) {
    if (strncmp(name, "blk.", 4) != 0) return -1;
    char *end;
    long l = strtol(name + 4, &end, 10);
    return end != name + 4 && *end == '.' && l >= 0 && l < 1 << 20 ? (int)l : -1;
}

/* Decide the stored type of a tensor and its output size. */
static int plan_tensor(qz_job *j, qz_tensor *t) {
    const cx_model_info *h = &j->model->info;
    /* A row length every block size (32, 256) divides: the rule's choice without fallback. */
    const int64_t fits_all = 256 * 1024;
    if (t->n_dims == 2 || t->n_dims == 3) { /* matrices, and stacked experts' matrices */
        int layer = layer_of(t->name);
        /* A tied embedding is also the classifier: it gets output.weight's type, as in llama.cpp. */
        const char *rule_name = j->tied && !strcmp(t->name, "token_embd.weight") ? "output.weight" : t->name;
        int moe = h->n_expert > 0;
        int type = quant_tensor_type(j->ftype, rule_name, layer, h->n_layer, t->ne[0], moe);
        int wanted = quant_tensor_type(j->ftype, rule_name, layer, h->n_layer, fits_all, moe);
        assert(type >= 0 && wanted >= 0); /* the file type was checked on entry */
        t->out_type = (uint32_t)type;
        t->wanted = (uint32_t)wanted;
    } else if (t->n_dims == 1) {
        t->out_type = t->wanted = CX_TYPE_F32;
    } else {
        t->out_type = t->wanted = t->in_type;
    }
    uint64_t be = gguf_type_block_elems(t->out_type);
    if (!be || (uint64_t)t->ne[0] % be || !quant_row_bytes((int)t->out_type, t->ne[0]))
        return cx_fail(j->err, CX_EUNSUP, "%s: tensor '%s' [%lld columns] would be stored as %s, which this engine "
                       "cannot write", j->in, t->name, (long long)t->ne[0], gguf_type_name(t->out_type));
    t->out_bytes = gguf_tensor_nbytes(t->out_type, t->n_dims, t->ne);
    return 0;
}

/* Add a tensor of the input to the plan. */
static int add_tensor(qz_job *j, const char *name, size_t name_len, uint32_t type, int n_dims, const int64_t *ne,
                      const uint8_t *data, uint64_t nbytes) {
    assert(n_dims >= 1 && n_dims <= GGUF_MAX_DIMS);
    if (name_len >= QZ_NAME_MAX)
        return cx_fail(j->err, CX_EUNSUP, "%s: tensor name '%.40s...' is longer than %d bytes", j->in, name, QZ_NAME_MAX - 1);
    qz_tensor *t = &j->t[j->n_t++];
    memcpy(t->name, name, name_len);
    t->name[name_len] = 0;
    t->n_dims = n_dims;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->in_type = type;
    t->data = data;
    t->in_bytes = nbytes;
    return plan_tensor(j, t);
}

/* GGUF input: every tensor must be f32, f16 or bf16 (the float types
 * llama.cpp's converters write); quantized ones mean the file was quantized
 * already. */
static int check_gguf_types(qz_job *j) {
    for (uint64_t i = 0; i < j->g.n_tensors; i++) {
        const gguf_tensor *t = &j->g.tensors[i];
        if (t->type == CX_TYPE_F32 || t->type == CX_TYPE_F16 || t->type == CX_TYPE_BF16) continue;
        int nl = (int)(t->name.len > 64 ? 64 : t->name.len);
        if (gguf_type_block_elems(t->type) > 1)
            return cx_fail(j->err, CX_EINVAL, "%s: already quantized (tensor '%.*s' is %s): requantizing loses quality; "
                           "quantize from the f32/f16/bf16 original", j->in, nl, t->name.ptr, gguf_type_name(t->type));
        return cx_fail(j->err, CX_EUNSUP, "%s: tensor '%.*s' has type %s; quantize reads f32, f16 and bf16 only", j->in, nl,
                       t->name.ptr, gguf_type_name(t->type));
    }
    return 0;
}

/* GGUF input: metadata copied, tensors in file order. */
static int plan_gguf(qz_job *j) {
    if (!(j->w = gguf_writer_new(j->g.alignment))) return cx_fail(j->err, CX_ENOMEM, "%s: out of memory", j->in);
    j->tied = gguf_find_tensor(&j->g, "output.weight") == NULL;
    copy_gguf_metadata(j);
    j->t = calloc(j->g.n_tensors ? j->g.n_tensors : 1, sizeof *j->t);
    if (!j->t) return cx_fail(j->err, CX_ENOMEM, "%s: out of memory", j->in);
    for (uint64_t i = 0; i < j->g.n_tensors; i++) {
        const gguf_tensor *t = &j->g.tensors[i];
        int rc = add_tensor(j, t->name.ptr, (size_t)t->name.len, t->type, (int)t->n_dims, t->ne, t->data, t->nbytes);
        if (rc) return rc;
    }
    return 0;
}

/* The loader's record of a llama2.c tensor by name (always present: the loader
 * records every tensor of a valid checkpoint). */
static const cx_tensor_rec *l2c_find(const cx_model *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name)) return &m->tensors[i];
    return NULL;
}

/* Add a llama2.c tensor `src` to the plan under `name` (output.weight may be a
 * second view of token_embd.weight, as llama.cpp's converter writes it). */
static int l2c_add(qz_job *j, const char *name, const char *src) {
    const cx_tensor_rec *r = l2c_find(j->model, src);
    assert(r && r->type == CX_TYPE_F32 && r->offset + r->nbytes <= j->model->map_size);
    return add_tensor(j, name, strlen(name), (uint32_t)r->type, r->n_dims, r->ne, j->model->map + r->offset, r->nbytes);
}

/* llama2.c input: metadata built, tensors in llama.cpp's converter order. */
static int plan_llama2c(qz_job *j) {
    const cx_model_info *h = &j->model->info;
    if (!(j->w = gguf_writer_new(GGUF_DEFAULT_ALIGNMENT))) return cx_fail(j->err, CX_ENOMEM, "%s: out of memory", j->in);
    l2c_model_metadata(j);
    l2c_tokenizer_metadata(j);
    j->t = calloc(3 + 9 * (size_t)h->n_layer, sizeof *j->t);
    if (!j->t) return cx_fail(j->err, CX_ENOMEM, "%s: out of memory", j->in);
    int rc = l2c_add(j, "token_embd.weight", "token_embd.weight");
    if (!rc) rc = l2c_add(j, "output_norm.weight", "output_norm.weight");
    if (!rc) rc = l2c_add(j, "output.weight", h->tied_output ? "token_embd.weight" : "output.weight");
    static const char *parts[9] = {"attn_q", "attn_k", "attn_v", "attn_output", "attn_norm",
                                   "ffn_gate", "ffn_down", "ffn_up", "ffn_norm"};
    for (int l = 0; !rc && l < h->n_layer; l++)
        for (int k = 0; !rc && k < 9; k++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, parts[k]);
            rc = l2c_add(j, name, name);
        }
    return rc;
}

/* ---- writing ---- */

/* Header: the two rewritten metadata entries last, tensor infos (offsets
 * assigned by the writer), padding to the alignment. */
static int write_header(qz_job *j, FILE *f, const char *path) {
    gguf_w_u32(j->w, "general.file_type", (uint32_t)gguf_file_type(j->ftype));
    gguf_w_u32(j->w, "general.quantization_version", QZ_QUANT_VERSION);
    for (int i = 0; i < j->n_t; i++) {
        qz_tensor *t = &j->t[i];
        t->offset = gguf_w_tensor(j->w, t->name, t->out_type, t->n_dims, t->ne);
    }
    return gguf_w_header(j->w, f, path, NULL, j->err);
}

/* Stream one tensor row by row: input row -> floats -> output type -> file. */
static int write_tensor(qz_job *j, FILE *f, const char *path, const qz_tensor *t, float *row, uint8_t *qrow) {
    int64_t cols = t->ne[0], rows = 1;
    for (int d = 1; d < t->n_dims; d++) rows *= t->ne[d];
    size_t in_rb = quant_row_bytes((int)t->in_type, cols), out_rb = quant_row_bytes((int)t->out_type, cols);
    assert(in_rb * (uint64_t)rows == t->in_bytes && out_rb * (uint64_t)rows == t->out_bytes);
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *src = t->data + (uint64_t)r * in_rb;
        const void *dst = src;
        int edited = j->edit && j->edit->wants(j->edit->ctx, t->name);
        if (t->out_type != t->in_type || edited) {
            quant_dequantize_row((int)t->in_type, src, row, cols);
            if (edited) j->edit->edit(j->edit->ctx, t->name, r, row, cols);
            quant_quantize_row((int)t->out_type, row, qrow, cols);
            dst = qrow;
        }
        if (fwrite(dst, 1, out_rb, f) != out_rb)
            return cx_fail(j->err, CX_EIO, "%s: write failed in tensor %s: %s", path, t->name, strerror(errno));
    }
    if (gguf_w_pad(j->w, f, t->out_bytes))
        return cx_fail(j->err, CX_EIO, "%s: write failed after tensor %s: %s", path, t->name, strerror(errno));
    return 0;
}

/* Write the whole file to `path`, then load it back as a check. */
static int write_file(qz_job *j, const char *path, uint64_t *out_bytes) {
    int64_t max_cols = 1;
    for (int i = 0; i < j->n_t; i++)
        if (j->t[i].ne[0] > max_cols) max_cols = j->t[i].ne[0];
    float *row = malloc(sizeof(float) * (size_t)max_cols);
    uint8_t *qrow = malloc(sizeof(float) * (size_t)max_cols); /* no type takes more than 4 bytes a weight */
    FILE *f = fopen(path, "wb");
    int rc = 0;
    if (!f) rc = cx_fail(j->err, CX_EIO, "%s: cannot create: %s", path, strerror(errno));
    else if (!row || !qrow) rc = cx_fail(j->err, CX_ENOMEM, "%s: out of memory", path);
    if (!rc) setvbuf(f, NULL, _IOFBF, 1 << 20);
    if (!rc) rc = write_header(j, f, path);
    for (int i = 0; !rc && i < j->n_t; i++) rc = write_tensor(j, f, path, &j->t[i], row, qrow);
    if (f) {
        if (!rc && (fflush(f) != 0 || ferror(f)))
            rc = cx_fail(j->err, CX_EIO, "%s: write failed: %s", path, strerror(errno));
        if (!rc) *out_bytes = (uint64_t)ftell(f);
        if (fclose(f) != 0 && !rc) rc = cx_fail(j->err, CX_EIO, "%s: write failed: %s", path, strerror(errno));
    }
    free(row);
    free(qrow);
    if (!rc) { /* the engine must be able to load what it wrote */
        cx_model *check = NULL;
        rc = cx_model_load(path, NULL, &check, j->err);
        cx_model_free(check);
    }
    return rc;
}

/* ---- statistics ---- */

/* What was written, per type, and which tensors fell back, grouped by kind. */
static void fill_stats(const qz_job *j, uint64_t out_bytes, cx_quantize_stats *st) {
    memset(st, 0, sizeof *st);
    st->input_format = j->have_g ? "gguf" : "llama2c";
    st->n_tensors = j->n_t;
    st->in_file_bytes = j->have_g ? j->map_size : j->model->map_size;
    st->out_file_bytes = out_bytes;
    for (int i = 0; i < j->n_t; i++) {
        const qz_tensor *t = &j->t[i];
        st->in_weight_bytes += t->in_bytes;
        st->out_weight_bytes += t->out_bytes;
        if (t->out_type < CX_QUANT_NTYPES) {
            st->count[t->out_type]++;
            st->bytes[t->out_type] += t->out_bytes;
        }
        if (t->out_type == t->wanted) continue;
        st->n_fallback++;
        int g = 0;
        while (g < st->n_fallback_groups && !(st->fallback[g].wanted == (int)t->wanted &&
                                              st->fallback[g].stored == (int)t->out_type && st->fallback[g].cols == t->ne[0]))
            g++;
        if (g == CX_QUANT_MAX_FALLBACKS) continue; /* more kinds than we list: counted in n_fallback only */
        cx_quantize_fallback *fb = &st->fallback[g];
        if (g == st->n_fallback_groups) {
            st->n_fallback_groups++;
            fb->wanted = (int)t->wanted;
            fb->stored = (int)t->out_type;
            fb->cols = t->ne[0];
            snprintf(fb->example, sizeof fb->example, "%.63s", t->name); /* names past 63 bytes are cut */
        }
        fb->count++;
    }
}

/* ---- entry point ---- */

/* Open the input: parse a GGUF (refusing quantized ones) and load either kind
 * through the model loader, which validates every shape the output relies on. */
static int open_input(qz_job *j) {
    int rc = model_map_file(j->in, &j->map, &j->map_size, j->err);
    if (rc) return rc;
    if (j->map_size >= 4 && !memcmp(j->map, "GGUF", 4)) {
        if ((rc = gguf_parse(j->map, j->map_size, j->in, &j->g, j->err))) return rc;
        j->have_g = 1;
        if ((rc = check_gguf_types(j))) return rc;
        posix_madvise((void *)j->map, j->map_size, POSIX_MADV_SEQUENTIAL);
    } else { /* llama2.c: the loader's own mapping serves the tensor data */
        model_unmap_file(j->map, j->map_size);
        j->map = NULL;
    }
    if ((rc = cx_model_load(j->in, j->tok, &j->model, j->err))) return rc;
    if (!j->have_g) posix_madvise((void *)j->model->map, j->model->map_size, POSIX_MADV_SEQUENTIAL);
    return 0;
}

/* 1 if a and b name the same existing file. */
static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* See cortex.h: open and validate the input, plan every tensor, write OUT.tmp,
 * load it back, rename. Every path out of here cleans up after itself. */
int cx_quantize_file(const char *in, const char *tokenizer, const char *out, int ftype, cx_quantize_stats *stats,
                     cx_err *err) {
    return cx_quantize_file_ex(in, tokenizer, out, ftype, NULL, stats, err);
}

/* See cortex_tools.h. */
int cx_quantize_file_ex(const char *in, const char *tokenizer, const char *out, int ftype, const cx_row_edit *edit,
                        cx_quantize_stats *stats, cx_err *err) {
    if (!in || !*in || !out || !*out) return cx_fail(err, CX_EINVAL, "quantize needs an input and an output path");
    if (gguf_file_type(ftype) < 0)
        return cx_fail(err, CX_EINVAL, "cannot write file type %s (%d): f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, mxfp4 or q4_k_m",
                       cx_type_name(ftype), ftype);
    if (same_file(in, out)) return cx_fail(err, CX_EINVAL, "%s: the output would overwrite the input", out);
    qz_job j = {0};
    j.in = in;
    j.tok = tokenizer;
    j.out = out;
    j.ftype = ftype;
    j.err = err;
    j.edit = edit;
    char *tmp = malloc(strlen(out) + 5);
    if (!tmp) return cx_fail(err, CX_ENOMEM, "out of memory");
    sprintf(tmp, "%s.tmp", out);
    int rc = open_input(&j), wrote = 0;
    if (!rc) rc = j.have_g ? plan_gguf(&j) : plan_llama2c(&j);
    uint64_t out_bytes = 0;
    if (!rc) {
        wrote = 1;
        rc = write_file(&j, tmp, &out_bytes);
    }
    if (!rc && rename(tmp, out) != 0) rc = cx_fail(err, CX_EIO, "%s: cannot rename into place: %s", out, strerror(errno));
    if (rc && wrote) remove(tmp);
    if (!rc && stats) fill_stats(&j, out_bytes, stats);
    free(tmp);
    free(j.t);
    gguf_writer_free(j.w);
    if (j.have_g) gguf_free(&j.g);
    model_unmap_file(j.map, j.map_size);
    cx_model_free(j.model);
    return rc;
}
