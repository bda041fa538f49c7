/*
 * model.c - load a model file into a cx_model: map it, recognise the format,
 * validate every shape, and point weight views into the mapping (no copies but
 * the tiny norm vectors). Also the public model and tokenizer accessors.
 */
#include "model.h"

#include <assert.h>
#include <inttypes.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cortex_tools.h"
#include "kernels/kernels.h"
#include "quant.h"
#include "util.h"

#define HUGE_2M ((size_t)2 << 20)
/* Files at least this large are copied into huge pages by default. */
#define COPY_MIN_BYTES ((size_t)64 << 20)

/* Bytes a copied image occupies: whole 2 MiB pages. */
static size_t copy_len(size_t size) { return (size + HUGE_2M - 1) & ~(HUGE_2M - 1); }

/*
 * Weights memory policy (cx_model_params.weights, see cortex.h): CX_WEIGHTS_MMAP
 * maps the file (pages shared with the page cache, 4 KiB each);
 * CX_WEIGHTS_HUGEPAGES copies it into anonymous memory advised for 2 MiB
 * transparent huge pages (measured on tinyllama q8_0: docs/performance.md).
 * CX_WEIGHTS_AUTO copies files of 64 MiB and more when the kernel offers
 * transparent huge pages (enabled = always or madvise), maps everything else.
 */
static int model_want_copy(size_t size, int weights) {
    if (weights == CX_WEIGHTS_MMAP) return 0;
    if (weights == CX_WEIGHTS_HUGEPAGES) return 1;
    if (size < COPY_MIN_BYTES) return 0;
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return 0;
    char line[128] = "";
    int ok = fgets(line, sizeof line, f) && !strstr(line, "[never]");
    fclose(f);
    return ok;
}

/* Read the whole file into anonymous memory advised for huge pages, then
 * make it read-only like a mapping. MAP_FAILED if anything fails (the caller
 * falls back to mmap). */
static void *model_copy_hugepages(int fd, size_t size) {
    size_t len = copy_len(size);
    /* over-allocate by one huge page so the image can start 2 MiB-aligned */
    uint8_t *raw = mmap(NULL, len + HUGE_2M, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return MAP_FAILED;
    uint8_t *p = (uint8_t *)(((uintptr_t)raw + HUGE_2M - 1) & ~(uintptr_t)(HUGE_2M - 1));
    if (p > raw) munmap(raw, (size_t)(p - raw));
    size_t tail = (size_t)(raw + len + HUGE_2M - (p + len));
    if (tail) munmap(p + len, tail);
    madvise(p, len, MADV_HUGEPAGE);
    size_t got = 0;
    while (got < size) {
        ssize_t r = pread(fd, p + got, size - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            munmap(p, len);
            return MAP_FAILED;
        }
        got += (size_t)r;
    }
    return p; /* writable until model_seal: cx_model_load may repack weights in place */
}

/* Bytes of the anonymous mapping holding p that the kernel backs with huge
 * pages (its AnonHugePages line in /proc/self/smaps), 0 when not found. A
 * copy advised MADV_HUGEPAGE gets 2 MiB pages only while the kernel has free
 * 2 MiB blocks, and decode speed depends on it (TLB misses), so a benchmark
 * must be able to say how much it got. */
static uint64_t model_hugepage_bytes(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return 0;
    char line[512];
    int inside = 0;
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char dash;
        if (sscanf(line, "%lx%c%lx ", &lo, &dash, &hi) == 3 && dash == '-') {
            if (inside) break; /* past the mapping's own block */
            inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        } else if (inside && sscanf(line, "AnonHugePages: %" SCNu64 " kB", &kb) == 1) {
            break;
        }
    }
    fclose(f);
    return kb * 1024;
}

/* See model.h. */
int model_layer_matrices(cx_layer *y, cx_weight **out) {
    int n = 0;
    out[n++] = &y->wq;
    out[n++] = &y->wk;
    out[n++] = &y->wv;
    out[n++] = &y->wo;
    if (y->router.data) {
        out[n++] = &y->router;
        out[n++] = &y->gate_exps;
        out[n++] = &y->up_exps;
        out[n++] = &y->down_exps;
    } else {
        out[n++] = &y->w_gate;
        out[n++] = &y->w_up;
        out[n++] = &y->w_down;
    }
    assert(n <= MODEL_LAYER_MATS);
    return n;
}

int model_map_file(const char *path, const uint8_t **map, size_t *size, cx_err *err) {
    int copied_unused;
    return model_load_file(path, map, size, &copied_unused, CX_WEIGHTS_MMAP, err);
}

int model_load_file(const char *path, const uint8_t **map, size_t *size, int *copied, int weights, cx_err *err) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return cx_fail(err, CX_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return cx_fail(err, CX_EIO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return cx_fail(err, CX_EFORMAT, "%s: empty file", path);
    }
    void *p = MAP_FAILED;
    if (model_want_copy((size_t)st.st_size, weights)) p = model_copy_hugepages(fd, (size_t)st.st_size);
    if (p != MAP_FAILED) {
        *copied = 1;
    } else {
        *copied = 0;
        p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    }
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return cx_fail(err, CX_EIO, "%s: mmap failed: %s", path, strerror(e));
    *map = p;
    *size = (size_t)st.st_size;
    return 0;
}

void model_unmap_file(const uint8_t *map, size_t size) {
    if (map) munmap((void *)map, size);
}

/*
 * Repack the matrices the selected kernel table reads faster interleaved
 * into KERN_LAYOUT_X16 (kern->gemm_x16: q8_0/q4_0 under AVX-512) or else
 * KERN_LAYOUT_X8 (kern->gemm_x8: under AVX2), in place. Only for a copied
 * image (a file mapping is read-only and shared with the page cache), only
 * for row counts that are multiples of the group (16 or 8), never the token
 * embedding (embedding lookups read single rows; a tied classifier shares it).
 * cx_model_params.repack = 0 turns it off, to measure what it buys. No memory
 * is added: each group of rows keeps its bytes (one 16-row scratch during
 * the pass). The model's own kernel table decides, so a scalar model is not
 * repacked.
 */
/* Repack one matrix if the table has an interleaved gemm for its type and its rows group evenly. */
static void repack_matrix(cx_model *m, cx_weight *w, uint8_t *scratch) {
    const kern_ops *kern = m->kern;
    if (w->layout != KERN_LAYOUT_ROWS) return;
    int64_t unit = w->expert_rows ? w->expert_rows : w->rows; /* an expert's rows stay whole groups */
    int layout = kern->gemm_x16[w->type] && unit % 16 == 0 ? KERN_LAYOUT_X16
                 : kern->gemm_x8[w->type] && unit % 8 == 0 ? KERN_LAYOUT_X8 : KERN_LAYOUT_ROWS;
    if (layout == KERN_LAYOUT_ROWS) return;
    int group = kern_layout_group(layout);
    assert(group <= 16 && "the scratch holds 16 rows");
    uint8_t *base = (uint8_t *)(uintptr_t)w->data;
    for (int64_t g = 0; g < w->rows / group; g++) {
        uint8_t *p = base + (size_t)g * (size_t)group * w->row_bytes;
        if (layout == KERN_LAYOUT_X16) kern_repack_x16(w->type, p, w->row_bytes, w->cols, scratch);
        else kern_repack_x8(w->type, p, w->row_bytes, w->cols, scratch);
    }
    w->layout = layout;
    m->n_repacked++;
    m->repacked_layout = layout;
}

static void model_repack(cx_model *m, int repack) {
    if (!m->map_copied || !repack) return;
    cx_weight *mats[MODEL_LAYER_MATS];
    size_t max_rb = m->output.row_bytes; /* the scratch: 16 rows of the widest matrix, every layer walked */
    for (int l = 0; l < m->info.n_layer; l++)
        for (int i = 0, n = model_layer_matrices(&m->layers[l], mats); i < n; i++)
            if (mats[i]->row_bytes > max_rb) max_rb = mats[i]->row_bytes;
    uint8_t *scratch = malloc(16 * max_rb);
    if (!scratch) return; /* repacking is an optimisation: without memory for it the rows stay as they are */
    for (int l = 0; l < m->info.n_layer; l++)
        for (int i = 0, n = model_layer_matrices(&m->layers[l], mats); i < n; i++) repack_matrix(m, mats[i], scratch);
    if (m->output.data != m->tok_embd.data) repack_matrix(m, &m->output, scratch);
    free(scratch);
}

/* Make a copied image read-only, like a mapping, once repacking is done. */
static void model_seal(cx_model *m) {
    if (m->map_copied) mprotect((void *)(uintptr_t)m->map, copy_len(m->map_size), PROT_READ);
}

void model_release_file(const uint8_t *map, size_t size, int copied) {
    if (map) munmap((void *)map, copied ? copy_len(size) : size);
}

int model_check_hparams(const cx_model_info *h, const char *L, cx_err *err) {
    if (h->n_embd < 1 || h->n_embd > 65536) return cx_fail(err, CX_ERANGE, "%s: absurd embedding length %d", L, h->n_embd);
    if (h->n_ff < 1 || h->n_ff > (1 << 20)) return cx_fail(err, CX_ERANGE, "%s: absurd feed-forward length %d", L, h->n_ff);
    if (h->n_layer < 1 || h->n_layer > 1024) return cx_fail(err, CX_ERANGE, "%s: absurd layer count %d", L, h->n_layer);
    /* head_dim 0: n_embd / n_head, which must divide; else the file's own (attention.key_length) */
    if (h->head_dim == 0 && (h->n_head < 1 || h->n_head > h->n_embd || h->n_embd % h->n_head))
        return cx_fail(err, CX_ERANGE, "%s: head count %d does not divide embedding length %d", L, h->n_head, h->n_embd);
    if (h->head_dim != 0 && (h->n_head < 1 || h->n_head > 4096 || h->head_dim < 2 || h->head_dim > 4096))
        return cx_fail(err, CX_ERANGE, "%s: absurd head count %d or head dimension %d", L, h->n_head, h->head_dim);
    if (h->n_head_kv < 1 || h->n_head_kv > h->n_head || h->n_head % h->n_head_kv)
        return cx_fail(err, CX_ERANGE, "%s: kv head count %d does not divide head count %d", L, h->n_head_kv, h->n_head);
    int hd = h->head_dim ? h->head_dim : h->n_embd / h->n_head;
    if (hd % 2) return cx_fail(err, CX_ERANGE, "%s: head dimension %d is odd; RoPE needs pairs", L, hd);
    if (h->n_vocab < 1 || h->n_vocab > (1 << 24)) return cx_fail(err, CX_ERANGE, "%s: absurd vocabulary size %d", L, h->n_vocab);
    if (h->n_ctx < 1 || h->n_ctx > (1 << 24)) return cx_fail(err, CX_ERANGE, "%s: absurd context length %d", L, h->n_ctx);
    if (!(h->rms_eps > 0 && h->rms_eps < 1)) return cx_fail(err, CX_ERANGE, "%s: RMS norm epsilon %g out of range", L, h->rms_eps);
    if (!(h->rope_base > 1 && h->rope_base < 1e12f)) return cx_fail(err, CX_ERANGE, "%s: RoPE base %g out of range", L, h->rope_base);
    return 0;
}

void model_add_tensor(cx_model *m, const char *name, int type, int n_dims, const int64_t *ne, uint64_t offset,
                      uint64_t nbytes) {
    cx_tensor_rec *r = &m->tensors[m->n_tensors++];
    snprintf(r->name, sizeof r->name, "%s", name);
    r->type = type;
    r->n_dims = n_dims;
    uint64_t n = 1;
    for (int d = 0; d < 4; d++) {
        r->ne[d] = d < n_dims ? ne[d] : 1;
        n *= (uint64_t)r->ne[d];
    }
    r->offset = offset;
    r->nbytes = nbytes;
    m->info.n_params += n;
    m->info.weight_bytes += nbytes;
}

/* ---------------------------------------------------------------- GGUF */

typedef struct gguf_loader {
    cx_model *m;
    const gguf_ctx *g;
    const char *L;
    cx_err *err;
    float *norm_next; /* where the next norm, bias or factor vector is copied */
    const char *arch; /* the metadata key prefix: general.architecture */
} gguf_loader;

/* Find tensor `name` of shape want[0..n_dims) (ggml order: want[0] is the
 * row length) in a supported type; the message names the tensor and both shapes. */
static int get_tensor_nd(gguf_loader *ld, const char *name, int n_dims, const int64_t *want, int optional,
                         const gguf_tensor **out) {
    const gguf_tensor *t = gguf_find_tensor(ld->g, name);
    *out = t;
    if (!t) return optional ? 0 : cx_fail(ld->err, CX_EFORMAT, "%s: required tensor '%s' is missing", ld->L, name);
    int bad = (int)t->n_dims != n_dims;
    for (int d = 0; d < n_dims && !bad; d++) bad = t->ne[d] != want[d];
    if (bad) {
        char got[80], exp[80];
        int a = 0, b = 0;
        for (int d = 0; d < (int)t->n_dims && d < 4; d++)
            a += snprintf(got + a, sizeof got - (size_t)a, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
        for (int d = 0; d < n_dims; d++)
            b += snprintf(exp + b, sizeof exp - (size_t)b, "%s%lld", d ? ", " : "", (long long)want[d]);
        return cx_fail(ld->err, CX_EFORMAT, "%s: tensor '%s' has shape [%s] (%u dims), expected [%s]", ld->L, name, got,
                       t->n_dims, exp);
    }
    if (!quant_supported((int)t->type))
        return cx_fail(ld->err, CX_EUNSUP, "%s: tensor '%s' has type %s, which this engine does not support yet "
                       "(f32, f16, bf16, q8_0, q4_0, q4_K, q6_K, mxfp4)", ld->L, name, gguf_type_name(t->type));
    if (want[0] % quant_block_size((int)t->type))
        return cx_fail(ld->err, CX_EFORMAT, "%s: tensor '%s' rows of %lld weights do not fill whole %s blocks of %d",
                       ld->L, name, (long long)want[0], gguf_type_name(t->type), quant_block_size((int)t->type));
    cx_model *m = ld->m;
    model_add_tensor(m, name, (int)t->type, (int)t->n_dims, t->ne, ld->g->data_offset + t->offset, t->nbytes);
    return 0;
}

/* Find tensor `name` of shape [cols, rows] (rows 0 means 1-D) in a supported type. */
static int get_tensor(gguf_loader *ld, const char *name, int64_t cols, int64_t rows, int optional,
                      const gguf_tensor **out) {
    int64_t want[2] = {cols, rows};
    return get_tensor_nd(ld, name, rows ? 2 : 1, want, optional, out);
}

static int load_matrix(gguf_loader *ld, const char *name, int64_t cols, int64_t rows, int optional, cx_weight *w) {
    const gguf_tensor *t;
    int rc = get_tensor(ld, name, cols, rows, optional, &t);
    if (rc || !t) return rc;
    w->data = t->data;
    w->type = (int)t->type;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = quant_row_bytes(w->type, cols);
    return 0;
}

/* The n_expert matrices of the 3-D tensor `name` (ggml shape [cols, rows,
 * n_expert]) as one weight of n_expert x rows rows: expert e is the row
 * range e*rows .. e*rows+rows-1 (ggml stores the experts one after another). */
static int load_experts(gguf_loader *ld, const char *name, int64_t cols, int64_t rows, int64_t n_expert, cx_weight *w) {
    int64_t want[3] = {cols, rows, n_expert};
    const gguf_tensor *t;
    int rc = get_tensor_nd(ld, name, 3, want, 0, &t);
    if (rc) return rc;
    w->data = t->data;
    w->type = (int)t->type;
    w->rows = rows * n_expert;
    w->expert_rows = rows;
    ld->m->info.expert_bytes += t->nbytes;
    w->cols = cols;
    w->row_bytes = quant_row_bytes(w->type, cols);
    return 0;
}

/* A 2-D tensor of `count` vectors of n values (the experts' biases,
 * [n, count]), copied as f32 like load_vec; *out stays NULL if optional and absent. */
static int load_vecs(gguf_loader *ld, const char *name, int64_t n, int64_t count, int optional, const float **out) {
    const gguf_tensor *t;
    int rc = get_tensor(ld, name, n, count, optional, &t);
    if (rc || !t) return rc;
    quant_dequantize_row((int)t->type, t->data, ld->norm_next, n * count);
    *out = ld->norm_next;
    ld->norm_next += n * count;
    return 0;
}

/* A 1-D tensor of n values (norm weights, biases, RoPE factors), copied as
 * f32 into the model's vector storage; *out stays NULL if optional and absent. */
static int load_vec(gguf_loader *ld, const char *name, int64_t n, int optional, const float **out) {
    const gguf_tensor *t;
    int rc = get_tensor(ld, name, n, 0, optional, &t);
    if (rc || !t) return rc;
    quant_dequantize_row((int)t->type, t->data, ld->norm_next, n);
    *out = ld->norm_next;
    ld->norm_next += n;
    return 0;
}

static int load_norm(gguf_loader *ld, const char *name, int64_t n, const float **out) {
    return load_vec(ld, name, n, 0, out);
}

/* Read an integer hyper-parameter "<arch>.<key>"; absent + required is an error. */
static int hp_u32(gguf_loader *ld, const char *key, int required, uint32_t dflt, int *out) {
    char full[96];
    snprintf(full, sizeof full, "%s.%s", ld->arch, key);
    uint32_t v = dflt;
    int r = gguf_get_u32(ld->g, full, &v);
    if (r < 0) return cx_fail(ld->err, CX_EFORMAT, "%s: metadata '%s' is not an integer in range", ld->L, full);
    if (r == 0 && required) return cx_fail(ld->err, CX_EFORMAT, "%s: required metadata '%s' is missing", ld->L, full);
    if (v > (1u << 30)) return cx_fail(ld->err, CX_ERANGE, "%s: absurd value %u for '%s'", ld->L, v, full);
    *out = (int)v;
    return 0;
}

/* Read a float hyper-parameter "<arch>.<key>", dflt if absent. */
static int hp_f32(gguf_loader *ld, const char *key, float dflt, float *out) {
    char full[96];
    snprintf(full, sizeof full, "%s.%s", ld->arch, key);
    *out = dflt;
    if (gguf_get_f32(ld->g, full, out) < 0)
        return cx_fail(ld->err, CX_EFORMAT, "%s: metadata '%s' is not a number", ld->L, full);
    return 0;
}

#define MODEL_NTYPES 40 /* every supported type's ggml id is below this (mxfp4: 39) */

/* The type of the layer matrices; if they mix types, CX_FTYPE_Q4_K_M when the
 * file says it is llama.cpp's Q4_K_M (general.file_type 15), else the type
 * holding most of their weights (lowest type id on ties). */
static int main_type(cx_model *m, const gguf_ctx *g) {
    uint64_t weights[MODEL_NTYPES] = {0};
    int first = m->layers[0].wq.type, mixed = 0;
    for (int l = 0; l < m->info.n_layer; l++) {
        cx_weight *ws[MODEL_LAYER_MATS];
        int n = model_layer_matrices(&m->layers[l], ws);
        for (int i = 0; i < n; i++) {
            assert(ws[i]->type >= 0 && ws[i]->type < MODEL_NTYPES);
            weights[ws[i]->type] += (uint64_t)ws[i]->rows * (uint64_t)ws[i]->cols;
            mixed |= ws[i]->type != first;
        }
    }
    if (!mixed) return first;
    uint32_t ftype = 0;
    if (gguf_get_u32(g, "general.file_type", &ftype) == 1 && ftype == 15) return CX_FTYPE_Q4_K_M;
    int best = first;
    for (int t = 0; t < MODEL_NTYPES; t++)
        if (weights[t] > weights[best]) best = t;
    return best;
}

/* Fill m from a GGUF with no tensors: the vocabulary alone, whatever the
 * architecture (tokenizing needs nothing else); sessions refuse such a model
 * (model_require_weights). */
static int model_vocab_only(cx_model *m, const gguf_ctx *g, const char *L, cx_err *err) {
    gguf_str s;
    if (gguf_get_str(g, "general.name", &s) == 1)
        snprintf(m->name, sizeof m->name, "%.*s", (int)(s.len > 127 ? 127 : s.len), s.ptr);
    if (gguf_get_str(g, "general.architecture", &s) == 1)
        snprintf(m->arch, sizeof m->arch, "%.*s", (int)(s.len > 31 ? 31 : s.len), s.ptr);
    int rc = tok_load_gguf(&m->vocab, g, L, err);
    if (rc) return rc;
    m->info.vocab_only = 1;
    m->info.n_vocab = m->vocab.n;
    m->info.main_type = -1;
    return 0;
}

/* See model.h. */
int model_require_weights(const cx_model *m, cx_err *err) {
    if (!m->info.vocab_only) return 0;
    return cx_fail(err, CX_EUNSUP, "%s: a vocabulary-only file (no weights): it can tokenize, not run", m->info.name);
}

/* The metadata gpt-oss files carry, after "gpt-oss.": all of them are read
 * (vocab_size and rope.scaling.finetuned change nothing here); any other
 * key of the architecture is refused by name, since llama.cpp would compute
 * something this engine does not. */
static const char *GPTOSS_KEYS[] = {
    "context_length", "embedding_length", "feed_forward_length", "block_count", "attention.head_count",
    "attention.head_count_kv", "attention.key_length", "attention.value_length", "attention.layer_norm_rms_epsilon",
    "attention.sliding_window", "rope.freq_base", "rope.dimension_count", "rope.scaling.type", "rope.scaling.factor",
    "rope.scaling.original_context_length", "rope.scaling.attn_factor", "rope.scaling.finetuned", "expert_count",
    "expert_used_count", "expert_feed_forward_length", "vocab_size", NULL};

/* llama and qwen2 metadata that changes the computation beyond what this
 * engine does for them, refused by name (other keys are harmless there). */
static const char *LLAMA_REFUSED[] = {
    "attention.sliding_window", "attn_logit_softcapping", "final_logit_softcapping", "rope.scaling.yarn_log_multiplier",
    "rope.scaling.yarn_ext_factor", "rope.scaling.yarn_attn_factor", "rope.scaling.yarn_beta_fast",
    "rope.scaling.yarn_beta_slow", "expert_shared_count", "expert_weights_scale", "expert_weights_norm",
    "expert_gating_func", "interleave_moe_layer_step", "leading_dense_block_count",
    "expert_shared_feed_forward_length", NULL};

/* CX_EUNSUP naming the first key of the architecture's prefix that is not
 * in `known` (gpt-oss), or the first key in `refused` that is present. */
static int model_refuse_keys(gguf_loader *ld, const char *const *known, const char *const *refused) {
    char key[96];
    size_t pl = strlen(ld->arch);
    for (uint64_t i = 0; known && i < ld->g->n_kv; i++) {
        gguf_str k = ld->g->kv[i].key;
        if (k.len <= pl + 1 || memcmp(k.ptr, ld->arch, pl) || k.ptr[pl] != '.') continue;
        int ok = 0;
        for (int j = 0; known[j] && !ok; j++) ok = strlen(known[j]) == k.len - pl - 1 && !memcmp(known[j], k.ptr + pl + 1, k.len - pl - 1);
        if (!ok)
            return cx_fail(ld->err, CX_EUNSUP, "%s: metadata '%.*s' is not supported", ld->L, (int)(k.len > 80 ? 80 : k.len),
                           k.ptr);
    }
    for (int j = 0; refused && refused[j]; j++) {
        snprintf(key, sizeof key, "%s.%s", ld->arch, refused[j]);
        if (gguf_find(ld->g, key)) return cx_fail(ld->err, CX_EUNSUP, "%s: metadata '%s' is not supported", ld->L, key);
    }
    return 0;
}

/* rope.scaling.*: none; linear (rope_freq_scale); YaRN, with ggml's defaults
 * (ext_factor 1, beta_fast 32, beta_slow 1; the original context defaults
 * to context_length, the attention factor to 1). Others are refused by name. */
static int model_rope_scaling(gguf_loader *ld) {
    cx_model *m = ld->m;
    cx_model_info *h = &m->info;
    char key[96];
    snprintf(key, sizeof key, "%s.rope.scaling.type", ld->arch);
    gguf_str st;
    int r = gguf_get_str(ld->g, key, &st);
    h->rope_scaling = "none";
    if (r < 0) return cx_fail(ld->err, CX_EFORMAT, "%s: %s is not a string", ld->L, key);
    if (r == 0 || gguf_str_eq(st, "none")) return 0;
    int yarn = gguf_str_eq(st, "yarn");
    if (!yarn && !gguf_str_eq(st, "linear"))
        return cx_fail(ld->err, CX_EUNSUP, "%s: RoPE scaling '%.*s' (%s) is not supported (none, linear, yarn, and Llama "
                       "3's rope_freqs.weight are)", ld->L, (int)(st.len > 32 ? 32 : st.len), st.ptr, key);
    float f = 1.0f;
    if (hp_f32(ld, "rope.scaling.factor", 1.0f, &f)) return CX_EFORMAT;
    if (!(f >= 1.0f && f <= 1024.0f))
        return cx_fail(ld->err, CX_ERANGE, "%s: %s.rope.scaling.factor %g is out of range", ld->L, ld->arch, f);
    h->rope_freq_scale = 1.0f / f;
    h->rope_scaling = "linear";
    if (!yarn) return 0;
    h->rope_scaling = "yarn";
    m->yarn_factor = f;
    m->yarn_beta_fast = 32.0f;
    m->yarn_beta_slow = 1.0f;
    if (hp_u32(ld, "rope.scaling.original_context_length", 0, (uint32_t)h->n_ctx, &m->yarn_orig_ctx) ||
        hp_f32(ld, "rope.scaling.attn_factor", 1.0f, &m->yarn_attn_factor))
        return CX_EFORMAT;
    if (m->yarn_orig_ctx < 1 || !(m->yarn_attn_factor > 0 && m->yarn_attn_factor < 100))
        return cx_fail(ld->err, CX_ERANGE, "%s: YaRN original context %d or attention factor %g out of range", ld->L,
                       m->yarn_orig_ctx, m->yarn_attn_factor);
    return 0;
}

/*
 * Metadata that changes the computation beyond what this engine does is
 * refused by name: RoPE scaling other than linear and YaRN (LongRoPE, ...;
 * Llama 3's scaling arrives as rope_freqs.weight factors), a value length
 * other than the key length (head_dim), and per architecture what it does
 * not use (model_refuse_keys). Reads the experts' counts and width and the
 * sliding window (gpt-oss).
 */
static int model_check_arch_keys(gguf_loader *ld, int gptoss) {
    cx_model_info *h = &ld->m->info;
    int rc = model_rope_scaling(ld);
    if (rc) return rc;
    int v = 0;
    if (hp_u32(ld, "attention.value_length", 0, (uint32_t)h->head_dim, &v)) return CX_EFORMAT;
    if (v != h->head_dim)
        return cx_fail(ld->err, CX_EUNSUP, "%s: %s.attention.value_length = %d differs from the key length %d: not supported",
                       ld->L, ld->arch, v, h->head_dim);
    if ((rc = model_refuse_keys(ld, gptoss ? GPTOSS_KEYS : NULL, gptoss ? NULL : LLAMA_REFUSED))) return rc;
    if (!strcmp(ld->arch, "qwen2") && (rc = model_refuse_keys(ld, NULL, (const char *[]){"expert_count", NULL})))
        return rc;
    if (hp_u32(ld, "expert_count", gptoss, 0, &h->n_expert) || hp_u32(ld, "expert_used_count", h->n_expert > 0, 0,
                                                                       &h->n_expert_used) ||
        hp_u32(ld, "expert_feed_forward_length", gptoss, (uint32_t)h->n_ff, &h->n_ff_expert) ||
        hp_u32(ld, "attention.sliding_window", gptoss, 0, &h->sliding_window))
        return CX_EFORMAT;
    if (h->n_expert > MODEL_MAX_EXPERTS || (h->n_expert > 0 && (h->n_expert_used < 1 || h->n_expert_used > h->n_expert)) ||
        (h->n_expert == 0 && h->n_expert_used))
        return cx_fail(ld->err, CX_EFORMAT, "%s: %s.expert_used_count %d with expert_count %d (1 <= used <= count <= %d)",
                       ld->L, ld->arch, h->n_expert_used, h->n_expert, MODEL_MAX_EXPERTS);
    if (h->n_ff_expert < 1 || h->n_ff_expert > (1 << 20))
        return cx_fail(ld->err, CX_ERANGE, "%s: absurd expert feed-forward length %d", ld->L, h->n_ff_expert);
    if (!h->n_expert) h->n_ff_expert = 0;
    if (gptoss && h->sliding_window < 1)
        return cx_fail(ld->err, CX_ERANGE, "%s: %s.attention.sliding_window %d must be at least 1", ld->L, ld->arch,
                       h->sliding_window);
    return 0;
}

/* A layer's mixture of experts: the router (and its bias), the three stacked
 * expert tensors (ggml [cols, rows, n_expert]) and their biases, all
 * required for gpt-oss (biases optional otherwise). */
static int load_moe(gguf_loader *ld, int l, int gptoss, cx_layer *y) {
    const cx_model_info *h = &ld->m->info;
    int64_t E = h->n_embd, F = h->n_ff_expert, X = h->n_expert;
    char n[64];
    int rc;
#define NAME(part, kind) (snprintf(n, sizeof n, "blk.%d.%s.%s", l, part, kind), n)
    if ((rc = load_matrix(ld, NAME("ffn_gate_inp", "weight"), E, X, 0, &y->router)) ||
        (rc = load_vec(ld, NAME("ffn_gate_inp", "bias"), X, !gptoss, &y->router_b)) ||
        (rc = load_experts(ld, NAME("ffn_gate_exps", "weight"), E, F, X, &y->gate_exps)) ||
        (rc = load_experts(ld, NAME("ffn_up_exps", "weight"), E, F, X, &y->up_exps)) ||
        (rc = load_experts(ld, NAME("ffn_down_exps", "weight"), F, E, X, &y->down_exps)) ||
        (rc = load_vecs(ld, NAME("ffn_gate_exps", "bias"), F, X, !gptoss, &y->gate_exps_b)) ||
        (rc = load_vecs(ld, NAME("ffn_up_exps", "bias"), F, X, !gptoss, &y->up_exps_b)) ||
        (rc = load_vecs(ld, NAME("ffn_down_exps", "bias"), E, X, !gptoss, &y->down_exps_b)))
        return rc;
#undef NAME
    return 0;
}

/* See model.h. */
int model_from_gguf(cx_model *m, const char *L, cx_err *err) {
    gguf_ctx g;
    int rc = gguf_parse(m->map, m->map_size, L, &g, err);
    if (rc) return rc;
    gguf_loader ld = {m, &g, L, err, NULL, "llama"};
    cx_model_info *h = &m->info;
    h->format = "gguf";
    h->format_version = g.version;
    gguf_str s;
    if (gguf_get_str(&g, "tokenizer.chat_template", &s) == 1) { /* a copy: a NUL-terminated string for the API */
        m->chat_template = malloc(s.len + 1);
        if (!m->chat_template) {
            rc = cx_fail(err, CX_ENOMEM, "%s: out of memory for the chat template", L);
            goto done;
        }
        memcpy(m->chat_template, s.ptr, s.len);
        m->chat_template[s.len] = 0;
        h->chat_template = m->chat_template;
    }
    if (g.n_tensors == 0) { /* a vocabulary-only file, as llama.cpp ships its tokenizer tests */
        rc = model_vocab_only(m, &g, L, err);
        goto done;
    }
    if (gguf_get_str(&g, "general.architecture", &s) != 1) {
        rc = cx_fail(err, CX_EFORMAT, "%s: general.architecture is missing", L);
        goto done;
    }
    if (!gguf_str_eq(s, "llama") && !gguf_str_eq(s, "qwen2") && !gguf_str_eq(s, "gpt-oss")) {
        rc = cx_fail(err, CX_EUNSUP, "%s: architecture '%.*s' is not supported (only 'llama', 'qwen2' and 'gpt-oss')", L,
                     (int)(s.len > 32 ? 32 : s.len), s.ptr);
        goto done;
    }
    snprintf(m->arch, sizeof m->arch, "%.*s", (int)s.len, s.ptr);
    ld.arch = m->arch;
    int qwen2 = gguf_str_eq(s, "qwen2"), gptoss = gguf_str_eq(s, "gpt-oss");
    /* llama.cpp's converter permutes llama's Q/K rows for pairwise RoPE, not qwen2's or gpt-oss's */
    h->rope_neox = qwen2 || gptoss;
    m->moe_gating = gptoss ? MODEL_GATING_TOPK_SOFTMAX : MODEL_GATING_SOFTMAX;
    m->moe_act = gptoss ? MODEL_ACT_SWIGLU_OAI : MODEL_ACT_SILU;
    if (gguf_get_str(&g, "general.name", &s) == 1)
        snprintf(m->name, sizeof m->name, "%.*s", (int)(s.len > 127 ? 127 : s.len), s.ptr);
    int rope_dim = 0;
    if ((rc = hp_u32(&ld, "embedding_length", 1, 0, &h->n_embd)) || (rc = hp_u32(&ld, "feed_forward_length", 1, 0, &h->n_ff)) ||
        (rc = hp_u32(&ld, "block_count", 1, 0, &h->n_layer)) || (rc = hp_u32(&ld, "attention.head_count", 1, 0, &h->n_head)) ||
        (rc = hp_u32(&ld, "context_length", 0, 2048, &h->n_ctx)) ||
        (rc = hp_f32(&ld, "attention.layer_norm_rms_epsilon", 1e-5f, &h->rms_eps)) ||
        (rc = hp_f32(&ld, "rope.freq_base", 10000.0f, &h->rope_base)))
        goto done;
    if ((rc = hp_u32(&ld, "attention.head_count_kv", 0, (uint32_t)h->n_head, &h->n_head_kv)) ||
        (rc = hp_u32(&ld, "attention.key_length", 0, 0, &h->head_dim))) /* 0 (absent): n_embd / n_head */
        goto done;
    if ((rc = tok_load_gguf(&m->vocab, &g, L, err))) goto done;
    h->n_vocab = m->vocab.n;
    if ((rc = model_check_hparams(h, L, err))) goto done;
    if (h->head_dim == 0) h->head_dim = h->n_embd / h->n_head;
    if ((rc = hp_u32(&ld, "rope.dimension_count", 0, (uint32_t)h->head_dim, &rope_dim))) goto done;
    if (rope_dim != h->head_dim) {
        rc = cx_fail(err, CX_EUNSUP, "%s: partial RoPE (%d of %d dimensions) is not supported", L, rope_dim, h->head_dim);
        goto done;
    }
    if ((rc = model_check_arch_keys(&ld, gptoss))) goto done;
    if (h->rope_neox && h->head_dim > MODEL_MAX_HEAD_DIM) {
        rc = cx_fail(err, CX_EUNSUP, "%s: NeoX RoPE over heads of %d dimensions (above %d) is not supported", L,
                     h->head_dim, MODEL_MAX_HEAD_DIM);
        goto done;
    }
    int64_t E = h->n_embd, F = h->n_ff, KV = (int64_t)h->n_head_kv * h->head_dim, V = h->n_vocab;
    int64_t QD = (int64_t)h->n_head * h->head_dim; /* the query side: E unless the file gives head_dim */
    int64_t X = h->n_expert, FX = h->n_ff_expert;
    /* per layer: two norms, Q/K/V/output biases, sinks, the router's and experts' biases */
    size_t per_layer = (size_t)(3 * E + QD + 2 * KV + h->n_head + X + X * (2 * FX + E));
    m->layers = calloc((size_t)h->n_layer, sizeof *m->layers);
    m->norms = malloc(sizeof(float) * ((size_t)E + per_layer * (size_t)h->n_layer + (size_t)h->head_dim));
    m->tensors = calloc(4 + 20 * (size_t)h->n_layer, sizeof *m->tensors);
    if (!m->layers || !m->norms || !m->tensors) {
        rc = cx_fail(err, CX_ENOMEM, "%s: out of memory", L);
        goto done;
    }
    ld.norm_next = m->norms;
    const gguf_tensor *emb = gguf_find_tensor(&g, "token_embd.weight");
    if (emb && emb->n_dims == 2 && emb->ne[0] == E && emb->ne[1] != V) {
        rc = cx_fail(err, CX_EFORMAT, "%s: vocabulary has %lld tokens but token_embd.weight has %lld rows (vocab/model mismatch)",
                     L, (long long)V, (long long)emb->ne[1]);
        goto done;
    }
    if ((rc = load_matrix(&ld, "token_embd.weight", E, V, 0, &m->tok_embd)) ||
        (rc = load_norm(&ld, "output_norm.weight", E, &m->out_norm)) ||
        (rc = load_matrix(&ld, "output.weight", E, V, 1, &m->output)))
        goto done;
    h->tied_output = m->output.data == NULL;
    if (h->tied_output) m->output = m->tok_embd;
    if ((rc = load_vec(&ld, "rope_freqs.weight", h->head_dim / 2, 1, &m->rope_factors))) goto done;
    h->rope_freq_factors = m->rope_factors != NULL;
    for (int l = 0; l < h->n_layer; l++) {
        cx_layer *y = &m->layers[l];
        char n[9][64];
        /* gpt-oss names the feed-forward norm post_attention_norm */
        static const char *parts[9] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                       "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
        for (int i = 0; i < 9; i++)
            snprintf(n[i], sizeof n[i], "blk.%d.%s.weight", l, i == 5 && gptoss ? "post_attention_norm" : parts[i]);
        if ((rc = load_norm(&ld, n[0], E, &y->attn_norm)) || (rc = load_matrix(&ld, n[1], E, QD, 0, &y->wq)) ||
            (rc = load_matrix(&ld, n[2], E, KV, 0, &y->wk)) || (rc = load_matrix(&ld, n[3], E, KV, 0, &y->wv)) ||
            (rc = load_matrix(&ld, n[4], QD, E, 0, &y->wo)) || (rc = load_norm(&ld, n[5], E, &y->ffn_norm)))
            goto done;
        if (h->n_expert ? (rc = load_moe(&ld, l, gptoss, y))
                        : ((rc = load_matrix(&ld, n[6], E, F, 0, &y->w_gate)) || (rc = load_matrix(&ld, n[7], E, F, 0, &y->w_up)) ||
                           (rc = load_matrix(&ld, n[8], F, E, 0, &y->w_down))))
            goto done;
        char b[5][64];
        static const char *bparts[5] = {"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias", "attn_sinks.weight"};
        for (int i = 0; i < 5; i++) snprintf(b[i], sizeof b[i], "blk.%d.%s", l, bparts[i]);
        int qkv_opt = !qwen2 && !gptoss;
        if ((rc = load_vec(&ld, b[0], QD, qkv_opt, &y->bq)) || (rc = load_vec(&ld, b[1], KV, qkv_opt, &y->bk)) ||
            (rc = load_vec(&ld, b[2], KV, qkv_opt, &y->bv)) || (rc = load_vec(&ld, b[3], E, !gptoss, &y->bo)) ||
            (gptoss && (rc = load_vec(&ld, b[4], h->n_head, 0, &y->sinks))))
            goto done;
        /* gpt-oss: even layers see a sliding window, odd ones everything (llama.cpp's pattern 2) */
        y->window = gptoss && l % 2 == 0 ? h->sliding_window : 0;
        h->attn_sinks |= y->sinks != NULL;
        if (!y->bq != !y->bk || !y->bq != !y->bv) {
            rc = cx_fail(err, CX_EFORMAT, "%s: layer %d has some but not all of the Q, K and V biases", L, l);
            goto done;
        }
        h->qkv_bias |= y->bq != NULL;
    }
    if ((uint64_t)m->n_tensors != g.n_tensors) { /* every tensor is used, or the model would run wrong */
        for (uint64_t i = 0; i < g.n_tensors; i++) {
            int used = 0;
            const gguf_tensor *t = &g.tensors[i];
            for (int k = 0; k < m->n_tensors && !used; k++)
                used = strlen(m->tensors[k].name) == t->name.len && !memcmp(m->tensors[k].name, t->name.ptr, t->name.len);
            if (!used) {
                rc = cx_fail(err, CX_EUNSUP, "%s: tensor '%.*s' is not supported by this engine (architecture %s)", L,
                             (int)(t->name.len > 64 ? 64 : t->name.len), t->name.ptr, m->arch);
                goto done;
            }
        }
    }
    h->main_type = main_type(m, &g);
done:
    gguf_free(&g);
    return rc;
}

/* ---------------------------------------------------------------- API */

/* See cortex.h. */
cx_model_params cx_model_defaults(void) {
    cx_model_params p = {CX_WEIGHTS_AUTO, 1, NULL};
    return p;
}

/* See cortex.h. */
int cx_model_load(const char *path, const char *tokenizer_path, cx_model **out, cx_err *err) {
    return cx_model_load_ex(path, tokenizer_path, NULL, out, err);
}

/* See cortex.h: parameters checked first (a bad isa costs no file access),
 * then the file mapped or copied, parsed, repacked for the model's kernels,
 * sealed read-only. */
int cx_model_load_ex(const char *path, const char *tokenizer_path, const cx_model_params *params, cx_model **out,
                     cx_err *err) {
    *out = NULL;
    cx_model_params p = params ? *params : cx_model_defaults();
    if (!path || !*path) return cx_fail(err, CX_EINVAL, "no model path given");
    if (p.weights != CX_WEIGHTS_AUTO && p.weights != CX_WEIGHTS_MMAP && p.weights != CX_WEIGHTS_HUGEPAGES)
        return cx_fail(err, CX_EINVAL, "weights memory mode %d is not one of CX_WEIGHTS_AUTO, _MMAP, _HUGEPAGES",
                       p.weights);
    const kern_ops *kern;
    char msg[512];
    if (kern_select(p.isa, &kern, msg, sizeof msg)) return cx_fail(err, CX_EINVAL, "%s", msg);
    cx_model *m = calloc(1, sizeof *m);
    if (!m) return cx_fail(err, CX_ENOMEM, "out of memory");
    m->kern = kern;
    int rc = model_load_file(path, &m->map, &m->map_size, &m->map_copied, p.weights, err);
    if (rc) {
        free(m);
        return rc;
    }
    snprintf(m->name, sizeof m->name, "%s", cx_basename(path));
    m->info.file_bytes = m->map_size;
    m->info.rope_freq_scale = 1.0f;
    if (m->map_size >= 4 && memcmp(m->map, "GGUF", 4) == 0) {
        rc = model_from_gguf(m, path, err);
    } else {
        const uint8_t *tok = NULL;
        size_t tok_size = 0;
        if (!tokenizer_path) {
            rc = cx_fail(err, CX_EINVAL, "%s: not a GGUF file; a llama2.c checkpoint needs a tokenizer (-z tokenizer.bin)", path);
        } else if (!(rc = model_map_file(tokenizer_path, &tok, &tok_size, err))) {
            rc = model_from_llama2c(m, path, tok, tok_size, tokenizer_path, err);
            model_unmap_file(tok, tok_size);
        }
    }
    if (rc) {
        cx_model_free(m);
        return rc;
    }
    m->info.name = m->name;
    m->info.arch = m->arch[0] ? m->arch : "llama";
    m->info.tokenizer = m->vocab.kind == TOK_BPE ? "gpt2" : "llama";
    m->info.tokenizer_pre = m->vocab.pre ? tok_pre_name(m->vocab.pre) : NULL;
    m->info.n_tensors = m->n_tensors;
    if (!m->info.rope_scaling) m->info.rope_scaling = "none";
    model_repack(m, p.repack);
    model_seal(m);
    m->info.isa = m->kern->name;
    m->info.weights_hugepage_bytes = m->map_copied ? model_hugepage_bytes(m->map) : 0;
    m->info.weights_memory = !m->map_copied ? "mmap"
                             : !m->n_repacked ? "hugepages"
                             : m->repacked_layout == KERN_LAYOUT_X16 ? "hugepages, repacked x16"
                                                                     : "hugepages, repacked x8";
    *out = m;
    return 0;
}

void cx_model_free(cx_model *m) {
    if (!m) return;
    model_release_file(m->map, m->map_size, m->map_copied);
    tok_free(&m->vocab);
    free(m->layers);
    free(m->norms);
    free(m->tensors);
    free(m->chat_template);
    free(m);
}

const cx_model_info *cx_model_get_info(const cx_model *m) { return &m->info; }

int cx_model_tensor(const cx_model *m, int i, cx_tensor_info *out) {
    if (i < 0 || i >= m->n_tensors) return CX_ERANGE;
    const cx_tensor_rec *r = &m->tensors[i];
    out->name = r->name;
    out->type = r->type;
    out->n_dims = r->n_dims;
    memcpy(out->ne, r->ne, sizeof out->ne);
    out->offset = r->offset;
    out->nbytes = r->nbytes;
    return 0;
}

int cx_token_bos(const cx_model *m) { return m->vocab.bos; }
int cx_token_eos(const cx_model *m) { return m->vocab.eos; }
int cx_token_eot(const cx_model *m) { return m->vocab.eot; }
int cx_token_is_eog(const cx_model *m, int token) { return token >= 0 && (token == m->vocab.eos || token == m->vocab.eot); }

_Static_assert((int)CX_TOKENIZE_BOS == (int)TOK_ADD_BOS && (int)CX_TOKENIZE_SPECIAL == (int)TOK_PARSE_SPECIAL, "tokenize flags");

/* See cortex.h. */
int cx_tokenize(const cx_model *m, const char *text, size_t len, int flags, int32_t *out, int cap, int *n_out,
                cx_err *err) {
    return tok_encode(&m->vocab, text, len, flags, out, cap, n_out, err);
}

size_t cx_token_piece(const cx_model *m, int prev, int token, char tmp[2], const char **bytes) {
    return tok_piece(&m->vocab, prev, token, tmp, bytes);
}

/* See cortex.h. A stored piece is never shorter than the text it stands
 * for: SentencePiece stores a space as U+2581 (3 bytes), byte-level BPE a
 * byte as one or two bytes of UTF-8, a byte token as "<0xNN>". */
size_t cx_token_max_bytes(const cx_model *m) {
    size_t mx = 4;
    for (int i = 0; i < m->vocab.n; i++)
        if (m->vocab.len[i] > mx) mx = m->vocab.len[i];
    return mx;
}

size_t cx_detokenize(const cx_model *m, const int32_t *ids, int n, char *buf, size_t cap) {
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        char tmp[2];
        const char *p;
        size_t k = tok_piece(&m->vocab, i ? ids[i - 1] : -1, ids[i], tmp, &p);
        for (size_t j = 0; j < k; j++, total++)
            if (total + 1 < cap) buf[total] = p[j];
    }
    if (cap) buf[total < cap ? total : cap - 1] = 0;
    return total;
}

/* Every type and file type with a name, in the order cx_type_from_name tries them. */
static const int NAMED_TYPES[] = {CX_TYPE_F32, CX_TYPE_F16, CX_TYPE_BF16, CX_TYPE_Q8_0, CX_TYPE_Q4_0,
                                  CX_TYPE_Q4_K, CX_TYPE_Q6_K, CX_TYPE_MXFP4, CX_FTYPE_Q4_K_M};

const char *cx_type_name(int type) {
    switch (type) {
    case CX_TYPE_F32: return "f32";
    case CX_TYPE_F16: return "f16";
    case CX_TYPE_BF16: return "bf16";
    case CX_TYPE_Q8_0: return "q8_0";
    case CX_TYPE_Q4_0: return "q4_0";
    case CX_TYPE_Q4_K: return "q4_k";
    case CX_TYPE_Q6_K: return "q6_k";
    case CX_TYPE_MXFP4: return "mxfp4";
    case CX_FTYPE_Q4_K_M: return "q4_k_m";
    default: return "?";
    }
}

int cx_type_from_name(const char *s) {
    for (size_t i = 0; i < sizeof NAMED_TYPES / sizeof NAMED_TYPES[0]; i++)
        if (!strcasecmp(s, cx_type_name(NAMED_TYPES[i]))) return NAMED_TYPES[i];
    return -1;
}
