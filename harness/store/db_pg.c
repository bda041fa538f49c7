/*
 * db_pg.c - the PostgreSQL engine of db.h, over libpq. A statement keeps
 * its parameters as text (PostgreSQL infers their types from the SQL) and
 * runs at its first step with PQexecParams, which returns the whole result;
 * later steps walk its rows. Server notices ("table exists, skipping") are
 * dropped: errors come back as results.
 */
#include "db_int.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hx_err.h"

typedef struct {
    PGconn *c;
    char err[1024];
} pg_conn;

typedef struct {
    db_stmt base;
    char *sql;     /* with $N parameters */
    int n_params;
    char **vals;   /* n_params values as text; NULL is SQL NULL */
    PGresult *res; /* after the first step */
    int row;       /* the current row of res */
    int64_t changes;
} pg_stmt;

#define CONN(d) ((pg_conn *)(d)->h)
#define PS(s) ((pg_stmt *)(s))

/* Keep the server's message, one line, as the connection's last error. */
static void keep_error(pg_conn *pc, const char *msg) {
    snprintf(pc->err, sizeof pc->err, "%s", msg && *msg ? msg : "unknown error");
    size_t n = strlen(pc->err);
    while (n && (pc->err[n - 1] == '\n' || pc->err[n - 1] == ' ')) pc->err[--n] = 0;
    for (char *p = pc->err; *p; p++)
        if (*p == '\n' || *p == '\t') *p = ' ';
}

static void quiet(void *arg, const char *msg) { (void)arg, (void)msg; }

static int pg_open(db *d, const char *url, char *err, size_t errlen) {
    pg_conn *pc = calloc(1, sizeof *pc);
    if (!pc) return hx_fail(err, errlen, "out of memory");
    pc->c = PQconnectdb(url);
    if (!pc->c || PQstatus(pc->c) != CONNECTION_OK) {
        keep_error(pc, pc->c ? PQerrorMessage(pc->c) : "out of memory");
        hx_fail(err, errlen, "%s: cannot connect to the database: %s", d->name, pc->err);
        PQfinish(pc->c);
        free(pc);
        return -1;
    }
    PQsetNoticeProcessor(pc->c, quiet, NULL);
    d->h = pc;
    return 0;
}

static void pg_close(db *d) {
    PQfinish(CONN(d)->c);
    free(CONN(d));
}

static const char *pg_errmsg(db *d) { return CONN(d)->err; }

static int result_ok(pg_conn *pc, PGresult *r) {
    ExecStatusType s = PQresultStatus(r);
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) return 1;
    keep_error(pc, r ? PQresultErrorMessage(r) : PQerrorMessage(pc->c));
    return 0;
}

static int pg_exec(db *d, const char *sql) {
    PGresult *r = PQexec(CONN(d)->c, sql);
    int ok = result_ok(CONN(d), r);
    /* COMMIT of a transaction an error aborted answers ROLLBACK, and succeeds: it is a failure here */
    if (ok && !strcmp(sql, "COMMIT") && strcmp(PQcmdStatus(r), "COMMIT")) {
        keep_error(CONN(d), "the transaction was rolled back after an earlier error");
        ok = 0;
    }
    PQclear(r);
    return ok ? 0 : -1;
}

/* A write transaction. A run holds its connection while it measures, which
 * may be hours: a server or a network in between may have dropped it by the
 * time the results are written. Every write starts here, outside any
 * transaction, so a connection found broken is reconnected once and the
 * BEGIN tried again; nothing was in flight, so nothing is lost or doubled. */
static int pg_begin(db *d) {
    if (!pg_exec(d, "BEGIN")) return 0;
    if (PQstatus(CONN(d)->c) != CONNECTION_BAD) return -1;
    PQreset(CONN(d)->c);
    if (PQstatus(CONN(d)->c) != CONNECTION_OK) {
        keep_error(CONN(d), PQerrorMessage(CONN(d)->c));
        return -1;
    }
    return pg_exec(d, "BEGIN");
}
/* Any fixed number: the key of the one lock cortex-bench's migrations take. */
static int pg_lock_schema(db *d) { return pg_exec(d, "SELECT pg_advisory_xact_lock(2028282801)"); }

/* One value of a one-row query, as an integer; `none` when there is no row or it is NULL. */
static int64_t query_int(db *d, const char *sql, int64_t none, int *ok) {
    PGresult *r = PQexec(CONN(d)->c, sql);
    *ok = result_ok(CONN(d), r);
    int64_t v = none;
    if (*ok && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)) v = db_text_int(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

static int pg_schema_version(db *d) {
    int ok;
    int64_t exists = query_int(d, "SELECT to_regclass('cortex_schema') IS NOT NULL", 0, &ok);
    if (!ok) return -1;
    if (!exists) return 0;
    int64_t v = query_int(d, "SELECT max(version) FROM cortex_schema", 0, &ok);
    return ok ? (int)v : -1;
}

static int pg_set_schema_version(db *d, int v) {
    char sql[192];
    snprintf(sql, sizeof sql, "CREATE TABLE IF NOT EXISTS cortex_schema (version BIGINT NOT NULL);"
                              " DELETE FROM cortex_schema; INSERT INTO cortex_schema VALUES (%d)", v);
    return pg_exec(d, sql);
}

static db_stmt *pg_prepare(db *d, const char *sql) {
    pg_stmt *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->base.d = d;
    s->sql = db_translate_params(sql, &s->n_params);
    s->vals = s->n_params ? calloc((size_t)s->n_params, sizeof *s->vals) : NULL;
    if (!s->sql || (s->n_params && !s->vals)) {
        free(s->sql);
        free(s->vals);
        free(s);
        keep_error(CONN(d), "out of memory");
        return NULL;
    }
    return &s->base;
}

static int pg_param_count(db_stmt *s) { return PS(s)->n_params; }

static void set_val(db_stmt *s, int i, const char *text) {
    pg_stmt *p = PS(s);
    if (i < 1 || i > p->n_params) return; /* as SQLite: binding a parameter the SQL lacks does nothing */
    free(p->vals[i - 1]);
    p->vals[i - 1] = text ? strdup(text) : NULL;
}

static void pg_bind_int(db_stmt *s, int i, int64_t v) {
    char b[32];
    snprintf(b, sizeof b, "%lld", (long long)v);
    set_val(s, i, b);
}

static void pg_bind_double(db_stmt *s, int i, double v) {
    char b[40];
    snprintf(b, sizeof b, "%.17g", v);
    set_val(s, i, b);
}

static void pg_bind_text(db_stmt *s, int i, const char *v) { set_val(s, i, v); }
static void pg_bind_null(db_stmt *s, int i) { set_val(s, i, NULL); }

static int pg_step(db_stmt *s) {
    pg_stmt *p = PS(s);
    pg_conn *pc = CONN(s->d);
    if (!p->res) {
        p->res = PQexecParams(pc->c, p->sql, p->n_params, NULL, (const char *const *)p->vals, NULL, NULL, 0);
        if (!result_ok(pc, p->res)) return DB_ERROR;
        const char *n = PQcmdTuples(p->res);
        p->changes = n && *n ? atoll(n) : 0;
        p->row = 0;
    } else {
        p->row++;
    }
    return p->row < PQntuples(p->res) ? DB_ROW : DB_DONE;
}

static void pg_reset(db_stmt *s) {
    PQclear(PS(s)->res);
    PS(s)->res = NULL;
}

static int64_t pg_changes(db_stmt *s) { return PS(s)->changes; }

static void pg_finalize(db_stmt *s) {
    pg_stmt *p = PS(s);
    PQclear(p->res);
    for (int i = 0; i < p->n_params; i++) free(p->vals[i]);
    free(p->vals);
    free(p->sql);
    free(p);
}

static int pg_column_count(db_stmt *s) { return PS(s)->res ? PQnfields(PS(s)->res) : 0; }
static const char *pg_column_name(db_stmt *s, int i) { return PQfname(PS(s)->res, i); }

static int pg_column_null(db_stmt *s, int i) {
    pg_stmt *p = PS(s);
    return !p->res || p->row >= PQntuples(p->res) || PQgetisnull(p->res, p->row, i);
}

static const char *pg_column_text(db_stmt *s, int i) {
    return pg_column_null(s, i) ? NULL : PQgetvalue(PS(s)->res, PS(s)->row, i);
}

static double pg_column_double(db_stmt *s, int i) { return db_text_double(pg_column_text(s, i)); }
static int64_t pg_column_int(db_stmt *s, int i) { return db_text_int(pg_column_text(s, i)); }

/* A float8's text is already exact (shortest round-trip, PostgreSQL 12+). */
static const char *pg_column_exact(db_stmt *s, int i, char *buf, size_t n) {
    (void)buf, (void)n;
    return pg_column_text(s, i);
}

const db_ops DB_PG_OPS = {
    pg_open, pg_close, pg_errmsg, pg_exec, pg_begin, pg_lock_schema, pg_schema_version, pg_set_schema_version,
    pg_prepare, pg_param_count, pg_bind_int, pg_bind_double, pg_bind_text, pg_bind_null, pg_step, pg_reset,
    pg_changes, pg_finalize, pg_column_count, pg_column_name, pg_column_null, pg_column_text, pg_column_double,
    pg_column_int, pg_column_exact,
};
