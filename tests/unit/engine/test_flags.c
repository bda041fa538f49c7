/*
 * test_flags.c - the shared table-driven flag parser and help printer
 * (engine/src/flags.c, cortex_tools.h) that `cortex` and `cortex-bench` use:
 * every kind of value with its range and its error line, enumerations (a
 * fixed list, a list from the engine's tables, any case), callbacks (parse
 * and show), positional arguments, which flags were given, the order of
 * errors and -h, one line per error, and the help's exact text.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cortex_tools.h"
#include "testing.h"

enum { CA = 1, CB = 2 }; /* two commands */

typedef struct t_opts {
    int sw, i, choice, kvt, pol, n_items;
    long l;
    uint64_t u;
    float f;
    double d;
    int64_t budget;
    const char *str, *mode, *items[4];
    struct { int a, b; } group; /* two flags into one struct: cx_flags_given over it */
} t_opts;

static void t_defaults(t_opts *o) {
    memset(o, 0, sizeof *o);
    o->i = 3;
    o->l = -5;
    o->u = 7;
    o->f = 0.5f;
    o->d = 2.5;
    o->budget = CX_KV_UNLIMITED;
    o->str = "dflt";
    o->mode = "auto";
    o->kvt = CX_KV_F32;
    o->pol = CX_KV_LRU;
}

/* A repeatable flag: appended to items; "bad" refused with a message of the callback's own. */
static int parse_item(const cx_flag *f, const char *name, const char *v, void *op, char *err, size_t n) {
    t_opts *o = op;
    (void)f;
    if (!strcmp(v, "bad") || o->n_items == 4) return snprintf(err, n, "%s: '%s' is no item", name, v), -1;
    o->items[o->n_items++] = v;
    return 0;
}

/* The number of items, as the default in words. */
static const char *show_items(const cx_flag *f, const void *op, char *buf, size_t cap) {
    const t_opts *o = op;
    (void)f;
    snprintf(buf, cap, "%d items", o->n_items);
    return buf;
}

#define O(f) offsetof(t_opts, f)
static const cx_flag TABLE[] = {
    {"--switch", "-s", NULL, CA, CX_FLAG_SWITCH, O(sw), 0, 0, NULL, .help = "a switch"},
    {"--int", "-i", "N", CA, CX_FLAG_INT, O(i), 1, 10, NULL, .help = "an int"},
    {"--long", NULL, "L", CA, CX_FLAG_LONG, O(l), -100, 100, NULL, .help = "a long"},
    {"--u64", NULL, "U", CA, CX_FLAG_U64, O(u), 0, 9223372036854775807.0, NULL, .help = "a u64"},
    {"--float", NULL, "F", CA, CX_FLAG_FLOAT, O(f), 0, 1, NULL, .help = "a float"},
    {"--double", NULL, "D", CA, CX_FLAG_DOUBLE, O(d), 0.01, 1e6, "two and a half", .help = "a double"},
    {"--budget", NULL, "BYTES", CA, CX_FLAG_BUDGET, O(budget), 0, 0, NULL, .help = "a budget"},
    {"--choice", NULL, "LOOP", CA, CX_FLAG_CHOICE, O(choice), 0, 0, NULL, .help = "a choice", .choices = "closed|open"},
    {"--mode", NULL, "HOW", CA, CX_FLAG_STR, O(mode), 0, 0, NULL, .help = "a listed string", .choices = "perf|auto"},
    {"--kv-type", NULL, "TYPE", CA, CX_FLAG_CUSTOM, O(kvt), CX_KV_HOT, 0, NULL, .help = "a KV type", CX_FLAG_KV_TYPE_OPS},
    {"--kv-policy", NULL, "POLICY", CA, CX_FLAG_CUSTOM, O(pol), 0, 0, NULL, .help = "a policy", CX_FLAG_KV_POLICY_OPS},
    {"--item", NULL, "ITEM", CA, CX_FLAG_CUSTOM, O(items), 0, 0, NULL, .help = "an item, repeatable",
     .parse = parse_item, .show = show_items},
    {"--group-a", NULL, "A", CA, CX_FLAG_INT, O(group.a), 0, 9, NULL, .help = "group a"},
    {"--group-b", NULL, "B", CA | CB, CX_FLAG_INT, O(group.b), 0, 9, NULL, .help = "group b"},
    {"-o", NULL, "FILE", CA, CX_FLAG_STR, O(str), 0, 0, NULL, .help = "a short flag alone"},
    {"--a-rather-long-flag-name", NULL, "VALUE", CA, CX_FLAG_STR, O(str), 0, 0, "none", .help = "a long left column"},
    {"--only-b", NULL, "X", CB, CX_FLAG_STR, O(str), 0, 0, NULL, .help = "another command's"},
    {"--help", "-h", NULL, CA | CB, CX_FLAG_HELP, 0, 0, 0, NULL, .help = "print this help and exit"},
};
#undef O
#define N_TABLE ((int)(sizeof TABLE / sizeof TABLE[0]))

static cx_flags spec(unsigned bit, int max_pos) {
    cx_flags p = {.prog = "prog", .cmd = "cmd", .table = TABLE, .n = N_TABLE, .bit = bit, .max_pos = max_pos};
    return p;
}

static char err_text[2048]; /* what the last parse printed on stderr */

/* Parse the NULL-terminated words for command `bit` into o (defaults first),
 * stderr captured into err_text; the parser's return value. */
static int parse(cx_flags *p, t_opts *o, const char *const *words) {
    static char store[32][128]; /* writable copies, as argv is */
    char *argv[32];
    int argc = 0;
    for (; words[argc]; argc++) {
        snprintf(store[argc], sizeof store[argc], "%s", words[argc]);
        argv[argc] = store[argc];
    }
    t_defaults(o);
    fflush(stderr);
    FILE *cap = tmpfile();
    int saved = dup(2);
    dup2(fileno(cap), 2);
    int rc = cx_flags_parse(p, argc, argv, o);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(cap);
    size_t k = fread(err_text, 1, sizeof err_text - 1, cap);
    err_text[k] = 0;
    fclose(cap);
    return rc;
}

#define W(...) ((const char *const[]){__VA_ARGS__, NULL})

/* A parse that must fail with exactly this one line. */
static void fails(unsigned bit, const char *const *words, const char *line) {
    cx_flags p = spec(bit, 1);
    t_opts o;
    int rc = parse(&p, &o, words);
    char want[512];
    snprintf(want, sizeof want, "prog: %s\n", line);
    CHECK(rc == 2 && !strcmp(err_text, want), "'%s ...': want rc 2 and '%s', got %d '%s'", words[0], line, rc,
          err_text);
}

/* Every kind with a good value, and the defaults kept for the flags not given. */
static void test_kinds(void) {
    cx_flags p = spec(CA, 0);
    t_opts o;
    int rc = parse(&p, &o, W("-s", "--int", "10", "--long", "-100", "--u64", "9223372036854775807", "--float", "0.25",
                             "--budget", "64K", "--choice", "OPEN", "--mode", "perf", "--kv-type", "F16", "--kv-policy",
                             "lfu", "--item", "x", "--item", "y", "-o", "-h"));
    CHECK(rc == 0 && !err_text[0], "rc %d, stderr '%s'", rc, err_text);
    CHECK(o.sw == 1 && o.i == 10 && o.l == -100 && o.u == 9223372036854775807ull && o.f == 0.25f, "numbers: %d %ld %llu %g",
          o.i, o.l, (unsigned long long)o.u, (double)o.f);
    CHECK(o.budget == 65536 && o.choice == 1 && !strcmp(o.mode, "perf"), "budget %lld choice %d mode %s",
          (long long)o.budget, o.choice, o.mode);
    CHECK(o.kvt == CX_KV_F16 && o.pol == CX_KV_LFU, "kv type %d policy %d", o.kvt, o.pol);
    CHECK(o.n_items == 2 && !strcmp(o.items[0], "x") && !strcmp(o.items[1], "y"), "items %d", o.n_items);
    CHECK(!strcmp(o.str, "-h"), "a value that looks like a flag is the value: '%s'", o.str);
    CHECK(o.d == 2.5 && o.group.a == 0, "defaults kept: %g %d", o.d, o.group.a);
    rc = parse(&p, &o, W("--budget", "unlimited", "--double", "1e6", "--int", "1", "--choice", "closed"));
    CHECK(rc == 0 && o.budget == CX_KV_UNLIMITED && o.d == 1e6 && o.i == 1 && o.choice == 0, "bounds and unlimited");
    rc = parse(&p, &o, W("--mode", "AUTO"));
    CHECK(rc == 0 && !strcmp(o.mode, "AUTO"), "a listed string matches any case and is kept as written: %s", o.mode);
}

/* Each bad value: exit 2 with one line naming the flag as written and the value. */
static void test_bad_values(void) {
    fails(CA, W("--int", "11"), "--int: '11' is not an integer in [1, 10]");
    fails(CA, W("-i", "0"), "-i: '0' is not an integer in [1, 10]");
    fails(CA, W("--int", "1e1"), "--int: '1e1' is not an integer in [1, 10]");
    fails(CA, W("--int", "5x"), "--int: '5x' is not an integer in [1, 10]");
    fails(CA, W("--int", ""), "--int: '' is not an integer in [1, 10]");
    fails(CA, W("--long", "99999999999999999999"), "--long: '99999999999999999999' is not an integer in [-100, 100]");
    fails(CA, W("--u64", "-1"), "--u64: '-1' is not an integer in [0, 9223372036854775807]");
    fails(CA, W("--u64", "9223372036854775808"), "--u64: '9223372036854775808' is not an integer in [0, 9223372036854775807]");
    fails(CA, W("--float", "nan"), "--float: 'nan' is not a number in [0, 1]");
    fails(CA, W("--float", "1.5"), "--float: '1.5' is not a number in [0, 1]");
    fails(CA, W("--double", "inf"), "--double: 'inf' is not a number in [0.01, 1e+06]");
    fails(CA, W("--budget", "lots"), "--budget: 'lots' is not a byte count (e.g. 65536, 64K, 1.5M, 2G) or 'unlimited'");
    fails(CA, W("--choice", "half"), "--choice: 'half' is not one of closed|open");
    fails(CA, W("--mode", "callgrind"), "--mode: 'callgrind' is not one of perf|auto");
    fails(CA, W("--kv-type", "q4"), "--kv-type: 'q4' is not one of f32|f16|q8|bf16|e4m3|e5m2|q4g|q4h");
    fails(CA, W("--kv-policy", "mru"), "--kv-policy: 'mru' is not one of lru|lfu|random");
    fails(CA, W("--item", "bad"), "--item: 'bad' is no item");
    fails(CA, W("--item", "1", "--item", "2", "--item", "3", "--item", "4", "--item", "5"), "--item: '5' is no item");
}

/* Unknown flags, another command's flags, missing values, positionals, -h. */
static void test_words(void) {
    fails(CA, W("--nope"), "cmd: unknown option '--nope' (see prog cmd --help)");
    fails(CA, W("-Q", "1"), "cmd: unknown option '-Q' (see prog cmd --help)");
    fails(CA, W("--only-b", "x"), "cmd: unknown option '--only-b' (see prog cmd --help)");
    fails(CA, W("--int"), "cmd: --int needs a value (N)");
    fails(CA, W("pos", "two"), "cmd: unexpected argument 'two' (see prog cmd --help)");
    fails(CA, W("--int", "x", "--help"), "--int: 'x' is not an integer in [1, 10]"); /* in order: the error first */
    cx_flags p = spec(CB, 2);
    t_opts o;
    int rc = parse(&p, &o, W("a", "--only-b", "v", "-"));
    CHECK(rc == 0 && p.n_pos == 2 && !strcmp(p.pos[0], "a") && !strcmp(p.pos[1], "-") && !strcmp(o.str, "v"),
          "positionals (\"-\" is one): rc %d n %d", rc, p.n_pos);
    rc = parse(&p, &o, W("--group-b", "3", "-h", "--nope"));
    CHECK(rc == 1 && !err_text[0] && o.group.b == 3, "-h: 1, nothing printed, what came before it parsed: %d", rc);
    rc = parse(&p, &o, W("--help"));
    CHECK(rc == 1, "--help: 1");
    p.max_pos = CX_FLAGS_MAX_POS + 1;
    rc = parse(&p, &o, W("x"));
    CHECK(rc == 2 && strstr(err_text, "at most"), "too many positionals for the parser: %d '%s'", rc, err_text);
}

/* Which flags were given, by the fields they store into. */
static void test_given(void) {
    cx_flags p = spec(CA, 0);
    t_opts o;
    int rc = parse(&p, &o, W("--group-b", "0", "--int", "3"));
    CHECK(rc == 0, "parsed");
    CHECK(cx_flags_given(&p, offsetof(t_opts, i), sizeof o.i), "--int given (with its default value)");
    CHECK(!cx_flags_given(&p, offsetof(t_opts, l), sizeof o.l), "--long not given");
    CHECK(cx_flags_given(&p, offsetof(t_opts, group), sizeof o.group), "a flag into the group given");
    CHECK(!cx_flags_given(&p, offsetof(t_opts, group.a), sizeof o.group.a), "--group-a not given");
    rc = parse(&p, &o, W("-s"));
    CHECK(rc == 0 && cx_flags_given(&p, offsetof(t_opts, sw), sizeof o.sw) &&
          !cx_flags_given(&p, offsetof(t_opts, i), sizeof o.i), "a new parse forgets the last one's");
    cx_flags q = spec(CB, 0);
    rc = parse(&q, &o, W("--only-b", "v"));
    CHECK(rc == 0 && cx_flags_given(&q, offsetof(t_opts, str), sizeof o.str), "--only-b given for B");
}

/* The help text, exactly: names, placeholders, accepted values, ranges, defaults. */
static void test_help(void) {
    t_opts d;
    t_defaults(&d);
    d.n_items = 2;
    cx_flags p = spec(CA, 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cx_flags_help(&p, &d, f);
    fclose(f);
    const char *want =
        "  -s, --switch                 a switch\n"
        "  -i, --int N                  an int (1..10; default 3)\n"
        "      --long L                 a long (-100..100; default -5)\n"
        "      --u64 U                  a u64 (0..9223372036854775807; default 7)\n"
        "      --float F                a float (0..1; default 0.5)\n"
        "      --double D               a double (0.01..1e+06; default two and a half)\n"
        "      --budget BYTES           a budget (default unlimited)\n"
        "      --choice LOOP            a choice (one of closed|open; default closed)\n"
        "      --mode HOW               a listed string (one of perf|auto; default auto)\n"
        "      --kv-type TYPE           a KV type (one of f32|f16|q8|bf16|e4m3|e5m2|q4g|q4h; default f32)\n"
        "      --kv-policy POLICY       a policy (one of lru|lfu|random; default lru)\n"
        "      --item ITEM              an item, repeatable (default 2 items)\n"
        "      --group-a A              group a (0..9; default 0)\n"
        "      --group-b B              group b (0..9; default 0)\n"
        "  -o FILE                      a short flag alone (default dflt)\n"
        "      --a-rather-long-flag-name VALUE\n"
        "                               a long left column (default none)\n"
        "  -h, --help                   print this help and exit\n";
    CHECK(text && !strcmp(text, want), "help:\n%s\nwanted:\n%s", text ? text : "(none)", want);
    free(text);
    d.budget = 4096;
    d.choice = 5; /* no such value: no default shown */
    d.str = NULL;
    text = NULL;
    f = open_memstream(&text, &len);
    cx_flags_help(&p, &d, f);
    fclose(f);
    CHECK(text && strstr(text, "a budget (default 4096)\n") && strstr(text, "a choice (one of closed|open)\n") &&
          strstr(text, "  -o FILE                      a short flag alone\n"), "defaults read from the struct:\n%s", text);
    free(text);
    cx_flags q = spec(CB, 0);
    text = NULL;
    f = open_memstream(&text, &len);
    cx_flags_help(&q, &d, f);
    fclose(f);
    CHECK(text && strstr(text, "--only-b X") && !strstr(text, "--int"), "B's help has B's flags only:\n%s", text);
    free(text);
}

/* The number parsers and the engine-table lists. */
static void test_helpers(void) {
    long long v = 0;
    double x = 0;
    CHECK(cx_parse_int_in("-7", -10, 10, &v) == 0 && v == -7, "int");
    CHECK(cx_parse_int_in("11", -10, 10, &v) == -1 && cx_parse_int_in(NULL, 0, 1, &v) == -1 &&
          cx_parse_int_in(" 1", 0, 1, &v) == 0, "int range, NULL; strtoll skips leading space");
    CHECK(cx_parse_num_in("0.5", 0, 1, &x) == 0 && x == 0.5 && cx_parse_num_in("nan", 0, 1, &x) == -1 &&
          cx_parse_num_in("1x", 0, 2, &x) == -1, "num");
    char buf[1024];
    CHECK(strstr(cx_flag_weight_types(NULL, buf, sizeof buf), "q8_0") && strstr(buf, "|q4_k_m"), "weight types: %s", buf);
    CHECK(strstr(cx_flag_shapes(NULL, buf, sizeof buf), "test-tiny|"), "shapes: %s", buf);
    CHECK(!strcmp(cx_flag_kv_policies(NULL, buf, sizeof buf), "lru|lfu|random"), "policies: %s", buf);
}

TEST_MAIN({
    test_kinds();
    test_bad_values();
    test_words();
    test_given();
    test_help();
    test_helpers();
})
