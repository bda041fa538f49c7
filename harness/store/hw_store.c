/*
 * hw_store.c - the `hw` table (see hw_store.h).
 */
#include "hw_store.h"
#include "store_row.h"
#include "hx_err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bind a double, or NULL for NAN (a figure that was not measured). */
static void hw_bind_num(db_stmt *st, int i, double v) {
    if (isnan(v)) db_bind_null(st, i);
    else db_bind_double(st, i, v);
}

/* Bind a text, or NULL for NULL/empty. */
static void hw_bind_text(db_stmt *st, int i, const char *v) {
    if (v && *v) db_bind_text(st, i, v);
    else db_bind_null(st, i);
}

/* Write the row with the prepared INSERT; DB_DONE on success. */
static int hw_insert_row(db *d, int64_t env, const hw_result *r, int64_t *id) {
    static const char *sql =
        "INSERT INTO hw (env_id, measured_at, threads, cpus, reps, buffer_bytes, llc_bytes, mem_isa,"
        " read_gbs_1t, read_gbs_1t_median, copy_gbs_1t, triad_gbs_1t, read_gbs, read_gbs_median, copy_gbs, triad_gbs,"
        " fp32_gflops_scalar_1t, fp32_gflops_scalar, fp32_gflops_avx2_1t, fp32_gflops_avx2, int8_gops_avx2_1t,"
        " int8_gops_avx2, avx512, vnni, notes, uuid)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id";
    char now[40], uuid[37];
    store_now(now, sizeof now);
    db_stmt *st = store_new_uuid(uuid) ? NULL : db_prepare(d, sql);
    if (!st) return DB_ERROR;
    int i = 1;
    db_bind_int(st, i++, env);
    db_bind_text(st, i++, now);
    db_bind_int(st, i++, r->threads);
    hw_bind_text(st, i++, r->cpus);
    db_bind_int(st, i++, r->reps);
    db_bind_int(st, i++, (int64_t)r->buffer_bytes);
    if (r->llc_bytes) db_bind_int(st, i++, (int64_t)r->llc_bytes);
    else db_bind_null(st, i++);
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
    db_bind_text(st, i++, uuid);
    int rc = db_step(st);
    if (rc == DB_ROW) *id = db_column_int(st, 0);
    db_finalize(st);
    return rc;
}

int hw_store_insert(store *s, const hw_result *r, const env_info *e, int64_t *id, char *err, size_t errlen) {
    db *d = store_db(s);
    if (db_begin(d)) return hx_fail(err, errlen, "%s: begin hw row: %s", db_name(d), db_errmsg(d));
    int64_t env = store_env_id(s, e);
    const char *what = env < 0 || hw_insert_row(d, env, r, id) != DB_ROW ? "record hw measurement"
                       : db_commit(d)                                      ? "commit hw row"
                                                                           : NULL;
    if (what) {
        hx_fail(err, errlen, "%s: %s: %s", db_name(d), what, db_errmsg(d));
        db_rollback(d);
        return -1;
    }
    return 0;
}

int hw_store_lookup(store *s, const char *fingerprint, int64_t env_id, int threads, hw_ref *out) {
    /* Rows of the machine; those measured at exactly `threads` first, then newest. */
    const char *sql =
        "SELECT h.id, h.threads, h.read_gbs_1t, h.read_gbs, h.measured_at FROM hw h JOIN environments e ON e.id = h.env_id"
        " WHERE (CAST(?1 AS TEXT) IS NOT NULL AND e.fingerprint = ?1) OR (CAST(?1 AS TEXT) IS NULL AND e.id = ?2)"
        " ORDER BY (?3 > 1 AND h.threads = ?3) DESC, h.id DESC LIMIT 1";
    db *d = store_db(s);
    memset(out, 0, sizeof *out);
    db_stmt *st = db_prepare(d, sql);
    if (!st) /* a database that predates the hw table has no measurement either */
        return strstr(db_errmsg(d), "no such table") ? 0 : -1;
    if (fingerprint) db_bind_text(st, 1, fingerprint);
    else db_bind_null(st, 1);
    db_bind_int(st, 2, env_id);
    db_bind_int(st, 3, threads);
    int rc = db_step(st), found = 0;
    if (rc == DB_ERROR && strstr(db_errmsg(d), "does not exist")) rc = DB_DONE; /* the same, on PostgreSQL */
    if (rc == DB_ROW) {
        out->id = row_int(st, "id");
        out->hw_threads = (int)row_int(st, "threads");
        int one = threads == 1 && !row_null(st, "read_gbs_1t");
        out->read_gbs = row_num(st, one ? "read_gbs_1t" : "read_gbs");
        out->threads = one ? 1 : out->hw_threads;
        row_copy(st, "measured_at", out->measured_at, sizeof out->measured_at);
        found = out->read_gbs > 0;
    }
    db_finalize(st);
    return rc == DB_ROW || rc == DB_DONE ? found : -1;
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
    memset(out, 0, sizeof *out);
    db_stmt *st = db_prepare(store_db(s), "SELECT id, threads, read_gbs_1t, read_gbs, fp32_gflops_scalar_1t,"
                                          " fp32_gflops_avx2_1t, int8_gops_avx2_1t, avx512, vnni, llc_bytes, measured_at"
                                          " FROM hw WHERE id = ?1");
    if (!st) return -1;
    db_bind_int(st, 1, id);
    int rc = db_step(st);
    if (rc == DB_ROW) {
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
    db_finalize(st);
    return rc == DB_ROW ? 1 : rc == DB_DONE ? 0 : -1;
}
