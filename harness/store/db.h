/*
 * db.h - one SQL connection, to a SQLite file or a PostgreSQL server: the
 * store's only way to the database (store-internal: only harness/store/
 * includes it). The store writes its SQL once, in the subset both engines
 * speak (docs/harness.md, "One schema, two engines"); this layer carries it
 * over the differences that cannot be written away:
 *
 *   - parameters are written ?N (or ?); on PostgreSQL they become $N,
 *     whose type the server infers from the first place one is used: a
 *     parameter whose first use gives no type (?2 IS NULL) is written
 *     CAST(?2 AS TEXT);
 *   - migrations (db_exec_ddl) name SQLite's types; on PostgreSQL INTEGER
 *     becomes BIGINT, REAL DOUBLE PRECISION and INTEGER PRIMARY KEY an
 *     identity column (so a byte count or a double keeps every bit);
 *   - the schema version is PRAGMA user_version on SQLite, the one row of
 *     table cortex_schema on PostgreSQL;
 *   - a write transaction is BEGIN IMMEDIATE on SQLite (writers queue at
 *     BEGIN, 30 s busy timeout), BEGIN on PostgreSQL (row locks).
 *
 * Every value is read back by column; PostgreSQL's are fetched as text (a
 * boolean reads as 1 or 0, a NULL as NULL) so both engines give readers the
 * same numbers. A statement on PostgreSQL runs at its first db_step, which
 * fetches the whole result: the store's queries are bounded (one run, one
 * history), and no cursor stays open across a transaction boundary.
 *
 * Errors: every call that fails returns -1 (NULL for db_prepare) and leaves
 * the engine's message in db_errmsg.
 */
#ifndef CB_DB_H
#define CB_DB_H

#include <stddef.h>
#include <stdint.h>

typedef struct db db;
typedef struct db_stmt db_stmt;

typedef enum { DB_SQLITE, DB_POSTGRES } db_kind;
enum { DB_ERROR = -1, DB_DONE = 0, DB_ROW = 1 };

/* Is `target` a PostgreSQL connection URL (postgresql:// or postgres://)? */
int db_is_url(const char *target);
/* Open a SQLite file (created when absent) or connect to a server. */
int db_open(const char *target, db **out, char *err, size_t errlen);
void db_close(db *d);
db_kind db_kind_of(const db *d);
/* The target for messages: a path, or the URL without its password. */
const char *db_name(const db *d);
const char *db_errmsg(db *d);

/* Run one or more statements without parameters. */
int db_exec(db *d, const char *sql);
/* The same for a migration's DDL: types translated for the engine. */
int db_exec_ddl(db *d, const char *sql);
int db_begin(db *d);
int db_commit(db *d);
void db_rollback(db *d);
/* Inside a transaction: wait until no other connection is migrating the
 * schema (SQLite: BEGIN IMMEDIATE already did; PostgreSQL: an advisory
 * lock held to the end of the transaction). */
int db_lock_schema(db *d);
/* The schema version (0 for an empty database), or -1. */
int db_schema_version(db *d);
int db_set_schema_version(db *d, int v);

db_stmt *db_prepare(db *d, const char *sql);
int db_param_count(db_stmt *st);
void db_bind_int(db_stmt *st, int i, int64_t v);
/* NAN binds NULL. */
void db_bind_double(db_stmt *st, int i, double v);
/* NULL binds NULL. */
void db_bind_text(db_stmt *st, int i, const char *v);
void db_bind_null(db_stmt *st, int i);
/* DB_ROW, DB_DONE or DB_ERROR. */
int db_step(db_stmt *st);
/* Ready to run again with new bindings (the old ones are kept). */
void db_reset(db_stmt *st);
/* Rows the statement's last run inserted, updated or deleted. */
int64_t db_changes(db_stmt *st);
void db_finalize(db_stmt *st);

int db_column_count(db_stmt *st);
const char *db_column_name(db_stmt *st, int i);
int db_column_null(db_stmt *st, int i);
/* NULL when the value is NULL. */
const char *db_column_text(db_stmt *st, int i);
double db_column_double(db_stmt *st, int i);
int64_t db_column_int(db_stmt *st, int i);
/* The value as text that reads back to the same value, or NULL when it is
 * NULL: a float with all 17 digits (copying rows between stores). */
const char *db_column_exact(db_stmt *st, int i, char *buf, size_t n);

#endif
