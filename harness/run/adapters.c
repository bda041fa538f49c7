/*
 * adapters.c - see adapters.h. Synthetic adapters live in
 * $CORTEX_CACHE (default ${TMPDIR:-/tmp}/cortex-cache)/lora/, named after
 * the model file (base name and size), the rank and the index, so a second
 * run finds them: writing a TinyLlama-sized one takes longer than loading it.
 */
#include "adapters.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cortex_tools.h"
#include "hx_err.h"

/* mkdir -p of a two-level path (the cache and its lora/ folder). */
static int make_dirs(const char *dir) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0755) && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(buf, 0755) && errno != EEXIST ? -1 : 0;
}

/* 1 if name is an adapter a directory may hold: a .gguf file, or a PEFT folder. */
static int is_adapter(const char *dir, const char *name) {
    if (name[0] == '.') return 0;
    size_t n = strlen(name);
    if (n > 5 && !strcmp(name + n - 5, ".gguf")) return 1;
    char cfg[1024];
    struct stat st;
    snprintf(cfg, sizeof cfg, "%s/%s/adapter_config.json", dir, name);
    return stat(cfg, &st) == 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The adapter files of a directory, sorted by name. */
static int from_dir(const char *dir, adapter_set *out, char *err, size_t errlen) {
    DIR *d = opendir(dir);
    if (!d) return hx_fail(err, errlen, "--adapters: cannot open directory %s: %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)))
        if (is_adapter(dir, e->d_name)) {
            if (out->n == ADAPTERS_MAX) {
                closedir(d);
                return hx_fail(err, errlen, "--adapters: %s holds more than %d adapters", dir, ADAPTERS_MAX);
            }
            size_t len = strlen(dir) + strlen(e->d_name) + 2;
            if (!(out->path[out->n] = malloc(len))) break;
            snprintf(out->path[out->n++], len, "%s/%s", dir, e->d_name);
        }
    closedir(d);
    if (out->n == 0) return hx_fail(err, errlen, "--adapters: %s holds no adapter (*.gguf or PEFT folders)", dir);
    qsort(out->path, (size_t)out->n, sizeof *out->path, by_name);
    for (int i = 0; i < out->n; i++) {
        const char *base = strrchr(out->path[i], '/') + 1;
        snprintf(out->name[i], sizeof out->name[i], "%.*s", (int)strcspn(base, "."), base);
    }
    return 0;
}

/* K synthetic adapters of one rank for the model, made once. */
static int from_synth(const char *spec, const char *model_path, const cx_model *m, adapter_set *out, char *err,
                      size_t errlen) {
    int k, rank, used = 0;
    if (sscanf(spec, "synth:%d,%d%n", &k, &rank, &used) != 2 || spec[used] || k < 1 || k > ADAPTERS_MAX || rank < 1 ||
        rank > 1024)
        return hx_fail(err, errlen, "--adapters: '%s' is not DIR or synth:K,RANK (K in 1..%d, RANK in 1..1024)", spec,
                       ADAPTERS_MAX);
    struct stat st;
    if (stat(model_path, &st)) return hx_fail(err, errlen, "--adapters: cannot stat %s", model_path);
    long long model_size = (long long)st.st_size;
    char dir[512];
    const char *cache = getenv("CORTEX_CACHE"), *tmp = getenv("TMPDIR");
    if (cache && *cache) snprintf(dir, sizeof dir, "%s/lora", cache);
    else snprintf(dir, sizeof dir, "%s/cortex-cache/lora", tmp && *tmp ? tmp : "/tmp");
    if (make_dirs(dir)) return hx_fail(err, errlen, "--adapters: cannot create %s: %s", dir, strerror(errno));
    const char *base = strrchr(model_path, '/') ? strrchr(model_path, '/') + 1 : model_path;
    for (int i = 0; i < k; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s-%lld-r%d-%d.gguf", dir, base, model_size, rank, i + 1);
        if (!(out->path[i] = strdup(path))) return hx_fail(err, errlen, "out of memory");
        out->n = i + 1;
        snprintf(out->name[i], sizeof out->name[i], "synth-%d", i + 1);
        if (stat(path, &st) == 0) continue;
        cx_lora_synth_params p = {.rank = rank, .alpha = 2.0f * (float)rank, .targets = CX_LORA_ALL,
                                  .seed = (uint64_t)(i + 1), .type = CX_TYPE_Q8_0};
        cx_err e = {0};
        if (cx_lora_synth_write(m, &p, path, &e)) return hx_fail(err, errlen, "--adapters: %s", e.msg);
    }
    return 0;
}

/* See adapters.h. */
int adapters_resolve(const char *spec, const char *model_path, const cx_model *m, adapter_set *out, char *err,
                     size_t errlen) {
    memset(out, 0, sizeof *out);
    snprintf(out->spec, sizeof out->spec, "%s", spec);
    int rc = !strncmp(spec, "synth:", 6) ? from_synth(spec, model_path, m, out, err, errlen)
                                         : from_dir(spec, out, err, errlen);
    if (rc) adapters_free(out);
    return rc;
}

/* See adapters.h. */
int adapters_check(const adapter_set *a, const wl_workload *wl, char *err, size_t errlen) {
    for (size_t i = 0; i < wl->n; i++)
        if (wl->req[i].adapter > a->n)
            return hx_fail(err, errlen, "request %s names adapter %d, but --adapters %s gives ids 1..%d",
                           wl->req[i].id, wl->req[i].adapter, a->spec, a->n);
    return 0;
}

/* See adapters.h. */
void adapters_free(adapter_set *a) {
    if (!a) return;
    for (int i = 0; i < a->n; i++) free(a->path[i]);
    a->n = 0;
}
