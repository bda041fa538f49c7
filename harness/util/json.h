/*
 * json.h - the little JSON cortex-bench needs: parse one flat JSON object per
 * line (JSONL workload files) and write strings and numbers that are always
 * valid JSON (result files).
 *
 * Parsing is strict RFC 8259: UTF-8 is validated, strings are fully unescaped
 * (\uXXXX surrogate pairs become one 4-byte UTF-8 character; lone surrogates
 * are rejected), numbers follow the JSON grammar. Top-level values may be
 * strings, numbers, true, false or null; nested objects and arrays are
 * validated and skipped (recorded with their type only). Duplicate keys are
 * rejected: a workload line with two "max_tokens" is ambiguous.
 *
 * Errors: functions return 0 or a negative CX_E* code (cortex.h) and write one
 * sentence to `err` that starts with "column N: " (1-based byte column in the
 * parsed text), e.g. "column 14: expected ':' after the key".
 */
#ifndef CX_HARNESS_JSON_H
#define CX_HARNESS_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum json_type {
    JSON_NULL,
    JSON_BOOL,
    JSON_NUMBER,
    JSON_STRING,
    JSON_OBJECT, /* nested: validated and skipped, no content kept */
    JSON_ARRAY   /* nested: validated and skipped, no content kept */
} json_type;

typedef struct json_field {
    char *key;          /* unescaped, NUL-terminated (may hold \0 bytes: see key_len) */
    size_t key_len;
    json_type type;
    int boolean;        /* JSON_BOOL: 0 or 1 */
    double number;      /* JSON_NUMBER: the value (always finite) */
    char *str;          /* JSON_STRING: unescaped UTF-8, NUL-terminated */
    size_t str_len;     /* JSON_STRING: bytes in str, excluding the terminator */
    size_t col;         /* 1-based column where the value starts, for messages */
} json_field;

typedef struct json_obj {
    json_field *fields; /* in the order they appear */
    size_t n;
} json_obj;

/* Nesting deeper than this (objects/arrays inside the top object) is rejected. */
#define JSON_MAX_DEPTH 64
/* More keys than this in the top object are rejected (keeps the duplicate-key
 * check, which is quadratic, cheap on hostile input; workload lines have ~6). */
#define JSON_MAX_FIELDS 1024

/*
 * Parse exactly one JSON object from s[0, n) (no NUL terminator needed);
 * only whitespace may surround it. On success *out owns its memory (free with
 * json_obj_free); on failure *out is empty and err names the column.
 */
int json_parse_object(const char *s, size_t n, json_obj *out, char *err, size_t errlen);

/* The field named `key` (exact bytes), or NULL. */
const json_field *json_get(const json_obj *o, const char *key);

/* Free what json_parse_object allocated; safe on an empty or zeroed object. */
void json_obj_free(json_obj *o);

/* Name of a type for messages: "null", "a boolean", "a number", "a string", ... */
const char *json_type_name(json_type t);

/* 1 and *out = value if f is a number with an integral value in [-2^53, 2^53]. */
int json_get_int64(const json_field *f, int64_t *out);

/*
 * Length of the valid UTF-8 character at p[0, n): 1..4, or 0 if the bytes are
 * not valid UTF-8 (overlong forms, surrogates, > U+10FFFF, truncated).
 */
size_t json_utf8_len(const unsigned char *p, size_t n);

/*
 * Write s[0, n) as a quoted JSON string: '"', '\\' and control characters are
 * escaped; valid UTF-8 passes through; each byte of invalid UTF-8 is written
 * as \u00XX (its Latin-1 reading), so the output is always valid JSON.
 */
void json_write_string(FILE *f, const char *s, size_t n);

/* The shortest decimal that reads back as exactly x ("0.1", "3", "1e-07");
 * "null" for NaN and infinities, which JSON cannot hold. Returns strlen. */
int json_format_number(char *buf, size_t cap, double x);

/* Write json_format_number(x) to f. */
void json_write_number(FILE *f, double x);

#endif
