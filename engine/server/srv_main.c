/*
 * srv_main.c - `cortex serve` from start to exit: the scheduler on its own
 * thread, the chat template (--chat-template, else the one the model's
 * tokenizer.chat_template is recognized as), the daemon, then a wait for
 * SIGTERM or SIGINT. Then it drains: no new connections, new requests on
 * open ones get 503, connections without an admitted request (idle, or
 * still sending one) are closed at once, every admitted request runs to its
 * end and its response is written (within --drain-timeout; past it what is
 * left is cancelled), and the process exits 0. The signals are blocked in every
 * thread (the mask is set before any starts) and taken with sigwait, so no
 * handler runs in the middle of a pass.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "srv.h"

/* Choose S's chat format (S->chat, S->has_chat; else S->tmpl_why says why):
 * the library's cx_chat_init, whose reasons serve as they are but for a
 * model without a template or with an unknown one, where the server names
 * its flag. */
static void pick_template(srv_server *S) {
    cx_err err = {0};
    S->has_chat = !cx_chat_init(S->m, S->cfg->chat_template, &S->chat, &err);
    const char *jinja = cx_model_get_info(S->m)->chat_template;
    char names[128] = "";
    for (int t = 0; t < CX_CHAT_N; t++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", t ? ", " : "", cx_chat_name(t));
    if (S->has_chat)
        S->tmpl_why[0] = 0;
    else if (!S->cfg->chat_template && !jinja)
        snprintf(S->tmpl_why, sizeof S->tmpl_why, "the model has no chat template (tokenizer.chat_template): start the "
                 "server with --chat-template NAME (one of %s)", names);
    else if (!S->cfg->chat_template && cx_chat_detect(jinja) < 0)
        snprintf(S->tmpl_why, sizeof S->tmpl_why, "the model's chat template is not one this server knows: start it with "
                 "--chat-template NAME (one of %s) if one of them is the model's format", names);
    else
        snprintf(S->tmpl_why, sizeof S->tmpl_why, "%s", err.msg);
    static const char *const CTL[] = {"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>"};
    int harmony = S->has_chat && S->chat.tmpl == CX_CHAT_HARMONY;
    for (size_t k = 0; harmony && k < sizeof CTL / sizeof CTL[0]; k++) { /* the answer's structure */
        int32_t id;
        int n = 0;
        if (!cx_tokenize(S->m, CTL[k], strlen(CTL[k]), CX_TOKENIZE_SPECIAL, &id, 1, &n, &err) && n == 1) {
            S->ctl_id[S->n_ctl] = id;
            S->ctl_text[S->n_ctl++] = CTL[k];
        }
    }
}

/* See srv.h. */
int srv_serve(const cx_model *m, const srv_config *cfg) {
    srv_server S;
    memset(&S, 0, sizeof S);
    S.m = m;
    S.cfg = cfg;
    S.model_id = cx_model_get_info(m)->name;
    S.sp = cx_sampler_defaults();
    srv_metrics_init(&S.metrics);
    pthread_mutex_init(&S.mu, NULL);
    pthread_mutex_init(&S.admin_mu, NULL);
    pthread_cond_init(&S.cv, NULL);
    pick_template(&S);
    /* The context bounds the prompt text before it is tokenized: no token
     * stands for more bytes than the longest piece, so a text longer than
     * that times the context cannot fit, and tokenizing it whole (megabytes
     * of text: tokenizer state per byte) is what memory must not pay for. */
    const cx_model_info *mi = cx_model_get_info(m);
    int ctx = cfg->sched.n_ctx > 0 ? cfg->sched.n_ctx : CX_DEFAULT_CTX;
    S.n_ctx = mi->n_ctx > 0 && mi->n_ctx < ctx ? mi->n_ctx : ctx;
    S.max_prompt_bytes = cx_token_max_bytes(m) * (size_t)S.n_ctx;

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* before any thread starts: they all inherit it */
    signal(SIGPIPE, SIG_IGN);

    cx_err err = {0};
    char msg[256];
    int port = 0, rc = 1;
    if (cfg->n_lora > cfg->max_adapters) {
        fprintf(stderr, "cortex: serve: %d adapters given with --lora, more than --max-adapters %d\n", cfg->n_lora,
                cfg->max_adapters);
        goto out;
    }
    if (cfg->lora_dir) { /* resolved once: every load compares its file's real path with this one */
        struct stat st;
        if (!(S.lora_dir = realpath(cfg->lora_dir, NULL)) || stat(S.lora_dir, &st) || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "cortex: serve: --lora-dir %s: not a directory\n", cfg->lora_dir);
            goto out;
        }
    }
    cx_sched_params sp = cfg->sched;
    if (cfg->spec) { /* the drafter first: the scheduler gives each sequence slot a cx_spec of it */
        if (cx_drafter_new(m, cfg->spec, &S.drafter, &err)) {
            fprintf(stderr, "cortex: serve: speculation: %s\n", err.msg);
            goto out;
        }
        sp.drafter = S.drafter;
    }
    if (cx_sched_new(m, &sp, &S.sched, &err)) {
        fprintf(stderr, "cortex: serve: %s\n", err.msg);
        goto out;
    }
    for (int i = 0; i < cfg->n_lora; i++) { /* NAME=FILE, loaded now so a bad file stops the start */
        char name[64];
        const char *eq = strchr(cfg->lora[i], '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - cfg->lora[i]), cfg->lora[i]);
        if (!strcmp(name, S.model_id)) {
            fprintf(stderr, "cortex: serve: --lora %s: the name is the base model's\n", cfg->lora[i]);
            goto out;
        }
        if (cx_sched_adapter_add(S.sched, i + 1, name, eq + 1, 1, &err)) {
            fprintf(stderr, "cortex: serve: --lora %s: %s\n", cfg->lora[i], err.msg);
            goto out;
        }
    }
    if (cx_sched_start(S.sched, &err)) {
        fprintf(stderr, "cortex: serve: %s\n", err.msg);
        goto out;
    }
    if (srv_http_start(&S, &port, msg, sizeof msg)) {
        fprintf(stderr, "cortex: serve: %s\n", msg);
        goto out;
    }
    int v6 = strchr(cfg->host, ':') != NULL; /* an IPv6 address goes in brackets in a URL */
    fprintf(stderr, "cortex serve: listening on http://%s%s%s:%d (model '%s'; chat template %s)\n", v6 ? "[" : "", cfg->host,
            v6 ? "]" : "", port, S.model_id, S.has_chat ? cx_chat_name(S.chat.tmpl) : "none");
    fprintf(stderr, "cortex serve: limits: %d connections (%d per address; %d past them answered 503), request read "
            "%gs, idle %ds, body %ld bytes, prompt text %zu bytes (context %d)\n", S.max_conns, cfg->max_conns_per_ip,
            S.hard_conns - S.max_conns, cfg->read_timeout, cfg->idle_timeout, cfg->max_body, S.max_prompt_bytes, S.n_ctx);
    if (S.drafter)
        fprintf(stderr, "cortex serve: speculation: %s, drafts of up to %d tokens%s, while at most %d sequences decode\n",
                cx_drafter_describe(S.drafter), cfg->spec->draft_max, cfg->spec->adapt ? " (adaptive)" : "",
                sp.spec_max_batch > 0 ? sp.spec_max_batch : CX_SCHED_SPEC_MAX_BATCH);
    fflush(stderr);
    int sig = 0;
    sigwait(&sigs, &sig);
    cx_sched_stats st;
    cx_sched_get_stats(S.sched, &st);
    fprintf(stderr, "cortex serve: %s: draining %d running and %d waiting requests\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
            st.running, st.waiting);
    srv_http_quiesce(&S);
    int left = srv_http_drain(&S, cfg->drain_timeout);
    if (left) {
        fprintf(stderr, "cortex serve: %d requests still running after --drain-timeout %gs: cancelled\n", left,
                cfg->drain_timeout);
        fflush(stderr);
    }
    cx_sched_stop(S.sched, !left); /* nothing admitted is left, or what is left is cancelled */
    srv_http_drain(&S, 5);         /* the cancelled ones' answers: a job ends at the scheduler's next step */
    srv_http_stop(&S);
    fprintf(stderr, "cortex serve: stopped\n");
    rc = 0;
out:
    srv_http_stop(&S);
    cx_sched_free(S.sched);
    cx_drafter_free(S.drafter); /* after the scheduler's cx_spec of it */
    srv_metrics_free(&S.metrics);
    free(S.lora_dir);
    pthread_mutex_destroy(&S.admin_mu);
    pthread_mutex_destroy(&S.mu);
    pthread_cond_destroy(&S.cv);
    return rc;
}
