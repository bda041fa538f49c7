/*
 * llama2c.c - llama2.c checkpoints (.bin) into a cx_model.
 *
 * Layout: 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
 * seq_len), then float32 arrays: token_embedding[vocab][dim], rms_att[L][dim],
 * wq[L][dim][dim], wk[L][kv_dim][dim], wv[L][kv_dim][dim], wo[L][dim][dim],
 * rms_ffn[L][dim], w1[L][hidden][dim], w2[L][dim][hidden], w3[L][hidden][dim],
 * rms_final[dim], freq_cis_real[seq][hd/2], freq_cis_imag[seq][hd/2], and,
 * when vocab_size is negative, an unshared classifier wcls[vocab][dim].
 * The file must be exactly that long: a size mismatch means a wrong header.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "quant.h"
#include "util.h"

/* Point a weight view at `rows` x `cols` floats at *pos and advance it. */
static void take_matrix(cx_model *m, const char *name, uint64_t *pos, int64_t rows, int64_t cols, cx_weight *w) {
    int64_t ne[2] = {cols, rows};
    w->data = m->map + *pos;
    w->type = CX_TYPE_F32;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = (size_t)cols * 4;
    model_add_tensor(m, name, CX_TYPE_F32, 2, ne, *pos, (uint64_t)(rows * cols * 4));
    *pos += (uint64_t)(rows * cols * 4);
}

int model_from_llama2c(cx_model *m, const char *L, const uint8_t *tok, size_t tok_size, const char *tok_label,
                       cx_err *err) {
    if (m->map_size < 28)
        return cx_fail(err, CX_EFORMAT, "%s: not a GGUF file (wrong magic) and too short (%zu bytes) for a llama2.c checkpoint",
                       L, m->map_size);
    int32_t hdr[7];
    memcpy(hdr, m->map, sizeof hdr);
    cx_model_info *h = &m->info;
    h->format = "llama2c";
    h->n_embd = hdr[0];
    h->n_ff = hdr[1];
    h->n_layer = hdr[2];
    h->n_head = hdr[3];
    h->n_head_kv = hdr[4];
    h->tied_output = hdr[5] > 0;
    h->n_vocab = hdr[5] == INT32_MIN ? 0 : (hdr[5] < 0 ? -hdr[5] : hdr[5]);
    h->n_ctx = hdr[6];
    h->rms_eps = 1e-5f;
    h->rope_base = 10000.0f;
    int rc = model_check_hparams(h, L, err);
    if (rc) return rc;
    h->head_dim = h->n_embd / h->n_head;
    uint64_t E = (uint64_t)h->n_embd, F = (uint64_t)h->n_ff, NL = (uint64_t)h->n_layer, V = (uint64_t)h->n_vocab;
    uint64_t KV = (uint64_t)h->n_head_kv * (uint64_t)h->head_dim;
    uint64_t floats = V * E + NL * (E + E * E + 2 * KV * E + E * E + E + 3 * F * E) + E +
                      (uint64_t)h->n_ctx * (uint64_t)h->head_dim + (h->tied_output ? 0 : V * E);
    uint64_t expect = 28 + floats * 4;
    if (expect != m->map_size)
        return cx_fail(err, CX_EFORMAT,
                       "%s: file has %zu bytes but its header (dim %d, hidden %d, layers %d, heads %d/%d, vocab %d, seq %d) "
                       "implies %llu: not a llama2.c checkpoint, or truncated",
                       L, m->map_size, hdr[0], hdr[1], hdr[2], hdr[3], hdr[4], hdr[5], hdr[6], (unsigned long long)expect);
    if ((rc = tok_load_llama2c(&m->vocab, tok, tok_size, h->n_vocab, tok_label, err))) return rc;

    m->layers = calloc(NL, sizeof *m->layers);
    m->norms = malloc(sizeof(float) * E * (2 * NL + 1));
    m->tensors = calloc(3 + 9 * NL, sizeof *m->tensors);
    if (!m->layers || !m->norms || !m->tensors) return cx_fail(err, CX_ENOMEM, "%s: out of memory", L);

    uint64_t pos = 28;
    char name[64];
    take_matrix(m, "token_embd.weight", &pos, (int64_t)V, (int64_t)E, &m->tok_embd);
    /* Each kind of per-layer array is stored for all layers back to back, in
     * this order; a layer's matrix is `rows` x `cols` floats at base + l * size. */
    struct kind { const char *part; uint64_t rows, cols; } kinds[10] = {
        {"attn_norm", 1, E}, {"attn_q", E, E}, {"attn_k", KV, E}, {"attn_v", KV, E}, {"attn_output", E, E},
        {"ffn_norm", 1, E},  {"ffn_gate", F, E}, {"ffn_down", E, F}, {"ffn_up", F, E}, {"output_norm", 1, E},
    };
    uint64_t base[10];
    for (int k = 0; k < 10; k++) {
        base[k] = pos;
        pos += (k == 9 ? 1 : NL) * kinds[k].rows * kinds[k].cols * 4;
    }
    uint64_t cls = pos + (uint64_t)h->n_ctx * (uint64_t)h->head_dim * 4; /* after the freq_cis tables */
    float *norm = m->norms;
    for (uint64_t l = 0; l <= NL; l++) {
        cx_layer *y = l < NL ? &m->layers[l] : NULL;
        const float **norms[10] = {y ? &y->attn_norm : NULL, NULL, NULL, NULL, NULL, y ? &y->ffn_norm : NULL,
                                   NULL, NULL, NULL, &m->out_norm};
        cx_weight *mats[10] = {NULL, y ? &y->wq : NULL, y ? &y->wk : NULL, y ? &y->wv : NULL, y ? &y->wo : NULL, NULL,
                               y ? &y->w_gate : NULL, y ? &y->w_down : NULL, y ? &y->w_up : NULL, NULL};
        for (int k = 0; k < 10; k++) {
            if ((k == 9) != (l == NL)) continue; /* output_norm once, after the layers */
            uint64_t off = base[k] + (k == 9 ? 0 : l) * kinds[k].rows * kinds[k].cols * 4;
            if (k == 9) snprintf(name, sizeof name, "output_norm.weight");
            else snprintf(name, sizeof name, "blk.%d.%s.weight", (int)l, kinds[k].part);
            if (mats[k]) {
                take_matrix(m, name, &off, (int64_t)kinds[k].rows, (int64_t)kinds[k].cols, mats[k]);
            } else { /* a norm vector: copied to f32 storage the model owns */
                int64_t ne1[1] = {(int64_t)E};
                memcpy(norm, m->map + off, E * 4);
                *norms[k] = norm;
                norm += E;
                model_add_tensor(m, name, CX_TYPE_F32, 1, ne1, off, E * 4);
            }
        }
    }
    if (h->tied_output) {
        m->output = m->tok_embd;
    } else {
        take_matrix(m, "output.weight", &cls, (int64_t)V, (int64_t)E, &m->output);
    }
    h->main_type = CX_TYPE_F32;
    return 0;
}
