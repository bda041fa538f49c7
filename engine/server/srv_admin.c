/*
 * srv_admin.c - the adapter routes, vLLM's POST /v1/load_lora_adapter
 * {"lora_name", "lora_path"} and POST /v1/unload_lora_adapter {"lora_name"}.
 * They change what the process holds, so they are closed by default:
 *   - without --lora-dir both answer 403 naming the flag (--api-key guards
 *     them like every route once they are open);
 *   - lora_path is resolved inside the --lora-dir directory with realpath,
 *     and whatever does not resolve to a readable file or directory strictly
 *     inside it (.., an absolute path elsewhere, a symbolic link out, a
 *     missing or unreadable file, a device) gets one answer, word for word
 *     the same, so the route tells nothing about files outside; a file
 *     inside that is no adapter gets the loader's message;
 *   - at most --max-adapters are registered (those of --lora included): 409
 *     past it;
 *   - a name whose adapter is still being unloaded (requests used it when
 *     the unload came) answers 409 to a load until those requests end, when
 *     the scheduler forgets it and the name is free; an unload of it answers
 *     200 again (it is already going).
 * One admin call runs at a time (S->admin_mu), so the cap and the ids a
 * load picks cannot race with another load.
 */
#include <jansson.h>
#include <limits.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "srv.h"

/* The one answer for a lora_path that does not name a readable adapter inside the directory. */
#define NO_SUCH_PATH "'lora_path' does not name a readable adapter file or directory inside the server's adapter " \
                     "directory (--lora-dir)"

/* See srv.h. realpath resolves every symbolic link and every "..", so the
 * prefix comparison is made on the file the loader will open; the loader
 * then gets that resolved path, not the client's. */
char *srv_admin_path(const char *dir, const char *lora_path) {
    size_t nd = strlen(dir), np = strlen(lora_path);
    if (!np || np >= PATH_MAX) return NULL;
    char *joined = malloc(nd + np + 2);
    if (!joined) return NULL;
    if (lora_path[0] == '/') memcpy(joined, lora_path, np + 1); /* absolute: allowed only when it lands inside */
    else snprintf(joined, nd + np + 2, "%s/%s", dir, lora_path);
    char *real = realpath(joined, NULL);
    free(joined);
    struct stat st;
    int inside = real && !strncmp(real, dir, nd) && (real[nd] == '/' || (nd == 1 && real[1])) && /* dir "/": any but it */
                 !stat(real, &st) &&
                 ((S_ISREG(st.st_mode) && !access(real, R_OK)) || (S_ISDIR(st.st_mode) && !access(real, R_OK | X_OK)));
    if (inside) return real;
    free(real);
    return NULL;
}

/* The string field `key` of a JSON object body, or NULL with e filled (400). */
static const char *body_string(json_t *doc, const char *key, srv_error *e) {
    json_t *f = doc ? json_object_get(doc, key) : NULL;
    if (!json_is_string(f) || !json_string_value(f)[0]) {
        srv_error_set(e, 400, "invalid_request_error", NULL, key, "'%s' must be a non-empty string", key);
        return NULL;
    }
    return json_string_value(f);
}

/* A plain-text success answer, as vLLM's adapter routes give. */
static int reply_text(srv_server *S, struct MHD_Connection *c, const char *fmt, const char *name, int n) {
    char buf[320];
    snprintf(buf, sizeof buf, fmt, name, n);
    char *t = strdup(buf);
    return srv_http_reply(S, c, 200, "text/plain; charset=utf-8", t, t ? strlen(t) : 0, 0);
}

/* The registration named `name` (removing ones included) into *in: 1 if there is one. */
static int find_named(srv_server *S, const char *name, cx_adapter_info *in) {
    for (int i = 0; cx_sched_adapter_info(S->sched, i, in) == 0; i++)
        if (!strcmp(in->name, name)) return 1;
    return 0;
}

/* Register and load `name` from `path` (admin lock held): 0 with the 200
 * sent, or -1 with e filled. */
static int load(srv_server *S, struct MHD_Connection *c, const char *name, const char *path, srv_error *e, int *ret) {
    cx_adapter_info in;
    int n = 0, id = 1;
    for (int i = 0; cx_sched_adapter_info(S->sched, i, &in) == 0; i++, n++)
        if (in.id >= id) id = in.id + 1;
    if (!strcmp(name, S->model_id))
        return srv_error_set(e, 400, "invalid_request_error", NULL, "lora_name", "'%s' is the base model's name", name);
    if (find_named(S, name, &in)) {
        if (in.removing)
            return srv_error_set(e, 409, "invalid_request_error", "adapter_unloading", "lora_name", "the adapter '%s' is being "
                            "unloaded: %d requests still use it; the name is free once they end", name, in.refs);
        return srv_error_set(e, 400, "invalid_request_error", NULL, "lora_name", "adapter name '%s' is already taken", name);
    }
    if (n >= S->cfg->max_adapters)
        return srv_error_set(e, 409, "invalid_request_error", "adapter_limit", "lora_name", "%d adapters are registered, the "
                        "server's limit (--max-adapters): unload one first", n);
    char *real = srv_admin_path(S->lora_dir, path);
    if (!real) return srv_error_set(e, 400, "invalid_request_error", "adapter_path_refused", "lora_path", NO_SUCH_PATH);
    cx_err err = {0};
    int rc = cx_sched_adapter_add(S->sched, id, name, real, 1, &err);
    if (rc) { /* the file is inside and readable: what is wrong with it may be said, under the client's name for it */
        char msg[sizeof err.msg];
        const char *at = strstr(err.msg, real);
        if (at) snprintf(msg, sizeof msg, "%.*s%s%s", (int)(at - err.msg), err.msg, path, at + strlen(real));
        else snprintf(msg, sizeof msg, "%s", err.msg);
        free(real);
        if (rc == CX_ENOMEM) return srv_error_set(e, 500, "server_error", NULL, NULL, "%s", msg);
        return srv_error_set(e, 400, "invalid_request_error", NULL, strncmp(err.msg, "adapter name", 12) ? "lora_path" : "lora_name",
                        "%s", msg);
    }
    free(real);
    *ret = reply_text(S, c, "Success: LoRA adapter '%s' added successfully.", name, 0);
    return 0;
}

/* Unload `name` (admin lock held): 0 with the 200 sent, or -1 with e filled. */
static int unload(srv_server *S, struct MHD_Connection *c, const char *name, srv_error *e, int *ret) {
    cx_adapter_info in;
    if (!find_named(S, name, &in))
        return srv_error_set(e, MHD_HTTP_NOT_FOUND, "invalid_request_error", "model_not_found", "lora_name",
                        "no adapter named '%s' (GET /v1/models)", name);
    cx_err err = {0};
    /* Not removing: only this (serialized) route removes it, so the removal finds it. Removing: already going. */
    int rc = in.removing ? 1 : cx_sched_adapter_remove(S->sched, in.id, &err);
    if (rc <= 0) *ret = reply_text(S, c, "Success: LoRA adapter '%s' removed successfully.", name, 0);
    else
        *ret = reply_text(S, c, "Success: LoRA adapter '%s' will be removed when its %d requests end; new requests naming "
                          "it are refused.", name, in.refs);
    return 0;
}

/* See srv.h. */
int srv_admin_adapter(srv_server *S, struct MHD_Connection *c, int load_it, const char *body, size_t len) {
    srv_error e;
    if (!S->lora_dir) {
        srv_error_set(&e, MHD_HTTP_FORBIDDEN, "permission_error", "adapter_routes_disabled", NULL, "loading and unloading "
                 "adapters at run time is off: start the server with --lora-dir DIR to allow it from files in DIR");
        return srv_http_reply_error(S, c, &e);
    }
    json_error_t je;
    json_t *doc = json_loadb(body, len, 0, &je);
    const char *name = NULL, *path = NULL;
    int ret = MHD_NO, rc = -1;
    if (!json_is_object(doc)) srv_error_set(&e, 400, "invalid_request_error", "invalid_json", NULL, "the body is not a JSON object");
    else if ((name = body_string(doc, "lora_name", &e)) && (!load_it || (path = body_string(doc, "lora_path", &e)))) {
        pthread_mutex_lock(&S->admin_mu);
        rc = load_it ? load(S, c, name, path, &e, &ret) : unload(S, c, name, &e, &ret);
        pthread_mutex_unlock(&S->admin_mu);
    }
    json_decref(doc);
    return rc ? srv_http_reply_error(S, c, &e) : ret;
}
