/*
 * fixture.h - the set-up the unit tests share: one scratch directory per test
 * binary and the synthetic models and adapters written into it.
 *
 *   fx_dir()                    the directory, /tmp/cortex-TEST-XXXXXX, made on first use
 *   fx_path(fmt, ...)           a path in it (the same name gives the same pointer,
 *                               valid until fx_cleanup)
 *   fx_shape(name, n_ctx)       a copy of a shape preset, its context set (0: kept)
 *   fx_synth(sh, type, seed, file)        cx_synth_write into the directory; its path
 *                               (file: a name, or a path from fx_path, for formatted names)
 *   fx_synth_once(...)          the same, unless this binary already wrote `file`
 *   fx_load(path, params)       cx_model_load_ex (params NULL: the defaults)
 *   fx_synth_model(sh, type, seed, file, params)   fx_synth, then fx_load
 *   fx_synth_adapter(m, params, file)     cx_lora_synth_write for m; its path
 *   fx_write(name, data, n)     a whole file; its path
 *   fx_slurp(path, &n)          a whole file, malloc'd and NUL-terminated (NULL: unreadable)
 *   fx_real_model(file, what, out, cap)   the path of a real model in $CORTEX_MODELS (else
 *                               ../shared/models) in out; 0 after "SKIP what: ... not found"
 *                               (a failed CHECK under CI=true, where the models must be)
 *   fx_cleanup()                removes the directory and everything in it
 *
 * Each step that can fail is one CHECK (testing.h) naming the step, the file
 * and the engine's message, and gives NULL on failure; a directory or file
 * that cannot be made ends the binary (exit 2): nothing after it could run.
 * Not thread-safe: call from the test's main thread.
 */
#ifndef CX_FIXTURE_H
#define CX_FIXTURE_H

#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cortex_tools.h"
#include "testing.h"

enum { FX_MAX_PATHS = 256, FX_PATH_CAP = 256 };
static char fx_dir_[64];
static char fx_paths_[FX_MAX_PATHS][FX_PATH_CAP];
static int fx_n_paths_;

static inline const char *fx_dir(void) {
    if (!fx_dir_[0]) {
        snprintf(fx_dir_, sizeof fx_dir_, "/tmp/cortex-%.24s-XXXXXX", program_invocation_short_name);
        if (!mkdtemp(fx_dir_)) {
            fprintf(stderr, "FAIL mkdtemp %s: %s\n", fx_dir_, strerror(errno));
            exit(2);
        }
    }
    return fx_dir_;
}

static inline const char *fx_path(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline const char *fx_path(const char *fmt, ...) {
    char p[FX_PATH_CAP], name[FX_PATH_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if ((size_t)snprintf(p, sizeof p, "%s/%s", fx_dir(), name) >= sizeof p) {
        fprintf(stderr, "FAIL fx_path: %s/%s is too long\n", fx_dir(), name);
        exit(2);
    }
    for (int i = 0; i < fx_n_paths_; i++)
        if (!strcmp(fx_paths_[i], p)) return fx_paths_[i];
    if (fx_n_paths_ == FX_MAX_PATHS) {
        fprintf(stderr, "FAIL fx_path: more than %d scratch paths\n", FX_MAX_PATHS);
        exit(2);
    }
    return strcpy(fx_paths_[fx_n_paths_++], p);
}

/* `file` as a path: a name in the directory, or a path fx_path gave, as it is. */
static inline const char *fx_at_(const char *file) {
    size_t n = strlen(fx_dir());
    return strncmp(file, fx_dir_, n) == 0 && file[n] == '/' ? file : fx_path("%s", file);
}

static inline cx_shape fx_shape(const char *name, int n_ctx) {
    const cx_shape *sh = cx_shape_find(name);
    if (!sh) {
        fprintf(stderr, "FAIL fx_shape: no shape preset '%s'\n", name);
        exit(2);
    }
    cx_shape s = *sh;
    if (n_ctx) s.n_ctx = n_ctx;
    return s;
}

static inline const char *fx_synth(const cx_shape *sh, int type, uint64_t seed, const char *file) {
    const char *path = fx_at_(file);
    cx_err err = {0};
    int rc = cx_synth_write(sh, type, seed, path, &err);
    CHECK(rc == 0, "synth %s %s: %s", sh->name, path, err.msg);
    return rc ? NULL : path;
}

static inline const char *fx_synth_once(const cx_shape *sh, int type, uint64_t seed, const char *file) {
    const char *path = fx_at_(file);
    return access(path, F_OK) == 0 ? path : fx_synth(sh, type, seed, file);
}

static inline cx_model *fx_load(const char *path, const cx_model_params *p) {
    cx_model *m = NULL;
    cx_err err = {0};
    int rc = cx_model_load_ex(path, NULL, p, &m, &err);
    CHECK(rc == 0, "load %s: %s", path, err.msg);
    return rc ? NULL : m;
}

static inline cx_model *fx_synth_model(const cx_shape *sh, int type, uint64_t seed, const char *file,
                                       const cx_model_params *p) {
    const char *path = fx_synth(sh, type, seed, file);
    return path ? fx_load(path, p) : NULL;
}

static inline const char *fx_synth_adapter(const cx_model *m, const cx_lora_synth_params *p, const char *file) {
    const char *path = fx_at_(file);
    cx_err err = {0};
    int rc = cx_lora_synth_write(m, p, path, &err);
    CHECK(rc == 0, "synth adapter %s: %s", path, err.msg);
    return rc ? NULL : path;
}

static inline const char *fx_write(const char *name, const void *data, size_t n) {
    const char *path = fx_at_(name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "FAIL cannot write %s\n", path);
        exit(2);
    }
    return path;
}

static inline char *fx_slurp(const char *path, size_t *n) {
    if (n) *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0, got;
    char *buf = malloc(cap + 1);
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            char *more = realloc(buf, (cap *= 2) + 1);
            if (!more) free(buf);
            buf = more;
        }
    }
    fclose(f);
    if (buf) buf[len] = 0;
    if (n) *n = len;
    return buf;
}

static inline int fx_real_model(const char *file, const char *what, char *out, size_t cap) {
    const char *models = getenv("CORTEX_MODELS") ? getenv("CORTEX_MODELS") : "../shared/models";
    snprintf(out, cap, "%s/%s", models, file);
    if (access(out, R_OK) == 0) return 1;
    const char *ci = getenv("CI");
    if (ci && !strcmp(ci, "true")) CHECK(0, "%s is missing in CI", out);
    else printf("SKIP %s: %s not found (set CORTEX_MODELS)\n", what, out);
    return 0;
}

static inline int fx_remove_(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag; (void)ftw;
    if (remove(p)) fprintf(stderr, "note: could not remove %s: %s\n", p, strerror(errno));
    return 0;
}

static inline void fx_cleanup(void) {
    if (fx_dir_[0]) nftw(fx_dir_, fx_remove_, 16, FTW_DEPTH | FTW_PHYS);
    fx_dir_[0] = 0;
    fx_n_paths_ = 0;
}

#endif
