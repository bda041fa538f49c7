/*
 * show_kv.c - the "KV cache" section of `cortex-bench run`, `show` and
 * `report`: the run's KV configuration and its kv_* metrics (medians over
 * repetitions) with their meaning and unit. Definitions: docs/metrics.md.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "show.h"

/* The kv_* metrics in display order. */
static const struct { const char *name, *label, *unit; } KV_ROWS[] = {
    {"kv_prefix_hit_rate", "prefix hit rate (blocks found / full prompt blocks looked up)", "fraction"},
    {"kv_prefix_token_frac", "prompt tokens reused from the prefix cache / prompt tokens", "fraction"},
    {"kv_prefix_tokens", "prompt tokens reused", "tokens"},
    {"kv_prefix_hits", "prefix blocks found", "blocks"},
    {"kv_prefix_lookups", "prefix blocks looked up", "blocks"},
    {"kv_cow_copies", "copy-on-write copies", ""},
    {"kv_hits_hot", "block reads served from hot", "reads"},
    {"kv_hits_warm", "block reads served from warm", "reads"},
    {"kv_hits_cold", "block reads served from cold", "reads"},
    {"kv_peak_bytes_hot", "peak hot bytes", "B"},
    {"kv_peak_bytes_warm", "peak warm bytes", "B"},
    {"kv_peak_bytes_cold", "peak cold bytes (in memory)", "B"},
    {"kv_peak_spilled_bytes", "peak spilled bytes", "B"},
    {"kv_zip_ratio", "zlib ratio (bytes in / out)", ""},
    {"kv_restores", "cold pages restored", "pages"},
    {"kv_restore_us_mean", "restore latency, mean", "us"},
    {"kv_demotions", "demotions", "blocks"},
    {"kv_promotions", "promotions", "blocks"},
    {"kv_spills", "spills", "pages"},
    {"kv_drops", "cached prefixes dropped", "blocks"},
};

/* See show.h. */
void show_kv(sqlite3 *db, int64_t id, FILE *out) {
    sqlite3_stmt *st;
    char config[512] = "default (recorded before schema v6)";
    if (sqlite3_prepare_v2(db, "SELECT kv_config FROM runs WHERE id = ?", -1, &st, NULL) != SQLITE_OK) return;
    sqlite3_bind_int64(st, 1, id);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
        snprintf(config, sizeof config, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(db, "SELECT median FROM summary WHERE run_id = ? AND name = ?", -1, &st, NULL) != SQLITE_OK)
        return;
    fprintf(out, "### KV cache\n\n`%s`\n\n| metric | median | unit |\n| --- | ---: | --- |\n", config);
    for (size_t i = 0; i < sizeof KV_ROWS / sizeof KV_ROWS[0]; i++) {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_text(st, 2, KV_ROWS[i].name, -1, SQLITE_STATIC);
        if (sqlite3_step(st) != SQLITE_ROW || sqlite3_column_type(st, 0) == SQLITE_NULL) continue;
        double v = sqlite3_column_double(st, 0);
        if (!strcmp(KV_ROWS[i].unit, "fraction")) fprintf(out, "| %s | %.3f (%.1f%%) | |\n", KV_ROWS[i].label, v, v * 100);
        else if (v == (double)(long long)v) fprintf(out, "| %s | %lld | %s |\n", KV_ROWS[i].label, (long long)v, KV_ROWS[i].unit);
        else fprintf(out, "| %s | %.3f | %s |\n", KV_ROWS[i].label, v, KV_ROWS[i].unit);
    }
    sqlite3_finalize(st);
    fprintf(out, "\n");
}
