/*
 * test_jsonx.c - cortex-bench's JSON (harness/util/jsonx.c): reading through
 * jansson with cortex-bench's settings (every value type, escapes, numbers as
 * doubles, nesting and key limits, every rejected input with one "column N:"
 * message) and writing (escaping, invalid UTF-8, round trips, numbers).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"
#include "jsonx.h"
#include "testing.h"

/* ---- JSON reading (jansson through jsonx) ---------------------------------- */

/* Parse a NUL-terminated object, expecting success. */
static json_t *parse_ok(const char *s) {
    json_t *o;
    char err[256];
    int rc = jx_parse_object(s, strlen(s), &o, NULL, err, sizeof err);
    CHECK(rc == 0 && o, "parse %s: %s", s, err);
    return rc == 0 ? o : NULL;
}

/* Expect s[0, n) to be rejected with exactly `want` on line `line`. */
static void parse_bad(const char *s, size_t n, int line, const char *want) {
    json_t *o = (json_t *)1;
    char err[256];
    int l = -1;
    int rc = jx_parse_object(s, n, &o, &l, err, sizeof err);
    CHECK(rc == CX_EFORMAT && o == NULL && l == line, "parse should fail on line %d: %.*s (line %d)", line, (int)n, s, l);
    CHECK(strcmp(err, want) == 0, "for %.*s\n  got:  %s\n  want: %s", (int)n, s, err, want);
}

/* Every value type, escapes, surrogate pairs, spans without terminators,
 * numbers as doubles (JSON_DECODE_INT_AS_REAL). */
static void test_json_values(void) {
    json_t *o = parse_ok("{\"s\": \"q\\\"b\\\\s\\/b\\bf\\fn\\nr\\rt\\t\", \"n\": -12.5e1, \"i\": 0, \"t\": true, \"f\": false, "
                         "\"z\": null, \"o\": {\"x\": [1, 2.5, {\"y\": null}, \"s\", []], \"e\": {}}, \"a\": []}");
    if (o) {
        CHECK(json_object_size(o) == 8, "8 fields (got %zu)", json_object_size(o));
        const json_t *f = json_object_get(o, "s");
        CHECK(json_is_string(f) && json_string_length(f) == 16 &&
                  memcmp(json_string_value(f), "q\"b\\s/b\bf\fn\nr\rt\t", 17) == 0,
              "simple escapes");
        f = json_object_get(o, "n");
        CHECK(json_is_real(f) && json_real_value(f) == -125.0, "number -12.5e1");
        CHECK(json_is_real(json_object_get(o, "i")) && json_real_value(json_object_get(o, "i")) == 0, "integer 0 as a double");
        CHECK(json_is_true(json_object_get(o, "t")) && json_is_false(json_object_get(o, "f")), "true, false");
        CHECK(json_is_null(json_object_get(o, "z")), "null");
        CHECK(json_is_object(json_object_get(o, "o")) && json_is_array(json_object_get(o, "a")), "nested");
        CHECK(json_object_get(o, "missing") == NULL, "absent key");
        CHECK(!strcmp(jx_type_name(json_object_get(o, "s")), "a string") &&
                  !strcmp(jx_type_name(json_object_get(o, "n")), "a number") &&
                  !strcmp(jx_type_name(json_object_get(o, "t")), "a boolean") &&
                  !strcmp(jx_type_name(json_object_get(o, "z")), "null") &&
                  !strcmp(jx_type_name(json_object_get(o, "o")), "an object") &&
                  !strcmp(jx_type_name(json_object_get(o, "a")), "an array"),
              "type names");
        json_decref(o);
    }
    /* \u escapes, surrogate pairs, raw UTF-8 and an escaped NUL (kept, with its length). */
    o = parse_ok("{\"u\": \"\\u00e9\\u20AC\\uD83D\\uDE00\\u0041\", \"raw\": \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\", "
                 "\"nul\": \"x\\u0000y\"}");
    if (o) {
        const json_t *f = json_object_get(o, "u");
        CHECK(json_string_length(f) == 10 && memcmp(json_string_value(f), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80" "A", 10) == 0,
              "\\u escapes decode to UTF-8 (len %zu)", json_string_length(f));
        CHECK(json_string_length(json_object_get(o, "raw")) == 9, "raw UTF-8 kept");
        f = json_object_get(o, "nul");
        CHECK(json_string_length(f) == 3 && json_string_value(f)[1] == 0 && json_string_value(f)[2] == 'y',
              "\\u0000 kept with its length");
        json_decref(o);
    }
    o = parse_ok("  \t{}\r ");
    CHECK(o && json_object_size(o) == 0, "empty object");
    json_decref(o);
    /* Whitespace everywhere; a span that is not NUL-terminated. */
    const char *line = "{ \"a\" :\t1 , \"b\":[ ] }garbage";
    char err[256];
    if (jx_parse_object(line, 21, &o, NULL, NULL, 0) == 0) {
        CHECK(json_object_size(o) == 2 && json_number_value(json_object_get(o, "a")) == 1, "span without terminator");
        json_decref(o);
    } else {
        CHECK(0, "span without terminator parses");
    }
    /* Numbers: a 150-digit one; an integer literal past int64 is a double (no
     * overflow error), equal to its exponent form; tiny ones read as 0. */
    char longnum[200] = "{\"x\": 1.";
    memset(longnum + 8, '5', 150);
    strcpy(longnum + 158, "}");
    if ((o = parse_ok(longnum))) {
        CHECK(fabs(json_number_value(json_object_get(o, "x")) - 1.5555555555555556) < 1e-15, "150-digit number");
        json_decref(o);
    }
    if ((o = parse_ok("{\"big\": 100000000000000000000, \"e\": 1e20, \"neg\": -123456789012345678901234567890, "
                      "\"tiny\": 1e-999, \"mz\": -0}"))) {
        CHECK(json_number_value(json_object_get(o, "big")) == 1e20 && json_number_value(json_object_get(o, "e")) == 1e20,
              "10^20 as an integer literal = 1e20");
        CHECK(json_number_value(json_object_get(o, "neg")) == -123456789012345678901234567890.0, "huge negative integer");
        CHECK(json_number_value(json_object_get(o, "tiny")) == 0, "underflow reads as 0");
        CHECK(signbit(json_number_value(json_object_get(o, "mz"))), "-0 keeps its sign");
        json_decref(o);
    }
    /* Deliberate differences from the parser jansson replaced: nesting up to
     * jansson's 2048 levels (it stopped at 64), any number of keys (it stopped
     * at 1024: its duplicate check was quadratic; jansson's is a hash). */
    size_t cap = 8 + 2 * 2100 + 2, k;
    char *deep = malloc(cap);
    for (int levels = 65; levels <= 2100; levels += 2100 - 65) {
        k = (size_t)sprintf(deep, "{\"d\": ");
        for (int i = 0; i < levels; i++) deep[k++] = '[';
        for (int i = 0; i < levels; i++) deep[k++] = ']';
        deep[k++] = '}';
        int rc = jx_parse_object(deep, k, &o, NULL, err, sizeof err);
        if (levels == 65) CHECK(rc == 0, "65 levels of nesting: %s", err);
        else CHECK(rc == CX_EFORMAT && strstr(err, "maximum parsing depth reached"), "2100 levels: %s", err);
        if (rc == 0) json_decref(o);
    }
    free(deep);
    cap = 20 * 2000;
    char *many = malloc(cap);
    k = 0;
    many[k++] = '{';
    for (int i = 0; i < 2000; i++) k += (size_t)sprintf(many + k, "%s\"k%d\": 0", i ? ", " : "", i);
    many[k++] = '}';
    CHECK(jx_parse_object(many, k, &o, NULL, err, sizeof err) == 0 && json_object_size(o) == 2000, "2000 keys: %s", err);
    json_decref(o);
    free(many);
}

/* Every input the replaced parser rejected is still rejected, each with one
 * "column N: " message; the messages of our own checks exactly. */
static void test_json_errors(void) {
    static const struct { const char *s; int col; } bad[] = {
        {"[1]", 1}, {"{\"a\": 1,}", 9}, {"{\"a\": 1 , }", 11}, {"{\"a\" 1}", 6}, {"{\"a\": 1 \"b\": 2}", 11},
        {"{\"a\": tru}", 9}, {"{a: 1}", 2}, {"{\"a\": 1", 7}, {"{\"a\": ", 6}, {"{\"a\": \"abc", 10},
        {"{\"a\": \"abc\\\"}", 13}, {"{\"a\": \"\\x\"}", 9}, {"{\"a\": \"\\u12G4\"}", 12}, {"{\"a\": \"\\u12\"}", 12},
        {"{\"a\": \"\\uD800\"}", 14}, {"{\"a\": \"x\\uD83D\\u0041\"}", 21}, {"{\"a\": \"\\uDE00\"}", 14},
        {"{\"a\": \"x\ty\"}", 8}, {"{\"a\": \"\xff\"}", 7}, {"{\"a\": \"\xc0\xaf\"}", 7}, {"{\"a\": \"\xed\xa0\x80\"}", 7},
        {"{\"a\": \"x\xe2\x82\"}", 8}, {"{\"a\": \"\xf4\x90\x80\x80\"}", 7}, {"{\"a\": 01}", 7}, {"{\"a\": 1.}", 8},
        {"{\"a\": .5}", 7}, {"{\"a\": -}", 7}, {"{\"a\": 1e}", 8}, {"{\"a\": +1}", 7}, {"{\"a\": 1e999}", 11},
        {"{\"a\": -1e999}", 12}, {"{\"a\": 1} x", 10}, {"{\"a\": 1}{}", 9}, {"{\"a\": 1, \"a\": 2}", 12},
        {"{\"o\": {\"x\" 1}}", 12}, {"{\"o\": [1 2]}", 10}, {"{\"o\": [1,]}", 10}, {"{\"o\": {1: 2}}", 8},
        {"{\"o\": [\"\\q\"]}", 10}, {"{\"a\\u0000\": 1}", 10}, {"5", 1}, {"\"s\"", 3}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *o = (json_t *)1;
        char err[256];
        int line = 0, col = 0;
        int rc = jx_parse_object(bad[i].s, strlen(bad[i].s), &o, &line, err, sizeof err);
        CHECK(rc == CX_EFORMAT && o == NULL && line == 1 && sscanf(err, "column %d: ", &col) == 1 && col == bad[i].col &&
                  strlen(strchr(err, ':')) > 3,
              "%s: rc %d line %d: %s (want column %d)", bad[i].s, rc, line, err, bad[i].col);
    }
    /* Our own messages, and jansson's "end of file" said as "end of line" in one line. */
    parse_bad("", 0, 1, "column 1: '[' or '{' expected near end of line");
    parse_bad("[1]", 3, 1, "column 1: expected a JSON object, found an array");
    parse_bad(" \n\t[1]", 6, 2, "column 2: expected a JSON object, found an array");
    parse_bad("{\"a\": 1", 7, 1, "column 7: '}' expected near end of line");
    parse_bad("{\"a\": 1\n", 8, 2, "column 1: '}' expected near end of file");
    parse_bad("{\"a\": 1, \"a\": 2}", 16, 1, "column 12: duplicate object key near '\"a\"'");
    parse_bad("{\"a\":\0 1}", 9, 1, "column 6: a raw NUL byte (JSON text holds none; inside a string write it as \\u0000)");
    parse_bad("{\n\"\xc3\xa9\": \"x\0\"}", 13, 2,
              "column 8: a raw NUL byte (JSON text holds none; inside a string write it as \\u0000)");
    /* A too-small error buffer truncates but stays terminated; no buffer at all is fine. */
    char small[12];
    json_t *o;
    CHECK(jx_parse_object("[", 1, &o, NULL, small, sizeof small) == CX_EFORMAT && strlen(small) == 11, "truncated message");
    CHECK(jx_parse_object("[", 1, &o, NULL, NULL, 0) == CX_EFORMAT && o == NULL, "no message buffer");
}

/* ---- JSON writing ---------------------------------------------------------- */

/* jx_write_string into a malloc'd string. */
static char *write_str(const char *s, size_t n) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(jx_write_string(f, s, n) == 0, "jx_write_string");
    fclose(f);
    return buf;
}

/* Escaping (byte for byte what the committed traces hold), invalid UTF-8
 * handling, round trips, number formatting. */
static void test_json_write(void) {
    const char in[] = "a\"b\\c/\n\t\r\b\f\x01\x1f\x7f \xc3\xa9 \xf0\x9f\x98\x80 \xff\xc3 x";
    char *out = write_str(in, sizeof in - 1);
    const char *want = "\"a\\\"b\\\\c/\\n\\t\\r\\b\\f\\u0001\\u001F\x7f \xc3\xa9 \xf0\x9f\x98\x80 \\u00FF\\u00C3 x\"";
    CHECK(strcmp(out, want) == 0, "escaped\n  got:  %s\n  want: %s", out, want);
    free(out);
    out = write_str("", 0);
    CHECK(strcmp(out, "\"\"") == 0, "empty string: %s", out);
    free(out);
    out = write_str("\xff", 1);
    CHECK(strcmp(out, "\"\\u00FF\"") == 0, "only an invalid byte: %s", out);
    free(out);
    /* Valid UTF-8 (with a NUL) round-trips through the parser exactly. */
    const char rt[] = "line1\nline2 \"quoted\" back\\slash \x00 nul \xe2\x82\xac\xf0\x9f\x98\x80 \x1b[0m";
    out = write_str(rt, sizeof rt - 1);
    size_t n = strlen(out) + 8;
    char *obj = malloc(n + 1);
    snprintf(obj, n + 1, "{\"k\": %s}", out);
    json_t *o = parse_ok(obj);
    if (o) {
        const json_t *f = json_object_get(o, "k");
        CHECK(json_string_length(f) == sizeof rt - 1 && memcmp(json_string_value(f), rt, sizeof rt - 1) == 0,
              "write -> parse round trip");
        json_decref(o);
    }
    free(obj);
    free(out);
    /* Invalid UTF-8 still gives valid JSON, each bad byte read as Latin-1. */
    out = write_str("\x80\xfe\xed\xa0\x80", 5);
    n = strlen(out) + 8;
    obj = malloc(n + 1);
    snprintf(obj, n + 1, "{\"k\": %s}", out);
    if ((o = parse_ok(obj))) {
        CHECK(!strcmp(json_string_value(json_object_get(o, "k")), "\xc2\x80\xc3\xbe\xc3\xad\xc2\xa0\xc2\x80"), "Latin-1 reading");
        json_decref(o);
    }
    free(obj);
    free(out);
    /* Numbers: the shortest text that reads back exactly. */
    static const struct { double x; const char *s; } nums[] = {
        {0.1, "0.1"}, {40, "40"}, {3, "3"}, {-0.5, "-0.5"}, {1e-7, "1e-07"}, {1e21, "1e+21"},
        {123456.789, "123456.789"}, {9007199254740992.0, "9007199254740992"}, {1.1, "1.1"}, {0, "0"},
        {2.0 / 3.0, "0.6666666666666666"}};
    char buf[40];
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        jx_format_number(buf, sizeof buf, nums[i].x);
        CHECK(strcmp(buf, nums[i].s) == 0, "format %.17g: got %s want %s", nums[i].x, buf, nums[i].s);
    }
    jx_format_number(buf, sizeof buf, NAN);
    CHECK(strcmp(buf, "null") == 0, "NaN -> null");
    jx_format_number(buf, sizeof buf, -INFINITY);
    CHECK(strcmp(buf, "null") == 0, "-inf -> null");
}

TEST_MAIN({
    test_json_values();
    test_json_errors();
    test_json_write();
})
