/*
 * hw_store.c - the `hw` table (see hw_store.h).
 */
#include "hw_store.h"
#include "store_row.h"
#include "hx_err.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bind a double, or NULL for NAN (a figure that was not measured). */
static void hw_bind_num(sqlite3_stmt *st, int i, double v) {
    if (isnan(v)) sqlite3_bind_null(st, i);
    else sqlite3_bind_double(st, i, v);
}

/* Bind a text, or NULL for NULL/empty. */
static void hw_bind_text(sqlite3_stmt *st, int i, const char *v) {
    if (v && *v) sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(st, i);
}

/* Write the row with the prepared INSERT; SQLITE_DONE on success. */
static int hw_insert_row(sqlite3 *db, int64_t env, const hw_result *r) {
    static const char *sql =
        "INSERT INTO hw (env_id, measured_at, threads, cpus, reps, buffer_bytes, llc_bytes, mem_isa,"
        " read_gbs_1t, read_gbs_1t_median, copy_gbs_1t, triad_gbs_1t, read_gbs, read_gbs_median, copy_gbs, triad_gbs,"
        " fp32_gflops_scalar_1t, fp32_gflops_scalar, fp32_gflops_avx2_1t, fp32_gflops_avx2, int8_gops_avx2_1t,"
        " int8_gops_avx2, avx512, vnni, notes)"
        " VALUES (?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), ?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return SQLITE_ERROR;
    int i = 1;
    sqlite3_bind_int64(st, i++, env);
    sqlite3_bind_int(st, i++, r->threads);
    hw_bind_text(st, i++, r->cpus);
    sqlite3_bind_int(st, i++, r->reps);
    sqlite3_bind_int64(st, i++, (sqlite3_int64)r->buffer_bytes);
    if (r->llc_bytes) sqlite3_bind_int64(st, i++, (sqlite3_int64)r->llc_bytes);
    else sqlite3_bind_null(st, i++);
    hw_bind_text(st, i++, r->mem_isa);
    hw_bind_num(st, i++, r->read[0].best);
    hw_bind_num(st, i++, r->read[0].median);
    hw_bind_num(st, i++, r->copy[0].best);
    hw_bind_num(st, i++, r->triad[0].best);
    hw_bind_num(st, i++, r->read[1].best);
    hw_bind_num(st, i++, r->read[1].median);
    hw_bind_num(st, i++, r->copy[1].best);
    hw_bind_num(st, i++, r->triad[1].best);
    hw_bind_num(st, i++, r->fp32_scalar[0].best);
    hw_bind_num(st, i++, r->fp32_scalar[1].best);
    hw_bind_num(st, i++, r->fp32_avx2[0].best);
    hw_bind_num(st, i++, r->fp32_avx2[1].best);
    hw_bind_num(st, i++, r->int8_avx2[0].best);
    hw_bind_num(st, i++, r->int8_avx2[1].best);
    hw_bind_text(st, i++, r->avx512);
    hw_bind_text(st, i++, r->vnni);
    hw_bind_text(st, i++, r->notes);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc;
}

int hw_store_insert(store *s, const hw_result *r, const env_info *e, int64_t *id, char *err, size_t errlen) {
    sqlite3 *db = store_db(s);
    if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return hx_fail(err, errlen, "begin hw row: %s", sqlite3_errmsg(db));
    int64_t env = store_env_id(s, e);
    if (env < 0 || hw_insert_row(db, env, r) != SQLITE_DONE) {
        hx_fail(err, errlen, "record hw measurement: %s", sqlite3_errmsg(db));
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    *id = sqlite3_last_insert_rowid(db);
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        hx_fail(err, errlen, "commit hw row: %s", sqlite3_errmsg(db));
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return 0;
}

int hw_store_lookup(store *s, const char *fingerprint, int64_t env_id, int threads, hw_ref *out) {
    /* Rows of the machine; those measured at exactly `threads` first, then newest. */
    const char *sql =
        "SELECT h.id, h.threads, h.read_gbs_1t, h.read_gbs, h.measured_at FROM hw h JOIN environments e ON e.id = h.env_id"
        " WHERE (?1 IS NOT NULL AND e.fingerprint = ?1) OR (?1 IS NULL AND e.id = ?2)"
        " ORDER BY (?3 > 1 AND h.threads = ?3) DESC, h.id DESC LIMIT 1";
    sqlite3 *db = store_db(s);
    sqlite3_stmt *st;
    memset(out, 0, sizeof *out);
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        /* A database that predates the hw table has no measurement either. */
        return strstr(sqlite3_errmsg(db), "no such table") ? 0 : -1;
    }
    if (fingerprint) sqlite3_bind_text(st, 1, fingerprint, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(st, 1);
    sqlite3_bind_int64(st, 2, env_id);
    sqlite3_bind_int(st, 3, threads);
    int rc = sqlite3_step(st), found = 0;
    if (rc == SQLITE_ROW) {
        out->id = row_int(st, "id");
        out->hw_threads = (int)row_int(st, "threads");
        int one = threads == 1 && !row_null(st, "read_gbs_1t");
        out->read_gbs = row_num(st, one ? "read_gbs_1t" : "read_gbs");
        out->threads = one ? 1 : out->hw_threads;
        row_copy(st, "measured_at", out->measured_at, sizeof out->measured_at);
        found = out->read_gbs > 0;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? found : -1;
}

/* See hw_store.h. Word by word after "measured: ": the number whose next
 * words are a G...OP/s unit and "(1 thread)". */
double hw_store_text_peak_1t(const char *text) {
    static const char PREFIX[] = "measured: ";
    if (!text || strncmp(text, PREFIX, sizeof PREFIX - 1)) return NAN;
    const char *w = text + sizeof PREFIX - 1;
    while (*w) {
        const char *unit = strchr(w, ' ');
        if (!unit) break;
        unit++;
        size_t ulen = strcspn(unit, " ");
        char *end;
        double v = strtod(w, &end);
        if (end == unit - 1 && end > w && isfinite(v) && v > 0 && unit[0] == 'G' && ulen >= 5 &&
            !strncmp(unit + ulen - 4, "OP/s", 4) && !strncmp(unit + ulen, " (1 thread)", 11))
            return v;
        w = unit;
    }
    return NAN;
}

/* See hw_store.h. */
int hw_store_peaks(store *s, int64_t id, hw_peaks *out) {
    sqlite3 *db = store_db(s);
    sqlite3_stmt *st;
    memset(out, 0, sizeof *out);
    if (sqlite3_prepare_v2(db, "SELECT id, threads, read_gbs_1t, read_gbs, fp32_gflops_scalar_1t, fp32_gflops_avx2_1t,"
                               " int8_gops_avx2_1t, avx512, vnni, llc_bytes, measured_at FROM hw WHERE id = ?1", -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        out->id = row_int(st, "id");
        out->threads = (int)row_int(st, "threads");
        out->read_gbs_1t = row_num(st, "read_gbs_1t");
        out->read_gbs = row_num(st, "read_gbs");
        out->fp32_scalar_1t = row_num(st, "fp32_gflops_scalar_1t");
        out->fp32_avx2_1t = row_num(st, "fp32_gflops_avx2_1t");
        out->int8_avx2_1t = row_num(st, "int8_gops_avx2_1t");
        out->fp32_avx512_1t = hw_store_text_peak_1t(row_text(st, "avx512"));
        out->int8_vnni_1t = hw_store_text_peak_1t(row_text(st, "vnni"));
        out->llc_bytes = row_null(st, "llc_bytes") ? NAN : row_num(st, "llc_bytes");
        row_copy(st, "measured_at", out->measured_at, sizeof out->measured_at);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}
