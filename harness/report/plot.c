/*
 * plot.c - the gnuplot and output-file helpers shared by `report`,
 * `dashboard` and `trend` (see plot.h): gnuplot string and data-label
 * quoting, finding and running gnuplot, mkdir -p, and replacing a file by
 * its finished temporary.
 */
#include "plot.h"
#include "hx_err.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

const char *plot_num(char *buf, size_t n, double v, int prec) {
    if (isnan(v)) snprintf(buf, n, "–");
    else snprintf(buf, n, "%.*f", prec, v);
    return buf;
}

/* A gnuplot string literal: single quotes, embedded quotes doubled. */
void plot_gp_string(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputs("''", f);
        else if (*s == '\n' || *s == '\r') fputc(' ', f);
        else fputc(*s, f);
    }
    fputc('\'', f);
}

/* A quoted label field of a gnuplot data file. */
void plot_dat_label(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) fputc(*s == '"' ? '\'' : ((unsigned char)*s < 0x20 ? ' ' : *s), f);
    fputc('"', f);
}

/* mkdir -p, then check the result is a directory. */
int plot_mkdirs(const char *path, char *err, size_t errlen) {
    char buf[PATH_MAX];
    if (!*path) {
        return hx_fail(err, errlen, "empty directory name");
    }
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        return hx_fail(err, errlen, "%s: path too long", path);
    }
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p) continue;
        char c = *p;
        *p = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            return hx_fail(err, errlen, "cannot create directory %s: %s", buf, strerror(errno));
        }
        *p = c;
        if (!c) break;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        return hx_fail(err, errlen, "%s: not a directory", path);
    }
    return 0;
}

/* Close a finished temporary file and rename it over `path`. */
int plot_commit_file(FILE *f, const char *tmp, const char *path, char *err, size_t errlen) {
    int bad = fflush(f) != 0 || ferror(f);
    int e = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        unlink(tmp);
        return hx_fail(err, errlen, "cannot write %s: %s", path, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        hx_fail(err, errlen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Search $PATH for an executable `name`; 1 and its path in `out` if found. */
static int plot_which(const char *name, char *out, size_t n) {
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        if (len > 0 && (size_t)snprintf(out, n, "%.*s/%s", (int)len, path, name) < n && access(out, X_OK) == 0) {
            struct stat st;
            if (stat(out, &st) == 0 && S_ISREG(st.st_mode)) return 1;
        }
        path += len + (end != NULL);
    }
    return 0;
}

/* $CORTEX_GNUPLOT (a path or a name on $PATH), else gnuplot on $PATH. */
int plot_gnuplot_find(char *path, size_t n) {
    const char *env = getenv("CORTEX_GNUPLOT");
    if (env && *env) {
        if (!strchr(env, '/')) return plot_which(env, path, n);
        struct stat st;
        if (access(env, X_OK) != 0 || stat(env, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
        return (size_t)snprintf(path, n, "%s", env) < n;
    }
    return plot_which("gnuplot", path, n);
}

/* The most useful line of gnuplot's stderr: the one naming the script line
 * ("FILE" line N: message), else the last non-empty one. */
static void plot_gnuplot_reason(const char *text, char *out, size_t n) {
    const char *best = NULL, *last = NULL;
    size_t best_len = 0, last_len = 0;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len && (p[len - 1] == '\r' || p[len - 1] == ' ')) len--;
        if (len) {
            last = p;
            last_len = len;
            if (!best && memmem(p, len, "\" line ", 7)) {
                best = p;
                best_len = len;
            }
        }
        p = e ? e + 1 : p + strlen(p);
    }
    if (!best) {
        best = last;
        best_len = last_len;
    }
    if (best) snprintf(out, n, "%.*s", (int)best_len, best);
    else snprintf(out, n, "no message");
}

/* fork + exec gnuplot SCRIPT in DIR, stderr captured for the error message. */
int plot_gnuplot_run(const char *gnuplot, const char *dir, const char *script, char *err, size_t errlen) {
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) != 0) {
        return hx_fail(err, errlen, "gnuplot: pipe: %s", strerror(errno));
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        hx_fail(err, errlen, "gnuplot: fork: %s", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        /* Child: stdin and stdout from/to /dev/null, stderr into the pipe. */
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
        }
        dup2(fd[1], 2);
        if (chdir(dir) != 0) {
            dprintf(2, "cannot enter %s: %s\n", dir, strerror(errno));
            _exit(126);
        }
        execl(gnuplot, "gnuplot", script, (char *)NULL);
        dprintf(2, "cannot run %s: %s\n", gnuplot, strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    char text[8192];
    size_t used = 0;
    for (;;) {
        char chunk[4096];
        ssize_t got = read(fd[0], chunk, sizeof chunk);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        size_t take = (size_t)got < sizeof text - 1 - used ? (size_t)got : sizeof text - 1 - used;
        memcpy(text + used, chunk, take);
        used += take;
    }
    text[used] = 0;
    close(fd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            return hx_fail(err, errlen, "gnuplot: waitpid: %s", strerror(errno));
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    char why[512];
    plot_gnuplot_reason(text, why, sizeof why);
    if (WIFSIGNALED(status))
        hx_fail(err, errlen, "gnuplot (%s) killed by signal %d on %s/%s: %s", gnuplot, WTERMSIG(status), dir, script, why);
    else
        hx_fail(err, errlen, "gnuplot (%s) failed (exit %d) on %s/%s: %s", gnuplot, WEXITSTATUS(status), dir, script,
                why);
    return -1;
}
