/*
 * challenge.c - the challenge report (see challenge.h): challenge.md with
 * VALID or INVALID first, then the measured figures against the 30 tokens/s
 * baseline, per prompt, the charts (drawn by the report's chart code:
 * report_int.h, plot.h), the projection to the challenge machine and the
 * reproduction record. An INVALID run gets its verdict, its per-prompt
 * outcomes and the reproduction record, and nothing that reads as a figure.
 */
#include "challenge.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plot.h"
#include "report_int.h"
#include "show.h"
#include "hx_err.h"

enum { CC_TPS, CC_TTFT, CC_N };

/* "1 thread" / "2 threads" / "HTTP" for a run. */
static const char *threads_label(const chal_run *r, char *buf, size_t n) {
    if (r->info.endpoint[0]) snprintf(buf, n, "over HTTP");
    else snprintf(buf, n, "%d thread%s", r->info.threads, r->info.threads == 1 ? "" : "s");
    return buf;
}

/* ---------------------------------------------------------------- charts */

/* Per prompt, one bar per thread count: decode TPS against the baseline's
 * line (ttft = 0), or TTFT. A log scale when the values span more than 20x
 * (with the baseline, for TPS: a tiny model runs thousands of tokens/s). */
static int chal_chart(rp_ctx *c, rp_chart *ch, const chal_data *d, int ttft) {
    const chal_run *r0 = &d->run[0];
    double lo = ttft ? INFINITY : CHAL_BASELINE_TPS, hi = ttft ? 0 : CHAL_BASELINE_TPS;
    int any = 0;
    for (int k = 0; k < d->n_runs; k++)
        for (int i = 0; i < d->run[k].n; i++) {
            double v = ttft ? d->run[k].p[i].ttft_ms : d->run[k].p[i].decode_tps;
            if (isnan(v) || !(v > 0)) continue;
            lo = fmin(lo, v);
            hi = fmax(hi, v);
            any = 1;
        }
    if (!any) {
        snprintf(ch->why, sizeof ch->why, "no prompt was served%s", ttft ? "" : " with two or more tokens");
        return 0;
    }
    FILE *f = rp_open(c, ch->stem, "dat");
    if (!f) return -1;
    fprintf(f, "# %s (medians over repetitions; '?': not served)\n# prompt", ch->title);
    char lb[32];
    for (int k = 0; k < d->n_runs; k++) fprintf(f, "\trun_%lld_%s", (long long)d->run[k].info.id,
                                                  threads_label(&d->run[k], lb, sizeof lb));
    fputc('\n', f);
    for (int i = 0; i < r0->n; i++) {
        plot_dat_label(f, r0->p[i].item);
        for (int k = 0; k < d->n_runs; k++) {
            double v = i < d->run[k].n ? (ttft ? d->run[k].p[i].ttft_ms : d->run[k].p[i].decode_tps) : NAN;
            if (isnan(v)) fprintf(f, "\t?");
            else fprintf(f, "\t%.6g", v);
        }
        fputc('\n', f);
    }
    if (rp_close(c, f, ch->stem, "dat")) return -1;
    if (!(f = rp_open(c, ch->stem, "gp"))) return -1;
    int logy = hi / lo > 20;
    rp_gp_begin(f, ch, 900, 500);
    fprintf(f, "set title ");
    plot_gp_string(f, ttft ? "Time to first token per prompt (median over repetitions)"
                           : "Decode tokens/s per prompt (median over repetitions) against the challenge's baseline");
    fprintf(f, "\nset ylabel ");
    plot_gp_string(f, ttft ? (logy ? "TTFT (ms, log scale)" : "TTFT (ms)")
                           : (logy ? "decode tokens/s (log scale)" : "decode tokens/s"));
    fprintf(f, "\nset xlabel 'prompt'\nset datafile missing '?'\nset style data histograms\n"
               "set style histogram clustered gap 1\nset style fill solid 0.85 border rgb '#333333'\n"
               "set boxwidth 0.9 relative\nset grid ytics lc rgb '#dddddd'\nset key outside top center horizontal\n"
               "set xrange [-0.6:%.1f]\n", r0->n - 0.4);
    if (logy) fprintf(f, "set logscale y\nset yrange [%.6g:%.6g]\n", lo / 2, hi * 2);
    else fprintf(f, "set yrange [0:%.6g]\n", hi * 1.15);
    for (int i = 0; i < r0->n; i++)
        if (!r0->p[i].served)
            fprintf(f, "set label %d 'failed' at %d, graph 0.03 left rotate by 90 tc rgb '#b00000'\n", i + 1, i);
    static const char *const COLOR[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                        "#bcbd22"};
    fprintf(f, "plot ");
    for (int k = 0; k < d->n_runs; k++) {
        char t[96];
        snprintf(t, sizeof t, "run %lld, %s", (long long)d->run[k].info.id, threads_label(&d->run[k], lb, sizeof lb));
        if (!k) fprintf(f, "'%s.dat' using 2:xtic(1) title ", ch->stem);
        else fprintf(f, ", '' using %d title ", k + 2);
        plot_gp_string(f, t);
        fprintf(f, " lc rgb '%s'", COLOR[k % 8]);
    }
    if (!ttft) fprintf(f, ", %g with lines dt 2 lw 2 lc rgb '#d62728' title 'challenge baseline %g tok/s'",
                       CHAL_BASELINE_TPS, CHAL_BASELINE_TPS);
    fputc('\n', f);
    rp_gp_end(f, ch, 900, 500);
    if (rp_close(c, f, ch->stem, "gp")) return -1;
    ch->made = 1;
    return 0;
}

/* ---------------------------------------------------------------- challenge.md */

/* "12.34" or "–". */
static const char *num(char *buf, double v, int prec) { return plot_num(buf, 32, v, prec); }

/* The measured figures against the baseline, one row per thread count, and a sentence each. */
static void md_results(FILE *out, const chal_data *d) {
    char b[9][32], lb[32];
    fprintf(out, "## Measured here, against the %g tokens/s baseline\n\n"
                 "| threads | run | prompts served | decode tok/s min / median / max | median vs %g tok/s |"
                 " end-to-end tok/s min / median / max | TTFT median (ms) | peak RSS (MiB) |\n"
                 "| --- | ---: | ---: | --- | ---: | --- | ---: | ---: |\n", CHAL_BASELINE_TPS, CHAL_BASELINE_TPS);
    for (int k = 0; k < d->n_runs; k++) {
        const chal_run *r = &d->run[k];
        int served = 0;
        for (int i = 0; i < r->n; i++) served += r->p[i].served > 0;
        fprintf(out, "| %s | %lld | %d of %d | %s / **%s** / %s | %s× | %s / %s / %s | %s | %s |\n",
                threads_label(r, lb, sizeof lb), (long long)r->info.id, served, r->n, num(b[0], r->decode.min, 2),
                num(b[1], r->decode.median, 2), num(b[2], r->decode.max, 2),
                num(b[3], r->decode.median / CHAL_BASELINE_TPS, 2), num(b[4], r->e2e.min, 2), num(b[5], r->e2e.median, 2),
                num(b[6], r->e2e.max, 2), num(b[7], r->ttft.median, 1), num(b[8], r->peak_rss_mib, 1));
    }
    fprintf(out, "\n");
    for (int k = 0; k < d->n_runs; k++) {
        const chal_run *r = &d->run[k];
        if (isnan(r->decode.median)) {
            fprintf(out, "- %s: no prompt decoded two or more tokens, so there is no decode speed to compare.\n",
                    threads_label(r, lb, sizeof lb));
            continue;
        }
        int below = 0;
        for (int i = 0; i < r->n; i++) below += !isnan(r->p[i].decode_tps) && r->p[i].decode_tps < CHAL_BASELINE_TPS;
        fprintf(out, "- %s: the median prompt decodes at %.2f tokens/s, **%s** the baseline (%.2f×); %d of %d"
                     " decoded prompts are below it, the slowest at %.2f tokens/s.\n",
                threads_label(r, lb, sizeof lb), r->decode.median, r->decode.median >= CHAL_BASELINE_TPS ? "above" : "below",
                r->decode.median / CHAL_BASELINE_TPS, below, r->decode.n, r->decode.min);
    }
    fprintf(out, "\nDecode tok/s is the figure compared with the baseline: a prompt's generated tokens after the first"
                 " over the time they took (1 / TPOT), free of the prompt's prefill. End-to-end tok/s divides all its"
                 " generated tokens by its whole service time (prefill included), so long prompts lower it; if the"
                 " challenge counts that way, compare that column instead. Both are medians over repetitions per"
                 " prompt, then min / median / max over the prompts (docs/metrics.md, \"The challenge run\"). Peak"
                 " RSS is the largest of the repetitions' peaks and counts the mapped model's touched pages.\n\n");
}

/* Per prompt: tokens, then decode and end-to-end TPS, TTFT and the canary per thread count. */
static void md_prompts(FILE *out, const chal_data *d) {
    const chal_run *r0 = &d->run[0];
    char lb[32], b[4][32];
    fprintf(out, "## Per prompt (medians over repetitions)\n\n| prompt | prompt tok | gen tok |");
    for (int k = 0; k < d->n_runs; k++) {
        threads_label(&d->run[k], lb, sizeof lb);
        fprintf(out, " decode tok/s, %s | e2e tok/s, %s | TTFT ms, %s |", lb, lb, lb);
    }
    fprintf(out, " canary |\n| --- | ---: | ---: |");
    for (int k = 0; k < d->n_runs; k++) fprintf(out, " ---: | ---: | ---: |");
    fprintf(out, " --- |\n");
    for (int i = 0; i < r0->n; i++) {
        const chal_prompt *p = &r0->p[i];
        fprintf(out, "| ");
        show_md_inline(out, p->item);
        fprintf(out, " | %d | %s |", p->prompt_tokens, num(b[0], p->gen_tokens, 0));
        for (int k = 0; k < d->n_runs; k++) {
            const chal_prompt *q = i < d->run[k].n ? &d->run[k].p[i] : NULL;
            fprintf(out, " %s | %s | %s |", num(b[0], q ? q->decode_tps : NAN, 2), num(b[1], q ? q->e2e_tps : NAN, 2),
                    num(b[2], q ? q->ttft_ms : NAN, 2));
        }
        if (!p->served) {
            fprintf(out, " failed: ");
            show_md_inline(out, p->error);
            fprintf(out, " |\n");
            continue;
        }
        /* the canary: the same greedy tokens in every repetition and at every thread count */
        int same = 1;
        for (int k = 1; k < d->n_runs; k++)
            if (i >= d->run[k].n || strcmp(d->run[k].p[i].hash, p->hash)) same = 0;
        fprintf(out, " `%s`%s%s%s |\n", p->hash, p->served < p->reps ? " (some repetitions failed)" : "",
                p->stable ? "" : " **UNSTABLE across repetitions**",
                same ? "" : " **differs between thread counts**");
    }
    fprintf(out, "\n`–`: not served, or one generated token (no decode speed). The canary is FNV-1a over the"
                 " generated token ids (greedy decoding), shown for %s.\n\n", threads_label(r0, lb, sizeof lb));
}

/* The projection: inputs, roofs here and there, result, assumptions. */
static void md_projection(FILE *out, const chal_data *d, const chal_opts *o) {
    fprintf(out, "## Projection to the challenge machine (a projection, not a measurement)\n\n");
    if (!d->have_proj) {
        fprintf(out, "_No projection: %s._\n\n", d->no_proj);
        return;
    }
    const chal_proj *p = &d->proj;
    const chal_run *r = &d->run[d->best];
    char b[4][32], lb[32];
    fprintf(out, "The challenge machine (2 sockets, %d cores, %.0f GB) is not available here. Its decode speed is"
                 " **projected** from what one decoded token costs, the roofs `cortex-bench hw` measured on this"
                 " machine, and the share of its roof this engine reached here at %s (run %lld)%s:\n\n",
            o->cores, o->mem_gb, threads_label(r, lb, sizeof lb), (long long)r->info.id,
            d->n_runs > 1 ? ", the thread count that decoded fastest here (`decode_tps`, median over repetitions)" : "");
    for (int k = 0; k < d->n_runs; k++) { /* more threads, less speed: said, not hidden by the choice above */
        const chal_run *q = &d->run[k];
        if (q->info.threads <= r->info.threads || !(q->decode_tps < r->decode_tps)) continue;
        char lq[32];
        fprintf(out, "> **Warning: more threads were slower.** At %s (run %lld) decode ran at %.2f tokens/s, %.1f %%"
                     " below the %.2f tokens/s of %s. The projection starts from the faster %s; that this machine did"
                     " not scale (shared or hyperthreaded cores, bandwidth already saturated, or threading overhead on"
                     " a small model) is itself a finding the projection cannot carry over.\n\n",
                threads_label(q, lq, sizeof lq), (long long)q->info.id, q->decode_tps,
                100 * (1 - q->decode_tps / r->decode_tps), r->decode_tps, lb, lb);
    }
    fprintf(out, "| quantity | value | from |\n| --- | ---: | --- |\n");
    fprintf(out, "| bytes read per decoded token | %.4g MB | `bytes_per_token` of run %lld: weights read (for a mixture"
                 " of experts only the used experts), KV at the mean attended position |\n",
            p->bytes_per_token / 1e6, (long long)r->info.id);
    fprintf(out, "| arithmetic per decoded token | %s GFLOP | `flops_per_token` of run %lld: 2 per weight of every"
                 " matrix read, plus attention |\n", num(b[0], p->flops_per_token / 1e9, 4), (long long)r->info.id);
    fprintf(out, "| read bandwidth here, %d thread%s | %.2f GB/s | hw row %lld (%s) |\n", p->here_threads,
            p->here_threads == 1 ? "" : "s", p->here_gbs, (long long)d->hw.id, d->hw.measured_at);
    fprintf(out, "| one core's peak arithmetic here | %.2f G op/s | hw row %lld: %s, 1 thread |\n", p->core_gops,
            (long long)d->hw.id, d->core_fig);
    fprintf(out, "| roof here: bandwidth / compute | %s / %s tok/s | the two rows above |\n",
            num(b[0], p->here_bw_roof, 2), num(b[1], isinf(p->here_cpu_roof) ? NAN : p->here_cpu_roof, 2));
    fprintf(out, "| decode measured here | %.2f tok/s | `decode_tps` of run %lld (all prompts) |\n", p->here_decode_tps,
            (long long)r->info.id);
    fprintf(out, "| efficiency here (measured / roof) | %s %% | carried over at most 100 %% |\n",
            num(b[0], 100 * p->efficiency, 1));
    fprintf(out, "| challenge machine's read bandwidth | %.2f GB/s | `--challenge-gbs`%s |\n", p->target_gbs,
            o->gbs == CHAL_DEFAULT_GBS ? " default (an estimate, see the assumptions)" : ", given");
    fprintf(out, "| challenge machine's roof: bandwidth / compute | %s / %s tok/s | %.0f GB/s; %d cores × one core"
                 " here |\n", num(b[0], p->target_bw_roof, 2),
            num(b[1], isinf(p->target_cpu_roof) ? NAN : p->target_cpu_roof, 2), p->target_gbs, p->target_cores);
    fprintf(out, "| **projected decode** | **%s tok/s** | roof × efficiency: %.2f× the %g tok/s baseline |\n\n",
            num(b[0], p->projected_tps, 2), p->projected_tps / CHAL_BASELINE_TPS, CHAL_BASELINE_TPS);
    if (!isnan(p->projected_tps))
        fprintf(out, "Projected: **%.2f tokens/s, %s the %g tokens/s baseline**, %s-bound on the challenge machine."
                     " Bandwidth-bound, it scales with the bandwidth: each 10 GB/s more or less moves it by %.2f"
                     " tokens/s.\n\n",
                p->projected_tps, p->projected_tps >= CHAL_BASELINE_TPS ? "above" : "below", CHAL_BASELINE_TPS,
                p->target_compute_bound ? "compute" : "bandwidth",
                p->target_compute_bound ? 0.0 : 10e9 / p->bytes_per_token * p->eff_used);
    fprintf(out, "Assumptions (each one can make the projection wrong):\n\n");
    fprintf(out, "- The challenge machine reads memory at %.0f GB/s over its %d cores. %s\n", p->target_gbs,
            p->target_cores, o->gbs == CHAL_DEFAULT_GBS
                ? "This default is an estimate, not a measurement: a dual-socket host of 2 × 8 DDR4-3200 channels"
                  " (409.6 GB/s peak, about 70 % of it sustained) shared by about 60 cores gives a core about 5 GB/s"
                  " when the host is busy; 8 cores, about 40 GB/s. Run `cortex-bench hw` on the challenge VM and pass"
                  " its read figure with `--challenge-gbs`."
                : "Given with `--challenge-gbs`.");
    fprintf(out, "- Its cores compute as fast as one core here (%s, %.2f G op/s) and all %d work on decode.\n",
            d->core_fig, p->core_gops, p->target_cores);
    fprintf(out, "- The engine reaches the same share of the roof there as at %s here (%s %%, used as %s %%):"
                 " scaling from %d to %d threads and across two sockets (remote-memory reads, NUMA) is not"
                 " measured, and both usually lower it.\n",
            threads_label(r, lb, sizeof lb), num(b[0], 100 * p->efficiency, 1), num(b[1], 100 * p->eff_used, 1),
            r->info.threads, p->target_cores);
    fprintf(out, "- A token costs the same bytes and arithmetic there: the same model file, kernels and KV format, at"
                 " the mean context these prompts reached here. Prefill and TTFT are not projected.\n");
    if (!isnan(d->hw.llc_bytes) && p->bytes_per_token < d->hw.llc_bytes)
        fprintf(out, "- **Not meaningful for this model**: a token reads %.3g MB, which fits in this machine's"
                     " %.3g MB last-level cache, so the efficiency above is measured against cache, not memory"
                     " (docs/metrics.md, Roofline). Judge the projection on a model many times larger than the"
                     " cache, such as GPT-OSS-20B.\n",
                p->bytes_per_token / 1e6, d->hw.llc_bytes / 1e6);
    double need = r->peak_rss_mib * 1048576.0 / 1e9;
    fprintf(out, "- Memory: the peak RSS here was %s MiB (%.2f GB) against the challenge machine's %.0f GB: %s.\n\n",
            num(b[0], r->peak_rss_mib, 1), need, o->mem_gb,
            isnan(need) ? "not measured" : need < o->mem_gb ? "it fits" : "**it does not fit**");
}

/* The reproduction record: build, model, machine, workload, canaries, commands. */
static void md_record(FILE *out, const chal_data *d, const chal_opts *o) {
    const chal_run *a = &d->run[d->asked];
    const store_run *r = &a->info;
    fprintf(out, "## Reproduction record\n\n");
    fprintf(out, "- commit `%s`%s, build %s, flags `%s`, compiler %s\n", r->commit,
            r->dirty ? " **with uncommitted changes** (dirty)" : "", r->build_type, r->build_flags, r->compiler);
    fprintf(out, "- kernels %s, KV cache `%s`, scheduler `%s`, context %d, %s\n", *r->isa ? r->isa : "unknown",
            r->kv_config, r->sched_config, r->n_ctx, r->pinned[0] ? r->pinned : "not pinned");
    if (r->endpoint[0]) {
        fprintf(out, "- over HTTP: model `%s` served at `%s`, server ", r->model, r->endpoint);
        show_md_inline(out, r->server);
        fprintf(out, " (its build, model file and machine are the server's, not recorded here)\n");
    } else
        fprintf(out, "- model `%s` (%s, %s, %lld parameters, %lld bytes of weights)\n", r->model_path, r->model, r->type,
                (long long)r->model_params, (long long)r->model_bytes);
    fprintf(out, "- model SHA-256 `%s`\n", r->model_sha256);
    fprintf(out, "- prompts submitted %s\n", !strcmp(r->chat_format, "harmony")
                ? "as harmony user turns (the model's chat format, gpt-oss; docs/harness.md)" : "as plain text");
    fprintf(out, "- workload `%s`, SHA-256 `%s`%s\n", r->workload, r->workload_hash,
            strcmp(r->workload, "challenge") ? " (not the `challenge` set)" : " (prompts/challenge.jsonl: stand-ins for"
                                                                              " the challenge's prompts)");
    fprintf(out, "- environment fingerprint `%s`: %s [%s], %d CPUs, %.1f GiB, %s, governor %s\n", r->fingerprint,
            r->cpu_model, r->isa_flags, r->logical_cores, (double)r->mem_bytes / (1 << 30), r->kernel, r->governor);
    if (d->have_hw)
        fprintf(out, "- roofs: hw row %lld, measured %s (read %.2f GB/s at 1 thread, %.2f GB/s at %d)\n",
                (long long)d->hw.id, d->hw.measured_at, d->hw.read_gbs_1t, d->hw.read_gbs, d->hw.threads);
    int stable = 1, same = 1, n = 0;
    for (int i = 0; i < a->n; i++) {
        if (!a->p[i].served) continue;
        n++;
        stable &= a->p[i].stable;
        for (int k = 0; k < d->n_runs; k++)
            if (i >= d->run[k].n || (d->run[k].p[i].served && strcmp(d->run[k].p[i].hash, a->p[i].hash))) same = 0;
    }
    fprintf(out, "- token canary: %d served prompt%s, greedy tokens %s across repetitions and %s across thread counts"
                 " (hashes in the per-prompt table)\n", n, n == 1 ? "" : "s", stable ? "identical" : "**not identical**",
            same ? "identical" : "**not identical**");
    fprintf(out, "- the runs:\n");
    for (int k = 0; k < d->n_runs; k++)
        fprintf(out, "  - run %lld (%d thread%s, %d repetitions + %d warm-up, started %s): `%s`\n",
                (long long)d->run[k].info.id, d->run[k].info.threads, d->run[k].info.threads == 1 ? "" : "s",
                d->run[k].info.reps, d->run[k].info.warmup, d->run[k].info.started, d->run[k].info.cmdline);
    fprintf(out, "- this report: `%s`\n\n", o->cmdline ? o->cmdline : "cortex-bench report --challenge RUN");
    fprintf(out, "To reproduce on another machine: build this commit (`make`), measure its roofs once"
                 " (`cortex-bench hw`), run the same command lines with the same model file (check its SHA-256),"
                 " then this report; the canaries must match.\n");
}

/* VALID or INVALID, first: an INVALID run's reasons and that nothing below
 * is a measurement; a VALID run's tolerated failures and how many prompts
 * each thread count served. */
static void md_verdict(FILE *out, const chal_data *d) {
    const store_run *r = &d->run[d->asked].info;
    char word[48], lb[32];
    if (d->invalid) {
        fprintf(out, "> %s: ", show_validity_word(word, sizeof word, "invalid", out));
        show_md_inline(out, r->validity_reasons);
        fprintf(out, ".\n>\n> **Not a measurement**: no comparison with the %g tokens/s baseline and no projection"
                     " are made from this run; what follows are its per-prompt outcomes only. Rerun with every prompt"
                     " served (a larger context, fewer failures) or, to accept some failures knowingly,"
                     " `--allow-failures SHARE`.\n\n", CHAL_BASELINE_TPS);
        return;
    }
    fprintf(out, "> **VALID**");
    if (*r->validity_reasons) {
        fprintf(out, " with tolerated failures (");
        show_md_inline(out, r->validity_reasons);
        fprintf(out, ")");
    }
    fprintf(out, ":");
    for (int k = 0; k < d->n_runs; k++) {
        const chal_run *q = &d->run[k];
        int served = 0, partly = 0;
        for (int i = 0; i < q->n; i++) {
            served += q->p[i].served > 0;
            partly += q->p[i].served > 0 && q->p[i].served < q->p[i].reps;
        }
        fprintf(out, "%s %d of %d prompts served at %s", k ? (k == d->n_runs - 1 ? " and" : ",") : "", served, q->n,
                threads_label(q, lb, sizeof lb));
        if (partly) fprintf(out, " (%d of them not in every repetition)", partly);
    }
    fprintf(out, ".%s\n\n", *r->validity_reasons ? " Every figure below is over the served prompts only: a prompt"
                                                    " that failed counts in none." : "");
}

/* The title, what the challenge is and what was run instead. */
static void md_head(FILE *out, const chal_data *d) {
    const store_run *r = &d->run[d->asked].info;
    char now[32], lb[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(out, "# Challenge run: %s (%s), run %lld\n\n", r->model, r->type, (long long)r->id);
    md_verdict(out, d);
    fprintf(out, "Generated %s by `cortex-bench report --challenge`. Metric definitions: docs/metrics.md.\n\n", now);
    fprintf(out, "**The challenge**: GPT-OSS-20B on a CPU VM with 2 sockets, 8 cores and 32 GB, 10 standardized"
                 " prompts, minimum, median and maximum tokens per second and memory, against a baseline of %g"
                 " tokens/s.\n\n", CHAL_BASELINE_TPS);
    if (r->endpoint[0]) {
        fprintf(out, "**This reproduction**: model `%s` served at `%s`, measured over HTTP from %s", r->model,
                r->endpoint, r->cpu_model);
    } else {
        fprintf(out, "**This reproduction**: model `%s` on %s (%d CPUs, %.1f GiB), measured at", r->model_path,
                r->cpu_model, r->logical_cores, (double)r->mem_bytes / (1 << 30));
        for (int k = 0; k < d->n_runs; k++)
            fprintf(out, "%s %s", k ? (k == d->n_runs - 1 ? " and" : ",") : "", threads_label(&d->run[k], lb, sizeof lb));
    }
    fprintf(out, ", workload `%s`. ", r->workload);
    if (!strcmp(r->workload, "challenge"))
        fprintf(out, "Its 10 prompts (prompts/challenge.jsonl) **stand in for the challenge's own set**, whose text is"
                     " not available here: they are varied prompts of realistic lengths, from a one-line question to"
                     " a ~1,000-token document, not the challenge's prompts.");
    else fprintf(out, "This is not the `challenge` prompt set.");
    if (strcmp(r->model, "gpt-oss-20b") && !strstr(r->model_path, "gpt-oss-20b"))
        fprintf(out, " The model is not GPT-OSS-20B, so no figure here is the challenge's: they show the method.");
    fprintf(out, "\n\n");
    if (d->n_runs < 2 && !d->invalid)
        fprintf(out, "> Only one thread count of this configuration is stored. The challenge comparison wants 1 and 2"
                     " threads: `cortex-bench run ... --workload %s -t 1,2`.\n\n", r->workload);
}

/* Write challenge.md (through a temporary file) from the loaded data. */
static int md_write(rp_ctx *c, const chal_data *d, const chal_opts *o, rp_chart *charts, int have_gp,
                    const char *gp_err, char *path) {
    char tmp[PATH_MAX + 48];
    snprintf(path, CHAL_PATH_BYTES, "%s/challenge.md", c->dir);
    snprintf(tmp, sizeof tmp, "%s/challenge.md.tmp", c->dir);
    FILE *out = fopen(tmp, "w");
    if (!out) return hx_fail(c->err, c->errlen, "cannot write %s: %s", tmp, strerror(errno));
    md_head(out, d);
    if (d->invalid) { /* the outcomes, what was run; no figure */
        fprintf(out, "## Outcomes per prompt\n\n");
        show_verdict(c->s, d->run[d->asked].info.id, out);
        fprintf(out, "\n");
        show_items(c->s, d->run[d->asked].info.id, out);
        md_record(out, d, o);
        return plot_commit_file(out, tmp, path, c->err, c->errlen);
    }
    md_results(out, d);
    rp_md_charts(out, charts, CC_N, have_gp, gp_err);
    md_prompts(out, d);
    md_projection(out, d, o);
    md_record(out, d, o);
    return plot_commit_file(out, tmp, path, c->err, c->errlen);
}

/* See challenge.h. */
int chal_report_write(store *s, int64_t run_id, const chal_opts *opts, const char *out_dir, char *path_out,
                      char *err, size_t errlen) {
    chal_data d;
    if (chal_load(s, run_id, opts, &d, err, errlen)) return -1;
    rp_ctx c;
    memset(&c, 0, sizeof c);
    c.s = s;
    c.err = err;
    c.errlen = errlen;
    if (out_dir) snprintf(c.dir, sizeof c.dir, "%s", out_dir);
    else snprintf(c.dir, sizeof c.dir, "reports/challenge-%lld", (long long)run_id);
    rp_chart charts[CC_N] = {{"challenge_tps", "Decode tokens/s per prompt against the 30 tokens/s baseline", 0, 0, ""},
                             {"challenge_ttft", "Time to first token per prompt", 0, 0, ""}};
    int rc = -1;
    if (plot_mkdirs(c.dir, err, errlen)) goto out;
    rp_charts_clear(&c, charts, CC_N);
    char gp_err[768] = "";
    int have_gp = 0;
    if (!d.invalid) { /* an INVALID run's speeds are no measurement: no chart */
        if (chal_chart(&c, &charts[CC_TPS], &d, 0) || chal_chart(&c, &charts[CC_TTFT], &d, 1)) goto out;
        have_gp = rp_charts_render(&c, charts, CC_N, gp_err, sizeof gp_err);
    }
    if (md_write(&c, &d, opts, charts, have_gp, *gp_err ? gp_err : NULL, path_out)) goto out;
    if (*gp_err) {
        hx_fail(err, errlen, "%s (challenge.md written without that chart)", gp_err);
        goto out;
    }
    rc = 0;
out:
    chal_free(&d);
    return rc;
}
