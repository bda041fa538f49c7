/*
 * flags.c - the table-driven command-line parser and help printer both
 * programs use (cortex_tools.h, "command-line flags"): `cortex`
 * (engine/cli/cli_flags.c) and `cortex-bench` (harness/commands.c).
 *
 * Contract: a program describes every flag of every command once, in one
 * cx_flag table (names, placeholder, commands, kind, field offset, range or
 * accepted values, default in words or none, help). cx_flags_parse walks
 * argv in order and stores each value into the caller's options struct,
 * which the caller filled with its defaults first; cx_flags_help prints a
 * command's flags with their accepted values and the defaults read from such
 * a struct, so what --help says is what the parser does. Errors are one line
 * "PROG: ..." on stderr and the return value 2; nothing else is printed.
 * Enumerations match any case; numbers must be whole strings in range.
 * Nothing is allocated: positional arguments and string values point into argv.
 */
#include "cortex_tools.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

/* See cortex_tools.h. */
int cx_parse_int_in(const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* See cortex_tools.h. */
int cx_parse_num_in(const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || errno || end == s || *end || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

/* A table bound as an integer: doubles past the long long range saturate
 * (9223372036854775807.0 is 2^63 as a double). */
static long long bound(double d) {
    if (d >= 9223372036854775807.0) return LLONG_MAX;
    if (d <= -9223372036854775807.0) return LLONG_MIN;
    return (long long)d;
}

/* Append "|name" (no bar first) to the list in buf; a name that does not fit is left out. */
static void list_add(char *buf, size_t cap, const char *name) {
    size_t at = strlen(buf);
    int w = snprintf(buf + at, cap - at, "%s%s", at ? "|" : "", name);
    if (w < 0 || (size_t)w >= cap - at) buf[at] = 0;
}

/* The position of `v` among the '|'-separated names of list (any case), or -1. */
static int list_find(const char *list, const char *v) {
    size_t n = strlen(v);
    int i = 0;
    for (const char *p = list; *p; i++) {
        const char *bar = strchr(p, '|');
        size_t k = bar ? (size_t)(bar - p) : strlen(p);
        if (k == n && !strncasecmp(p, v, n)) return i;
        if (!bar) break;
        p = bar + 1;
    }
    return -1;
}

/* The i-th name of a '|'-separated list into buf; NULL when there is none. */
static const char *list_item(const char *list, int i, char *buf, size_t cap) {
    for (const char *p = list; i >= 0; i--) {
        const char *bar = strchr(p, '|');
        size_t k = bar ? (size_t)(bar - p) : strlen(p);
        if (i == 0) {
            snprintf(buf, cap, "%.*s", (int)k, p);
            return buf;
        }
        if (!bar) break;
        p = bar + 1;
    }
    return NULL;
}

/* The values flag f accepts, '|'-separated; NULL when it is no enumeration. */
static const char *flag_values(const cx_flag *f, char *buf, size_t cap) {
    buf[0] = 0;
    if (f->choices) return f->choices;
    return f->values ? f->values(f, buf, cap) : NULL;
}

/* The field of f in opts. */
static void *field(const cx_flag *f, void *opts) { return (char *)opts + f->off; }
static const void *cfield(const cx_flag *f, const void *opts) { return (const char *)opts + f->off; }

/* The default of f in opts, in words, into buf; NULL when it has none to show. */
static const char *flag_default(const cx_flag *f, const void *opts, char *buf, size_t cap) {
    if (f->dflt) return f->dflt;
    if (f->show) return f->show(f, opts, buf, cap);
    const void *at = cfield(f, opts);
    switch (f->kind) {
    case CX_FLAG_STR: {
        const char *s;
        memcpy(&s, at, sizeof s);
        return s;
    }
    case CX_FLAG_INT: snprintf(buf, cap, "%d", *(const int *)at); return buf;
    case CX_FLAG_LONG: snprintf(buf, cap, "%ld", *(const long *)at); return buf;
    case CX_FLAG_U64: snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)at); return buf;
    case CX_FLAG_FLOAT: snprintf(buf, cap, "%g", (double)*(const float *)at); return buf;
    case CX_FLAG_DOUBLE: snprintf(buf, cap, "%g", *(const double *)at); return buf;
    case CX_FLAG_BUDGET: {
        int64_t b = *(const int64_t *)at;
        if (b == CX_KV_UNLIMITED) return "unlimited";
        snprintf(buf, cap, "%lld", (long long)b);
        return buf;
    }
    case CX_FLAG_CHOICE: {
        char tmp[256];
        const char *name = list_item(flag_values(f, tmp, sizeof tmp), *(const int *)at, buf, cap);
        return name;
    }
    default: return NULL;
    }
}

/* The range of a number flag as the help shows it ("1..256"); NULL for other kinds. */
static const char *flag_range(const cx_flag *f, char *buf, size_t cap) {
    switch (f->kind) {
    case CX_FLAG_INT: case CX_FLAG_LONG: case CX_FLAG_U64:
        snprintf(buf, cap, "%lld..%lld", bound(f->lo), bound(f->hi));
        return buf;
    case CX_FLAG_FLOAT: case CX_FLAG_DOUBLE: snprintf(buf, cap, "%g..%g", f->lo, f->hi); return buf;
    default: return NULL;
    }
}

/* Store value v of flag f (as written: `name`) into opts; 0, or CX_EINVAL with the message in err. (A
 * CX_FLAG_CUSTOM parser, a public callback, writes its message into err->msg itself.) */
static int flag_set(const cx_flag *f, const char *name, const char *v, void *opts, cx_err *err) {
    void *at = field(f, opts);
    char list[1024];
    const char *vals = flag_values(f, list, sizeof list);
    int idx = vals ? list_find(vals, v) : -1;
    if (vals && idx < 0) return cx_fail(err, CX_EINVAL, "%s: '%s' is not one of %s", name, v, vals);
    long long i;
    double d;
    switch (f->kind) {
    case CX_FLAG_STR: memcpy(at, &v, sizeof v); return 0;
    case CX_FLAG_INT: case CX_FLAG_LONG: case CX_FLAG_U64:
        if (cx_parse_int_in(v, bound(f->lo), bound(f->hi), &i))
            return cx_fail(err, CX_EINVAL, "%s: '%s' is not an integer in [%lld, %lld]", name, v, bound(f->lo),
                           bound(f->hi));
        if (f->kind == CX_FLAG_INT) *(int *)at = (int)i;
        else if (f->kind == CX_FLAG_LONG) *(long *)at = (long)i;
        else *(uint64_t *)at = (uint64_t)i;
        return 0;
    case CX_FLAG_FLOAT: case CX_FLAG_DOUBLE:
        if (cx_parse_num_in(v, f->lo, f->hi, &d))
            return cx_fail(err, CX_EINVAL, "%s: '%s' is not a number in [%g, %g]", name, v, f->lo, f->hi);
        if (f->kind == CX_FLAG_FLOAT) *(float *)at = (float)d;
        else *(double *)at = d;
        return 0;
    case CX_FLAG_BUDGET: {
        int64_t b = !strcmp(v, "unlimited") ? CX_KV_UNLIMITED : cx_parse_bytes(v);
        if (b == -1 && strcmp(v, "unlimited"))
            return cx_fail(err, CX_EINVAL, "%s: '%s' is not a byte count (e.g. 65536, 64K, 1.5M, 2G) or 'unlimited'",
                           name, v);
        *(int64_t *)at = b;
        return 0;
    }
    case CX_FLAG_CHOICE: *(int *)at = idx; return 0;
    case CX_FLAG_CUSTOM:
        if (!f->parse) return cx_fail(err, CX_EINVAL, "%s: no parser for this flag", name);
        err->msg[0] = 0;
        if (f->parse(f, name, v, opts, err->msg, sizeof err->msg) == 0) return 0;
        return err->code = CX_EINVAL;
    default: return cx_fail(err, CX_EINVAL, "%s: takes no value", name);
    }
}

/* Print "PROG: " + the message + newline to stderr; return 2. */
static int fail(const cx_flags *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(const cx_flags *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", p->prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

/* The entry of flag `a` for p's command, or -1. */
static int flag_find(const cx_flags *p, const char *a) {
    for (int i = 0; i < p->n; i++) {
        const cx_flag *f = &p->table[i];
        if ((f->cmds & p->bit) && (!strcmp(a, f->name) || (f->alias && !strcmp(a, f->alias)))) return i;
    }
    return -1;
}

/* See cortex_tools.h. */
int cx_flags_parse(cx_flags *p, int argc, char **argv, void *opts) {
    p->n_pos = 0;
    memset(p->given, 0, sizeof p->given);
    if (p->n > CX_FLAGS_MAX || p->max_pos > CX_FLAGS_MAX_POS)
        return fail(p, "%s: the flag table has %d entries and %d positional arguments (at most %d and %d)", p->cmd, p->n,
                    p->max_pos, CX_FLAGS_MAX, CX_FLAGS_MAX_POS);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1]) { /* positional ("-" included) */
            if (p->n_pos >= p->max_pos)
                return fail(p, "%s: unexpected argument '%s' (see %s %s --help)", p->cmd, a, p->prog, p->cmd);
            p->pos[p->n_pos++] = a;
            continue;
        }
        int k = flag_find(p, a);
        if (k < 0) return fail(p, "%s: unknown option '%s' (see %s %s --help)", p->cmd, a, p->prog, p->cmd);
        const cx_flag *f = &p->table[k];
        if (f->kind == CX_FLAG_HELP) return 1;
        p->given[k / 8] |= (unsigned char)(1u << (k % 8));
        if (f->kind == CX_FLAG_SWITCH) {
            *(int *)field(f, opts) = 1;
            continue;
        }
        if (i + 1 >= argc) return fail(p, "%s: %s needs a value (%s)", p->cmd, a, f->meta ? f->meta : "a value");
        cx_err err;
        if (flag_set(f, a, argv[++i], opts, &err)) return fail(p, "%s", err.msg);
    }
    return 0;
}

/* See cortex_tools.h. */
int cx_flags_given(const cx_flags *p, size_t off, size_t size) {
    for (int i = 0; i < p->n && i < CX_FLAGS_MAX; i++) {
        const cx_flag *f = &p->table[i];
        if ((f->cmds & p->bit) && f->off >= off && f->off < off + size && (p->given[i / 8] >> (i % 8) & 1)) return 1;
    }
    return 0;
}

/* See cortex_tools.h. The left column is 29 characters and a space; a
 * longer one gets a line of its own, the help starting under the others'. */
void cx_flags_help(const cx_flags *p, const void *defaults, FILE *out) {
    for (int i = 0; i < p->n; i++) {
        const cx_flag *f = &p->table[i];
        if (!(f->cmds & p->bit)) continue;
        char left[128], vbuf[1024], dbuf[256], rbuf[96];
        int short_name = f->name[1] != '-'; /* "-o" alone stands in the aliases' column */
        snprintf(left, sizeof left, "  %s%s%s%s%s", f->alias ? f->alias : "", f->alias ? ", " : short_name ? "" : "    ",
                 f->name, f->meta ? " " : "", f->meta ? f->meta : "");
        const char *vals = flag_values(f, vbuf, sizeof vbuf), *range = vals ? NULL : flag_range(f, rbuf, sizeof rbuf);
        const char *dflt = f->kind == CX_FLAG_HELP ? NULL : flag_default(f, defaults, dbuf, sizeof dbuf);
        if (strlen(left) >= 30) fprintf(out, "%s\n%31s", left, "");
        else fprintf(out, "%-30s ", left);
        fputs(f->help, out);
        if (vals || range || dflt)
            fprintf(out, " (%s%s%s%s%s)", vals ? "one of " : "", vals ? vals : range ? range : "",
                    (vals || range) && dflt ? "; " : "", dflt ? "default " : "", dflt ? dflt : "");
        fputc('\n', out);
    }
}

/* ---- callbacks over the engine's tables ---- */

/* See cortex_tools.h. */
const char *cx_flag_kv_types(const cx_flag *f, char *buf, size_t cap) { return cx_kv_tier_types((int)f->lo, buf, cap); }

/* See cortex_tools.h: the value is one of the tier's types already (the parser checked the list). */
int cx_flag_kv_type(const cx_flag *f, const char *name, const char *v, void *opts, char *err, size_t n) {
    int t = cx_kv_type_from_name(v);
    if (t < 0) return snprintf(err, n, "%s: '%s' is not a KV type", name, v), -1;
    *(int *)field(f, opts) = t;
    return 0;
}

/* See cortex_tools.h. */
const char *cx_flag_kv_type_show(const cx_flag *f, const void *opts, char *buf, size_t cap) {
    (void)buf, (void)cap;
    return cx_kv_type_name(*(const int *)cfield(f, opts));
}

/* See cortex_tools.h. */
const char *cx_flag_kv_policies(const cx_flag *f, char *buf, size_t cap) {
    (void)f;
    buf[0] = 0;
    for (int p = 0; cx_kv_policy_name(p); p++) list_add(buf, cap, cx_kv_policy_name(p));
    return buf;
}

/* See cortex_tools.h. */
int cx_flag_kv_policy(const cx_flag *f, const char *name, const char *v, void *opts, char *err, size_t n) {
    int p = cx_kv_policy_from_name(v);
    if (p < 0) return snprintf(err, n, "%s: '%s' is not a KV policy", name, v), -1;
    *(int *)field(f, opts) = p;
    return 0;
}

/* See cortex_tools.h. */
const char *cx_flag_kv_policy_show(const cx_flag *f, const void *opts, char *buf, size_t cap) {
    (void)buf, (void)cap;
    return cx_kv_policy_name(*(const int *)cfield(f, opts));
}

/* See cortex_tools.h: the names in enum order, so a choice's index is the policy. */
const char *cx_flag_pin_policies(const cx_flag *f, char *buf, size_t cap) {
    (void)f;
    buf[0] = 0;
    for (int p = 0; cx_pin_policy_name(p); p++) list_add(buf, cap, cx_pin_policy_name(p));
    return buf;
}

/* See cortex_tools.h. */
const char *cx_flag_numa_policies(const cx_flag *f, char *buf, size_t cap) {
    (void)f;
    buf[0] = 0;
    for (int p = 0; cx_numa_policy_name(p); p++) list_add(buf, cap, cx_numa_policy_name(p));
    return buf;
}

/* See cortex_tools.h: every tensor type id with a name, then the file types (one today). */
const char *cx_flag_weight_types(const cx_flag *f, char *buf, size_t cap) {
    (void)f;
    buf[0] = 0;
    for (int t = 0; t < CX_QUANT_NTYPES; t++)
        if (strcmp(cx_type_name(t), "?")) list_add(buf, cap, cx_type_name(t));
    list_add(buf, cap, cx_type_name(CX_FTYPE_Q4_K_M));
    return buf;
}

/* See cortex_tools.h. */
const char *cx_flag_shapes(const cx_flag *f, char *buf, size_t cap) {
    (void)f;
    buf[0] = 0;
    for (const cx_shape *s = cx_shapes(); s->name; s++) list_add(buf, cap, s->name);
    return buf;
}
