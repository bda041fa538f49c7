/*
 * tok_pre.c - pre-tokenizers for byte-level BPE (see tok_pre.h).
 *
 * The regular expressions are the ones llama.cpp uses for each
 * tokenizer.ggml.pre name (src/llama-vocab.cpp), where llama.cpp rewrote the
 * Hugging Face originals' case-insensitive groups "(?i:'s|...)" as explicit
 * classes; PCRE2 runs them in UTF mode with Unicode properties (\p{L}, \p{N},
 * \s) and lookahead, so no Unicode tables live here. A set of several regexes
 * is applied one after the other, each splitting the pieces the previous one
 * left, which is how llama.cpp applies them.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tok_pre.h"

#include <assert.h>
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define PRE_MAX_RE 6

/* GPT-2's pattern: contractions, letters, digits, other, trailing spaces. */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
/* Llama 3 (tiktoken cl100k): digits in runs of at most three. */
#define RE_LLAMA3 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Qwen 2: as Llama 3, one digit per word. */
#define RE_QWEN2 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* o200k (GPT-4o, GPT-OSS): case-aware words, as llama.cpp adapts it. */
#define RE_O200K_WORD_TAIL "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
#define RE_O200K \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" RE_O200K_WORD_TAIL \
    "|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" RE_O200K_WORD_TAIL \
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* CJK ideographs, and Hangul, as DeepSeek's pre-tokenizers group them. */
#define RE_CJK "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"

/* One pre-tokenizer: the names that select it (the first is canonical), its
 * regexes and the vocabulary defaults llama.cpp gives those names. */
typedef struct pre_def {
    const char *names[12];
    const char *re[PRE_MAX_RE];
    int ignore_merges, add_bos;
} pre_def;

static const pre_def PRE_DEFS[] = {
    {{"default"},
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, 0, 0},
    {{"gpt-2", "gpt-neox", "mpt", "olmo", "phi-2", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "gigachat", "exaone4"},
     {RE_GPT2}, 0, 0},
    {{"llama-bpe", "llama3", "llama-v3", "falcon3", "pixtral"}, {RE_LLAMA3}, 1, 1},
    {{"dbrx", "smaug-bpe"}, {RE_LLAMA3}, 0, 0},
    {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"}, {RE_QWEN2}, 0, 0},
    {{"starcoder", "refact", "smollm", "codeshell", "command-r", "exaone"}, {"\\p{N}", RE_GPT2}, 0, 0},
    {{"falcon"}, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}, 0, 0},
    {{"deepseek-llm"},
     {"[\r\n]", "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
      "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+", "\\s+$", RE_CJK,
      "\\p{N}+"},
     0, 0},
    {{"deepseek-coder"}, {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK, "\\p{N}"}, 0, 0},
    {{"gpt-4o", "llama4"}, {RE_O200K}, 0, 0},
};
#define PRE_NDEFS (sizeof PRE_DEFS / sizeof PRE_DEFS[0])

struct tok_pre {
    const pre_def *def;
    int n;
    pcre2_code *code[PRE_MAX_RE];
};

/* See tok_pre.h. */
const char *tok_pre_name_at(int k) {
    for (size_t d = 0; d < PRE_NDEFS; d++)
        for (int i = 0; i < 12 && PRE_DEFS[d].names[i]; i++)
            if (k-- == 0) return PRE_DEFS[d].names[i];
    return NULL;
}

/* See tok_pre.h. */
void tok_pre_free(tok_pre *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) pcre2_code_free(p->code[i]);
    free(p);
}

/* See tok_pre.h. */
const char *tok_pre_name(const tok_pre *p) { return p->def->names[0]; }

/* See tok_pre.h: look the name up, then compile (and JIT-compile where the
 * platform can) every regex of its set. */
int tok_pre_new(const char *name, size_t name_len, tok_pre **out, int *ignore_merges, int *add_bos, cx_err *err) {
    *out = NULL;
    if (!name || name_len == 0) name = "default", name_len = 7;
    const pre_def *def = NULL;
    for (size_t d = 0; d < PRE_NDEFS && !def; d++)
        for (int i = 0; i < 12 && PRE_DEFS[d].names[i]; i++)
            if (strlen(PRE_DEFS[d].names[i]) == name_len && !memcmp(PRE_DEFS[d].names[i], name, name_len)) def = &PRE_DEFS[d];
    if (!def)
        return cx_fail(err, CX_EUNSUP, "pre-tokenizer '%.*s' (tokenizer.ggml.pre) is not supported",
                       (int)(name_len > 64 ? 64 : name_len), name);
    tok_pre *p = calloc(1, sizeof *p);
    if (!p) return cx_fail(err, CX_ENOMEM, "out of memory for a pre-tokenizer");
    p->def = def;
    for (int i = 0; i < PRE_MAX_RE && def->re[i]; i++) {
        int ec;
        PCRE2_SIZE eo;
        p->code[i] = pcre2_compile((PCRE2_SPTR)def->re[i], PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY, &ec, &eo, NULL);
        if (!p->code[i]) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(ec, msg, sizeof msg);
            tok_pre_free(p);
            return cx_fail(err, CX_EUNSUP, "pre-tokenizer '%s': regex %d does not compile at offset %zu: %s",
                           def->names[0], i, (size_t)eo, (const char *)msg);
        }
        p->n = i + 1;
        pcre2_jit_compile(p->code[i], PCRE2_JIT_COMPLETE); /* an interpreter fallback if JIT is missing */
    }
    *ignore_merges = def->ignore_merges;
    *add_bos = def->add_bos;
    *out = p;
    return 0;
}

/* Length of the UTF-8 character at s (1 for a byte that does not start a valid one). */
static uint32_t pre_char_len(const unsigned char *s, size_t left) {
    uint32_t n = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 1;
    if (n > left) return 1;
    for (uint32_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 1;
    return n;
}

/* A growing array of spans. */
typedef struct span_vec { tok_span *v; size_t n, cap; } span_vec;

/* Append a span; 0, or -1 when out of memory. */
static int span_push(span_vec *sv, uint32_t start, size_t len) {
    if (sv->n == sv->cap) {
        size_t cap = sv->cap ? 2 * sv->cap : 64;
        tok_span *v = realloc(sv->v, sizeof *v * cap);
        if (!v) return -1;
        sv->v = v;
        sv->cap = cap;
    }
    sv->v[sv->n++] = (tok_span){start, (uint32_t)len};
    return 0;
}

/* Cut span `in` of text by regex `re` into matches and gaps, appended to out. */
static int pre_cut(const pcre2_code *re, pcre2_match_data *md, const char *text, tok_span in, span_vec *out,
                   cx_err *err) {
    PCRE2_SPTR subj = (PCRE2_SPTR)text + in.start;
    size_t pos = 0, off = 0;
    int oom = 0;
    while (off < in.len && !oom) {
        int rc = pcre2_match(re, subj, in.len, off, 0, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return cx_fail(err, CX_EINVAL, "pre-tokenizer match failed: %s", (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t s = ov[0], e = ov[1];
        assert(s >= off && e >= s && e <= in.len);
        if (e == s) { /* an empty match cuts nothing: step over one character */
            off = s + pre_char_len(subj + s, in.len - s);
            continue;
        }
        if (s > pos) oom |= span_push(out, in.start + (uint32_t)pos, s - pos);
        oom |= span_push(out, in.start + (uint32_t)s, e - s);
        pos = off = e;
    }
    if (pos < in.len && !oom) oom |= span_push(out, in.start + (uint32_t)pos, in.len - pos);
    return oom ? cx_fail(err, CX_ENOMEM, "out of memory pre-tokenizing %u bytes", in.len) : 0;
}

/* See tok_pre.h: the words of one regex are cut by the next, the span
 * arrays growing as needed (so memory follows the word count). */
int tok_pre_split(const tok_pre *p, const char *text, size_t len, tok_span **out, int *n_out, cx_err *err) {
    *out = NULL;
    *n_out = 0;
    if (len > (1u << 30)) return cx_fail(err, CX_ERANGE, "text of %zu bytes is too long to pre-tokenize", len);
    span_vec a = {0}, b = {0};
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    int rc = md ? 0 : cx_fail(err, CX_ENOMEM, "out of memory pre-tokenizing %zu bytes", len);
    if (!rc && len && span_push(&a, 0, len)) rc = cx_fail(err, CX_ENOMEM, "out of memory pre-tokenizing %zu bytes", len);
    for (int r = 0; r < p->n && !rc; r++) {
        b.n = 0;
        for (size_t i = 0; i < a.n && !rc; i++) rc = pre_cut(p->code[r], md, text, a.v[i], &b, err);
        span_vec t = a; a = b; b = t;
    }
    free(b.v);
    pcre2_match_data_free(md);
    if (rc) {
        free(a.v);
        return rc;
    }
    *out = a.v ? a.v : malloc(sizeof(tok_span)); /* an empty text: an empty (but freeable) array */
    *n_out = (int)a.n;
    if (!*out) return cx_fail(err, CX_ENOMEM, "out of memory pre-tokenizing %zu bytes", len);
    return 0;
}
