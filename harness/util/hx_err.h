/*
 * hx_err.h - the harness's one error convention, the twin of the library's
 * cx_fail (engine/src/util.h): a function that fails fills the caller's
 * message buffer `char *err, size_t errlen` (every harness function that
 * reports errors names them so) and returns nonzero, -1 unless its header
 * documents codes (the parsers' CX_E* codes, detmode's DET_E*). A command
 * turns the message into one line and an exit code (cli_fail, cli_util.h).
 * docs/architecture.md, "Errors, one convention per layer".
 */
#ifndef HX_ERR_H
#define HX_ERR_H

#include <stddef.h>

#include "cortex.h"

#if defined(__GNUC__)
#define HX_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define HX_PRINTF(a, b)
#endif

/* Write the printf-style message to err (when err && errlen); return -1. */
int hx_fail(char *err, size_t errlen, const char *fmt, ...) HX_PRINTF(3, 4);
/* The same, returning `code`. */
int hx_fail_code(char *err, size_t errlen, int code, const char *fmt, ...) HX_PRINTF(4, 5);
/* "NAME:LINE: <message>" ("NAME: <message>" when line is 0); returns `code`. */
int hx_fail_at(char *err, size_t errlen, int code, const char *name, size_t line, const char *fmt, ...)
    HX_PRINTF(6, 7);
/* Carry the library's message over as it is: e->msg to err; returns -1. */
int hx_fail_cx(char *err, size_t errlen, const cx_err *e);

#endif
