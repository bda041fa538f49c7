/*
 * test_workload.c - the workload loader (harness/run/workload.c): every
 * validation rule of prompt sets and traces reported as FILE:LINE and the
 * problem exactly, the accepted variations (BOM, CRLF, comments, unknown
 * keys), the file hash, the in-memory parser, and the committed standard
 * prompt set. Run from the repository root (tests/run.sh does): it reads
 * prompts/.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"
#include "fixture.h"
#include "sha256.h"
#include "workload.h"

/* ---- workload loader ------------------------------------------------------- */

/* Load `content` from a scratch file; expect "PATH:LINE: problem" exactly. */
static void wl_bad(const char *name, const char *content, int line, const char *problem) {
    const char *path = fx_write(name, content, strlen(content));
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
    rc = wl_load(fx_dir(), &w, err, sizeof err);
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
    const char *path = fx_write("ok.jsonl", text, strlen(text));
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

/* The committed lookup prompt set (--workload lookup): 10 prompts, each an instruction and, after a blank
 * line, the text it edits, repeats or summarises, long enough for lookup to find its answer there. */
static void test_lookup_prompts(void) {
    wl_workload w;
    char err[512];
    int rc = wl_load("prompts/lookup.jsonl", &w, err, sizeof err);
    CHECK(rc == 0, "prompts/lookup.jsonl: %s (run from the repository root)", err);
    if (rc) return;
    CHECK(w.kind == WL_PROMPTS && w.n == 10, "10 prompts (got %zu)", w.n);
    int total = 0;
    for (size_t i = 0; i < w.n; i++) {
        char id[8];
        snprintf(id, sizeof id, "l%02d", (int)(i + 1) % 100);
        CHECK(strcmp(w.req[i].id, id) == 0, "id %s", w.req[i].id);
        CHECK(w.req[i].category && w.req[i].category[0], "%s has a category", id);
        CHECK(w.req[i].max_tokens >= 64 && w.req[i].max_tokens <= 512, "%s max_tokens %d", id, w.req[i].max_tokens);
        const char *body = strstr(w.req[i].text, "\n\n");
        CHECK(body && strlen(body) >= 250, "%s: an instruction, a blank line, then at least 250 bytes of text to work"
              " on (%zu)", id, body ? strlen(body) : 0);
        total += w.req[i].max_tokens;
    }
    CHECK(total == 1888, "1,888 generated tokens at most, as prompts/README.md says (got %d)", total);
    wl_free(&w);
}

TEST_MAIN({
    test_workload_errors();
    test_workload_ok();
    test_standard_prompts();
    test_lookup_prompts();
    fx_cleanup();
})
