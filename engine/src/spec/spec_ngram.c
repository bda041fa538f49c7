/*
 * spec_ngram.c - prompt-lookup drafting: text that repeats what the context
 * already holds (an edit of the prompt, a summary quoting it, code renaming
 * a variable) is drafted by finding the context's last few tokens earlier in
 * it and proposing what followed them there. No model, no memory: a scan
 * back over the context, O(n * g) per draft, allocation-free.
 */
#include <assert.h>
#include <string.h>

#include "spec.h"

/* See spec.h. */
int spec_ngram_draft(const int32_t *hist, int n, int gmin, int gmax, int k, int32_t *out) {
    assert(gmin >= 1 && gmax >= gmin && k >= 0);
    if (k == 0) return 0;
    for (int g = gmax < n - 1 ? gmax : n - 1; g >= gmin; g--) {
        const int32_t *suffix = hist + n - g;
        /* latest occurrence first: recent text predicts best, and the
         * continuation j + g .. lies before the suffix's own start at most */
        for (int j = n - g - 1; j >= 0; j--) {
            if (hist[j] != suffix[0] || memcmp(hist + j, suffix, sizeof *hist * (size_t)g) != 0) continue;
            int c = 0;
            while (c < k && j + g + c < n) {
                out[c] = hist[j + g + c];
                c++;
            }
            assert(c >= 1); /* j + g <= n - 1 */
            return c;
        }
    }
    return 0;
}
