/*
 * synth_bpe.c - the synthetic byte-level BPE vocabulary of synthetic gpt-oss
 * files (synth.c), in the shape of OpenAI's o200k one: GPT-2's byte
 * characters (tokens 0..255), then merges building letter n-grams with and
 * without a leading space ("Ġa", "ab", "Ġab", "abc", ...: shorter grams
 * first, each with the merge of its prefix and last letter), and at the end
 * the control tokens of the harmony chat format at o200k's offsets from the
 * first special (<|startoftext|>, <|endoftext|>, <|return|>, <|constrain|>,
 * <|channel|>, <|start|>, <|end|>, <|message|>, <|call|>; the rest
 * <|reserved_N|>). With 201,088 tokens the specials sit at o200k's ids
 * (199998 onwards). The pre-tokenizer is o200k's ("gpt-4o", tok_pre.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synth.h"
#include "tokenizer.h"

/* Specials: 1090 at full size (o200k: 199998..201087), else 16 at the end. */
static int bpe_n_special(int n) { return n >= 4096 ? 1090 : 16; }

/* GPT-2's character for byte b, UTF-8 encoded into out (NUL-terminated); its length. */
static int bpe_char(int b, char *out) {
    int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    int cp = b;
    if (!printable) cp = 256 + (b <= 32 ? b : b <= 160 ? 33 + b - 127 : 67); /* the 68 others, in byte order */
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
        return 1;
    }
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    out[2] = 0;
    return 2;
}

/* Append token `tok` (and merge `merge` unless NULL); -1 when out of memory. */
static int bpe_add(synth_bpe *v, const char *tok, int type, const char *merge) {
    v->tokens[v->n] = strdup(tok);
    v->types[v->n++] = type;
    if (!v->tokens[v->n - 1]) return -1;
    if (merge && !(v->merges[v->n_merges++] = strdup(merge))) return -1;
    return 0;
}

/* See synth.h. */
int synth_bpe_make(synth_bpe *v, int n) {
    memset(v, 0, sizeof *v);
    int ns = bpe_n_special(n), nn = n - ns; /* normal tokens */
    if (nn < 256 + 26) return -1;
    v->tokens = calloc((size_t)n, sizeof(char *));
    v->types = malloc(sizeof(int32_t) * (size_t)n);
    v->merges = calloc((size_t)n, sizeof(char *));
    v->special = nn;
    if (!v->tokens || !v->types || !v->merges) return -1;
    char sp[4], a[64], b[64];
    bpe_char(' ', sp);
    int rc = 0;
    for (int c = 0; c < 256 && !rc; c++) {
        bpe_char(c, a);
        rc = bpe_add(v, a, TOK_NORMAL, NULL);
    }
    for (int c = 0; c < 26 && !rc && v->n < nn; c++) { /* "Ġa": the space and a letter */
        snprintf(a, sizeof a, "%s%c", sp, 'a' + c);
        snprintf(b, sizeof b, "%s %c", sp, 'a' + c);
        rc = bpe_add(v, a, TOK_NORMAL, b);
    }
    for (int len = 2; len <= 8 && !rc && v->n < nn; len++) {
        long count = 1;
        for (int i = 0; i < len; i++) count *= 26;
        for (long k = 0; k < count && !rc && v->n < nn; k++) {
            char g[16];
            long x = k;
            for (int i = len - 1; i >= 0; i--, x /= 26) g[i] = (char)('a' + x % 26);
            g[len] = 0;
            snprintf(b, sizeof b, "%.*s %c", len - 1, g, g[len - 1]); /* prefix + last letter */
            rc = bpe_add(v, g, TOK_NORMAL, b);
            if (!rc && v->n < nn) {
                snprintf(a, sizeof a, "%s%s", sp, g);
                snprintf(b, sizeof b, "%s%.*s %c", sp, len - 1, g, g[len - 1]);
                rc = bpe_add(v, a, TOK_NORMAL, b);
            }
        }
    }
    static const char *named[15] = {"<|startoftext|>", "<|endoftext|>", NULL, NULL, "<|return|>", "<|constrain|>",
                                    NULL, "<|channel|>", "<|start|>", "<|end|>", "<|message|>", NULL, NULL, NULL,
                                    "<|call|>"};
    for (int k = 0; v->n < n && !rc; k++) {
        snprintf(a, sizeof a, "<|reserved_%d|>", nn + k);
        rc = bpe_add(v, k < 15 && named[k] ? named[k] : a, TOK_CONTROL, NULL);
    }
    return rc;
}

/* See synth.h. */
void synth_bpe_free(synth_bpe *v) {
    for (int i = 0; v->tokens && i < v->n; i++) free(v->tokens[i]);
    for (int i = 0; v->merges && i < v->n_merges; i++) free(v->merges[i]);
    free(v->tokens);
    free(v->types);
    free(v->merges);
    memset(v, 0, sizeof *v);
}
