/*
 * sched_stop.c - stop strings for the scheduler (sched.h).
 *
 * A stop string may span several tokens, so the text of a token cannot be
 * streamed as soon as it is sampled: bytes that could be the start of a stop
 * string are held back until the next tokens show whether it completes
 * (then the text ends where the stop string starts) or not (then they are
 * released). The same rule OpenAI-compatible servers follow: no client ever
 * sees part of a stop string.
 */
#include <stdlib.h>
#include <string.h>

#include "sched.h"
#include "../util.h"

/* See sched.h. */
int sched_stops_init(sched_stops *st, const char *const *strs, int n, cx_err *err) {
    memset(st, 0, sizeof *st);
    if (n < 0) return cx_fail(err, CX_EINVAL, "stop strings: negative count %d", n);
    if (n == 0) return 0;
    if (!strs) return cx_fail(err, CX_EINVAL, "stop strings: %d announced, none given", n);
    st->s = calloc((size_t)n, sizeof *st->s);
    st->len = calloc((size_t)n, sizeof *st->len);
    if (!st->s || !st->len) {
        sched_stops_free(st);
        return cx_fail(err, CX_ENOMEM, "out of memory for %d stop strings", n);
    }
    st->n = n;
    for (int i = 0; i < n; i++) {
        if (!strs[i] || !strs[i][0]) {
            sched_stops_free(st);
            return cx_fail(err, CX_EINVAL, "stop string %d is empty", i);
        }
        st->len[i] = strlen(strs[i]);
        st->s[i] = malloc(st->len[i] + 1);
        if (!st->s[i]) {
            sched_stops_free(st);
            return cx_fail(err, CX_ENOMEM, "out of memory for stop string %d", i);
        }
        memcpy(st->s[i], strs[i], st->len[i] + 1);
        if (st->len[i] > st->max_len) st->max_len = st->len[i];
    }
    return 0;
}

/* See sched.h. */
void sched_stops_free(sched_stops *st) {
    for (int i = 0; st->s && i < st->n; i++) free(st->s[i]);
    free(st->s);
    free(st->len);
    memset(st, 0, sizeof *st);
}

/* See sched.h. Only occurrences ending at or after `from` are new: earlier
 * ones would have been found when their last byte arrived. */
long sched_stops_find(const sched_stops *st, const char *text, size_t len, size_t from) {
    long best = -1;
    for (int i = 0; i < st->n; i++) {
        size_t L = st->len[i];
        if (L > len) continue;
        size_t lo = from + 1 > L ? from + 1 - L : 0; /* earliest start whose end reaches `from` */
        for (size_t p = lo; p + L <= len; p++)
            if (!memcmp(text + p, st->s[i], L)) {
                if (best < 0 || (long)p < best) best = (long)p;
                break;
            }
    }
    return best;
}

/* See sched.h. */
size_t sched_stops_safe(const sched_stops *st, const char *text, size_t len) {
    size_t hold = 0;
    for (int i = 0; i < st->n; i++) {
        size_t L = st->len[i];
        for (size_t k = L - 1 < len ? L - 1 : len; k > hold; k--) /* longest tail = prefix of s[i] */
            if (!memcmp(text + len - k, st->s[i], k)) {
                hold = k;
                break;
            }
    }
    return len - hold;
}
