/*
 * jsonx.h - what cortex-bench adds to jansson for its own JSON: one object
 * read with the settings every reader here shares (workload lines, trace
 * sidecars, `run -o json` lines), type names for messages, and writers whose
 * bytes are reproducible (the committed traces' SHA-256 depends on them).
 *
 * Reading (jx_parse_object) is jansson's json_loadb with
 *   JSON_REJECT_DUPLICATES   a line with two "max_tokens" is ambiguous;
 *   JSON_ALLOW_NUL           "\u0000" stays inside string values (see
 *                            json_string_length), so a caller can name it;
 *   JSON_DECODE_INT_AS_REAL  every number is the double strtod reads from its
 *                            text: an integer literal never overflows, and
 *                            100000000000000000000 is the same value as 1e20.
 * So: strict RFC 8259 grammar, UTF-8 validated (overlongs, encoded surrogates
 * and > U+10FFFF rejected), lone \u surrogates rejected, numbers beyond
 * +-1.8e308 rejected (smaller than 1e-308: read as 0 or a subnormal), nesting
 * capped at jansson's 2048 levels. Keys holding \u0000 are rejected (jansson
 * keeps keys NUL-terminated). A raw NUL byte is rejected here, before jansson,
 * whose message for it would say "end of file".
 *
 * Errors: CX_EFORMAT with err = "column C: <problem>" (C: 1-based character
 * column within its line) and *line = the 1-based line within the text; in
 * text of one line (no '\n': a workload line) "end of file" in jansson's
 * message is said as "end of line".
 */
#ifndef CB_JSONX_H
#define CB_JSONX_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

/*
 * Parse exactly one JSON object from s[0, n) (no terminator needed; only
 * whitespace around it). 0 and *out (a new reference: json_decref it), or
 * CX_EFORMAT with *out NULL, *line (when line is not NULL) and err as above.
 */
int jx_parse_object(const char *s, size_t n, json_t **out, int *line, char *err, size_t errlen);

/* A value's type for messages: "null", "a boolean", "a number", "a string",
 * "an object", "an array" (with its article, to read "must be X, not Y"). */
const char *jx_type_name(const json_t *v);

/*
 * Write s[0, n) as a quoted JSON string through jansson's encoder: '"', '\\'
 * and control characters escaped (\n \t \r \b \f, else \u00XX), valid UTF-8
 * and DEL as they are. A byte that is not valid UTF-8 is written as \u00XX
 * (its Latin-1 reading: lossy, but the output is always valid JSON).
 * 0, or -1 when jansson ran out of memory (the output is then incomplete).
 */
int jx_write_string(FILE *f, const char *s, size_t n);

/* The shortest decimal that reads back as exactly x ("0.1", "40", "1e-07");
 * "null" for NaN and infinities, which JSON cannot hold. cap >= 32. Returns
 * strlen. (Not jansson's: it writes 40 as "40.0" and 0.1 with 17 digits.) */
int jx_format_number(char *buf, size_t cap, double x);

/* Write jx_format_number(x) to f. */
void jx_write_number(FILE *f, double x);

#endif
