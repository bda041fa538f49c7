/*
 * db.c - see db.h: the dispatch to an engine (db_sqlite.c, db_pg.c) and the
 * SQL translations (db_int.h).
 */
#include "db_int.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hx_err.h"

int db_is_url(const char *t) { return t && (!strncmp(t, "postgresql://", 13) || !strncmp(t, "postgres://", 11)); }

int db_open(const char *target, db **out, char *err, size_t errlen) {
    *out = NULL;
    db *d = calloc(1, sizeof *d);
    if (!d) return hx_fail(err, errlen, "out of memory");
    int pg = db_is_url(target);
    d->ops = pg ? &DB_PG_OPS : &DB_SQLITE_OPS;
    d->kind = pg ? DB_POSTGRES : DB_SQLITE;
    if (pg) db_mask_url(target, d->name, sizeof d->name);
    else snprintf(d->name, sizeof d->name, "%s", target);
    if (d->ops->open(d, target, err, errlen)) {
        free(d);
        return -1;
    }
    *out = d;
    return 0;
}

void db_close(db *d) {
    if (!d) return;
    d->ops->close(d);
    free(d);
}

db_kind db_kind_of(const db *d) { return d->kind; }
const char *db_name(const db *d) { return d->name; }
const char *db_errmsg(db *d) { return d->ops->errmsg(d); }
int db_exec(db *d, const char *sql) { return d->ops->exec(d, sql); }

int db_exec_ddl(db *d, const char *sql) {
    if (d->kind == DB_SQLITE) return db_exec(d, sql);
    char *t = db_translate_ddl(sql);
    int rc = t ? db_exec(d, t) : -1;
    free(t);
    return rc;
}

int db_begin(db *d) { return d->ops->begin(d); }
int db_commit(db *d) { return d->ops->exec(d, "COMMIT"); }
void db_rollback(db *d) { d->ops->exec(d, "ROLLBACK"); }
int db_lock_schema(db *d) { return d->ops->lock_schema(d); }
int db_schema_version(db *d) { return d->ops->schema_version(d); }
int db_set_schema_version(db *d, int v) { return d->ops->set_schema_version(d, v); }
db_stmt *db_prepare(db *d, const char *sql) { return d->ops->prepare(d, sql); }
int db_param_count(db_stmt *st) { return st->d->ops->param_count(st); }
void db_bind_int(db_stmt *st, int i, int64_t v) { st->d->ops->bind_int(st, i, v); }
void db_bind_double(db_stmt *st, int i, double v) {
    if (isnan(v)) st->d->ops->bind_null(st, i);
    else st->d->ops->bind_double(st, i, v);
}
void db_bind_text(db_stmt *st, int i, const char *v) {
    if (!v) st->d->ops->bind_null(st, i);
    else st->d->ops->bind_text(st, i, v);
}
void db_bind_null(db_stmt *st, int i) { st->d->ops->bind_null(st, i); }
int db_step(db_stmt *st) { return st->d->ops->step(st); }
void db_reset(db_stmt *st) { st->d->ops->reset(st); }
int64_t db_changes(db_stmt *st) { return st->d->ops->changes(st); }
void db_finalize(db_stmt *st) {
    if (st) st->d->ops->finalize(st);
}
int db_column_count(db_stmt *st) { return st->d->ops->column_count(st); }
const char *db_column_name(db_stmt *st, int i) { return st->d->ops->column_name(st, i); }
int db_column_null(db_stmt *st, int i) { return st->d->ops->column_null(st, i); }
const char *db_column_text(db_stmt *st, int i) { return st->d->ops->column_text(st, i); }
const char *db_column_exact(db_stmt *st, int i, char *buf, size_t n) { return st->d->ops->column_exact(st, i, buf, n); }

double db_column_double(db_stmt *st, int i) { return st->d->ops->column_double(st, i); }
int64_t db_column_int(db_stmt *st, int i) { return st->d->ops->column_int(st, i); }

double db_text_double(const char *t) {
    if (!t) return NAN;
    if (!strcmp(t, "t")) return 1;
    if (!strcmp(t, "f")) return 0;
    return strtod(t, NULL);
}

int64_t db_text_int(const char *t) {
    if (!t) return 0;
    if (!strcmp(t, "t")) return 1;
    if (!strcmp(t, "f")) return 0;
    char *end;
    long long v = strtoll(t, &end, 10);
    if (*end == '.' || *end == 'e' || *end == 'E') return (int64_t)strtod(t, NULL); /* a REAL read as an integer */
    return v;
}

/* ---- translations ---- */

/* Length of the quoted text or comment starting at p (0 when none starts there). */
static size_t skip_quoted(const char *p) {
    if (*p == '\'' || *p == '"') {
        char q = *p;
        size_t k = 1;
        for (; p[k]; k++)
            if (p[k] == q) {
                if (p[k + 1] == q) k++; /* '' inside a literal */
                else return k + 1;
            }
        return k;
    }
    if (p[0] == '-' && p[1] == '-') {
        size_t k = 2;
        while (p[k] && p[k] != '\n') k++;
        return k;
    }
    return 0;
}

/* Copy the quoted text or comment at *p to out + *o as it is, advancing both; 0 when none starts there. */
static int copy_quoted(const char **p, char *out, size_t *o) {
    size_t q = skip_quoted(*p);
    memcpy(out + *o, *p, q);
    *o += q, *p += q;
    return q > 0;
}

char *db_translate_params(const char *sql, int *n_params) {
    size_t len = strlen(sql);
    char *out = malloc(len * 4 + 1); /* "?" -> "$NNN" at most */
    if (!out) return NULL;
    size_t o = 0;
    int max = 0;
    for (const char *p = sql; *p;) {
        if (copy_quoted(&p, out, &o)) continue;
        if (*p != '?') {
            out[o++] = *p++;
            continue;
        }
        p++;
        int n = 0;
        if (isdigit((unsigned char)*p)) {
            while (isdigit((unsigned char)*p) && n < 100000) n = n * 10 + (*p++ - '0');
        } else {
            n = max + 1;
        }
        if (n > max) max = n;
        o += (size_t)sprintf(out + o, "$%d", n);
    }
    out[o] = 0;
    if (n_params) *n_params = max;
    return out;
}

static int word_at(const char *p, const char *start, const char *w) {
    size_t n = strlen(w);
    if (strncmp(p, w, n)) return 0;
    if (p > start && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) return 0;
    return !(isalnum((unsigned char)p[n]) || p[n] == '_');
}

char *db_translate_ddl(const char *sql) {
    static const struct { const char *from, *to; } MAP[] = {
        {"INTEGER PRIMARY KEY", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"},
        {"INTEGER", "BIGINT"},
        {"REAL", "DOUBLE PRECISION"},
    };
    size_t len = strlen(sql);
    char *out = malloc(len * 3 + 64);
    if (!out) return NULL;
    size_t o = 0;
    for (const char *p = sql; *p;) {
        if (copy_quoted(&p, out, &o)) continue;
        int hit = 0;
        for (size_t m = 0; m < sizeof MAP / sizeof MAP[0] && !hit; m++)
            if (word_at(p, sql, MAP[m].from)) {
                o += (size_t)sprintf(out + o, "%s", MAP[m].to);
                p += strlen(MAP[m].from);
                hit = 1;
            }
        if (!hit) out[o++] = *p++;
    }
    out[o] = 0;
    return out;
}

void db_mask_url(const char *url, char *out, size_t n) {
    /* scheme://user:password@host...: the password is between the first ':' after
     * "//" and the '@' that ends the user part */
    const char *s = strstr(url, "//");
    const char *at = s ? strchr(s + 2, '@') : NULL;
    const char *slash = s ? strchr(s + 2, '/') : NULL;
    const char *colon = s ? strchr(s + 2, ':') : NULL;
    if (at && (!slash || at < slash) && colon && colon < at)
        snprintf(out, n, "%.*s:***%s", (int)(colon - url), url, at);
    else snprintf(out, n, "%s", url);
    char *pw = strstr(out, "password=");
    if (pw && strlen(out) + 4 < n) { /* password=... in the query string */
        char *e = pw + 9;
        while (*e && *e != '&') e++;
        memmove(pw + 12, e, strlen(e) + 1);
        memcpy(pw + 9, "***", 3);
    }
}
