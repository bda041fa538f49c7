/*
 * lora_peft_config.c - adapter_config.json (see lora_peft.h): jansson reads
 * the JSON, PCRE2 compiles the regular expressions PEFT's matching rules use.
 * Keys this reader does not need (base_model_name_or_path, lora_dropout,
 * task_type, ...) are ignored; the ones that change the arithmetic are all
 * read or refused.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "lora_peft.h"

#include <jansson.h>
#include <math.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util.h"

/* Compile `re` (anchored by the caller's wrapping) into *out; a bad pattern is
 * CX_EFORMAT naming the config key it came from. */
static int peft_compile(const char *re, const char *what, const char *label, void **out, cx_err *err) {
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &ec, &eo,
                                     NULL);
    if (!code) {
        PCRE2_UCHAR msg[128];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return cx_fail(err, CX_EFORMAT, "%s: %s: bad regular expression: %s", label, what, (const char *)msg);
    }
    *out = code;
    return 0;
}

/* Does the compiled pattern match the whole of key? */
static int peft_match(const void *re, const char *key) {
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    if (!md) return 0;
    int rc = pcre2_match(re, (PCRE2_SPTR)key, strlen(key), 0, 0, md, NULL);
    pcre2_match_data_free(md);
    return rc >= 0;
}

/* target_modules: a list of names, or one regular expression the key must match in full. */
static int peft_read_targets(const json_t *v, const char *label, peft_config *c, cx_err *err) {
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcmp(s, "all-linear") == 0) {
            c->all_linear = 1;
            return 0;
        }
        size_t n = strlen(s) + 16;
        char *re = malloc(n);
        if (!re) return cx_fail(err, CX_ENOMEM, "%s: out of memory", label);
        snprintf(re, n, "^(?:%s)$", s);
        int rc = peft_compile(re, "target_modules", label, &c->target_re, err);
        free(re);
        return rc;
    }
    if (!json_is_array(v) || json_array_size(v) == 0)
        return cx_fail(err, CX_EFORMAT, "%s: target_modules is not a string or a non-empty list of strings", label);
    size_t n = json_array_size(v);
    c->targets = calloc(n, sizeof *c->targets);
    if (!c->targets) return cx_fail(err, CX_ENOMEM, "%s: out of memory", label);
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        if (!json_is_string(e) || !json_string_value(e)[0])
            return cx_fail(err, CX_EFORMAT, "%s: target_modules[%zu] is not a non-empty string", label, i);
        if (!(c->targets[i] = strdup(json_string_value(e)))) return cx_fail(err, CX_ENOMEM, "%s: out of memory", label);
        c->n_targets++;
    }
    return 0;
}

/* rank_pattern (integer values >= 1) or alpha_pattern (numbers > 0): key -> value, in file order. */
static int peft_read_patterns(const json_t *v, const char *what, int ranks, const char *label, peft_pattern **out,
                              int *n_out, cx_err *err) {
    if (!v || json_is_null(v)) return 0;
    if (!json_is_object(v)) return cx_fail(err, CX_EFORMAT, "%s: %s is not an object", label, what);
    size_t n = json_object_size(v);
    if (n == 0) return 0;
    *out = calloc(n, sizeof **out);
    if (!*out) return cx_fail(err, CX_ENOMEM, "%s: out of memory", label);
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        peft_pattern *p = &(*out)[*n_out];
        if (ranks) {
            if (!json_is_integer(val) || json_integer_value(val) < 1 || json_integer_value(val) > INT32_MAX)
                return cx_fail(err, CX_EFORMAT, "%s: %s \"%.64s\": rank is not an integer >= 1", label, what, key);
            p->rank = (int)json_integer_value(val);
        } else {
            if (!json_is_number(val) || !(json_number_value(val) > 0) || !isfinite(json_number_value(val)))
                return cx_fail(err, CX_EFORMAT, "%s: %s \"%.64s\": alpha is not a number > 0", label, what, key);
            p->alpha = (float)json_number_value(val);
        }
        size_t len = strlen(key) + 24;
        char *re = malloc(len);
        if (!re) return cx_fail(err, CX_ENOMEM, "%s: out of memory", label);
        snprintf(re, len, "^(?:.*\\.)?(?:%s)$", key);
        char what_key[96];
        snprintf(what_key, sizeof what_key, "%s \"%.64s\"", what, key);
        int rc = peft_compile(re, what_key, label, &p->re, err);
        free(re);
        if (rc) return rc;
        (*n_out)++;
    }
    return 0;
}

/* A boolean key that must be false (or absent): `why` says what true would need. */
static int peft_refuse_true(const json_t *root, const char *key, const char *why, const char *label, cx_err *err) {
    const json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v) || json_is_false(v)) return 0;
    if (!json_is_true(v)) return cx_fail(err, CX_EFORMAT, "%s: %s is not a boolean", label, key);
    return cx_fail(err, CX_EUNSUP, "%s: %s is true: %s, not supported", label, key, why);
}

/* Every key of the config object this reader acts on. */
static int peft_read_config(const json_t *root, const char *label, peft_config *c, cx_err *err) {
    if (!json_is_object(root)) return cx_fail(err, CX_EFORMAT, "%s: not a JSON object", label);
    const json_t *v = json_object_get(root, "peft_type");
    if (v && !(json_is_string(v) && strcmp(json_string_value(v), "LORA") == 0))
        return cx_fail(err, CX_EUNSUP, "%s: peft_type is %s%.32s%s, only \"LORA\" is supported", label,
                       json_is_string(v) ? "\"" : "", json_is_string(v) ? json_string_value(v) : "not a string",
                       json_is_string(v) ? "\"" : "");
    v = json_object_get(root, "r");
    if (!v || !json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > INT32_MAX)
        return cx_fail(err, CX_EFORMAT, "%s: r is %s", label, v ? "not an integer >= 1" : "missing");
    c->r = (int)json_integer_value(v);
    v = json_object_get(root, "lora_alpha");
    if (!v || !json_is_number(v) || !(json_number_value(v) > 0) || !isfinite(json_number_value(v)))
        return cx_fail(err, CX_EFORMAT, "%s: lora_alpha is %s", label, v ? "not a number > 0" : "missing");
    c->alpha = (float)json_number_value(v);
    v = json_object_get(root, "use_rslora");
    if (v && !json_is_boolean(v) && !json_is_null(v))
        return cx_fail(err, CX_EFORMAT, "%s: use_rslora is not a boolean", label);
    c->use_rslora = v && json_is_true(v);
    int rc;
    if ((rc = peft_refuse_true(root, "fan_in_fan_out", "the base stores its weights transposed (Conv1D)", label,
                               err)) ||
        (rc = peft_refuse_true(root, "use_dora", "DoRA's magnitude vectors", label, err)) ||
        (rc = peft_refuse_true(root, "lora_bias", "a bias on lora_B", label, err)))
        return rc;
    v = json_object_get(root, "target_modules");
    if (!v || json_is_null(v)) return cx_fail(err, CX_EFORMAT, "%s: target_modules is missing", label);
    if ((rc = peft_read_targets(v, label, c, err))) return rc;
    if ((rc = peft_read_patterns(json_object_get(root, "rank_pattern"), "rank_pattern", 1, label, &c->rank_pat,
                                 &c->n_rank_pat, err)))
        return rc;
    return peft_read_patterns(json_object_get(root, "alpha_pattern"), "alpha_pattern", 0, label, &c->alpha_pat,
                              &c->n_alpha_pat, err);
}

int peft_config_parse(const char *text, size_t len, const char *label, peft_config *c, cx_err *err) {
    memset(c, 0, sizeof *c);
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return cx_fail(err, CX_EFORMAT, "%s: JSON: %s (line %d, column %d)", label, jerr.text, jerr.line, jerr.column);
    int rc = peft_read_config(root, label, c, err);
    json_decref(root);
    if (rc) peft_config_free(c);
    return rc;
}

void peft_config_free(peft_config *c) {
    for (int i = 0; i < c->n_targets; i++) free(c->targets[i]);
    free(c->targets);
    pcre2_code_free(c->target_re);
    for (int i = 0; i < c->n_rank_pat; i++) pcre2_code_free(c->rank_pat[i].re);
    for (int i = 0; i < c->n_alpha_pat; i++) pcre2_code_free(c->alpha_pat[i].re);
    free(c->rank_pat);
    free(c->alpha_pat);
    memset(c, 0, sizeof *c);
}

int peft_config_targets(const peft_config *c, const char *key) {
    if (c->all_linear) return 1;
    if (c->target_re) return peft_match(c->target_re, key);
    size_t kl = strlen(key);
    for (int i = 0; i < c->n_targets; i++) {
        size_t tl = strlen(c->targets[i]);
        if (strcmp(key, c->targets[i]) == 0) return 1;
        if (kl > tl && key[kl - tl - 1] == '.' && strcmp(key + kl - tl, c->targets[i]) == 0) return 1;
    }
    return 0;
}

int peft_config_rank(const peft_config *c, const char *key) {
    for (int i = 0; i < c->n_rank_pat; i++)
        if (peft_match(c->rank_pat[i].re, key)) return c->rank_pat[i].rank;
    return c->r;
}

float peft_config_alpha(const peft_config *c, const char *key) {
    for (int i = 0; i < c->n_alpha_pat; i++)
        if (peft_match(c->alpha_pat[i].re, key)) return c->alpha_pat[i].alpha;
    return c->alpha;
}
