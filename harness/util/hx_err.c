/* hx_err.c - the harness's error messages (hx_err.h). */
#include "hx_err.h"

#include <stdarg.h>
#include <stdio.h>

static void vformat(char *err, size_t errlen, const char *fmt, va_list ap) {
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
}

int hx_fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vformat(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

int hx_fail_code(char *err, size_t errlen, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vformat(err, errlen, fmt, ap);
    va_end(ap);
    return code;
}

int hx_fail_at(char *err, size_t errlen, int code, const char *name, size_t line, const char *fmt, ...) {
    if (!err || !errlen) return code;
    int k = line ? snprintf(err, errlen, "%s:%zu: ", name, line) : snprintf(err, errlen, "%s: ", name);
    if (k >= 0 && (size_t)k < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vformat(err + k, errlen - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return code;
}

int hx_fail_cx(char *err, size_t errlen, const cx_err *e) {
    return hx_fail(err, errlen, "%s", e->msg);
}
