/*
 * db_int.h - what db.c's dispatch and the two engines (db_sqlite.c,
 * db_pg.c) share: each engine fills a table of operations; db.c owns the
 * handles' common fields and the SQL translations (db_translate_params,
 * db_translate_ddl), which are pure text functions so the fuzzer and the
 * unit test reach them without a server.
 */
#ifndef CB_DB_INT_H
#define CB_DB_INT_H

#include "db.h"

typedef struct db_ops {
    int (*open)(db *d, const char *target, char *err, size_t errlen);
    void (*close)(db *d);
    const char *(*errmsg)(db *d);
    int (*exec)(db *d, const char *sql);
    int (*begin)(db *d);
    int (*lock_schema)(db *d);
    int (*schema_version)(db *d);
    int (*set_schema_version)(db *d, int v);
    db_stmt *(*prepare)(db *d, const char *sql);
    int (*param_count)(db_stmt *st);
    void (*bind_int)(db_stmt *st, int i, int64_t v);
    void (*bind_double)(db_stmt *st, int i, double v);
    void (*bind_text)(db_stmt *st, int i, const char *v);
    void (*bind_null)(db_stmt *st, int i);
    int (*step)(db_stmt *st);
    void (*reset)(db_stmt *st);
    int64_t (*changes)(db_stmt *st);
    void (*finalize)(db_stmt *st);
    int (*column_count)(db_stmt *st);
    const char *(*column_name)(db_stmt *st, int i);
    int (*column_null)(db_stmt *st, int i);
    const char *(*column_text)(db_stmt *st, int i);
    double (*column_double)(db_stmt *st, int i);
    int64_t (*column_int)(db_stmt *st, int i);
    const char *(*column_exact)(db_stmt *st, int i, char *buf, size_t n);
} db_ops;

struct db {
    const db_ops *ops;
    db_kind kind;
    char name[512]; /* for messages: the path, or the URL without a password */
    void *h;        /* the engine's connection */
};

/* Every statement starts with these; the engine's fields follow. */
struct db_stmt {
    db *d;
};

extern const db_ops DB_SQLITE_OPS, DB_PG_OPS;

/* ?N and ? parameters to $N (SQLite's numbering: a bare ? takes one more
 * than the largest number so far); quoted text and comments are copied as
 * they are. Malloc'd; NULL when out of memory. *n_params: the largest N. */
char *db_translate_params(const char *sql, int *n_params);
/* SQLite's DDL types to PostgreSQL's (db.h). Malloc'd; NULL when out of memory. */
char *db_translate_ddl(const char *sql);
/* A number from PostgreSQL's text: booleans (t, f), numerics ("2.5000"),
 * NULL (NAN, 0). */
double db_text_double(const char *t);
int64_t db_text_int(const char *t);
/* The URL with any password replaced by "***", into out. */
void db_mask_url(const char *url, char *out, size_t n);

#endif
