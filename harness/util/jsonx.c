/*
 * jsonx.c - jansson with cortex-bench's reading settings and messages, and
 * reproducible writers (see jsonx.h for the contract).
 */
#include "jsonx.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"
#include "hx_err.h"

/* Line and 1-based character column of byte `pos` of s (UTF-8 continuation
 * bytes do not start a character), counted as jansson counts them. */
static void line_col(const char *s, size_t pos, int *line, int *col) {
    int l = 1, c = 0;
    for (size_t i = 0; i <= pos; i++) {
        unsigned char b = (unsigned char)s[i];
        if (i < pos && b == '\n') {
            l++;
            c = 0;
        } else if ((b & 0xC0) != 0x80) {
            c++;
        }
    }
    *line = l;
    *col = c;
}

/* err = "column C: " + msg, with "end of file" said as "end of line" when
 * the text is one line. */
static void set_err(char *err, size_t errlen, int one_line, int col, const char *msg) {
    if (!err || !errlen) return;
    const char *eof = one_line ? strstr(msg, "end of file") : NULL;
    if (eof)
        hx_fail(err, errlen, "column %d: %.*send of line%s", col < 1 ? 1 : col, (int)(eof - msg), msg,
                eof + strlen("end of file"));
    else
        hx_fail(err, errlen, "column %d: %s", col < 1 ? 1 : col, msg);
}

/* A raw NUL first (jansson would read it as the end of the text), then
 * jansson, then "is it an object". */
int jx_parse_object(const char *s, size_t n, json_t **out, int *line, char *err, size_t errlen) {
    assert(out && (s || n == 0));
    *out = NULL;
    int l = 1, c = 1, one_line = !n || !memchr(s, '\n', n);
    if (err && errlen) err[0] = 0;
    const char *nul = n ? memchr(s, 0, n) : NULL;
    if (nul) {
        line_col(s, (size_t)(nul - s), &l, &c);
        set_err(err, errlen, 0, c, "a raw NUL byte (JSON text holds none; inside a string write it as \\u0000)");
        if (line) *line = l;
        return CX_EFORMAT;
    }
    json_error_t je;
    json_t *v = json_loadb(n ? s : "", n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &je);
    if (!v) {
        set_err(err, errlen, one_line, je.column, je.text);
        if (line) *line = je.line < 1 ? 1 : je.line;
        return CX_EFORMAT;
    }
    if (!json_is_object(v)) { /* jansson takes an array too: name where it starts */
        size_t i = 0;
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
        line_col(s, i, &l, &c);
        char msg[64];
        snprintf(msg, sizeof msg, "expected a JSON object, found %s", jx_type_name(v));
        set_err(err, errlen, 0, c, msg);
        if (line) *line = l;
        json_decref(v);
        return CX_EFORMAT;
    }
    *out = v;
    if (line) *line = 0;
    return 0;
}

/* Type names with their article, to read well in "must be X, not Y". */
const char *jx_type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_NULL: return "null";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_STRING: return "a string";
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    }
    return "?";
}

/* Length of the valid UTF-8 character at p[0, n) by RFC 3629 (the second
 * byte's range excludes overlongs, surrogates and > U+10FFFF), 0 if none. */
static size_t utf8_len(const unsigned char *p, size_t n) {
    unsigned char c = p[0], lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    size_t len;
    if (c < 0x80) return 1;
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

/* Encode valid UTF-8 s[0, n) with jansson and write it without its quotes. */
static int write_run(FILE *f, const char *s, size_t n) {
    json_t *v = json_stringn_nocheck(s, n); /* the caller checked the UTF-8 */
    char *d = v ? json_dumps(v, JSON_ENCODE_ANY) : NULL;
    json_decref(v);
    if (!d) return -1;
    size_t len = strlen(d); /* NUL bytes come out as \u0000 */
    assert(len >= 2 && d[0] == '"' && d[len - 1] == '"');
    fwrite(d + 1, 1, len - 2, f);
    free(d);
    return 0;
}

/* Valid runs through jansson; the bytes between them (which a json_t cannot
 * hold) as \u00XX. */
int jx_write_string(FILE *f, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    int rc = 0;
    putc('"', f);
    for (size_t i = 0; i < n && rc == 0;) {
        size_t run = 0, k;
        while (i + run < n && (k = utf8_len(u + i + run, n - i - run)) > 0) run += k;
        if (run) rc = write_run(f, s + i, run);
        i += run;
        if (i < n && rc == 0) fprintf(f, "\\u%04X", u[i++]);
    }
    putc('"', f);
    return rc;
}

/* Shortest round-trip decimal: try 1..17 significant digits, keep the first
 * that strtod reads back as exactly x. */
int jx_format_number(char *buf, size_t cap, double x) {
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
void jx_write_number(FILE *f, double x) {
    char buf[40];
    jx_format_number(buf, sizeof buf, x);
    fputs(buf, f);
}
