/*
 * model.c - the cx_model: cx_model_load reads the parameters, has the file
 * mapped or copied (model_map.c), hands it to its format's loader
 * (model_gguf.c, llama2c.c: validate every shape, point weight views into
 * the image, copy only the tiny norm vectors), repacks the matrices the
 * model's kernel table reads interleaved, and seals the image read-only;
 * cx_model_free undoes it. Also what both loaders share (the hyper-parameter
 * check, the tensor list) and the public model and tokenizer accessors.
 */
#include "model.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "model_map.h"
#include "util.h"

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
    kern_layout layout = kern->gemm_x16[w->type] && unit % 16 == 0 ? KERN_LAYOUT_X16
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

/* See model.h. */
int model_require_weights(const cx_model *m, cx_err *err) {
    if (!m->info.vocab_only) return 0;
    return cx_fail(err, CX_EUNSUP, "%s: a vocabulary-only file (no weights): it can tokenize, not run", m->info.name);
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
    int rc = kern_select(p.isa, &kern, err);
    if (rc) return rc;
    cx_model *m = calloc(1, sizeof *m);
    if (!m) return cx_fail(err, CX_ENOMEM, "out of memory");
    m->kern = kern;
    m->params = p;
    m->params.isa = NULL; /* the caller's string may not outlive the call; info.isa names the table */
    m->path = strdup(path);
    m->tok_path = tokenizer_path ? strdup(tokenizer_path) : NULL;
    if (!m->path || (tokenizer_path && !m->tok_path)) {
        cx_model_free(m);
        return cx_fail(err, CX_ENOMEM, "out of memory");
    }
    rc = model_load_file(path, &m->map, &m->map_size, &m->map_copied, p.weights, err);
    if (rc) {
        cx_model_free(m);
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
    model_seal_file(m->map, m->map_size, m->map_copied);
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
    if (m->map) model_release_file(m->map, m->map_size, m->map_copied);
    free(m->path);
    free(m->tok_path);
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
