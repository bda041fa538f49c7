/*
 * json.c - strict parser for one flat JSON object, and JSON writers.
 *
 * The parser is a recursive-descent reader over a byte span that need not be
 * NUL-terminated (a line inside a larger buffer). Every read is bounds-checked
 * against that span, nesting is capped at JSON_MAX_DEPTH, and each string is
 * found first (closing quote) and then decoded into a buffer of the raw
 * length, which is always enough because every escape decodes to fewer bytes
 * than it takes to write. Errors name the 1-based byte column.
 */
#include "json.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"

typedef struct parser {
    const unsigned char *s;
    size_t n, pos;
    char *err;
    size_t errlen;
} parser;

/* Record "column N: <message>" (N = pos + 1) and return CX_EFORMAT. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int perr(parser *p, size_t pos, const char *fmt, ...) {
    if (p->err && p->errlen) {
        int k = snprintf(p->err, p->errlen, "column %zu: ", pos + 1);
        if (k >= 0 && (size_t)k < p->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(p->err + k, p->errlen - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    return CX_EFORMAT;
}

/* Describe the byte at pos for a message: 'x', "byte 0xNN" or "end of line". */
static const char *what_at(const parser *p, size_t pos, char buf[16]) {
    if (pos >= p->n) return "the end of the line";
    unsigned char c = p->s[pos];
    if (c > 0x20 && c < 0x7f) snprintf(buf, 16, "'%c'", c);
    else if (c == ' ') snprintf(buf, 16, "a space");
    else snprintf(buf, 16, "byte 0x%02X", c);
    return buf;
}

/* A key made printable and short for messages (non-printables become '?'). */
static const char *key_for_msg(const char *key, size_t len, char buf[48]) {
    size_t k = 0;
    for (size_t i = 0; i < len && k < 40; i++) {
        unsigned char c = (unsigned char)key[i];
        buf[k++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (len > 40) { memcpy(buf + k, "...", 3); k += 3; }
    buf[k] = 0;
    return buf;
}

/* Skip JSON whitespace (space, tab, CR, LF). */
static void skip_ws(parser *p) {
    while (p->pos < p->n) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\r' && c != '\n') break;
        p->pos++;
    }
}

/* Validate one UTF-8 character by the Unicode 3.x table (RFC 3629): the
 * second byte's range excludes overlongs, surrogates and > U+10FFFF. */
size_t json_utf8_len(const unsigned char *p, size_t n) {
    if (n == 0) return 0;
    unsigned char c = p[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;      /* overlong */
        else if (c == 0xED) hi = 0x9F; /* UTF-16 surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;      /* overlong */
        else if (c == 0xF4) hi = 0x8F; /* > U+10FFFF */
    } else {
        return 0; /* continuation byte, C0/C1 overlong lead, or F5..FF */
    }
    if (n < len || p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    return len;
}

/* Append code point cp (valid, not a surrogate) to dst as UTF-8; returns bytes. */
static size_t put_utf8(unsigned char *dst, uint32_t cp) {
    assert(cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF));
    if (cp < 0x80) { dst[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) {
        dst[0] = (unsigned char)(0xC0 | (cp >> 6));
        dst[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (unsigned char)(0xE0 | (cp >> 12));
        dst[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        dst[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    dst[0] = (unsigned char)(0xF0 | (cp >> 18));
    dst[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    dst[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    dst[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Read the 4 hex digits of a \u escape at pos (the 'u' is at pos-1); -1 if bad. */
static long read_hex4(const parser *p, size_t pos) {
    if (pos > p->n || p->n - pos < 4) return -1;
    long v = 0;
    for (size_t i = 0; i < 4; i++) {
        unsigned char c = p->s[pos + i];
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return -1;
        v = v * 16 + d;
    }
    return v;
}

/*
 * Parse the string whose opening quote is at p->pos. When `out` is not NULL,
 * *out gets a malloc'd NUL-terminated decoded copy and *out_len its length;
 * when NULL the string is only validated (nested values being skipped).
 */
static int parse_string(parser *p, char **out, size_t *out_len) {
    assert(p->pos < p->n && p->s[p->pos] == '"');
    size_t open = p->pos, end = open + 1;
    /* Find the closing quote first so the output buffer can be sized once. */
    while (end < p->n && p->s[end] != '"') end += (p->s[end] == '\\') ? 2 : 1;
    if (end >= p->n) return perr(p, open, "unterminated string (no closing '\"' on this line)");
    unsigned char *dst = NULL;
    if (out) {
        dst = malloc(end - open); /* raw length - 1 (quotes) + 1 (NUL) */
        if (!dst) return perr(p, open, "out of memory for a %zu-byte string", end - open);
    }
    size_t k = 0, i = open + 1;
    int rc = 0;
    while (i < end && rc == 0) {
        unsigned char c = p->s[i];
        if (c < 0x20) {
            rc = perr(p, i, "unescaped control character 0x%02X in a string (write it as \\u%04X)", c, c);
        } else if (c >= 0x80) {
            size_t len = json_utf8_len(p->s + i, end - i);
            if (len == 0) {
                rc = perr(p, i, "invalid UTF-8 byte 0x%02X in a string", c);
            } else {
                if (dst) memcpy(dst + k, p->s + i, len);
                k += len;
                i += len;
            }
        } else if (c != '\\') {
            if (dst) dst[k] = c;
            k++;
            i++;
        } else {
            unsigned char e = p->s[i + 1]; /* i + 1 < end: the scan skipped escapes in pairs */
            const char *simple = strchr("\"\\/bfnrt", e);
            if (e && simple) {
                static const char map[] = "\"\\/\b\f\n\r\t";
                if (dst) dst[k] = (unsigned char)map[simple - "\"\\/bfnrt"];
                k++;
                i += 2;
            } else if (e == 'u') {
                long cp = read_hex4(p, i + 2);
                if (cp < 0 || i + 6 > end) {
                    rc = perr(p, i, "\\u must be followed by four hex digits");
                    break;
                }
                size_t used = 6;
                if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    rc = perr(p, i, "unpaired low surrogate \\u%04lX (it must follow a high surrogate \\uD800..\\uDBFF)", cp);
                    break;
                }
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    long lo = (i + 12 <= end && p->s[i + 6] == '\\' && p->s[i + 7] == 'u') ? read_hex4(p, i + 8) : -1;
                    if (lo < 0xDC00 || lo > 0xDFFF) {
                        rc = perr(p, i, "unpaired high surrogate \\u%04lX (it must be followed by a low surrogate \\uDC00..\\uDFFF)", cp);
                        break;
                    }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    used = 12;
                }
                unsigned char tmp[4];
                size_t len = put_utf8(tmp, (uint32_t)cp);
                assert(len <= used);
                if (dst) memcpy(dst + k, tmp, len);
                k += len;
                i += used;
            } else {
                char b[16];
                rc = perr(p, i, "invalid escape: backslash followed by %s (valid: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)",
                          what_at(p, i + 1, b));
            }
        }
    }
    if (rc) {
        free(dst);
        return rc;
    }
    assert(k < end - open);
    if (dst) {
        dst[k] = 0;
        *out = (char *)dst;
        *out_len = k;
    }
    p->pos = end + 1;
    return 0;
}

/* Parse a number by the JSON grammar at p->pos; store its value if `out`. */
static int parse_number(parser *p, double *out) {
    size_t start = p->pos, i = start;
    const unsigned char *s = p->s;
    if (i < p->n && s[i] == '-') i++;
    if (i >= p->n || s[i] < '0' || s[i] > '9')
        return perr(p, start, "a number needs digits after '-'");
    if (s[i] == '0') {
        i++;
        if (i < p->n && s[i] >= '0' && s[i] <= '9') return perr(p, start, "numbers may not have leading zeros");
    } else {
        while (i < p->n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < p->n && s[i] == '.') {
        i++;
        if (i >= p->n || s[i] < '0' || s[i] > '9') return perr(p, i, "a digit must follow the decimal point");
        while (i < p->n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < p->n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < p->n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= p->n || s[i] < '0' || s[i] > '9') return perr(p, i, "a digit must follow the exponent 'e'");
        while (i < p->n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (out) {
        /* strtod needs a terminator the span may lack: convert a copy. */
        size_t len = i - start;
        char small[64], *buf = len < sizeof small ? small : malloc(len + 1);
        if (!buf) return perr(p, start, "out of memory for a %zu-digit number", len);
        memcpy(buf, s + start, len);
        buf[len] = 0;
        double v = strtod(buf, NULL);
        if (buf != small) free(buf);
        if (!isfinite(v)) return perr(p, start, "number out of range (beyond +-1.8e308)");
        *out = v;
    }
    p->pos = i;
    return 0;
}

static int parse_value(parser *p, int depth, json_field *f);

/* Validate and skip a nested object or array starting at p->pos. */
static int skip_container(parser *p, int depth) {
    size_t open = p->pos;
    unsigned char close = p->s[open] == '{' ? '}' : ']';
    if (depth > JSON_MAX_DEPTH) return perr(p, open, "nesting deeper than %d levels", JSON_MAX_DEPTH);
    p->pos++;
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == close) {
        p->pos++;
        return 0;
    }
    for (;;) {
        char b[16];
        if (close == '}') {
            if (p->pos >= p->n || p->s[p->pos] != '"')
                return perr(p, p->pos, "expected a quoted key in the nested object, found %s", what_at(p, p->pos, b));
            int rc = parse_string(p, NULL, NULL);
            if (rc) return rc;
            skip_ws(p);
            if (p->pos >= p->n || p->s[p->pos] != ':')
                return perr(p, p->pos, "expected ':' after a key in the nested object, found %s", what_at(p, p->pos, b));
            p->pos++;
            skip_ws(p);
        }
        int rc = parse_value(p, depth, NULL);
        if (rc) return rc;
        skip_ws(p);
        if (p->pos < p->n && p->s[p->pos] == close) {
            p->pos++;
            return 0;
        }
        if (p->pos >= p->n || p->s[p->pos] != ',')
            return perr(p, p->pos, "expected ',' or '%c' in the nested %s opened at column %zu, found %s", close,
                        close == '}' ? "object" : "array", open + 1, what_at(p, p->pos, b));
        size_t comma = p->pos++;
        skip_ws(p);
        if (p->pos < p->n && p->s[p->pos] == close) return perr(p, comma, "trailing comma before '%c'", close);
    }
}

/* Does the span at p->pos start with the literal word w? */
static int has_word(const parser *p, const char *w) {
    size_t len = strlen(w);
    return p->n - p->pos >= len && memcmp(p->s + p->pos, w, len) == 0;
}

/*
 * Parse any value at p->pos (depth = nesting of the enclosing container).
 * With f != NULL the value is stored there (top-level field of the object);
 * with NULL it is only validated.
 */
static int parse_value(parser *p, int depth, json_field *f) {
    char b[16];
    if (p->pos >= p->n) return perr(p, p->pos, "expected a value, found the end of the line");
    unsigned char c = p->s[p->pos];
    if (f) f->col = p->pos + 1;
    if (c == '"') {
        if (f) f->type = JSON_STRING;
        return parse_string(p, f ? &f->str : NULL, f ? &f->str_len : NULL);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        if (f) f->type = JSON_NUMBER;
        return parse_number(p, f ? &f->number : NULL);
    }
    if (c == '{' || c == '[') {
        if (f) f->type = c == '{' ? JSON_OBJECT : JSON_ARRAY;
        return skip_container(p, depth + 1);
    }
    static const struct { const char *word; json_type type; int val; } words[] = {
        {"true", JSON_BOOL, 1}, {"false", JSON_BOOL, 0}, {"null", JSON_NULL, 0}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if (has_word(p, words[i].word)) {
            if (f) {
                f->type = words[i].type;
                f->boolean = words[i].val;
            }
            p->pos += strlen(words[i].word);
            return 0;
        }
    }
    return perr(p, p->pos, "expected a value (string, number, true, false, null, object or array), found %s",
                what_at(p, p->pos, b));
}

/* Free one field's strings. */
static void field_free(json_field *f) {
    free(f->key);
    free(f->str);
}

/* Free every key and string, then the field array; leave o empty. */
void json_obj_free(json_obj *o) {
    if (!o) return;
    for (size_t i = 0; i < o->n; i++) field_free(&o->fields[i]);
    free(o->fields);
    o->fields = NULL;
    o->n = 0;
}

/* Find a field by exact key bytes. */
static json_field *find_key(const json_obj *o, const char *key, size_t len) {
    for (size_t i = 0; i < o->n; i++)
        if (o->fields[i].key_len == len && memcmp(o->fields[i].key, key, len) == 0) return &o->fields[i];
    return NULL;
}

/* Linear lookup: workload objects have a handful of keys. */
const json_field *json_get(const json_obj *o, const char *key) {
    assert(o && key);
    return find_key(o, key, strlen(key));
}

/* The members of the top-level object, after its '{' (p->pos just past it). */
static int parse_members(parser *p, json_obj *out) {
    size_t cap = 0;
    char b[16], kb[48];
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == '}') {
        p->pos++;
        return 0;
    }
    for (;;) {
        if (p->pos >= p->n || p->s[p->pos] != '"')
            return perr(p, p->pos, "expected a quoted key, found %s", what_at(p, p->pos, b));
        if (out->n == JSON_MAX_FIELDS)
            return perr(p, p->pos, "more than %d keys in one object", JSON_MAX_FIELDS);
        if (out->n == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            json_field *nf = realloc(out->fields, ncap * sizeof *nf);
            if (!nf) return perr(p, p->pos, "out of memory for %zu fields", ncap);
            out->fields = nf;
            cap = ncap;
        }
        json_field *f = &out->fields[out->n];
        memset(f, 0, sizeof *f);
        size_t key_pos = p->pos;
        int rc = parse_string(p, &f->key, &f->key_len);
        if (rc) return rc;
        out->n++; /* owns the key now, so json_obj_free releases it on error */
        if (find_key(out, f->key, f->key_len) != f)
            return perr(p, key_pos, "duplicate key \"%s\"", key_for_msg(f->key, f->key_len, kb));
        skip_ws(p);
        if (p->pos >= p->n || p->s[p->pos] != ':')
            return perr(p, p->pos, "expected ':' after the key \"%s\", found %s",
                        key_for_msg(f->key, f->key_len, kb), what_at(p, p->pos, b));
        p->pos++;
        skip_ws(p);
        rc = parse_value(p, 0, f);
        if (rc) return rc;
        skip_ws(p);
        if (p->pos < p->n && p->s[p->pos] == '}') {
            p->pos++;
            return 0;
        }
        if (p->pos >= p->n || p->s[p->pos] != ',')
            return perr(p, p->pos, "expected ',' or '}' after the value of \"%s\", found %s",
                        key_for_msg(f->key, f->key_len, kb), what_at(p, p->pos, b));
        size_t comma = p->pos++;
        skip_ws(p);
        if (p->pos < p->n && p->s[p->pos] == '}') return perr(p, comma, "trailing comma before '}'");
    }
}

/* Entry point: '{' members '}' surrounded only by whitespace; on any error
 * the partial object is freed so callers never see half a result. */
int json_parse_object(const char *s, size_t n, json_obj *out, char *err, size_t errlen) {
    assert(out && (s || n == 0));
    parser p = {(const unsigned char *)s, n, 0, err, errlen};
    char b[16];
    out->fields = NULL;
    out->n = 0;
    if (err && errlen) err[0] = 0;
    skip_ws(&p);
    if (p.pos >= p.n || p.s[p.pos] != '{')
        return perr(&p, p.pos, "expected '{' to start a JSON object, found %s", what_at(&p, p.pos, b));
    p.pos++;
    int rc = parse_members(&p, out);
    if (rc == 0) {
        skip_ws(&p);
        if (p.pos < p.n) rc = perr(&p, p.pos, "unexpected %s after the end of the object", what_at(&p, p.pos, b));
    }
    if (rc) json_obj_free(out);
    return rc;
}

/* Type names with their article, to read well in "must be X, not Y". */
const char *json_type_name(json_type t) {
    switch (t) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "a boolean";
    case JSON_NUMBER: return "a number";
    case JSON_STRING: return "a string";
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    }
    return "?";
}

/* Integral doubles within 2^53 convert exactly; others are not integers here. */
int json_get_int64(const json_field *f, int64_t *out) {
    const double lim = 9007199254740992.0; /* 2^53: every integer up to it is exact */
    if (!f || f->type != JSON_NUMBER || !(f->number >= -lim && f->number <= lim)) return 0;
    int64_t v = (int64_t)f->number;
    if ((double)v != f->number) return 0;
    *out = v;
    return 1;
}

/* Escape for JSON, passing valid UTF-8 through and mapping each invalid
 * byte to \u00XX so any byte string yields valid JSON. */
void json_write_string(FILE *f, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    putc('"', f);
    size_t i = 0;
    while (i < n) {
        unsigned char c = u[i];
        if (c == '"' || c == '\\') {
            putc('\\', f);
            putc(c, f);
            i++;
        } else if (c < 0x20) {
            const char *e = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
            if (e) fputs(e, f);
            else fprintf(f, "\\u%04X", c);
            i++;
        } else if (c < 0x80) {
            putc(c, f);
            i++;
        } else {
            size_t len = json_utf8_len(u + i, n - i);
            if (len) {
                fwrite(u + i, 1, len, f);
                i += len;
            } else {
                fprintf(f, "\\u%04X", c); /* the byte read as Latin-1: valid JSON, lossy */
                i++;
            }
        }
    }
    putc('"', f);
}

/* Shortest round-trip decimal: try 1..17 significant digits, keep the
 * first that strtod reads back as exactly x. */
int json_format_number(char *buf, size_t cap, double x) {
    assert(buf && cap >= 32);
    if (!isfinite(x)) return snprintf(buf, cap, "null");
    int k = 0, prec = 1;
    for (; prec <= 17; prec++) {
        k = snprintf(buf, cap, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    /* %g writes 40 as "4e+01" at precision 1; for exponents 0..16 use enough
     * digits for plain notation (more correctly rounded digits still read back
     * as x). Very large and very small numbers keep the exponent. */
    const char *e = strchr(buf, 'e');
    if (e) {
        int ex = atoi(e + 1);
        if (ex >= 0 && ex < 17) k = snprintf(buf, cap, "%.*g", ex + 1 > prec ? ex + 1 : prec, x);
    }
    return k;
}

/* Write a number as JSON (null if not finite). */
void json_write_number(FILE *f, double x) {
    char buf[40];
    json_format_number(buf, sizeof buf, x);
    fputs(buf, f);
}
