/*
 * sched_lora.c - the adapters a scheduler serves (cortex.h, docs/lora.md).
 *
 * Adapters are registered by id and name, with a path; they are loaded on
 * first use and stay resident while the budget allows. When loading one
 * would pass cx_sched_params.lora_budget, the least recently used adapters
 * no running request uses are unloaded first; an adapter in use by a
 * running request is never unloaded, so a request whose adapter cannot fit
 * waits (in its priority order) until running ones end. Loading happens on
 * the stepping thread, inside admission, with the lock held: submit and
 * cancel wait out a load (tens of milliseconds: docs/lora.md measures it).
 *
 * Each live request holds a reference on its adapter's registration (refs),
 * and each running one a use (running). Removing an adapter with live
 * requests is deferred: it refuses new requests and goes when the last
 * one ends.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../lora/lora.h"
#include "../session.h"
#include "../util.h"
#include "sched.h"

typedef struct sched_adapter {
    int id;
    char name[64];
    char path[256];
    cx_lora *lora;             /* NULL when not resident */
    int64_t bytes;             /* when resident, or last resident; 0 before the first load */
    int64_t last_use;          /* monotonic ns of the last admission using it */
    int64_t loads;
    int refs, running, removing;
} sched_adapter;

/* Registration of adapter id, or NULL. */
static sched_adapter *find_id(const cx_sched *s, int id) {
    for (int i = 0; i < s->n_ad; i++)
        if (s->ad[i]->id == id) return s->ad[i];
    return NULL;
}

/* Unload a resident adapter (nothing running uses it). */
static void unload(cx_sched *s, sched_adapter *a) {
    assert(a->lora && a->running == 0);
    cx_lora_free(a->lora);
    a->lora = NULL;
    s->lora_bytes -= a->bytes;
}

/* Forget registration a entirely (nothing references it). */
static void drop(cx_sched *s, sched_adapter *a) {
    assert(a->refs == 0 && a->running == 0);
    if (a->lora) unload(s, a);
    for (int i = 0; i < s->n_ad; i++)
        if (s->ad[i] == a) {
            memmove(s->ad + i, s->ad + i + 1, sizeof *s->ad * (size_t)(s->n_ad - i - 1));
            s->n_ad--;
            break;
        }
    free(a);
}

/* Load a (lock held). 0, or CX_E* with the loader's message. */
static int load(cx_sched *s, sched_adapter *a, cx_err *err) {
    cx_lora_params lp = cx_lora_defaults();
    lp.type = s->p.lora_type;
    int rc = cx_lora_load(s->m, a->path, &lp, &a->lora, err);
    if (rc) return rc;
    cx_lora_info in;
    cx_lora_get_info(a->lora, &in);
    if ((rc = batch_lora_reserve(s->batch, lora_group_rank(a->lora), err))) { /* passes then allocate nothing */
        cx_lora_free(a->lora);
        a->lora = NULL;
        return rc;
    }
    a->bytes = (int64_t)in.bytes;
    a->loads++;
    s->lora_bytes += a->bytes;
    s->st.lora_loads++;
    s->st.lora_load_ns += in.load_ns;
    if (in.load_ns > s->st.lora_load_ns_max) s->st.lora_load_ns_max = in.load_ns;
    return 0;
}

/* See cortex.h. */
int cx_sched_adapter_add(cx_sched *s, int id, const char *name, const char *path, int preload, cx_err *err) {
    if (id < 1) return cx_fail(err, CX_EINVAL, "adapter id %d must be at least 1", id);
    if (!path || !*path) return cx_fail(err, CX_EINVAL, "adapter %d: no path", id);
    char nm[64];
    if (name && strlen(name) >= sizeof nm) return cx_fail(err, CX_EINVAL, "adapter name '%s' is too long (63 bytes)", name);
    if (strlen(path) >= sizeof ((sched_adapter *)0)->path)
        return cx_fail(err, CX_EINVAL, "adapter path '%s' is too long", path);
    snprintf(nm, sizeof nm, "%s", name ? name : "");
    if (!name) snprintf(nm, sizeof nm, "adapter-%d", id);
    struct stat st;
    if (stat(path, &st)) return cx_fail(err, CX_EIO, "adapter %s: cannot open %s", nm, path);
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    if (find_id(s, id)) rc = cx_fail(err, CX_EINVAL, "adapter id %d is already registered", id);
    else if (sched_lora_find_locked(s, nm)) rc = cx_fail(err, CX_EINVAL, "adapter name '%s' is already taken", nm);
    sched_adapter *a = NULL;
    if (!rc && s->n_ad == s->cap_ad) {
        int cap = s->cap_ad ? 2 * s->cap_ad : 16;
        sched_adapter **na = realloc(s->ad, sizeof *na * (size_t)cap);
        if (!na) rc = cx_fail(err, CX_ENOMEM, "out of memory");
        else {
            s->ad = na;
            s->cap_ad = cap;
        }
    }
    if (!rc && !(a = calloc(1, sizeof *a))) rc = cx_fail(err, CX_ENOMEM, "out of memory");
    if (!rc) {
        a->id = id;
        snprintf(a->name, sizeof a->name, "%s", nm);
        snprintf(a->path, sizeof a->path, "%s", path);
        if (preload) rc = load(s, a, err);
        if (rc) free(a);
        else s->ad[s->n_ad++] = a;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* See sched.h (lock held): the id registered under name, or 0. */
int sched_lora_find_locked(const cx_sched *s, const char *name) {
    for (int i = 0; i < s->n_ad; i++)
        if (!strcmp(s->ad[i]->name, name)) return s->ad[i]->id;
    return 0;
}

/* See sched.h. */
int sched_lora_resident(const cx_sched *s, int i) { return s->ad[i]->lora != NULL; }

/* See cortex.h. */
int cx_sched_adapter_find(cx_sched *s, const char *name) {
    pthread_mutex_lock(&s->mu);
    int id = sched_lora_find_locked(s, name);
    pthread_mutex_unlock(&s->mu);
    return id;
}

/* See cortex.h. */
int cx_sched_adapter_remove(cx_sched *s, int id, cx_err *err) {
    pthread_mutex_lock(&s->mu);
    sched_adapter *a = find_id(s, id);
    int rc;
    if (!a || a->removing) rc = cx_fail(err, CX_EINVAL, "adapter %d is not registered", id);
    else if (a->refs) {
        a->removing = 1; /* sched_lora_unref finishes it */
        rc = 1;
    } else {
        drop(s, a);
        rc = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* See cortex.h. */
int cx_sched_adapter_info(cx_sched *s, int i, cx_adapter_info *out) {
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    if (i < 0 || i >= s->n_ad) rc = CX_EINVAL;
    else {
        const sched_adapter *a = s->ad[i];
        memset(out, 0, sizeof *out);
        out->id = a->id;
        snprintf(out->name, sizeof out->name, "%s", a->name);
        snprintf(out->path, sizeof out->path, "%s", a->path);
        out->resident = a->lora != NULL;
        out->removing = a->removing;
        out->refs = a->refs;
        out->running = a->running;
        out->bytes = a->bytes;
        out->loads = a->loads;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* See sched.h. */
int sched_lora_ref(cx_sched *s, sched_req *r, cx_err *err) {
    if (r->adapter == 0) return 0;
    sched_adapter *a = find_id(s, r->adapter);
    if (!a) return cx_fail(err, CX_EINVAL, "request: adapter %d is not registered", r->adapter);
    if (a->removing) return cx_fail(err, CX_EINVAL, "request: adapter %d (%s) is being unloaded", a->id, a->name);
    a->refs++;
    r->ad = a;
    return 0;
}

/* The least recently used resident adapter nothing running uses, other than keep; NULL if none. */
static sched_adapter *lru_idle(const cx_sched *s, const sched_adapter *keep) {
    sched_adapter *best = NULL;
    for (int i = 0; i < s->n_ad; i++) {
        sched_adapter *a = s->ad[i];
        if (a != keep && a->lora && a->running == 0 && (!best || a->last_use < best->last_use)) best = a;
    }
    return best;
}

/* See sched.h. */
int sched_lora_acquire(cx_sched *s, sched_req *r, int k, int64_t now, cx_err *err) {
    cx_err le = {0};
    sched_adapter *a = r->ad;
    if (a && !a->lora) {
        int64_t budget = s->p.lora_budget;
        int known = a->bytes > 0; /* its size once loaded; before its first load it is learned by loading */
        sched_adapter *v;
        int lrc = known ? 0 : load(s, a, &le);
        if (lrc) return cx_fail(err, lrc, "adapter %s: %s", a->name, le.msg);
        int64_t need = known ? a->bytes : 0; /* the bytes not yet counted in lora_bytes */
        while (budget && s->lora_bytes + need > budget && (v = lru_idle(s, a))) {
            unload(s, v);
            s->st.lora_evictions++;
        }
        if (budget && s->lora_bytes + need > budget) {
            int alone = s->lora_bytes - (known ? 0 : a->bytes) == 0;
            if (!known) unload(s, a);
            if (!alone) return 1; /* running adapters hold the budget: wait for them */
            return cx_fail(err, CX_ENOMEM, "adapter %s (%lld bytes) is larger than the adapter budget (%lld bytes)",
                           a->name, (long long)a->bytes, (long long)budget);
        }
        if (known && (lrc = load(s, a, &le))) return cx_fail(err, lrc, "adapter %s: %s", a->name, le.msg);
    }
    cx_lora_use use = {a ? a->lora : NULL, r->adapter_scale};
    int rc = cx_session_set_lora(s->sess[k], &use, a ? 1 : 0, &le);
    assert(rc == 0); /* the slot's session is empty and the adapter is of this model */
    (void)rc;
    if (a) {
        a->running++;
        a->last_use = now;
    }
    return 0;
}

/* See sched.h. */
void sched_lora_unslot(cx_sched *s, sched_req *r) {
    (void)s;
    if (r->ad) {
        assert(r->ad->running > 0);
        r->ad->running--;
    }
}

/* See sched.h. */
void sched_lora_unref(cx_sched *s, sched_req *r) {
    sched_adapter *a = r->ad;
    if (!a) return;
    r->ad = NULL;
    assert(a->refs > 0);
    if (--a->refs == 0 && a->removing) drop(s, a);
}

/* See sched.h. */
void sched_lora_free_all(cx_sched *s) {
    for (int i = 0; i < s->n_ad; i++) {
        cx_lora_free(s->ad[i]->lora);
        free(s->ad[i]);
    }
    free(s->ad);
    s->ad = NULL;
    s->n_ad = s->cap_ad = 0;
}

/* See sched.h. */
int sched_lora_same(const sched_req *r, const sched_req *q) {
    return r->adapter == q->adapter && (r->adapter == 0 || r->adapter_scale == q->adapter_scale);
}
