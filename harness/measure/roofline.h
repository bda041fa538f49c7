/*
 * roofline.h - decode speed against the memory-bandwidth roofline.
 *
 * Generating a token reads every weight the step uses once, plus the KV cache
 * up to the current position, so decode tokens/s cannot exceed
 *
 *     roofline_tps = read bandwidth (bytes/s) / bytes read per token
 *     bytes per token = weight bytes read per step + kv_bytes_per_pos * positions attended
 *
 * weight bytes read per step: every tensor as stored, except that the token
 * embedding contributes one row (a lookup), unless the output matrix is tied
 * to it (then it is read whole by the classifier, plus that row).
 * kv_bytes_per_pos: K and V of every layer in the run's hot KV format
 * (cx_kv_bytes_per_pos: 2 * n_layer * n_head_kv * head_dim * 4 for f32,
 * half for f16, ~1/4 for q8; tiered runs also read warm and cold blocks,
 * which this does not model). A batched run decodes N sequences per pass,
 * so each token carries 1/N of the weight bytes. Definitions and limits:
 * docs/metrics.md.
 *
 * Per repetition the run stores decode_ctx_mean (from the runner),
 * bytes_per_token, and with a `cortex-bench hw` row for the machine
 * roofline_tps and roofline_frac = decode_tps / roofline_tps.
 */
#ifndef CB_ROOFLINE_H
#define CB_ROOFLINE_H

#include <stddef.h>
#include <stdint.h>

#include "cortex.h"
#include "results.h"

/* Bytes per element of an f32 KV cache (roof_model_from_numbers). */
#define ROOF_KV_ELEM_BYTES 4

/* Printed once when decode speeds are shown but the machine has no hw row. */
#define ROOF_HINT "roofline: run `cortex-bench hw` first"

/* What one decode step of a model reads and computes. */
typedef struct roof_model {
    double weight_bytes;      /* weights read per step */
    double kv_bytes_per_pos;  /* KV cache bytes per attended position */
    double weight_flops;      /* arithmetic of the step's matrix-vector products, 2 per multiply-add (0: unknown) */
    double flops_per_pos;     /* attention's per attended position: q.k and the weighted v, every head and layer */
} roof_model;

/*
 * Weight bytes and matrix arithmetic of one decode step from a tensor list
 * (into out->weight_bytes, out->weight_flops): every tensor is read whole,
 * except that token_embd.weight is one looked-up row (plus the whole matrix
 * when the output is tied to it, as the classifier reads it), and a
 * mixture-of-experts tensor (a name with "_exps.": ffn_gate_exps,
 * ffn_up_exps, ffn_down_exps and their biases, the experts along the last
 * dimension) counts n_expert_used / n_expert of itself: decode reads only the
 * selected experts. Arithmetic: 2 per weight of every matrix (2-D and up)
 * read, the embedding lookup excluded. 0, or -1 with the reason in `err`
 * (no token embedding; expert tensors without a valid n_expert_used).
 */
int roof_weights(const cx_tensor_info *t, int n, int tied_output, int n_expert_used, roof_model *out, char *err,
                 size_t errlen);

/* From the model's hyper-parameters and tensor list (roof_weights), with KV
 * blocks of kv_type (CX_KV_F32/F16/Q8). 0, or -1 with the reason in `err`
 * (no token_embd.weight tensor to account for, experts without a count of
 * those used, a KV type without hot blocks). */
int roof_model_of(const cx_model *m, int kv_type, roof_model *out, char *err, size_t errlen);

/* The same from raw numbers (tests, and models described by numbers):
 * weight_bytes of all tensors, the token embedding's bytes and rows; f32 KV. */
void roof_model_from_numbers(roof_model *out, double weight_bytes, double embd_bytes, double n_vocab, int tied_output,
                             int n_layer, int n_head_kv, int head_dim);

/* Bytes a decoded token costs when it attends `ctx_mean` positions and
 * `shared` tokens (sequences of a batched pass) share each weight read. */
double roof_bytes_per_token(const roof_model *rm, double ctx_mean, int shared);

/* Tokens/s the bandwidth allows: gbs * 1e9 / bytes_per_token (NAN if either <= 0). */
double roof_tps(double read_gbs, double bytes_per_token);

/* Arithmetic of a decoded token attending `ctx_mean` positions (2 per
 * multiply-add); NAN when the model's is unknown. */
double roof_flops_per_token(const roof_model *rm, double ctx_mean);

/* Add bytes_per_token (and flops_per_token when known) to every repetition
 * that decoded (has decode_tps and decode_ctx_mean), and roofline_tps and
 * roofline_frac when read_gbs > 0; `shared` as roof_bytes_per_token. */
void roof_apply(rep_result *reps, int n_reps, const roof_model *rm, double read_gbs, int shared);

#include "store.h"

/*
 * The sentence shown under a run's results, e.g. "decode 20.10 tok/s = 82%
 * of roofline 24.50 tok/s (1.020 MB read per token at 25.00 GB/s, hw row
 * 3)"; callers prefix "roofline: ". Uses the run's stored figures; a run recorded before
 * the machine had a hw row is judged against the row it has now (and says
 * so). Returns 1 with the sentence in buf; 0 when there is nothing to say
 * (the run did not decode, or predates the byte accounting); -1 when the run
 * decoded but the machine has no hw row (show ROOF_HINT once).
 */
int roof_describe(store *s, int64_t run_id, char *buf, size_t n);

/* Median decode TPS and roofline fraction of a run (NAN when absent),
 * by the same rules as roof_describe; for tables. */
void roof_fraction(store *s, int64_t run_id, double *decode_tps, double *frac);

#endif
