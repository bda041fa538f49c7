/*
 * test_peft.c - the PEFT LoRA reader (engine/src/lora/): the safetensors
 * parser on hand-built images, adapter_config.json's matching rules, and
 * lora_src_peft on adapters tests/tools/make_peft.py writes for
 * stories260K (Llama, 8 heads over 4 kv heads: q/k rows permuted) and a
 * synthetic Qwen 2 model (not permuted). The writer also writes each
 * adapter's GGUF twin, permuted by llama.cpp's converter formula: the
 * reader's pairs must equal the twin's tensors exactly. Then one broken
 * adapter per error the reader must report, each one message naming the
 * file and the tensor.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "gguf.h"
#include "lora/lora_peft.h"
#include "lora/lora_src.h"
#include "lora/safetensors.h"
#include "model.h"
#include "model_map.h"
#include "util.h"

/* ---- safetensors on hand-built images ------------------------------------ */

/* An image: the 8-byte length of json, json, then n data bytes. Returns its size. */
static size_t st_image(uint8_t *out, const char *json, const void *data, size_t n) {
    uint64_t len = strlen(json);
    memcpy(out, &len, 8);
    memcpy(out + 8, json, len);
    memcpy(out + 8 + len, data, n);
    return 8 + len + n;
}

/* Parse json + n data bytes; expect failure whose message has `want` (NULL: expect success). */
static void st_expect(const char *json, size_t n, const char *want) {
    static uint8_t buf[4096], data[256];
    for (int i = 0; i < 256; i++) data[i] = (uint8_t)i;
    size_t size = st_image(buf, json, data, n);
    st_file f;
    cx_err err = {0};
    int rc = st_parse(buf, size, "t.safetensors", &f, &err);
    if (!want) {
        CHECK(rc == 0, "%s: %s", json, err.msg);
        st_close(&f);
        return;
    }
    CHECK(rc < 0 && rc == err.code && strstr(err.msg, want) && strstr(err.msg, "t.safetensors"),
          "%s: want \"%s\", got %d \"%s\"", json, want, rc, err.msg);
}

static void test_safetensors(void) {
    /* A valid file: metadata, a scalar, an empty tensor, f16 and bf16 values. */
    uint8_t buf[512];
    uint16_t h[2] = {cx_fp32_to_fp16(1.5f), cx_fp32_to_fp16(-0.25f)};
    uint16_t bf[2] = {0x3fc0 /* 1.5 */, 0xc2f7 /* -123.5 */};
    float f1 = 7.0f;
    uint8_t data[12];
    memcpy(data, h, 4);
    memcpy(data + 4, bf, 4);
    memcpy(data + 8, &f1, 4);
    size_t size = st_image(buf,
                           "{\"__metadata__\":{\"format\":\"pt\"},\"h\":{\"dtype\":\"F16\",\"shape\":[2,1],"
                           "\"data_offsets\":[0,4]},\"e\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[4,4]},"
                           "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[4,8]},"
                           "\"s\":{\"data_offsets\":[8,12],\"shape\":[],\"dtype\":\"F32\"}}   ",
                           data, 12);
    st_file f;
    cx_err err = {0};
    CHECK(st_parse(buf, size, "ok.safetensors", &f, &err) == 0, "valid image: %s", err.msg);
    CHECK(f.n_tensors == 4 && f.n_meta == 1, "4 tensors, 1 metadata entry: %d %d", f.n_tensors, f.n_meta);
    const st_tensor *t = st_find(&f, "h");
    float v[2];
    CHECK(t && t->dtype == ST_F16 && t->n_dims == 2 && t->shape[0] == 2 && t->n_elems == 2, "f16 tensor");
    if (t) st_to_f32(t, v);
    CHECK(t && v[0] == 1.5f && v[1] == -0.25f, "f16 values %g %g", v[0], v[1]);
    t = st_find(&f, "b");
    if (t) st_to_f32(t, v);
    CHECK(t && t->dtype == ST_BF16 && v[0] == 1.5f && v[1] == -123.5f, "bf16 values %g %g", v[0], v[1]);
    t = st_find(&f, "s");
    if (t) st_to_f32(t, v);
    CHECK(t && t->n_dims == 0 && t->n_elems == 1 && v[0] == 7.0f, "scalar");
    t = st_find(&f, "e");
    CHECK(t && t->n_elems == 0 && t->nbytes == 0, "empty tensor");
    CHECK(!st_find(&f, "nope"), "absent name");
    st_close(&f);

    const char *T = "\"dtype\":\"F32\",\"shape\":[2]";
    char j[512];
    st_expect("{}", 0, NULL);
    st_expect("{}", 4, "4 data bytes but no tensor");
    snprintf(j, sizeof j, "{\"a\":{%s,\"data_offsets\":[0,8]}}", T);
    st_expect(j, 8, NULL);
    st_expect(j, 12, "4 bytes after the last tensor");
    st_expect(j, 4, "past the data buffer");
    snprintf(j, sizeof j, "{\"a\":{%s,\"data_offsets\":[0,4]}}", T);
    st_expect(j, 4, "span 4 bytes, its F32 shape needs 8");
    snprintf(j, sizeof j, "{\"a\":{%s,\"data_offsets\":[8,0]}}", T);
    st_expect(j, 8, "begin after their end");
    snprintf(j, sizeof j, "{\"a\":{%s,\"data_offsets\":[0,8]},\"b\":{%s,\"data_offsets\":[4,12]}}", T, T);
    st_expect(j, 12, "overlap");
    snprintf(j, sizeof j, "{\"a\":{%s,\"data_offsets\":[0,8]},\"b\":{%s,\"data_offsets\":[12,20]}}", T, T);
    st_expect(j, 20, "tensor b: 4 bytes before it belong to no tensor");
    snprintf(j, sizeof j, "{\"a\":{%s,\"data_offsets\":[0,8]},\"a\":{%s,\"data_offsets\":[8,16]}}", T, T);
    st_expect(j, 16, "duplicate");
    st_expect("{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
              "tensor a: dtype F64 not supported");
    st_expect("{\"a\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, "tensor a: unknown dtype");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,8]}}", 8, "shape[0]");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, "shape[0]");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
              "element count overflows");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8, "unexpected key");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "tensor a: missing shape");
    st_expect("{\"a\":[1]}", 0, "tensor a: entry is not an object");
    st_expect("{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ value \"k\" is not a string");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, "header JSON");
    st_expect("[]", 0, "does not start with '{'");
    /* Lengths: too short, absurd, past the end. */
    uint64_t big = 1000;
    CHECK(st_parse((const uint8_t *)"\x02\0\0", 3, "t.safetensors", &f, &err) == CX_EFORMAT &&
              strstr(err.msg, "too short"), "3 bytes: %s", err.msg);
    memcpy(buf, &big, 8);
    memcpy(buf + 8, "{}", 2);
    CHECK(st_parse(buf, 10, "t.safetensors", &f, &err) == CX_ERANGE && strstr(err.msg, "runs past the end"),
          "header length past the end: %s", err.msg);
    big = 1ull << 40;
    memcpy(buf, &big, 8);
    CHECK(st_parse(buf, 10, "t.safetensors", &f, &err) == CX_ERANGE && strstr(err.msg, "limit"),
          "absurd header length: %s", err.msg);
}

/* ---- adapter_config.json ---------------------------------------------------- */

/* Parse a config text; expect failure containing `want` (NULL: success, caller frees). */
static int cfg_parse(const char *text, peft_config *c, const char *want) {
    cx_err err = {0};
    int rc = peft_config_parse(text, strlen(text), "adapter_config.json", c, &err);
    if (want)
        CHECK(rc < 0 && strstr(err.msg, want) && strstr(err.msg, "adapter_config.json"), "%s: want \"%s\", got \"%s\"",
              text, want, err.msg);
    else
        CHECK(rc == 0, "%s: %s", text, err.msg);
    return rc;
}

static void test_config(void) {
    peft_config c;
    const char *q = "model.layers.3.self_attn.q_proj", *v = "model.layers.3.self_attn.v_proj";
    if (cfg_parse("{\"r\":8,\"lora_alpha\":16,\"target_modules\":[\"q_proj\",\"self_attn.k_proj\"],"
                  "\"rank_pattern\":{\"layers.3.self_attn.q_proj\":4,\"q_proj\":2},\"alpha_pattern\":{\"v_proj\":3.5}}",
                  &c, NULL) == 0) {
        CHECK(c.r == 8 && c.alpha == 16 && !c.use_rslora, "r, alpha");
        CHECK(peft_config_targets(&c, q) && peft_config_targets(&c, "model.layers.0.self_attn.k_proj"), "suffix");
        CHECK(!peft_config_targets(&c, v) && !peft_config_targets(&c, "model.layers.0.self_attn.xq_proj") &&
                  !peft_config_targets(&c, "model.layers.0.mlp.k_proj"), "only whole dotted suffixes");
        CHECK(peft_config_rank(&c, q) == 4 && peft_config_rank(&c, "model.layers.1.self_attn.q_proj") == 2 &&
                  peft_config_rank(&c, v) == 8, "rank_pattern: first match, else r");
        CHECK(peft_config_alpha(&c, v) == 3.5f && peft_config_alpha(&c, q) == 16, "alpha_pattern");
        peft_config_free(&c);
    }
    if (cfg_parse("{\"r\":8,\"lora_alpha\":16,\"target_modules\":[\"q_proj\"],"
                  "\"rank_pattern\":{\"q_proj\":2,\"layers.3.self_attn.q_proj\":4}}", &c, NULL) == 0) {
        CHECK(peft_config_rank(&c, q) == 2, "rank_pattern: the first match in file order wins");
        peft_config_free(&c);
    }
    if (cfg_parse("{\"r\":4,\"lora_alpha\":2.5,\"use_rslora\":true,\"target_modules\":\".*\\\\.(q|v)_proj\"}", &c,
                  NULL) == 0) {
        CHECK(c.use_rslora && c.alpha == 2.5f, "rslora, float alpha");
        CHECK(peft_config_targets(&c, q) && peft_config_targets(&c, v) &&
                  !peft_config_targets(&c, "model.layers.3.self_attn.k_proj") &&
                  !peft_config_targets(&c, "model.layers.3.self_attn.q_proj.x"), "regex must match the whole key");
        peft_config_free(&c);
    }
    if (cfg_parse("{\"r\":4,\"lora_alpha\":8,\"target_modules\":\"all-linear\",\"fan_in_fan_out\":false}", &c,
                  NULL) == 0) {
        CHECK(peft_config_targets(&c, "model.layers.3.mlp.down_proj"), "all-linear");
        peft_config_free(&c);
    }
    cfg_parse("{\"lora_alpha\":8,\"target_modules\":[\"q_proj\"]}", &c, "r is missing");
    cfg_parse("{\"r\":0,\"lora_alpha\":8,\"target_modules\":[\"q_proj\"]}", &c, "r is not an integer >= 1");
    cfg_parse("{\"r\":4,\"lora_alpha\":0,\"target_modules\":[\"q_proj\"]}", &c, "lora_alpha is not a number > 0");
    cfg_parse("{\"r\":4,\"lora_alpha\":8}", &c, "target_modules is missing");
    cfg_parse("{\"r\":4,\"lora_alpha\":8,\"target_modules\":[]}", &c, "target_modules is not");
    cfg_parse("{\"r\":4,\"lora_alpha\":8,\"target_modules\":[3]}", &c, "target_modules[0]");
    cfg_parse("{\"r\":4,\"lora_alpha\":8,\"target_modules\":\"(q\"}", &c, "target_modules: bad regular expression");
    cfg_parse("{\"r\":4,\"lora_alpha\":8,\"target_modules\":[\"q\"],\"fan_in_fan_out\":true}", &c, "fan_in_fan_out");
    cfg_parse("{\"r\":4,\"lora_alpha\":8,\"target_modules\":[\"q\"],\"use_dora\":true}", &c, "use_dora is true");
    cfg_parse("{\"r\":4,\"lora_alpha\":8,\"target_modules\":[\"q\"],\"lora_bias\":true}", &c, "lora_bias");
    cfg_parse("{\"r\":4,\"lora_alpha\":8,\"target_modules\":[\"q\"],\"peft_type\":\"IA3\"}", &c, "\"IA3\"");
    cfg_parse("{\"r\":4,\"lora_alpha\":8,\"target_modules\":[\"q\"],\"rank_pattern\":{\"q\":0}}", &c,
              "rank_pattern \"q\": rank");
    cfg_parse("{\"r\":4,\"lora_alpha\":8,\"target_modules\":[\"q\"],\"alpha_pattern\":{\"q\":\"x\"}}", &c,
              "alpha_pattern \"q\": alpha");
    cfg_parse("{\"r\":4,\"r\":5}", &c, "duplicate");
    cfg_parse("{\"r\":4,", &c, "JSON");
    cfg_parse("[4]", &c, "not a JSON object");
}

/* ---- adapters from make_peft.py ------------------------------------------- */

/* Run the writer for `model` into DIR/NAME (and DIR/NAME.gguf), DIR the scratch
 * directory (fx_dir); 0 on success. */
static int make_peft(const char *model, const char *name, const char *args) {
    const char *py = getenv("PY") ? getenv("PY") : "/usr/bin/python3";
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s tests/tools/make_peft.py --model %s --out %s/%s --gguf %s/%s.gguf %s", py, model,
             fx_dir(), name, fx_dir(), name, args);
    int rc = system(cmd);
    CHECK(rc == 0, "%s failed", cmd);
    return rc;
}

/* Every pair of s equals its tensors in the GGUF twin DIR/NAME.gguf: with
 * `alpha_too`, A, B and alpha bit for bit; without (per-module ranks and
 * alphas, which the twin folds into its B), A bit for bit and the scaled B
 * (alpha / rank * B) within float rounding. */
static void check_twin(const lora_src *s, const char *name, int alpha_too) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", fx_dir(), name);
    const uint8_t *map;
    size_t size;
    gguf_ctx g;
    cx_err err = {0};
    if (model_map_file(path, &map, &size, &err) || gguf_parse(map, size, path, &g, &err)) {
        CHECK(0, "%s: %s", path, err.msg);
        return;
    }
    float alpha = 0;
    CHECK(gguf_get_f32(&g, "adapter.lora.alpha", &alpha) == 1, "%s: alpha", path);
    CHECK(g.n_tensors == 2 * (uint64_t)s->n_pairs, "%s: %d pairs for %llu tensors", name, s->n_pairs,
          (unsigned long long)g.n_tensors);
    int bad = 0;
    for (int i = 0; i < s->n_pairs; i++) {
        const lora_pair *p = &s->pairs[i];
        char tn[128];
        snprintf(tn, sizeof tn, "%s.lora_a", p->name);
        const gguf_tensor *ta = gguf_find_tensor(&g, tn);
        snprintf(tn, sizeof tn, "%s.lora_b", p->name);
        const gguf_tensor *tb = gguf_find_tensor(&g, tn);
        if (!ta || !tb || ta->type != CX_TYPE_F32 || tb->type != CX_TYPE_F32 || ta->ne[0] != p->n_in ||
            ta->ne[1] != p->rank || tb->ne[0] != p->rank || tb->ne[1] != p->n_out) {
            CHECK(0, "%s: %s missing or of another shape in the twin", name, p->name);
            bad++;
            continue;
        }
        if (memcmp(ta->data, p->a, (size_t)(p->rank * p->n_in) * 4)) bad++;
        if (alpha_too && (p->alpha != alpha || memcmp(tb->data, p->b, (size_t)(p->rank * p->n_out) * 4))) bad++;
        for (int64_t k = 0; !alpha_too && k < p->rank * p->n_out; k++) {
            float tw;
            memcpy(&tw, tb->data + 4 * k, 4);
            double want = (double)alpha / p->rank * tw, got = (double)p->alpha / p->rank * p->b[k];
            if (fabs(want - got) > 1e-6 * fabs(want) + 1e-12) {
                bad++;
                break;
            }
        }
    }
    CHECK(bad == 0, "%s: %d of %d pairs differ from the GGUF twin", name, bad, s->n_pairs);
    gguf_free(&g);
    model_unmap_file(map, size);
}

/* Load DIR/NAME (or DIR/NAME/adapter_model.safetensors with `file`) for m. */
static int load(const cx_model *m, const char *name, int file, lora_src *s, cx_err *err) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s%s", fx_dir(), name, file ? "/adapter_model.safetensors" : "");
    return lora_src_peft(path, m, s, err);
}

/* Does q's lora_B as stored in DIR/NAME differ from the pair's B (permuted) or equal it? */
static int b_as_stored(const lora_src *s, const char *name, const char *tensor, const char *pair) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s/adapter_model.safetensors", fx_dir(), name);
    st_file f;
    cx_err err = {0};
    if (st_open(path, &f, &err)) return -1;
    const st_tensor *t = st_find(&f, tensor);
    int same = -1;
    for (int i = 0; t && i < s->n_pairs; i++)
        if (!strcmp(s->pairs[i].name, pair)) same = !memcmp(t->data, s->pairs[i].b, t->nbytes);
    st_close(&f);
    return same;
}

static void test_stories(const cx_model *m, const char *mp) {
    lora_src s;
    cx_err err = {0};
    /* Every module of every layer, f32. */
    if (make_peft(mp, "all", "--seed 3") == 0) {
        CHECK(load(m, "all", 0, &s, &err) == 0, "all: %s", err.msg);
        CHECK(s.n_pairs == 7 * m->info.n_layer, "all: %d pairs", s.n_pairs);
        CHECK(s.n_pairs > 8 && !strcmp(s.pairs[0].name, "blk.0.attn_q.weight") &&
                  !strcmp(s.pairs[3].name, "blk.0.attn_output.weight") &&
                  !strcmp(s.pairs[8].name, "blk.1.attn_k.weight"), "names in layer, module order");
        CHECK(s.pairs[1].rank == 4 && s.pairs[1].alpha == 8 && s.pairs[1].n_in == 64 && s.pairs[1].n_out == 32,
              "k: rank %d alpha %g %lldx%lld", s.pairs[1].rank, s.pairs[1].alpha, (long long)s.pairs[1].n_out,
              (long long)s.pairs[1].n_in);
        CHECK(strstr(s.label, "/all") != NULL, "label is the path");
        check_twin(&s, "all", 1);
        /* The permutation happened on q and k, and only there. */
        CHECK(b_as_stored(&s, "all", "base_model.model.model.layers.2.self_attn.q_proj.lora_B.weight",
                          "blk.2.attn_q.weight") == 0, "q's B is permuted");
        CHECK(b_as_stored(&s, "all", "base_model.model.model.layers.2.self_attn.k_proj.lora_B.weight",
                          "blk.2.attn_k.weight") == 0, "k's B is permuted");
        CHECK(b_as_stored(&s, "all", "base_model.model.model.layers.2.self_attn.v_proj.lora_B.weight",
                          "blk.2.attn_v.weight") == 1, "v's B is not");
        lora_src_free(&s);
        CHECK(s.n_pairs == 0 && !s.pairs, "lora_src_free zeroes");
        lora_src_free(&s);
        /* The .safetensors file instead of the directory: the same pairs. */
        CHECK(load(m, "all", 1, &s, &err) == 0, "all (file): %s", err.msg);
        check_twin(&s, "all", 1);
        lora_src_free(&s);
    }
    /* f16 and bf16 tensors, some modules and layers. */
    const char *dts[2][2] = {{"f16", "--dtype f16 --modules q_proj,down_proj --layers 1,4"},
                             {"bf16", "--dtype bf16 --modules k_proj,up_proj --layers 0"}};
    for (int i = 0; i < 2; i++) {
        if (make_peft(mp, dts[i][0], dts[i][1])) continue;
        CHECK(load(m, dts[i][0], 0, &s, &err) == 0, "%s: %s", dts[i][0], err.msg);
        CHECK(s.n_pairs == (i ? 2 : 4), "%s: %d pairs", dts[i][0], s.n_pairs);
        check_twin(&s, dts[i][0], 1);
        lora_src_free(&s);
    }
    /* rank_pattern, alpha_pattern, rsLoRA, a regex target_modules. */
    if (make_peft(mp, "pat", "--rank 4 --alpha 6 --rslora --modules q_proj,v_proj --layers 0,1 "
                             "--rank-pattern layers.1.self_attn.q_proj=8 --alpha-pattern v_proj=3 "
                             "--target-regex '.*\\.(q_proj|v_proj)'") == 0) {
        CHECK(load(m, "pat", 0, &s, &err) == 0, "pat: %s", err.msg);
        CHECK(s.n_pairs == 4, "pat: %d pairs", s.n_pairs);
        if (s.n_pairs == 4) {
            /* pairs: 0.q (r 4, alpha 6), 0.v (r 4, alpha 3), 1.q (r 8, alpha 6), 1.v (r 4, alpha 3); rsLoRA:
             * the pair's alpha / rank is alpha / sqrt(rank). */
            const int r[4] = {4, 4, 8, 4};
            const float al[4] = {6, 3, 6, 3};
            for (int i = 0; i < 4; i++) {
                CHECK(s.pairs[i].rank == r[i], "pat %d: rank %d", i, s.pairs[i].rank);
                CHECK_NEAR(s.pairs[i].alpha / s.pairs[i].rank, al[i] / sqrt(r[i]), 1e-6, "rsLoRA scale");
            }
        }
        check_twin(&s, "pat", 0);
        lora_src_free(&s);
    }
    /* Each broken adapter: one error naming the file and the tensor (or what is wrong). */
    static const struct {
        const char *defect, *want1, *want2;
    } bad[] = {
        {"truncated", "header length", "runs past the end"},
        {"hlen", "header length", "runs past the end"},
        {"badjson", "header JSON", "adapter_model.safetensors"},
        {"offsets", "lora_A.weight: data_offsets end", "past the data buffer"},
        {"overlap", "data_offsets overlap tensor", "lora_"},
        {"rank", "lora_B.weight: rank 5, its lora_A has rank 4", "layers.0."},
        {"cfgrank", "rank 4, adapter_config.json says 5", "lora_A.weight"},
        {"shape", "lora_A.weight: shape [4, 65], the base matrix needs [4, 64]", "q_proj"},
        {"module", "qkv_proj.lora_A.weight: module model.layers.0.self_attn.qkv_proj is not supported", "safetensors"},
        {"lmhead", "lm_head.lora_A.weight: module lm_head is not supported", "safetensors"},
        {"embedding", "embed_tokens.lora_embedding_A: an embedding LoRA is not supported", "safetensors"},
        {"lonely", "lora_A.weight has no lora_B partner", "layers.0."},
        {"layer", "layers.5.self_attn.v_proj.lora_A.weight: layer 5, the base model has 5", "safetensors"},
        {"dtype", "dtype F64 not supported", "layers.0.self_attn.q_proj.lora_A.weight"},
        {"untargeted", "q_proj is not in the config's target_modules", "lora_A.weight"},
        {"dora", "use_dora is true", "adapter_config.json"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[64], args[96];
        snprintf(name, sizeof name, "bad_%s", bad[i].defect);
        snprintf(args, sizeof args, "--defect %s", bad[i].defect);
        if (make_peft(mp, name, args)) continue;
        memset(&err, 0, sizeof err);
        int rc = load(m, name, 0, &s, &err);
        CHECK(rc < 0 && rc == err.code && strstr(err.msg, name) && strstr(err.msg, bad[i].want1) &&
                  strstr(err.msg, bad[i].want2), "%s: got %d \"%s\"", bad[i].defect, rc, err.msg);
        CHECK(s.n_pairs == 0 && !s.pairs, "%s: nothing left to free", bad[i].defect);
    }
    /* Paths that hold no adapter. */
    char path[512];
    snprintf(path, sizeof path, "%s/none", fx_dir());
    CHECK(lora_src_peft(path, m, &s, &err) == CX_EIO && strstr(err.msg, "cannot open"), "missing: %s", err.msg);
    CHECK(lora_src_peft(fx_dir(), m, &s, &err) == CX_EIO && strstr(err.msg, "no adapter_model.safetensors"),
          "empty directory: %s", err.msg);
    snprintf(path, sizeof path, "%s/bin/adapter_model.bin", fx_dir());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/bin && touch %s", fx_dir(), path);
    if (system(cmd) == 0) {
        snprintf(path, sizeof path, "%s/bin", fx_dir());
        CHECK(lora_src_peft(path, m, &s, &err) == CX_EUNSUP && strstr(err.msg, "adapter_model.bin"),
              "pickled weights: %s", err.msg);
    }
    snprintf(path, sizeof path, "%s/all.gguf", fx_dir());
    CHECK(lora_src_peft(path, m, &s, &err) == CX_EFORMAT && strstr(err.msg, "all.gguf: a GGUF file"),
          "a GGUF file: %s", err.msg);
}

/* A Qwen 2 base: Hugging Face's q/k layout is the GGUF one, nothing is permuted. */
static void test_qwen2(void) {
    const char *mp = fx_synth(cx_shape_find("test-qwen2"), CX_TYPE_F32, 5, "qwen2.gguf");
    cx_model *m = mp ? fx_load(mp, NULL) : NULL;
    if (!m) return;
    cx_err err = {0};
    lora_src s;
    if (make_peft(mp, "qwen", "--modules q_proj,k_proj,o_proj --layers 0") == 0) {
        CHECK(load(m, "qwen", 0, &s, &err) == 0, "qwen: %s", err.msg);
        CHECK(s.n_pairs == 3, "qwen: %d pairs", s.n_pairs);
        check_twin(&s, "qwen", 1);
        CHECK(b_as_stored(&s, "qwen", "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight",
                          "blk.0.attn_q.weight") == 1, "qwen2: q's B as stored");
        lora_src_free(&s);
    }
    cx_model_free(m);
}

TEST_MAIN({
    test_safetensors();
    test_config();
    char mp[512];
    cx_model *m = NULL;
    cx_err err = {0};
    if (fx_real_model("stories260K.gguf", "stories260K adapters", mp, sizeof mp)) {
        if (cx_model_load(mp, NULL, &m, &err) == 0) {
            test_stories(m, mp);
            cx_model_free(m);
        } else {
            CHECK(0, "load %s: %s", mp, err.msg);
        }
    }
    test_qwen2();
    fx_cleanup();
})
