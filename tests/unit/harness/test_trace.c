/*
 * test_trace.c - the cortex-bench workload modules: JSON reading (jansson with
 * cortex-bench's settings, jsonx.c) and writing,
 * SHA-256, the workload loader's validation messages, summary statistics, and
 * the trace generator's reproducibility and statistics.
 *
 * Statistical checks run at fixed seeds, so they are deterministic; their
 * thresholds are still the textbook ones (a test that passes only by luck of
 * the seed would fail at the stated significance level about that often):
 *   - Zipf/uniform adapter draws: Pearson chi-square with K - 1 = 7 degrees of
 *     freedom against 24.322, the 0.999 quantile of chi2(7) (p = 0.001);
 *   - Poisson arrivals: Kolmogorov-Smirnov distance of the gaps to Exp(R)
 *     against 1.63 / sqrt(n) (alpha = 0.01, large-n asymptotic);
 *   - means: within 4 standard errors (sigma / sqrt(n), CLT), a 6e-5 chance
 *     of a false alarm per check.
 * Run from the repository root (tests/run.sh does): it reads prompts/.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cortex.h"
#include "jsonx.h"
#include "sha256.h"
#include "stats.h"
#include "testing.h"
#include "trace_gen.h"
#include "workload.h"

/* ---- scratch directory ----------------------------------------------------- */

static char g_dir[64];
static char g_files[128][128];
static int g_n_files;

/* A path in the scratch directory, remembered for cleanup. */
static const char *tmp_path(const char *name) {
    if (!g_dir[0]) {
        snprintf(g_dir, sizeof g_dir, "/tmp/cortex-test-trace-XXXXXX");
        if (!mkdtemp(g_dir)) {
            fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
            exit(2);
        }
    }
    if (g_n_files == 128) {
        fprintf(stderr, "test_trace: too many scratch files\n");
        exit(2);
    }
    char *p = g_files[g_n_files++];
    snprintf(p, 128, "%s/%s", g_dir, name);
    return p;
}

/* Write bytes to a scratch file and return its path. */
static const char *write_tmp(const char *name, const char *data, size_t n) {
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    return path;
}

/* Read a whole file (malloc'd, NUL-terminated); NULL if unreadable. */
static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) buf = realloc(buf, (cap *= 2) + 1);
    }
    fclose(f);
    if (buf) buf[len] = 0;
    *n = len;
    return buf;
}

/* Remove every scratch file (and any .tmp, sidecar and sidecar .tmp twin)
 * and the directory. */
static void cleanup(void) {
    static const char *const twins[] = {".tmp", WL_META_SUFFIX, WL_META_SUFFIX ".tmp"};
    for (int i = 0; i < g_n_files; i++) {
        remove(g_files[i]);
        for (int k = 0; k < 3; k++) {
            char tmp[160];
            snprintf(tmp, sizeof tmp, "%.127s%s", g_files[i], twins[k]);
            remove(tmp);
        }
    }
    if (g_dir[0]) rmdir(g_dir);
}

/* ---- SHA-256 --------------------------------------------------------------- */

static void test_sha256(void) {
    char hex[65];
    sha256_hex("", 0, hex);
    CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0, "sha256('') = %s", hex);
    sha256_hex("abc", 3, hex);
    CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0, "sha256(abc) = %s", hex);
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_hex(m448, strlen(m448), hex);
    CHECK(strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0, "sha256(448 bits) = %s", hex);
    const char *million_a = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    sha256_hex(a, 1000000, hex);
    CHECK(strcmp(hex, million_a) == 0, "sha256(10^6 'a') = %s", hex);
    /* Fed in uneven pieces (crossing block boundaries every way). */
    sha256_ctx c;
    uint8_t d[32];
    sha256_init(&c);
    for (size_t off = 0, step = 1; off < 1000000; off += step, step = step % 131 + 1)
        sha256_update(&c, a + off, off + step <= 1000000 ? step : 1000000 - off);
    sha256_final(&c, d);
    char hex2[65];
    for (int i = 0; i < 32; i++) snprintf(hex2 + 2 * i, 3, "%02x", d[i]);
    CHECK(strcmp(hex2, million_a) == 0, "incremental sha256 = %s", hex2);
    /* From a file, and from a file longer than the 1 MiB read chunk. */
    char err[256];
    const char *path = write_tmp("million_a", a, 1000000);
    CHECK(sha256_hex_file(path, hex, err, sizeof err) == 0 && strcmp(hex, million_a) == 0, "file: %s %s", hex, err);
    size_t big_n = 3 * (1 << 20) + 17;
    char *big = malloc(big_n);
    for (size_t i = 0; i < big_n; i++) big[i] = (char)(i * 2654435761u >> 13);
    path = write_tmp("big.bin", big, big_n);
    sha256_hex(big, big_n, hex2);
    CHECK(sha256_hex_file(path, hex, err, sizeof err) == 0 && strcmp(hex, hex2) == 0, "3 MiB file streamed = one shot");
    int rc = sha256_hex_file("/nonexistent/x.bin", hex, err, sizeof err);
    CHECK(rc == CX_EIO && strstr(err, "/nonexistent/x.bin: cannot open") != NULL, "missing file: %s", err);
    free(a);
    free(big);
}

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

/* ---- workload loader ------------------------------------------------------- */

/* Load `content` from a scratch file; expect "PATH:LINE: problem" exactly. */
static void wl_bad(const char *name, const char *content, int line, const char *problem) {
    const char *path = write_tmp(name, content, strlen(content));
    wl_workload w;
    char err[512], want[512];
    int rc = wl_load(path, &w, err, sizeof err);
    if (line) snprintf(want, sizeof want, "%s:%d: %s", path, line, problem);
    else snprintf(want, sizeof want, "%s: %s", path, problem);
    CHECK(rc == CX_EFORMAT && w.n == 0 && w.req == NULL, "%s should fail (rc %d)", name, rc);
    CHECK(strcmp(err, want) == 0, "%s\n  got:  %s\n  want: %s", name, err, want);
}

/* Every validation rule reports FILE:LINE and the problem exactly. */
static void test_workload_errors(void) {
    const char *ok = "{\"id\": \"p1\", \"text\": \"hi\", \"max_tokens\": 4}\n";
    char buf[1024];
    snprintf(buf, sizeof buf, "# header\n%s\n   \n\t# indented comment\n%s%s",
             ok, "{\"id\": \"p2\", \"text\": \"hi\", \"max_tokens\": 4}\n",
             "{\"id\": \"p3\", \"text\": \"x\", \"max_tokens\": 0}\n");
    wl_bad("zero.jsonl", buf, 7, "\"max_tokens\" must be a positive integer (got 0)");
    wl_bad("frac.jsonl", "{\"id\": \"a\", \"text\": \"x\", \"max_tokens\": 1.5}", 1,
           "\"max_tokens\" must be a positive integer (got 1.5)");
    wl_bad("neg.jsonl", "{\"id\": \"a\", \"text\": \"x\", \"max_tokens\": -3}", 1,
           "\"max_tokens\" must be a positive integer (got -3)");
    wl_bad("str.jsonl", "{\"id\": \"a\", \"text\": \"x\", \"max_tokens\": \"64\"}", 1,
           "\"max_tokens\" must be a positive integer, not a string");
    wl_bad("big.jsonl", "{\"id\": \"a\", \"text\": \"x\", \"max_tokens\": 1000001}", 1,
           "\"max_tokens\" 1000001 is too large (at most 1000000)");
    wl_bad("huge.jsonl", "{\"id\": \"a\", \"text\": \"x\", \"max_tokens\": 1e20}", 1,
           "\"max_tokens\" 1e+20 is too large (at most 1000000)");
    wl_bad("tenth.jsonl", "{\"id\": \"a\", \"text\": \"x\", \"max_tokens\": 0.1}", 1,
           "\"max_tokens\" must be a positive integer (got 0.1)");
    wl_bad("nomax.jsonl", "{\"id\": \"a\", \"text\": \"x\"}", 1, "missing required key \"max_tokens\"");
    snprintf(buf, sizeof buf, "%s{\"id\": \"b\", \"max_tokens\": 3}\n", ok);
    wl_bad("notext.jsonl", buf, 2, "missing required key \"text\"");
    wl_bad("emptytext.jsonl", "{\"id\": \"a\", \"text\": \"\", \"max_tokens\": 3}", 1, "\"text\" must not be empty");
    wl_bad("numtext.jsonl", "{\"id\": \"a\", \"text\": 5, \"max_tokens\": 3}", 1, "\"text\" must be a string, not a number");
    wl_bad("nultext.jsonl", "{\"id\": \"a\", \"text\": \"a\\u0000b\", \"max_tokens\": 3}", 1,
           "\"text\" must not contain \\u0000");
    wl_bad("noid.jsonl", "{\"text\": \"x\", \"max_tokens\": 3}", 1, "missing required key \"id\"");
    wl_bad("boolid.jsonl", "{\"id\": true, \"text\": \"x\", \"max_tokens\": 3}", 1,
           "\"id\" must be a string or an integer, not a boolean");
    wl_bad("emptyid.jsonl", "{\"id\": \"\", \"text\": \"x\", \"max_tokens\": 3}", 1, "\"id\" must not be empty");
    wl_bad("cat.jsonl", "{\"id\": \"a\", \"text\": \"x\", \"max_tokens\": 3, \"category\": 7}", 1,
           "\"category\" must be a string, not a number");
    snprintf(buf, sizeof buf, "%s{\"id\": \"p0\", \"text\": \"x\", \"max_tokens\": 3}\n%s", ok, ok);
    wl_bad("dup.jsonl", buf, 3, "duplicate id \"p1\" (first used on line 1)");
    wl_bad("dupint.jsonl", "{\"id\": 7, \"text\": \"x\", \"max_tokens\": 3}\n{\"id\": \"7\", \"text\": \"y\", \"max_tokens\": 3}\n",
           2, "duplicate id \"7\" (first used on line 1)");
    snprintf(buf, sizeof buf, "%s{\"id\": \"b\", \"text\": \"x\", \"max_tokens\": 3, \"arrival_s\": 1}\n", ok);
    wl_bad("mixed.jsonl", buf, 2,
           "\"arrival_s\" in a prompt set (the first request, line 1, has none; a trace needs it on every line)");
    snprintf(buf, sizeof buf, "{\"id\": \"a\", \"text\": \"x\", \"max_tokens\": 3\n");
    wl_bad("json.jsonl", buf, 1, "column 40: '}' expected near end of line");
    /* JSON-level rejections name the file's line and the column in it. */
    wl_bad("dupkey.jsonl", "{\"id\": \"a\", \"text\": \"x\", \"max_tokens\": 3}\n{\"id\": \"b\", \"text\": \"x\", \"max_tokens\": 3, \"max_tokens\": 4}", 2,
           "column 54: duplicate object key near '\"max_tokens\"'");
    wl_bad("nulkey.jsonl", "{\"id\": \"a\", \"text\": \"x\", \"max_tokens\": 3, \"x\\u0000\": 1}", 1,
           "column 51: NUL byte in object key not supported near '\"x\\u0000\"'");
    wl_bad("hugenum.jsonl", "{\"id\": \"a\", \"text\": \"x\", \"max_tokens\": 1e400}", 1,
           "column 44: real number overflow near '1e400'");
    wl_bad("array.jsonl", "  [{\"id\": \"a\", \"text\": \"x\", \"max_tokens\": 3}]", 1,
           "column 3: expected a JSON object, found an array");
    wl_bad("bigint.jsonl", "{\"id\": \"a\", \"text\": \"x\", \"max_tokens\": 100000000000000000000}", 1,
           "\"max_tokens\" 1e+20 is too large (at most 1000000)");
    /* Integer ids: integral values within 2^53, written as decimal. */
    wl_bad("fracid.jsonl", "{\"id\": 1.5, \"text\": \"x\", \"max_tokens\": 3}", 1, "\"id\" must be a string or an integer");
    wl_bad("hugeid.jsonl", "{\"id\": 1e300, \"text\": \"x\", \"max_tokens\": 3}", 1, "\"id\" must be a string or an integer");
    wl_bad("empty.jsonl", "", 0, "no requests (only blank lines and '#' comments)");
    wl_bad("comments.jsonl", "# only\n\n  # comments\n", 0, "no requests (only blank lines and '#' comments)");

    /* Traces. */
#define TR(id, t, extra) "{\"id\": \"" id "\", \"arrival_s\": " t ", \"adapter\": 1, \"prompt_len\": 8, \"max_tokens\": 4, \"text\": \"x\"" extra "}\n"
    wl_bad("order.jsonl", TR("a", "0.5", "") TR("b", "1.25", "") TR("c", "1.0", ""), 3,
           "\"arrival_s\" 1 is earlier than the previous request's 1.25 (line 2): a trace must be sorted by arrival");
    wl_bad("negt.jsonl", TR("a", "-0.5", ""), 1, "\"arrival_s\" must not be negative (got -0.5)");
    wl_bad("strt.jsonl", TR("a", "\"0.5\"", ""), 1, "\"arrival_s\" must be a number of seconds, not a string");
    wl_bad("noarr.jsonl", TR("a", "0", "") "{\"id\": \"b\", \"text\": \"x\", \"max_tokens\": 3}\n", 2,
           "missing required key \"arrival_s\" (this is a trace: the first request, line 1, has it)");
    wl_bad("noadapter.jsonl", "{\"id\": \"a\", \"arrival_s\": 0, \"prompt_len\": 8, \"max_tokens\": 4, \"text\": \"x\"}", 1,
           "missing required key \"adapter\"");
    wl_bad("negadapter.jsonl",
           "{\"id\": \"a\", \"arrival_s\": 0, \"adapter\": -1, \"prompt_len\": 8, \"max_tokens\": 4, \"text\": \"x\"}", 1,
           "\"adapter\" must be a non-negative integer (got -1)");
    wl_bad("plen.jsonl", "{\"id\": \"a\", \"arrival_s\": 0, \"adapter\": 0, \"prompt_len\": 0, \"max_tokens\": 4, \"text\": \"x\"}",
           1, "\"prompt_len\" must be a positive integer (got 0)");
    wl_bad("tdup.jsonl", TR("a", "0", "") TR("a", "0", ""), 2, "duplicate id \"a\" (first used on line 1)");

    /* Unreadable files. */
    wl_workload w;
    char err[512];
    int rc = wl_load("/nonexistent/w.jsonl", &w, err, sizeof err);
    CHECK(rc == CX_EIO && strcmp(err, "/nonexistent/w.jsonl: cannot open: No such file or directory") == 0, "%s", err);
    rc = wl_load(g_dir, &w, err, sizeof err);
    CHECK(rc == CX_EIO && strstr(err, ": read error: Is a directory"), "directory: %s", err);
}

/* Accepted variations (BOM, CRLF, comments, unknown keys), hashing, memory API. */
static void test_workload_ok(void) {
    /* BOM, CRLF, comments, unknown keys, integer and string ids, null category. */
    const char *text =
        "\xEF\xBB\xBF# prompts\r\n"
        "{\"id\": \"a\", \"text\": \"Hello \\u00e9\", \"max_tokens\": 1, \"category\": \"qa\", \"extra\": [1, {\"x\": 2}]}\r\n"
        "\r\n"
        "{\"id\": 12, \"text\": \"b\", \"max_tokens\": 1000000, \"category\": null}";
    const char *path = write_tmp("ok.jsonl", text, strlen(text));
    wl_workload w;
    char err[512];
    int rc = wl_load(path, &w, err, sizeof err);
    CHECK(rc == 0, "load ok.jsonl: %s", err);
    if (rc == 0) {
        CHECK(w.kind == WL_PROMPTS && w.n == 2, "2 prompts (kind %s, n %zu)", wl_kind_name(w.kind), w.n);
        CHECK(strcmp(w.req[0].id, "a") == 0 && strcmp(w.req[0].text, "Hello \xc3\xa9") == 0 && w.req[0].text_len == 8 &&
                  strcmp(w.req[0].category, "qa") == 0 && w.req[0].line == 2 && w.req[0].adapter == -1,
              "first request");
        CHECK(strcmp(w.req[1].id, "12") == 0 && w.req[1].max_tokens == 1000000 && w.req[1].category == NULL &&
                  w.req[1].line == 4,
              "second request");
        char hex[65];
        sha256_hex_file(path, hex, err, sizeof err);
        CHECK(strcmp(w.sha256, hex) == 0, "workload hash is the file's: %s vs %s", w.sha256, hex);
        CHECK(strcmp(w.source, path) == 0, "source");
        wl_free(&w);
        CHECK(w.n == 0 && w.req == NULL, "freed");
    }
    /* In memory, with a name for messages. */
    const char *tr = TR("r1", "0", ", \"future\": true") TR("r2", "0", "") TR("r3", "2.5", "");
    rc = wl_parse_buffer(tr, strlen(tr), "mem", &w, err, sizeof err);
    CHECK(rc == 0 && w.kind == WL_TRACE && w.n == 3 && w.req[2].arrival_s == 2.5 && w.req[0].adapter == 1 &&
              w.req[0].prompt_len == 8 && strcmp(w.source, "mem") == 0,
          "trace from memory: %s", err);
    wl_free(&w);
    rc = wl_parse_buffer("{\"id\": 1}", 9, "mem", &w, err, sizeof err);
    CHECK(rc == CX_EFORMAT && strcmp(err, "mem:1: missing required key \"text\"") == 0, "%s", err);
    static const char rawnul[] = "{\"id\": \"a\", \"text\": \"x\0\", \"max_tokens\": 3}";
    rc = wl_parse_buffer(rawnul, sizeof rawnul - 1, "mem", &w, err, sizeof err);
    CHECK(rc == CX_EFORMAT && w.n == 0 &&
              !strcmp(err, "mem:1: column 23: a raw NUL byte (JSON text holds none; inside a string write it as \\u0000)"),
          "raw NUL: %s", err);
    const char *ids = "{\"id\": 64.0, \"text\": \"a\", \"max_tokens\": 1}\n{\"id\": -9007199254740992, \"text\": \"b\", "
                      "\"max_tokens\": 1}\n{\"id\": 1e3, \"text\": \"c\", \"max_tokens\": 1}\n";
    rc = wl_parse_buffer(ids, strlen(ids), "mem", &w, err, sizeof err);
    CHECK(rc == 0 && w.n == 3 && !strcmp(w.req[0].id, "64") && !strcmp(w.req[1].id, "-9007199254740992") &&
              !strcmp(w.req[2].id, "1000"),
          "integral ids as decimal: %s", err);
    if (rc == 0) wl_free(&w);
    /* Nesting deeper than 64 levels in an unknown key loads (jansson's limit is 2048). */
    char deep[512];
    size_t dk = (size_t)sprintf(deep, "{\"id\": \"d\", \"text\": \"x\", \"max_tokens\": 1, \"extra\": ");
    for (int i = 0; i < 100; i++) deep[dk++] = '[';
    for (int i = 0; i < 100; i++) deep[dk++] = ']';
    deep[dk++] = '}';
    rc = wl_parse_buffer(deep, dk, "mem", &w, err, sizeof err);
    CHECK(rc == 0 && w.n == 1, "100 levels of nesting in an unknown key: %s", err);
    if (rc == 0) wl_free(&w);
    /* Many requests: the id set grows. */
    size_t cap = 5000 * 64, k = 0;
    char *big = malloc(cap);
    for (int i = 0; i < 5000; i++) k += (size_t)snprintf(big + k, cap - k, "{\"id\": %d, \"text\": \"t\", \"max_tokens\": 1}\n", i);
    rc = wl_parse_buffer(big, k, "many", &w, err, sizeof err);
    CHECK(rc == 0 && w.n == 5000, "5000 requests: %s", err);
    wl_free(&w);
    k += (size_t)snprintf(big + k, cap - k, "{\"id\": 4321, \"text\": \"t\", \"max_tokens\": 1}\n");
    rc = wl_parse_buffer(big, k, "many", &w, err, sizeof err);
    CHECK(rc == CX_EFORMAT && strcmp(err, "many:5001: duplicate id \"4321\" (first used on line 4322)") == 0, "%s", err);
    free(big);
#undef TR
}

/* The committed standard prompt set loads and meets its description. */
static void test_standard_prompts(void) {
    wl_workload w;
    char err[512];
    int rc = wl_load("prompts/standard.jsonl", &w, err, sizeof err);
    CHECK(rc == 0, "prompts/standard.jsonl: %s (run from the repository root)", err);
    if (rc) return;
    CHECK(w.kind == WL_PROMPTS && w.n == 10, "10 prompts (got %zu)", w.n);
    int total = 0;
    size_t shortest = (size_t)-1, longest = 0;
    for (size_t i = 0; i < w.n; i++) {
        char id[8];
        snprintf(id, sizeof id, "p%02d", (int)(i + 1) % 100);
        CHECK(strcmp(w.req[i].id, id) == 0, "id %s", w.req[i].id);
        CHECK(w.req[i].category && w.req[i].category[0], "%s has a category", id);
        CHECK(w.req[i].max_tokens >= 32 && w.req[i].max_tokens <= 256, "%s max_tokens %d", id, w.req[i].max_tokens);
        total += w.req[i].max_tokens;
        if (w.req[i].text_len < shortest) shortest = w.req[i].text_len;
        if (w.req[i].text_len > longest) longest = w.req[i].text_len;
    }
    CHECK(total >= 900 && total <= 1100, "about 1000 generated tokens in all (got %d)", total);
    CHECK(shortest < 100 && longest > 3500, "lengths from a few tokens to ~1000 (%zu..%zu bytes)", shortest, longest);
    wl_free(&w);
}

/* ---- statistics ------------------------------------------------------------ */

static void test_stats(void) {
    const double x4[] = {1, 2, 3, 4};
    CHECK_NEAR(stats_percentile(x4, 4, 50), 2.5, 1e-12, "p50 [1,2,3,4]");
    CHECK_NEAR(stats_percentile(x4, 4, 90), 3.7, 1e-12, "p90 [1,2,3,4]");
    CHECK_NEAR(stats_percentile(x4, 4, 99), 3.97, 1e-12, "p99 [1,2,3,4]");
    CHECK(stats_percentile(x4, 4, 0) == 1 && stats_percentile(x4, 4, 100) == 4, "p0, p100");
    CHECK_NEAR(stats_percentile(x4, 4, 25), 1.75, 1e-12, "p25 [1,2,3,4]");
    const double one[] = {7.5};
    CHECK(stats_percentile(one, 1, 0) == 7.5 && stats_percentile(one, 1, 99) == 7.5 && stats_percentile(one, 1, 100) == 7.5,
          "single element");
    /* numpy.percentile([10, 20, 30, 40, 50], [90, 99]) = 46, 49.6 */
    const double x5[] = {10, 20, 30, 40, 50};
    CHECK_NEAR(stats_percentile(x5, 5, 90), 46.0, 1e-12, "p90 of 5");
    CHECK_NEAR(stats_percentile(x5, 5, 99), 49.6, 1e-12, "p99 of 5");

    stats_summary s;
    const double unsorted[] = {4, 1, 3, 2};
    CHECK(stats_summarize(unsorted, 4, &s) == 0, "summarize");
    CHECK(s.n == 4 && s.min == 1 && s.max == 4 && s.mean == 2.5 && s.median == 2.5 && s.p50 == 2.5, "basic fields");
    CHECK_NEAR(s.p90, 3.7, 1e-12, "summary p90");
    CHECK_NEAR(s.p99, 3.97, 1e-12, "summary p99");
    CHECK_NEAR(s.stddev, 1.2909944487358056, 1e-12, "sample stddev of 1..4 (sqrt(5/3))");
    CHECK(unsorted[0] == 4 && unsorted[1] == 1, "input not modified");
    CHECK(stats_summarize(one, 1, &s) == 0 && s.stddev == 0 && s.p99 == 7.5 && s.mean == 7.5, "one value");
    CHECK(stats_summarize(x4, 0, &s) == CX_EINVAL && s.n == 0, "empty is an error");
    const double withnan[] = {1, NAN};
    CHECK(stats_summarize(withnan, 2, &s) == CX_EINVAL, "NaN is an error");
    /* Large offset: two-pass variance stays exact. */
    const double off[] = {1e9 + 1, 1e9 + 2, 1e9 + 3, 1e9 + 4};
    CHECK(stats_summarize(off, 4, &s) == 0, "offset summarize");
    CHECK_NEAR(s.stddev, 1.2909944487358056, 1e-9, "stddev with a 1e9 offset");
}

/* ---- RNG and distributions ------------------------------------------------- */

static void test_rng(void) {
    /* Own log/exp agree with libm to ~1 ulp over a wide range. */
    double worst_log = 0, worst_exp = 0;
    for (double x = 1e-300; x < 1e300; x *= 1.37) {
        double a = rng_log(x), b = log(x);
        double rel = fabs(a - b) / (fabs(b) > 1e-300 ? fabs(b) : 1);
        if (rel > worst_log) worst_log = rel;
    }
    for (double x = 0.5; x < 2; x += 0.001) {
        double a = rng_log(x), b = log(x);
        double abs_err = fabs(a - b);
        if (abs_err > worst_log) worst_log = abs_err;
    }
    for (double x = -700; x < 700; x += 0.0137) {
        double a = rng_exp(x), b = exp(x);
        double rel = fabs(a - b) / b;
        if (rel > worst_exp) worst_exp = rel;
    }
    CHECK(worst_log < 1e-15, "rng_log vs log: worst %.3g", worst_log);
    CHECK(worst_exp < 1e-15, "rng_exp vs exp: worst relative %.3g", worst_exp);
    CHECK(rng_log(1) == 0 && rng_exp(0) == 1, "log 1 = 0, exp 0 = 1 exactly");
    CHECK(rng_log(0) == -INFINITY && isnan(rng_log(-1)) && rng_exp(1000) == INFINITY && rng_exp(-1000) == 0, "edges");

    /* Same seed and stream -> same numbers; other stream -> others. */
    rng a, b, c;
    rng_seed(&a, 42, 1);
    rng_seed(&b, 42, 1);
    rng_seed(&c, 42, 2);
    int same = 1, diff = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = rng_next(&a), y = rng_next(&b), z = rng_next(&c);
        same &= x == y;
        diff += x != z;
    }
    CHECK(same && diff == 100, "streams");
    /* Uniform in [0, 1) with mean 1/2 (sd 1/sqrt(12 n)); rng_below in range and fair. */
    enum { N = 100000 };
    double sum = 0, lo = 1, hi = 0;
    int counts[7] = {0};
    for (int i = 0; i < N; i++) {
        double u = rng_uniform(&a);
        sum += u;
        if (u < lo) lo = u;
        if (u > hi) hi = u;
        counts[rng_below(&a, 7)]++;
    }
    CHECK(lo >= 0 && hi < 1, "uniform range [%g, %g]", lo, hi);
    CHECK_NEAR(sum / N, 0.5, 4 / sqrt(12.0 * N), "uniform mean");
    double chi2 = 0;
    for (int k = 0; k < 7; k++) chi2 += (counts[k] - N / 7.0) * (counts[k] - N / 7.0) / (N / 7.0);
    CHECK(chi2 < 22.458, "rng_below(7) chi-square %.2f < 22.458 (chi2(6), p = 0.001)", chi2);
    /* Standard normal: mean 0 (se 1/sqrt(n)), variance 1 (se sqrt(2/n)). */
    double s1 = 0, s2 = 0;
    for (int i = 0; i < N; i++) {
        double z = rng_normal(&a);
        s1 += z;
        s2 += z * z;
    }
    CHECK_NEAR(s1 / N, 0, 4 / sqrt((double)N), "normal mean");
    CHECK_NEAR(s2 / N, 1, 4 * sqrt(2.0 / N), "normal variance");
}

/* Pearson chi-square of counts[0..k) against n * p[0..k). */
static double chi_square(const int *counts, const double *p, int k, int n) {
    double chi2 = 0;
    for (int i = 0; i < k; i++) {
        double e = n * p[i];
        chi2 += (counts[i] - e) * (counts[i] - e) / e;
    }
    return chi2;
}

/* Zipf table against theory and chi-square goodness of fit; S = 0 uniform. */
static void test_zipf(void) {
    enum { K = 8, DRAWS = 20000 };
    /* 24.322 = chi2.ppf(0.999, df = 7): the p = 0.001 critical value for K - 1 = 7 degrees of freedom. */
    const double CRIT_7 = 24.322;
    double theory[K], norm = 0;
    for (int i = 0; i < K; i++) norm += pow(i + 1, -1.1);
    for (int i = 0; i < K; i++) theory[i] = pow(i + 1, -1.1) / norm;
    trace_zipf z;
    char err[256];
    CHECK(trace_zipf_init(&z, K, 1.1, err, sizeof err) == 0, "zipf init: %s", err);
    for (int i = 0; i < K; i++) CHECK_NEAR(trace_zipf_prob(&z, i + 1), theory[i], 1e-14, "zipf table P(k)");
    rng r;
    rng_seed(&r, 1, 2);
    int counts[K] = {0};
    for (int i = 0; i < DRAWS; i++) {
        int v = trace_zipf_draw(&z, &r);
        CHECK(v >= 1 && v <= K, "zipf draw %d in 1..8", v);
        if (v >= 1 && v <= K) counts[v - 1]++;
    }
    double chi2 = chi_square(counts, theory, K, DRAWS);
    printf("zipf(1.1, K=8): chi-square %.3f (critical %.3f)\n", chi2, CRIT_7);
    CHECK(chi2 < CRIT_7, "Zipf(1.1) chi-square %.3f < %.3f", chi2, CRIT_7);
    CHECK(counts[0] > counts[1] && counts[1] > counts[K - 1], "skewed: %d > %d > %d", counts[0], counts[1], counts[K - 1]);
    trace_zipf_free(&z);

    /* S = 0: exactly uniform table, and uniform draws. */
    CHECK(trace_zipf_init(&z, K, 0, err, sizeof err) == 0, "zipf S=0");
    double uni[K];
    for (int i = 0; i < K; i++) {
        uni[i] = 1.0 / K;
        CHECK(trace_zipf_prob(&z, i + 1) == 0.125, "S=0 P(%d) = %.17g", i + 1, trace_zipf_prob(&z, i + 1));
    }
    memset(counts, 0, sizeof counts);
    for (int i = 0; i < DRAWS; i++) counts[trace_zipf_draw(&z, &r) - 1]++;
    chi2 = chi_square(counts, uni, K, DRAWS);
    printf("zipf(0, K=8): chi-square %.3f (critical %.3f)\n", chi2, CRIT_7);
    CHECK(chi2 < CRIT_7, "S=0 uniform chi-square %.3f < %.3f", chi2, CRIT_7);
    trace_zipf_free(&z);

    /* One value; bad parameters. */
    CHECK(trace_zipf_init(&z, 1, 2.0, err, sizeof err) == 0 && trace_zipf_draw(&z, &r) == 1, "K = 1");
    trace_zipf_free(&z);
    CHECK(trace_zipf_init(&z, 0, 1.0, err, sizeof err) == CX_EINVAL, "K = 0 rejected");
    CHECK(trace_zipf_init(&z, 4, -1.0, err, sizeof err) == CX_EINVAL, "S < 0 rejected");
    CHECK(trace_zipf_init(&z, 4, NAN, err, sizeof err) == CX_EINVAL, "S NaN rejected");
}

/* qsort order for doubles. */
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Poisson arrivals: first after 0, monotone, mean gap 1/R, KS vs Exp(R). */
static void test_arrivals(void) {
    enum { N = 20000 };
    const double R = 4.0;
    trace_params p = {0};
    char err[256];
    p.requests = N;
    p.rate = R;
    p.zipf_s = 1.1;
    p.adapters = 8;
    p.seed = 7;
    CHECK(trace_len_parse("fixed:1", "--prompt-len", &p.prompt_len, err, sizeof err) == 0, "%s", err);
    CHECK(trace_len_parse("fixed:1", "--gen-len", &p.gen_len, err, sizeof err) == 0, "%s", err);
    trace_gen g;
    if (trace_gen_init(&g, &p, err, sizeof err) != 0) {
        CHECK(0, "trace_gen_init: %s", err);
        return;
    }
    double *gap = malloc(N * sizeof *gap);
    trace_request r;
    int64_t prev = 0;
    int n = 0, monotone = 1, first_positive = 0;
    while (trace_gen_next(&g, &r) == 1) {
        if (n == 0) first_positive = r.arrival_us > 0;
        monotone &= r.arrival_us >= prev;
        gap[n++] = (double)(r.arrival_us - prev) / 1e6;
        prev = r.arrival_us;
    }
    trace_gen_free(&g);
    CHECK(n == N && monotone && first_positive, "N=%d arrivals, non-decreasing, first after 0", n);
    /* Mean gap 1/R, standard error (1/R)/sqrt(N) (exponential: sd = mean). */
    double mean = 0;
    for (int i = 0; i < N; i++) mean += gap[i];
    mean /= N;
    CHECK_NEAR(mean, 1 / R, 4 / (R * sqrt((double)N)), "mean gap = 1/R (4 standard errors)");
    /* KS distance to Exp(R). */
    qsort(gap, N, sizeof *gap, cmp_d);
    double d = 0;
    for (int i = 0; i < N; i++) {
        double F = 1 - exp(-R * gap[i]);
        double d1 = F - (double)i / N, d2 = (double)(i + 1) / N - F;
        if (d1 > d) d = d1;
        if (d2 > d) d = d2;
    }
    printf("arrivals (n=%d, R=%g): mean gap %.5f s (1/R = %.5f), KS D_n %.5f (critical %.5f)\n", N, R, mean, 1 / R, d,
           1.63 / sqrt((double)N));
    CHECK(d < 1.63 / sqrt((double)N), "KS D_n = %.5f < 1.63/sqrt(n) = %.5f (alpha 0.01)", d, 1.63 / sqrt((double)N));
    free(gap);
}

/* Draw n lengths from spec; check bounds [lo, hi] and the mean and sd. */
static void check_len(const char *spec, int lo, int hi, double mean, double sd) {
    enum { N = 20000 };
    trace_len d;
    char err[256];
    if (trace_len_parse(spec, "--gen-len", &d, err, sizeof err) != 0) {
        CHECK(0, "parse %s: %s", spec, err);
        return;
    }
    rng r;
    rng_seed(&r, 99, 3);
    double s1 = 0, s2 = 0;
    int mn = 1 << 30, mx = -1;
    for (int i = 0; i < N; i++) {
        int v = trace_len_draw(&d, &r);
        s1 += v;
        s2 += (double)v * v;
        if (v < mn) mn = v;
        if (v > mx) mx = v;
    }
    double m = s1 / N, var = (s2 - s1 * s1 / N) / (N - 1);
    CHECK(mn >= lo && mx <= hi, "%s: values in [%d, %d] (saw %d..%d)", spec, lo, hi, mn, mx);
    if (sd == 0) {
        CHECK(mn == lo && mx == hi, "%s: constant", spec);
        return;
    }
    CHECK(fabs(m - mean) <= 4 * sd / sqrt((double)N), "%s: mean %.3f vs %.3f (4 se = %.3f)", spec, m, mean,
          4 * sd / sqrt((double)N));
    /* sd of the sample sd is about sd / sqrt(2N) for near-normal shapes; allow 6 se. */
    CHECK(fabs(sqrt(var) - sd) <= 6 * sd / sqrt(2.0 * N) + 0.05 * sd * (d.kind == TRACE_LEN_LOGNORMAL),
          "%s: sd %.3f vs %.3f", spec, sqrt(var), sd);
}

/* Each length distribution: bounds, mean and sd within CLT tolerances, clamps. */
static void test_lengths(void) {
    check_len("fixed:7", 7, 7, 7, 0);
    /* Discrete uniform on A..B: mean (A+B)/2, variance ((B-A+1)^2 - 1)/12. */
    check_len("uniform:16,96", 16, 96, 56, sqrt((81.0 * 81 - 1) / 12));
    check_len("uniform:8,32", 8, 32, 20, sqrt((25.0 * 25 - 1) / 12));
    /* Rounding to the nearest integer adds variance 1/12. */
    check_len("normal:200,30", 1, 1000000, 200, sqrt(900 + 1.0 / 12));
    /* Lognormal: mean exp(mu + sigma^2/2), sd mean * sqrt(exp(sigma^2) - 1). */
    double lm = exp(4.5 + 0.18);
    check_len("lognormal:4.5,0.6", 1, 1000000, lm, lm * sqrt(exp(0.36) - 1));
    /* Clamps: at 1 below and at max= above. */
    trace_len d;
    char err[256];
    rng r;
    rng_seed(&r, 5, 5);
    int ones = 0, tops = 0, ok = 1;
    CHECK(trace_len_parse("normal:2,10", "--gen-len", &d, err, sizeof err) == 0, "%s", err);
    for (int i = 0; i < 2000; i++) {
        int v = trace_len_draw(&d, &r);
        ok &= v >= 1;
        ones += v == 1;
    }
    CHECK(ok && ones > 500, "normal:2,10 clamps at 1 (%d ones)", ones);
    CHECK(trace_len_parse("lognormal:6,1,max=300", "--prompt-len", &d, err, sizeof err) == 0 && d.max == 300, "%s", err);
    ok = 1;
    for (int i = 0; i < 2000; i++) {
        int v = trace_len_draw(&d, &r);
        ok &= v >= 1 && v <= 300;
        tops += v == 300;
    }
    CHECK(ok && tops > 1000, "max=300 clamps (%d at the top)", tops);
    CHECK(trace_len_parse("uniform:10,20,max=15", "--gen-len", &d, err, sizeof err) == 0, "%s", err);
    ok = 1;
    for (int i = 0; i < 1000; i++) ok &= trace_len_draw(&d, &r) <= 15;
    CHECK(ok, "uniform with max= clamps");
    CHECK(trace_len_parse("lognormal:100,1", "--gen-len", &d, err, sizeof err) == 0 && trace_len_draw(&d, &r) == TRACE_MAX_LEN,
          "huge values clamp at TRACE_MAX_LEN");
    /* Canonical formatting. */
    char buf[64];
    trace_len_parse("normal:40.0,1e1,max=90", "--gen-len", &d, err, sizeof err);
    trace_len_format(&d, buf, sizeof buf);
    CHECK(strcmp(buf, "normal:40,10,max=90") == 0, "format: %s", buf);
    trace_len_parse("fixed:64", "--gen-len", &d, err, sizeof err);
    trace_len_format(&d, buf, sizeof buf);
    CHECK(strcmp(buf, "fixed:64") == 0, "format: %s", buf);
}

/* Expect trace_len_parse(spec) to fail with exactly `want`. */
static void len_bad(const char *spec, const char *want) {
    trace_len d;
    char err[256];
    int rc = trace_len_parse(spec, "--prompt-len", &d, err, sizeof err);
    CHECK(rc == CX_EINVAL && strcmp(err, want) == 0, "spec '%s'\n  got:  %s\n  want: %s", spec, err, want);
}

/* Bad length specs are rejected with messages naming flag and spec. */
static void test_length_specs(void) {
    len_bad("uniform:5", "--prompt-len: 'uniform:5' needs two numbers A,B");
    len_bad("fixed:", "--prompt-len: 'fixed:': '' is not a number");
    len_bad("fixed:1,2", "--prompt-len: 'fixed:1,2' has too many numbers ('fixed' needs one number N)");
    len_bad("normal:5", "--prompt-len: 'normal:5' needs two numbers MEAN,SD");
    len_bad("lognormal:4.5", "--prompt-len: 'lognormal:4.5' needs two numbers MU,SIGMA");
    len_bad("uniform:5,x", "--prompt-len: 'uniform:5,x': 'x' is not a number");
    len_bad("uniform:9,5", "--prompt-len: 'uniform:9,5': A and B must be integers with 1 <= A <= B <= 1000000");
    len_bad("uniform:0,5", "--prompt-len: 'uniform:0,5': A and B must be integers with 1 <= A <= B <= 1000000");
    len_bad("uniform:1.5,5", "--prompt-len: 'uniform:1.5,5': A and B must be integers with 1 <= A <= B <= 1000000");
    len_bad("fixed:0", "--prompt-len: 'fixed:0': N must be an integer in 1..1000000");
    len_bad("fixed:2000000", "--prompt-len: 'fixed:2000000': N must be an integer in 1..1000000");
    len_bad("normal:100,-1", "--prompt-len: 'normal:100,-1': the standard deviation SD must be >= 0 (and both numbers within +-1e6)");
    len_bad("normal:nan,1", "--prompt-len: 'normal:nan,1': 'nan' is not a number");
    len_bad("fixed:10,max=0", "--prompt-len: 'fixed:10,max=0': max=M needs an integer M in 1..1000000");
    len_bad("fixed:10,max=5,3", "--prompt-len: 'fixed:10,max=5,3': max=M must come last");
    len_bad("fixed:10,max=", "--prompt-len: 'fixed:10,max=': max=M needs an integer M in 1..1000000");
    len_bad("gamma:1,2",
            "--prompt-len: 'gamma:1,2' is not a length distribution (use fixed:N, uniform:A,B, normal:MEAN,SD or "
            "lognormal:MU,SIGMA, optionally followed by ,max=M)");
    len_bad("fixed", "--prompt-len: 'fixed' is not a length distribution (use fixed:N, uniform:A,B, normal:MEAN,SD or "
                     "lognormal:MU,SIGMA, optionally followed by ,max=M)");
    len_bad("", "--prompt-len: '' is not a length distribution (use fixed:N, uniform:A,B, normal:MEAN,SD or "
                "lognormal:MU,SIGMA, optionally followed by ,max=M)");
    len_bad("uniform: 5,6", "--prompt-len: 'uniform: 5,6': ' 5' is not a number");
}

/* ---- traces ---------------------------------------------------------------- */

/* Fill p from the flag values a CLI would pass. */
static int params(trace_params *p, int n, double rate, double zipf, int k, const char *pl, const char *gl, uint64_t seed) {
    char err[256];
    memset(p, 0, sizeof *p);
    p->requests = n;
    p->rate = rate;
    p->zipf_s = zipf;
    p->adapters = k;
    p->seed = seed;
    int rc = trace_len_parse(pl, "--prompt-len", &p->prompt_len, err, sizeof err);
    if (!rc) rc = trace_len_parse(gl, "--gen-len", &p->gen_len, err, sizeof err);
    CHECK(rc == 0, "params: %s", err);
    return rc;
}

/* Are two files byte-identical? */
static int same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* PATH.meta.json (a static buffer: use before the next call). */
static const char *meta_of(const char *path) {
    static char buf[160];
    snprintf(buf, sizeof buf, "%s" WL_META_SUFFIX, path);
    return buf;
}

/* The file is plain JSONL: exactly `n` lines, each one JSON object, no
 * comment; the line count is the request count. */
static void check_plain_jsonl(const char *path, int n) {
    size_t len;
    char *text = slurp(path, &len);
    int lines = 0, objects = 0;
    for (size_t pos = 0; text && pos < len;) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        json_t *o;
        char err[256];
        lines++;
        if (jx_parse_object(text + pos, end - pos, &o, NULL, err, sizeof err) == 0) {
            objects++;
            json_decref(o);
        }
        pos = end + 1;
    }
    CHECK(text && len > 0 && text[len - 1] == '\n' && lines == n && objects == n,
          "%s: %d lines, %d JSON objects, want %d of each", path, lines, objects, n);
    free(text);
}

/* The sidecar of trace `path` holds exactly p's parameters, the trace's
 * hash and `cmdline`, and wl_load keeps it as the workload's meta. */
static void check_sidecar(const trace_params *p, const char *path, const char *cmdline) {
    char sha[65], err[512], pl[128], gl[128], rate[40], zipf[40], want[4096], cmd[1024] = "";
    CHECK(sha256_hex_file(path, sha, err, sizeof err) == 0, "%s", err);
    trace_len_format(&p->prompt_len, pl, sizeof pl);
    trace_len_format(&p->gen_len, gl, sizeof gl);
    jx_format_number(rate, sizeof rate, p->rate);
    jx_format_number(zipf, sizeof zipf, p->zipf_s);
    if (cmdline) { /* escaped as JSON: the test command lines hold no control characters */
        size_t k = (size_t)snprintf(cmd, sizeof cmd, ",\n  \"cmdline\": \"");
        for (const char *c = cmdline; *c && k + 4 < sizeof cmd; c++) {
            if (*c == '"' || *c == '\\') cmd[k++] = '\\';
            cmd[k++] = *c;
        }
        snprintf(cmd + k, sizeof cmd - k, "\"");
    }
    snprintf(want, sizeof want,
             "{\n  \"format\": \"cortex-bench trace\",\n  \"version\": 2,\n  \"requests\": %d,\n  \"rate\": %s,\n"
             "  \"zipf\": %s,\n  \"adapters\": %d,\n  \"prompt_len\": \"%s\",\n  \"gen_len\": \"%s\",\n"
             "  \"system_prefix\": %d,\n  \"seed\": %llu,\n  \"trace_sha256\": \"%s\"%s\n}\n",
             p->requests, rate, zipf, p->adapters, pl, gl, p->system_prefix, (unsigned long long)p->seed, sha, cmd);
    size_t n;
    char *got = slurp(meta_of(path), &n);
    CHECK(got && strcmp(got, want) == 0, "sidecar of %s:\n%s\nwant:\n%s", path, got ? got : "(missing)", want);
    wl_workload w;
    if (wl_load(path, &w, err, sizeof err) == 0) {
        want[strlen(want) - 1] = 0; /* kept without the final newline */
        CHECK(w.meta && strcmp(w.meta, want) == 0, "wl_load keeps the sidecar of %s: %s", path, w.meta ? w.meta : "(none)");
        wl_free(&w);
    } else {
        CHECK(0, "wl_load %s: %s", path, err);
    }
    free(got);
}

/* trace_write: reproducibility, loadability, stream independence, text
 * size, and failures that leave no partial file. */
static void test_trace_files(void) {
    trace_params p;
    char err[512];
    if (params(&p, 40, 2.5, 1.1, 4, "uniform:16,96", "uniform:8,32", 1)) return;
    const char *a = tmp_path("a.jsonl"), *b = tmp_path("b.jsonl"), *c = tmp_path("c.jsonl"), *d = tmp_path("d.jsonl");
    CHECK(trace_write(&p, a, NULL, err, sizeof err) == 0, "trace_write: %s", err);
    CHECK(trace_write(&p, b, NULL, err, sizeof err) == 0, "trace_write again: %s", err);
    CHECK(same_file(a, b), "same parameters and seed -> identical bytes");
    CHECK(same_file(meta_of(a), meta_of(b)), "... and identical sidecars");
    p.seed = 2;
    CHECK(trace_write(&p, c, NULL, err, sizeof err) == 0, "trace_write seed 2: %s", err);
    CHECK(!same_file(a, c), "different seed -> different bytes");
    p.seed = 1;

    /* The file loads as a trace and matches the generator request by request. */
    wl_workload w;
    int rc = wl_load(a, &w, err, sizeof err);
    CHECK(rc == 0 && w.kind == WL_TRACE && w.n == 40, "generated trace loads: %s", err);
    trace_gen g;
    trace_request r;
    if (rc == 0 && trace_gen_init(&g, &p, err, sizeof err) == 0) {
        int all = 1;
        for (size_t i = 0; i < w.n && trace_gen_next(&g, &r) == 1; i++) {
            const wl_request *q = &w.req[i];
            all &= strcmp(q->id, r.id) == 0 && q->arrival_s == r.arrival_s && q->adapter == r.adapter &&
                   q->prompt_len == r.prompt_len && q->max_tokens == r.max_tokens && q->text_len == r.text_len &&
                   memcmp(q->text, r.text, r.text_len) == 0 && q->adapter >= 1 && q->adapter <= 4 &&
                   q->prompt_len >= 16 && q->prompt_len <= 96 && q->max_tokens >= 8 && q->max_tokens <= 32;
        }
        CHECK(all, "file = generator output, values within their ranges");
        CHECK(strcmp(w.req[0].id, "r0001") == 0 && strcmp(w.req[39].id, "r0040") == 0, "ids r0001..r0040");
        trace_gen_free(&g);
    }
    wl_free(&w);
    check_plain_jsonl(a, 40);
    check_sidecar(&p, a, NULL);

    /* Separate streams: a different Zipf exponent keeps arrivals and lengths. */
    p.zipf_s = 0;
    CHECK(trace_write(&p, d, NULL, err, sizeof err) == 0, "%s", err);
    wl_workload w1, w2;
    if (wl_load(a, &w1, err, sizeof err) == 0 && wl_load(d, &w2, err, sizeof err) == 0) {
        int same = 1, adapters_differ = 0;
        for (size_t i = 0; i < w1.n; i++) {
            same &= w1.req[i].arrival_s == w2.req[i].arrival_s && w1.req[i].prompt_len == w2.req[i].prompt_len &&
                    strcmp(w1.req[i].text, w2.req[i].text) == 0 && w1.req[i].max_tokens == w2.req[i].max_tokens;
            adapters_differ += w1.req[i].adapter != w2.req[i].adapter;
        }
        CHECK(same && adapters_differ > 0, "--zipf changes adapters only");
        wl_free(&w1);
        wl_free(&w2);
    }
    p.zipf_s = 1.1;

    /* A plain trace (--adapters 0): every request asks for adapter 0, and
     * nothing else changes (no stream is drawn from for the adapters). */
    const char *e = tmp_path("plain.jsonl");
    p.adapters = 0;
    p.zipf_s = 0;
    CHECK(trace_write(&p, e, NULL, err, sizeof err) == 0, "plain trace: %s", err);
    if (wl_load(a, &w1, err, sizeof err) == 0 && wl_load(e, &w2, err, sizeof err) == 0) {
        int same = w1.n == w2.n, zero = 1;
        for (size_t i = 0; same && i < w1.n; i++) {
            same &= strcmp(w1.req[i].id, w2.req[i].id) == 0 && w1.req[i].arrival_s == w2.req[i].arrival_s &&
                    w1.req[i].prompt_len == w2.req[i].prompt_len && strcmp(w1.req[i].text, w2.req[i].text) == 0 &&
                    w1.req[i].max_tokens == w2.req[i].max_tokens;
            zero &= w2.req[i].adapter == 0 && w1.req[i].adapter >= 1;
        }
        CHECK(same && zero, "--adapters 0: adapter 0 everywhere, arrivals, lengths and texts as with --adapters 4");
        wl_free(&w1);
        wl_free(&w2);
    }
    check_sidecar(&p, e, NULL);
    p.adapters = 4;
    p.zipf_s = 1.1;

    /* Text is about prompt_len / 1.3 words, English-like sentences. */
    rng tr;
    rng_seed(&tr, 3, 3);
    trace_zipf words;
    trace_zipf_init(&words, trace_word_count(), 1.0, err, sizeof err);
    char *buf = NULL;
    size_t cap = 0;
    int targets[] = {1, 2, 13, 100, 1000};
    for (int i = 0; i < 5; i++) {
        size_t len = trace_text(&tr, &words, targets[i], &buf, &cap);
        int spaces = 0;
        for (size_t j = 0; j < len; j++) spaces += buf[j] == ' ';
        long want = lround(targets[i] / 1.3);
        if (want < 1) want = 1;
        CHECK(len > 0 && spaces + 1 == want && buf[len - 1] == '.' && buf[0] >= 'A' && buf[0] <= 'Z' && strlen(buf) == len,
              "text for %d tokens: %d words, want %ld: %s", targets[i], spaces + 1, want, buf);
    }
    CHECK(trace_word_count() >= 200, "a few hundred words (%d)", trace_word_count());
    free(buf);
    trace_zipf_free(&words);

    /* Failures: bad parameters, unwritable path; no partial file left. */
    trace_params bad = p;
    bad.rate = 0;
    rc = trace_write(&bad, tmp_path("bad.jsonl"), NULL, err, sizeof err);
    CHECK(rc == CX_EINVAL && strcmp(err, "--rate must be a number of requests per second in (0, 1e9] (got 0)") == 0, "%s", err);
    bad = p;
    bad.requests = 0;
    CHECK(trace_write(&bad, tmp_path("bad.jsonl"), NULL, err, sizeof err) == CX_EINVAL && strstr(err, "--requests"), "%s", err);
    bad = p;
    bad.adapters = -1;
    CHECK(trace_write(&bad, tmp_path("bad.jsonl"), NULL, err, sizeof err) == CX_EINVAL &&
          strcmp(err, "--adapters must be in 0..1000000 (got -1)") == 0, "%s", err);
    bad = p;
    bad.zipf_s = -1;
    CHECK(trace_write(&bad, tmp_path("bad.jsonl"), NULL, err, sizeof err) == CX_EINVAL && strstr(err, "--zipf"), "%s", err);
    rc = trace_write(&p, "/nonexistent-dir/t.jsonl", NULL, err, sizeof err);
    CHECK(rc == CX_EIO && strstr(err, "/nonexistent-dir/t.jsonl.tmp: cannot create: ") == err, "%s", err);
    /* A directory in the way of the sidecar: the new trace is removed again. */
    const char *lone = tmp_path("lone.jsonl");
    char lone_meta[160], lone_sub[170];
    snprintf(lone_meta, sizeof lone_meta, "%s", meta_of(lone));
    snprintf(lone_sub, sizeof lone_sub, "%s/x", lone_meta);
    FILE *lf = NULL;
    if (mkdir(lone_meta, 0700) == 0) lf = fopen(lone_sub, "w");
    if (!lf) {
        CHECK(0, "mkdir %s", lone_meta);
    } else {
        fclose(lf);
        rc = trace_write(&p, lone, NULL, err, sizeof err);
        char t1[170], t2[180];
        snprintf(t1, sizeof t1, "%s.tmp", lone);
        snprintf(t2, sizeof t2, "%s.tmp", lone_meta);
        CHECK(rc == CX_EIO && strstr(err, "cannot rename") && strstr(err, WL_META_SUFFIX) && access(lone, F_OK) != 0 &&
                  access(t1, F_OK) != 0 && access(t2, F_OK) != 0,
              "sidecar rename failure leaves no trace and no temporaries: %s", err);
        remove(lone_sub);
        rmdir(lone_meta);
    }
    /* A directory in the way of the rename: the .tmp is removed. */
    const char *dir = tmp_path("isdir.jsonl");
    if (mkdir(dir, 0700) != 0) {
        CHECK(0, "mkdir %s", dir);
    } else {
        char sub[140];
        snprintf(sub, sizeof sub, "%.127s/x", dir);
        FILE *f = fopen(sub, "w");
        if (f) fclose(f);
        rc = trace_write(&p, dir, NULL, err, sizeof err);
        char tmpf[140], meta_tmp[160];
        snprintf(tmpf, sizeof tmpf, "%.127s.tmp", dir);
        snprintf(meta_tmp, sizeof meta_tmp, "%.127s" WL_META_SUFFIX ".tmp", dir);
        CHECK(rc == CX_EIO && strstr(err, "cannot rename") && access(tmpf, F_OK) != 0 && access(meta_tmp, F_OK) != 0 &&
                  access(meta_of(dir), F_OK) != 0,
              "rename failure cleans up: %s", err);
        remove(sub);
        rmdir(dir);
    }
}

/* Write `content` as the sidecar of `trace` and return wl_load's result. */
static int load_with_meta(const char *trace, const char *content, wl_workload *w, char *err, size_t errlen) {
    FILE *f = fopen(meta_of(trace), "wb");
    if (!f || fputs(content, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", meta_of(trace));
        exit(2);
    }
    return wl_load(trace, w, err, errlen);
}

/* Sidecars: the command line is recorded (escaped), old-format files with a
 * "# cortex-bench trace v1" header still load, and a sidecar that is not
 * one JSON object, or describes another file, is a one-line error. */
static void test_sidecars(void) {
    trace_params p;
    char err[512], want[512];
    if (params(&p, 12, 3, 1.0, 3, "fixed:20", "normal:10,3,max=16", 7)) return;
    p.system_prefix = 30;
    const char *t = tmp_path("cmd.jsonl");
    const char *cmdline = "cortex-bench trace --requests 12 --seed 7 -o \"a \\ b.jsonl\"";
    CHECK(trace_write(&p, t, cmdline, err, sizeof err) == 0, "%s", err);
    check_plain_jsonl(t, 12);
    check_sidecar(&p, t, cmdline);

    /* An old trace: the v1 header line, then the same requests, no sidecar. */
    size_t n;
    char *body = slurp(t, &n);
    const char *hdr = "# cortex-bench trace v1 requests=12 rate=3 zipf=1 adapters=3 prompt_len=fixed:20 "
                      "gen_len=normal:10,3,max=16 seed=7 system_prefix=30\n";
    char *old = malloc(strlen(hdr) + n + 1);
    wl_workload w, w0;
    if (body && old) {
        memcpy(old, hdr, strlen(hdr));
        memcpy(old + strlen(hdr), body, n + 1);
        const char *oldp = write_tmp("old.jsonl", old, strlen(old));
        int rc = wl_load(oldp, &w, err, sizeof err);
        CHECK(rc == 0 && w.kind == WL_TRACE && w.n == 12 && w.meta == NULL && w.req[0].line == 2, "old format loads: %s", err);
        if (rc == 0 && wl_load(t, &w0, err, sizeof err) == 0) {
            int same = 1;
            for (size_t i = 0; i < w.n; i++)
                same &= !strcmp(w.req[i].id, w0.req[i].id) && !strcmp(w.req[i].text, w0.req[i].text) &&
                        w.req[i].arrival_s == w0.req[i].arrival_s;
            CHECK(same && strcmp(w.sha256, w0.sha256) != 0, "the same requests (the file hash differs)");
            wl_free(&w0);
        }
        if (rc == 0) wl_free(&w);

        /* The new trace's sidecar next to the old file: it names another hash. */
        char *meta = slurp(meta_of(t), &n);
        rc = meta ? load_with_meta(oldp, meta, &w, err, sizeof err) : -1;
        snprintf(want, sizeof want, "%s: describes another file (\"trace_sha256\" ", meta_of(oldp));
        CHECK(rc == CX_EFORMAT && strncmp(err, want, strlen(want)) == 0 && strstr(err, "delete the sidecar") && w.n == 0 &&
                  w.meta == NULL,
              "stale sidecar: %s", err);
        free(meta);
        /* A hand-written sidecar without a hash is kept as it is. */
        rc = load_with_meta(oldp, "{\"source\": \"production log, 2026-11-01\"}\n\n", &w, err, sizeof err);
        CHECK(rc == 0 && w.meta && !strcmp(w.meta, "{\"source\": \"production log, 2026-11-01\"}"), "hand-written: %s", err);
        if (rc == 0) wl_free(&w);
        /* Not a JSON object, a hash that is not a string, too large. */
        rc = load_with_meta(oldp, "{\"requests\": 12,}", &w, err, sizeof err);
        snprintf(want, sizeof want, "%s:1: column 17: string or '}' expected near '}'", meta_of(oldp));
        CHECK(rc == CX_EFORMAT && !strcmp(err, want), "bad JSON: %s", err);
        rc = load_with_meta(oldp, "{\n  \"requests\": 12,\n  \"rate\": 4\n  \"zipf\": 1\n}\n", &w, err, sizeof err);
        snprintf(want, sizeof want, "%s:4: column 8: '}' expected near '\"zipf\"'", meta_of(oldp));
        CHECK(rc == CX_EFORMAT && !strcmp(err, want), "bad JSON on line 4: %s", err);
        rc = load_with_meta(oldp, "[1, 2]", &w, err, sizeof err);
        snprintf(want, sizeof want, "%s:1: column 1: expected a JSON object, found an array", meta_of(oldp));
        CHECK(rc == CX_EFORMAT && !strcmp(err, want), "an array: %s", err);
        rc = load_with_meta(oldp, "{\"trace_sha256\": 5}", &w, err, sizeof err);
        snprintf(want, sizeof want, "%s: \"trace_sha256\" must be a string, not a number", meta_of(oldp));
        CHECK(rc == CX_EFORMAT && !strcmp(err, want), "numeric hash: %s", err);
        char *big = malloc(WL_META_MAX + 64);
        if (big) {
            memset(big, ' ', WL_META_MAX + 63);
            memcpy(big, "{\"x\": 1}", 8);
            big[WL_META_MAX + 63] = 0;
            rc = load_with_meta(oldp, big, &w, err, sizeof err);
            snprintf(want, sizeof want, "%s: larger than %d bytes: too large for a sidecar", meta_of(oldp), WL_META_MAX);
            CHECK(rc == CX_EFORMAT && !strcmp(err, want), "huge sidecar: %s", err);
            free(big);
        }
        /* An unreadable sidecar (a directory) fails the load, naming it. */
        remove(meta_of(oldp));
        if (mkdir(meta_of(oldp), 0700) == 0) {
            rc = wl_load(oldp, &w, err, sizeof err);
            CHECK(rc == CX_EIO && strstr(err, WL_META_SUFFIX ": read error: Is a directory"), "directory sidecar: %s", err);
            rmdir(meta_of(oldp));
        }
    }
    free(body);
    free(old);
}

/* The committed traces and their sidecars are exactly what their commands
 * write (prompts/README.md lists the commands), and are plain JSONL. */
static void test_committed_traces(void) {
#define CMD(args, file) "cortex-bench trace " args " -o prompts/traces/" file
    static const struct {
        const char *file;
        int n;
        double rate, zipf;
        int k;
        const char *pl, *gl;
        uint64_t seed;
        int system_prefix;
        const char *cmdline;
    } traces[] = {
        {"zipf-smoke.jsonl", 16, 4, 1.1, 4, "uniform:16,96", "uniform:8,32", 1, 0,
         CMD("--requests 16 --rate 4 --zipf 1.1 --adapters 4 --prompt-len uniform:16,96 --gen-len uniform:8,32 --seed 1",
             "zipf-smoke.jsonl")},
        {"zipf-chat.jsonl", 64, 1, 1.2, 8, "lognormal:4.5,0.6", "uniform:32,128", 2, 0,
         CMD("--requests 64 --rate 1 --zipf 1.2 --adapters 8 --prompt-len lognormal:4.5,0.6 --gen-len uniform:32,128 --seed 2",
             "zipf-chat.jsonl")},
        {"uniform-burst.jsonl", 32, 16, 0, 4, "normal:128,32,max=256", "fixed:32", 3, 0,
         CMD("--requests 32 --rate 16 --zipf 0 --adapters 4 --prompt-len normal:128,32,max=256 --gen-len fixed:32 --seed 3",
             "uniform-burst.jsonl")},
        {"plain-smoke.jsonl", 16, 8, 0, 0, "uniform:8,40", "uniform:8,24", 5, 0,
         CMD("--requests 16 --rate 8 --adapters 0 --prompt-len uniform:8,40 --gen-len uniform:8,24 --seed 5",
             "plain-smoke.jsonl")},
        {"plain-chat.jsonl", 64, 1, 0, 0, "lognormal:4.5,0.6", "uniform:32,128", 2, 0,
         CMD("--requests 64 --rate 1 --adapters 0 --prompt-len lognormal:4.5,0.6 --gen-len uniform:32,128 --seed 2",
             "plain-chat.jsonl")},
        {"shared-prefix.jsonl", 16, 1, 0, 1, "uniform:16,48", "fixed:16", 4, 400,
         CMD("--requests 16 --rate 1 --zipf 0 --adapters 1 --prompt-len uniform:16,48 --gen-len fixed:16 --system-prefix 400 "
             "--seed 4", "shared-prefix.jsonl")},
    };
#undef CMD
    for (size_t i = 0; i < sizeof traces / sizeof traces[0]; i++) {
        trace_params p;
        char err[512], committed[128], committed_meta[160];
        if (params(&p, traces[i].n, traces[i].rate, traces[i].zipf, traces[i].k, traces[i].pl, traces[i].gl, traces[i].seed))
            continue;
        p.system_prefix = traces[i].system_prefix;
        const char *out = tmp_path(traces[i].file);
        CHECK(trace_write(&p, out, traces[i].cmdline, err, sizeof err) == 0, "%s", err);
        snprintf(committed, sizeof committed, "prompts/traces/%s", traces[i].file);
        snprintf(committed_meta, sizeof committed_meta, "%s", meta_of(committed));
        CHECK(same_file(out, committed), "%s is reproduced byte for byte by its command", committed);
        CHECK(same_file(meta_of(out), committed_meta), "%s is reproduced byte for byte by its command", committed_meta);
        check_plain_jsonl(committed, traces[i].n);
        wl_workload w;
        CHECK(wl_load(committed, &w, err, sizeof err) == 0 && w.kind == WL_TRACE && w.n == (size_t)traces[i].n && w.meta,
              "%s", err);
        int plain = 1; /* the plain traces name no adapter: they replay against any server */
        for (size_t j = 0; j < w.n; j++) plain &= w.req[j].adapter == 0;
        CHECK(plain == (traces[i].k == 0), "%s: adapter 0 on every request exactly when --adapters 0", committed);
        wl_free(&w);
    }
}

TEST_MAIN({
    test_sha256();
    test_json_values();
    test_json_errors();
    test_json_write();
    test_workload_errors();
    test_workload_ok();
    test_standard_prompts();
    test_stats();
    test_rng();
    test_zipf();
    test_arrivals();
    test_lengths();
    test_length_specs();
    test_trace_files();
    test_sidecars();
    test_committed_traces();
    cleanup();
})
