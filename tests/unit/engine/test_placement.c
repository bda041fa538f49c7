/*
 * test_placement.c - thread placement and NUMA policy (cx_set_placement,
 * engine/src/affinity.c, placement.c):
 *   - the compact and spread orders, exactly, on fake sysfs trees of
 *     machines this one is not (2 packages x 2 cores x 2 SMT threads in both
 *     common CPU numberings, a subset of allowed CPUs, uneven core ids, no
 *     topology files at all), and the list parser and printer;
 *   - on this machine, pool workers run on the CPU the policy gives them
 *     (sched_getcpu and pthread_getaffinity_np inside a tp_run job): a bare
 *     pool with more threads than CPUs (wrap-around), a session's pool, the
 *     scheduler's own thread, a thread pinned by cx_pin_caller; and without
 *     a policy nothing is pinned;
 *   - NUMA: with one node a policy reports "no effect" and loading, KV
 *     caches and evaluation still work; the mbind call itself binds what it
 *     says (get_mempolicy), where the machine lets a process call it.
 * Parts this machine cannot exercise print SKIP with the reason. make tsan
 * runs this file under ThreadSanitizer.
 */
#include <assert.h>
#include <errno.h>
#include <linux/mempolicy.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "affinity.h"
#include "fixture.h"
#include "placement.h"
#include "session.h"
#include "threadpool.h"

/* ---- fake sysfs trees ---- */

/* Write `text` to ROOT/rel, making the directories on the way. */
static void put(const char *root, const char *rel, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *s = path + strlen(root) + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(path, 0755);
            *s = '/';
        }
    fx_write(path, text, strlen(text));
}

/* A fake machine under a fresh root: CPU c in package pkg[c] with core id core[c] (topology files only when
 * `topology`), and node k listing node_cpus[k]. Its root. */
static const char *machine(const char *name, int n, const int *pkg, const int *core, int topology,
                           const char *const *node_cpus, int n_nodes) {
    const char *root = fx_path("%s", name);
    mkdir(root, 0755);
    for (int c = 0; c < n; c++) {
        char rel[128], v[32];
        snprintf(rel, sizeof rel, "cpu/cpu%d/online", c);
        put(root, rel, "1\n");
        if (!topology) continue;
        snprintf(rel, sizeof rel, "cpu/cpu%d/topology/physical_package_id", c);
        snprintf(v, sizeof v, "%d\n", pkg[c]);
        put(root, rel, v);
        snprintf(rel, sizeof rel, "cpu/cpu%d/topology/core_id", c);
        snprintf(v, sizeof v, "%d\n", core[c]);
        put(root, rel, v);
    }
    for (int k = 0; k < n_nodes; k++) {
        char rel[128], v[128];
        snprintf(rel, sizeof rel, "node/node%d/cpulist", k);
        snprintf(v, sizeof v, "%s\n", node_cpus[k]);
        put(root, rel, v);
    }
    put(root, "node/possible", "0-1\n"); /* not a nodeN directory: must be ignored */
    return root;
}

/* The order of `policy` over the CPUs in `allowed` (a list) of the machine at root, as "0,4,1,5". */
static const char *order_of(const char *root, const char *allowed, int policy) {
    static char out[256];
    uint64_t mask[AFF_MASK_WORDS(AFF_MAX_CPUS)];
    cpu_set_t set;
    CPU_ZERO(&set);
    if (aff_parse_list(allowed, mask, AFF_MAX_CPUS)) return "bad list";
    for (int c = 0; c < AFF_MAX_CPUS; c++)
        if (mask[c / 64] >> (c % 64) & 1) CPU_SET(c, &set);
    static aff_topo t;
    int order[AFF_MAX_CPUS];
    cx_err err = {0};
    if (aff_read(root, &set, &t, &err) || aff_order(&t, policy, order, &err)) {
        snprintf(out, sizeof out, "error: %.200s", err.msg);
        return out;
    }
    size_t at = 0;
    out[0] = 0;
    for (int i = 0; i < t.n; i++) at += (size_t)snprintf(out + at, sizeof out - at, "%s%d", i ? "," : "", order[i]);
    return out;
}

#define CHECK_ORDER(root, allowed, policy, want)                                                               \
    do {                                                                                                       \
        const char *got_ = order_of(root, allowed, policy);                                                    \
        CHECK(!strcmp(got_, want), "%s, CPUs %s, %s: order %s, want %s", root, allowed,                        \
              cx_pin_policy_name(policy), got_, want);                                                         \
    } while (0)

static void test_orders(void) {
    /* 2 packages x 2 cores x 2 SMT threads, Intel's numbering: the first thread of every core, then the
     * second ones (cpu c: package c/2 mod 2, core c mod 2, sibling c/4); one node per package. */
    int pkg[8], core[8];
    for (int c = 0; c < 8; c++) pkg[c] = c / 2 % 2, core[c] = c % 2;
    const char *nodes[] = {"0-1,4-5", "2-3,6-7"};
    const char *m = machine("intel", 8, pkg, core, 1, nodes, 2);
    CHECK_ORDER(m, "0-7", CX_PIN_COMPACT, "0,4,1,5,2,6,3,7");
    CHECK_ORDER(m, "0-7", CX_PIN_SPREAD, "0,2,1,3,4,6,5,7");
    /* only some CPUs allowed (taskset): the orders are over those alone */
    CHECK_ORDER(m, "1-2,5-6", CX_PIN_COMPACT, "1,5,2,6");
    CHECK_ORDER(m, "1-2,5-6", CX_PIN_SPREAD, "1,2,5,6");
    CHECK_ORDER(m, "4", CX_PIN_SPREAD, "4");
    static aff_topo t;
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int c = 0; c < 8; c++) CPU_SET(c, &all);
    cx_err err = {0};
    CHECK(aff_read(m, &all, &t, &err) == 0 && t.n == 8, "read the fake machine: %s", err.msg);
    CHECK(t.cpu[6].cpu == 6 && t.cpu[6].package == 1 && t.cpu[6].core == 0 && t.cpu[6].node == 1,
          "cpu 6: package %d core %d node %d, want 1 0 1", t.cpu[6].package, t.cpu[6].core, t.cpu[6].node);

    /* the same shape numbered siblings-adjacent (cpu c: sibling c mod 2, core c/2 mod 2, package c/4) */
    for (int c = 0; c < 8; c++) pkg[c] = c / 4, core[c] = c / 2 % 2;
    const char *nodes2[] = {"0-3", "4-7"};
    m = machine("amd", 8, pkg, core, 1, nodes2, 2);
    CHECK_ORDER(m, "0-7", CX_PIN_COMPACT, "0,1,2,3,4,5,6,7");
    CHECK_ORDER(m, "0-7", CX_PIN_SPREAD, "0,4,2,6,1,5,3,7");

    /* one package, no node directory, core ids with a gap (0, 1, 8) and one core with two threads (0 and 3):
     * compact keeps the siblings together, spread leaves the sibling for last */
    int pkg3[4] = {0, 0, 0, 0}, core3[4] = {0, 1, 8, 0};
    m = machine("uneven", 4, pkg3, core3, 1, NULL, 0);
    CHECK_ORDER(m, "0-3", CX_PIN_COMPACT, "0,3,1,2");
    CHECK_ORDER(m, "0-3", CX_PIN_SPREAD, "0,1,2,3");

    /* two nodes of unequal size: the larger one's extra cores come after the domains' turns */
    int pkg4[6] = {0, 0, 0, 0, 1, 1}, core4[6] = {0, 1, 2, 3, 0, 1};
    const char *nodes4[] = {"0-3", "4-5"};
    m = machine("unequal", 6, pkg4, core4, 1, nodes4, 2);
    CHECK_ORDER(m, "0-5", CX_PIN_SPREAD, "0,4,1,5,2,3");
    CHECK_ORDER(m, "0-5", CX_PIN_COMPACT, "0,1,2,3,4,5");

    /* no topology files (some VMs): every CPU its own core, package 0, node 0: CPU number order */
    m = machine("bare", 4, NULL, NULL, 0, NULL, 0);
    CHECK_ORDER(m, "0-3", CX_PIN_COMPACT, "0,1,2,3");
    CHECK_ORDER(m, "0-3", CX_PIN_SPREAD, "0,1,2,3");
    CHECK(aff_read(m, &all, &t, &err) == 0 && t.cpu[2].core == 2 && t.cpu[2].package == 0 && t.cpu[2].node == 0,
          "bare cpu 2: core %d package %d node %d", t.cpu[2].core, t.cpu[2].package, t.cpu[2].node);
    /* a root that does not exist at all reads the same way */
    CHECK_ORDER(fx_path("nowhere"), "0-3", CX_PIN_SPREAD, "0,1,2,3");

    cpu_set_t none;
    CPU_ZERO(&none);
    CHECK(aff_read(m, &none, &t, &err) == CX_EINVAL && strstr(err.msg, "no CPU"), "no CPU allowed: %s", err.msg);
}

static void test_lists(void) {
    uint64_t mask[AFF_MASK_WORDS(AFF_MAX_CPUS)];
    char buf[64];
    CHECK(aff_parse_list("0-3,8,10-11\n", mask, AFF_MAX_CPUS) == 0, "parse a list");
    CHECK(aff_format_list(mask, AFF_MAX_CPUS, buf, sizeof buf) == 7 && !strcmp(buf, "0-3,8,10-11"),
          "list printed back: %s", buf);
    CHECK(aff_parse_list("", mask, AFF_MAX_CPUS) == 0 && aff_format_list(mask, AFF_MAX_CPUS, buf, sizeof buf) == 0 &&
          !buf[0], "empty list: '%s'", buf);
    CHECK(aff_parse_list("1023", mask, AFF_MAX_CPUS) == 0 && (mask[15] >> 63 & 1), "the last number");
    static const char *const bad[] = {"3-1", "a", "1,", "1024", "-1", "2 3", "1-"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(aff_parse_list(bad[i], mask, AFF_MAX_CPUS) == -1, "'%s' is refused", bad[i]);
    memset(mask, 0, sizeof mask);
    for (int b = 0; b < 1024; b += 2) mask[b / 64] |= 1ull << (b % 64);
    char small[16];
    int n = aff_format_list(mask, AFF_MAX_CPUS, small, sizeof small);
    CHECK(n == 512 && strlen(small) < sizeof small && strstr(small, "...") && !strncmp(small, "0,2,4", 5),
          "a long list is cut with ...: '%s' (%d)", small, n);
}

static void test_names(void) {
    for (int p = 0; p < 3; p++) {
        CHECK(cx_pin_policy_from_name(cx_pin_policy_name(p)) == p, "pin policy %d round trip", p);
        CHECK(cx_numa_policy_from_name(cx_numa_policy_name(p)) == p, "NUMA policy %d round trip", p);
    }
    CHECK(!cx_pin_policy_name(3) && !cx_numa_policy_name(-1), "out of range: no name");
    CHECK(cx_pin_policy_from_name("Spread") == CX_PIN_SPREAD && cx_numa_policy_from_name("INTERLEAVE") == 2, "any case");
    CHECK(cx_pin_policy_from_name("0-3") == -1 && cx_pin_policy_from_name(NULL) == -1, "a CPU list is no policy");
    cx_err err = {0};
    CHECK(cx_set_placement((cx_pin_policy)7, CX_NUMA_DEFAULT, &err) == CX_EINVAL && strstr(err.msg, "none|compact"),
          "bad pin policy: %s", err.msg);
    CHECK(cx_set_placement(CX_PIN_NONE, (cx_numa_policy)9, &err) == CX_EINVAL && strstr(err.msg, "interleave"),
          "bad NUMA policy: %s", err.msg);
}

/* ---- on this machine ---- */

enum { MAX_T = 65 };
typedef struct where {
    int cpu;                /* sched_getcpu() while running the job */
    int n_allowed, allowed; /* its affinity mask: how many CPUs, and the lowest */
} where;
static where seen[MAX_T];

static void where_am_i(where *w) {
    cpu_set_t set;
    CPU_ZERO(&set);
    pthread_getaffinity_np(pthread_self(), sizeof set, &set);
    w->n_allowed = CPU_COUNT(&set);
    w->allowed = -1;
    for (int c = 0; c < CPU_SETSIZE && w->allowed < 0; c++)
        if (CPU_ISSET(c, &set)) w->allowed = c;
    w->cpu = sched_getcpu();
}

/* One chunk per thread; each chunk waits in it until every thread holds one,
 * so no thread can claim a second chunk and every worker records itself. */
static atomic_int arrived;
static int job_threads;

static void record_job(void *ctx, int c, int thread) {
    (void)ctx;
    (void)c;
    assert(thread < MAX_T);
    where_am_i(&seen[thread]);
    atomic_fetch_add(&arrived, 1);
    while (atomic_load(&arrived) < job_threads) sched_yield();
}

static void run_everywhere(tp_pool *p) {
    atomic_store(&arrived, 0);
    job_threads = tp_size(p);
    tp_run(p, record_job, NULL, tp_size(p), 0);
}

/* Workers 1..n-1 of the pool ran pinned to cpus[i], and on it. */
static void check_pinned(tp_pool *p, const int *cpus, const char *what) {
    memset(seen, 0, sizeof seen);
    run_everywhere(p);
    for (int i = 1; i < tp_size(p); i++)
        CHECK(seen[i].n_allowed == 1 && seen[i].allowed == cpus[i] && seen[i].cpu == cpus[i],
              "%s: worker %d pinned to CPU %d: its mask has %d CPU(s) from %d, ran on %d", what, i, cpus[i],
              seen[i].n_allowed, seen[i].allowed, seen[i].cpu);
}

static void *pin_caller_main(void *arg) {
    where *w = arg;
    cx_err err = {0};
    w->n_allowed = -1;
    if (cx_pin_caller(&err) == 0) where_am_i(w);
    return NULL;
}

static where sched_seen;
static atomic_int sched_tokens;
static void on_token(void *user, const cx_token_event *ev) {
    (void)user, (void)ev;
    if (atomic_fetch_add(&sched_tokens, 1) == 0) where_am_i(&sched_seen); /* the stepping thread */
}

static void test_pinning(void) {
    cpu_set_t allowed;
    CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0, "sched_getaffinity");
    int n = CPU_COUNT(&allowed);
    cx_err err = {0};
    cx_shape sh = fx_shape("test-tiny", 64);
    const char *path = fx_synth_once(&sh, CX_TYPE_F32, 5, "tiny.gguf");
    cx_model *m = path ? fx_load(path, NULL) : NULL;
    for (int policy = CX_PIN_COMPACT; policy <= CX_PIN_SPREAD; policy++) {
        const char *name = cx_pin_policy_name(policy);
        CHECK(cx_set_placement((cx_pin_policy)policy, CX_NUMA_DEFAULT, &err) == 0, "set %s: %s", name, err.msg);
        cx_placement_info pi;
        cx_placement_get(&pi);
        CHECK(pi.pin == policy && pi.n_cpus == n && pi.cpus[0], "%s: %d CPUs in the order (%s), %d allowed", name,
              pi.n_cpus, pi.cpus, n);
        char line[512];
        cx_placement_describe(line, sizeof line);
        char want[64];
        snprintf(want, sizeof want, "pin=%s cpus=", name);
        CHECK(!strncmp(line, want, strlen(want)), "%s: described as '%s'", name, line);
        /* every allowed CPU once in the first n entries, then the same again */
        int cpus[2 * MAX_T];
        int nt = n + 1 < MAX_T ? n + 1 : MAX_T;
        CHECK(placement_cpus(2 * MAX_T, cpus) == 1, "%s: the pool is told CPUs", name);
        cpu_set_t once;
        CPU_ZERO(&once);
        for (int i = 0; i < n && i < 2 * MAX_T; i++) {
            CHECK(CPU_ISSET(cpus[i], &allowed) && !CPU_ISSET(cpus[i], &once), "%s: entry %d, CPU %d, allowed and new",
                  name, i, cpus[i]);
            CPU_SET(cpus[i], &once);
        }
        for (int i = n; i < 2 * MAX_T; i++) CHECK(cpus[i] == cpus[i % n], "%s: entry %d wraps around", name, i);
        if (n < 2) {
            printf("SKIP: one allowed CPU: the %s pool has no worker to pin (needs two)\n", name);
            continue;
        }
        /* a bare pool, one thread more than CPUs: the last worker shares cpus[0] with thread 0 */
        tp_pool *p = NULL;
        CHECK(tp_new(nt, cpus, &p, &err) == 0 && tp_size(p) == nt, "%s: pool of %d: %s", name, nt, err.msg);
        if (p) check_pinned(p, cpus, name);
        tp_free(p);
        /* a session's pool: what cx_session_new makes under this setting */
        cx_session *s = NULL;
        int st = n < 8 ? n : 8;
        if (m && cx_session_new(m, 64, st, &s, &err) == 0) {
            check_pinned(s->ws.pool, cpus, "session");
            int32_t tok[3] = {1, 2, 3};
            const float *logits;
            CHECK(cx_eval(s, tok, 3, &logits, &err) == 0, "%s: a pinned session evaluates: %s", name, err.msg);
            cx_session_free(s);
        } else {
            CHECK(0, "%s: session: %s", name, err.msg);
        }
        /* a thread that asks to be pinned: on cpus[0], for good */
        where w;
        pthread_t th;
        CHECK(pthread_create(&th, NULL, pin_caller_main, &w) == 0, "start a thread");
        pthread_join(th, NULL);
        CHECK(w.n_allowed == 1 && w.allowed == cpus[0] && w.cpu == cpus[0],
              "%s: cx_pin_caller: mask of %d from %d, on CPU %d; want CPU %d", name, w.n_allowed, w.allowed, w.cpu,
              cpus[0]);
        /* the scheduler's own thread: cpus[0] */
        cx_sched_params sp = cx_sched_defaults();
        sp.n_threads = st;
        sp.max_seqs = 2;
        sp.n_ctx = 64;
        cx_sched *sc = NULL;
        if (m && cx_sched_new(m, &sp, &sc, &err) == 0 && cx_sched_start(sc, &err) == 0) {
            atomic_store(&sched_tokens, 0);
            cx_request r = cx_request_defaults();
            int32_t prompt[2] = {1, 5};
            r.prompt = prompt;
            r.n_prompt = 2;
            r.max_tokens = 2;
            r.on_token = on_token;
            CHECK(cx_sched_submit(sc, &r, &err) > 0, "submit: %s", err.msg);
            cx_sched_stop(sc, 1); /* drain: returns once it ran */
            CHECK(atomic_load(&sched_tokens) >= 1 && sched_seen.n_allowed == 1 && sched_seen.allowed == cpus[0] &&
                  sched_seen.cpu == cpus[0], "%s: scheduler thread: %d tokens, mask of %d from %d, on CPU %d; want %d",
                  name, atomic_load(&sched_tokens), sched_seen.n_allowed, sched_seen.allowed, sched_seen.cpu, cpus[0]);
        } else {
            CHECK(0, "%s: scheduler: %s", name, err.msg);
        }
        cx_sched_free(sc);
    }
    /* no policy: nothing pinned, workers may use every CPU the process may */
    CHECK(cx_set_placement(CX_PIN_NONE, CX_NUMA_DEFAULT, &err) == 0, "set none: %s", err.msg);
    int cpus[4] = {-1, -1, -1, -1};
    CHECK(placement_cpus(4, cpus) == 0 && cpus[0] == -1, "none: the pool is told no CPU");
    tp_pool *p = NULL;
    CHECK(tp_new(3, NULL, &p, &err) == 0, "unpinned pool: %s", err.msg);
    if (p) {
        memset(seen, 0, sizeof seen);
        run_everywhere(p);
        for (int i = 1; i < 3; i++)
            CHECK(seen[i].n_allowed == n, "none: worker %d may use %d CPUs, the process %d", i, seen[i].n_allowed, n);
    }
    tp_free(p);
    cx_placement_info pi;
    cx_placement_get(&pi);
    CHECK(pi.pin == CX_PIN_NONE && pi.n_cpus == 0 && !pi.cpus[0], "none: no order (%d CPUs '%s')", pi.n_cpus, pi.cpus);
    /* a CPU this process may not use is an error of the pool, naming it */
    int bad[2] = {0, -1};
    for (int c = 0; c < CPU_SETSIZE && bad[1] < 0; c++)
        if (!CPU_ISSET(c, &allowed)) bad[1] = c;
    if (bad[1] >= 0) {
        CHECK(tp_new(2, bad, &p, &err) == CX_EINVAL && !p && strstr(err.msg, "not allowed"),
              "a worker on CPU %d, not allowed: %s", bad[1], err.msg);
    }
    cx_model_free(m);
}

/* ---- NUMA ---- */

/* The policy of the page at p (get_mempolicy MPOL_F_ADDR), or -errno. */
static int policy_at(void *p) {
    int mode = -1;
    long rc = syscall(SYS_get_mempolicy, &mode, NULL, 0ul, p, (unsigned long)MPOL_F_ADDR);
    return rc == 0 ? mode : -errno;
}

static void test_numa(void) {
    cx_err err = {0};
    char line[512];
    CHECK(cx_set_placement(CX_PIN_NONE, CX_NUMA_DEFAULT, &err) == 0, "set default: %s", err.msg);
    cx_placement_info pi;
    cx_placement_get(&pi);
    cx_placement_describe(line, sizeof line);
    CHECK(pi.numa_nodes >= 1 && pi.nodes[0] && !pi.numa_effect, "default: %d node(s) '%s', effect %d", pi.numa_nodes,
          pi.nodes, pi.numa_effect);
    CHECK(strstr(line, "numa=default nodes=") != NULL, "default described: %s", line);
    int one = pi.numa_nodes == 1;
    if (one) CHECK(strstr(line, "(one NUMA node)") != NULL, "one node said: %s", line);

    cx_shape sh = fx_shape("test-tiny", 64);
    const char *path = fx_synth_once(&sh, CX_TYPE_F32, 5, "tiny.gguf");
    for (int numa = CX_NUMA_LOCAL; numa <= CX_NUMA_INTERLEAVE; numa++) {
        const char *name = cx_numa_policy_name(numa);
        CHECK(cx_set_placement(CX_PIN_NONE, (cx_numa_policy)numa, &err) == 0, "set %s: %s", name, err.msg);
        cx_placement_get(&pi);
        cx_placement_describe(line, sizeof line);
        CHECK(pi.numa == numa && strstr(line, name), "%s: described as %s", name, line);
        if (one)
            CHECK(!pi.numa_effect && strstr(line, "one NUMA node: no effect"), "%s on one node: %s", name, line);
        else
            CHECK(pi.numa_effect && !strstr(line, "one NUMA node"), "%s on %d nodes: %s", name, pi.numa_nodes, line);
        /* the weights copied (bound before they are read in), a mapped model (noted), KV caches, evaluation */
        for (int weights = CX_WEIGHTS_MMAP; weights <= CX_WEIGHTS_HUGEPAGES; weights++) {
            cx_model_params mp = cx_model_defaults();
            mp.weights = weights;
            cx_model *m = NULL;
            int rc = path ? cx_model_load_ex(path, NULL, &mp, &m, &err) : -1;
            if (rc && !one && strstr(err.msg, "mbind")) { /* several nodes, mbind refused: an error, as it should */
                printf("SKIP: %s on %d nodes: this machine refuses mbind: %s\n", name, pi.numa_nodes, err.msg);
                continue;
            }
            CHECK(rc == 0, "%s, weights %d: load: %s", name, weights, err.msg);
            cx_session_params sp = cx_session_defaults();
            sp.n_ctx = 64;
            sp.kv.budget[CX_KV_HOT] = 4096 * 4; /* a small hot tier: warm and cold tiers made, and bound, too */
            cx_session *s = NULL;
            if (m && cx_session_new_ex(m, &sp, &s, &err) == 0) {
                int32_t tok[40];
                for (int i = 0; i < 40; i++) tok[i] = 1 + i % 7;
                const float *logits;
                CHECK(cx_eval(s, tok, 40, &logits, &err) == 0, "%s: evaluate: %s", name, err.msg);
            } else {
                CHECK(!m, "%s: session: %s", name, err.msg);
            }
            cx_session_free(s);
            cx_model_free(m);
        }
        cx_placement_get(&pi);
        CHECK(pi.mapped_unplaced == (one ? 0 : 1), "%s: a mapped model noted as not placed: %d (%d nodes)", name,
              pi.mapped_unplaced, pi.numa_nodes);
    }

    /* The system call, whatever the node count: bind a fresh mapping, touch it, ask the kernel. */
    uint64_t nodes[AFF_MASK_WORDS(AFF_MAX_NODES)];
    CHECK(aff_parse_list(pi.nodes, nodes, AFF_MAX_NODES) == 0, "the nodes list '%s' parses", pi.nodes);
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len = 4 * page;
    uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED, "mmap");
    if (p == MAP_FAILED) return;
    CHECK(placement_mbind(p + 1, page, CX_NUMA_INTERLEAVE, nodes) == 0, "less than a whole page: nothing to bind");
    int rc = placement_mbind(p, len, CX_NUMA_INTERLEAVE, nodes);
    if (rc == -EPERM || rc == -ENOSYS) {
        printf("SKIP: mbind refused on this machine (%s: a container without CAP_SYS_NICE?): the bound policy is not"
               " checked\n", strerror(-rc));
    } else {
        CHECK(rc == 0, "mbind interleave over %s: %s", pi.nodes, strerror(-rc));
        memset(p, 1, len);
        int mode = policy_at(p + page);
        if (mode == -EPERM || mode == -ENOSYS)
            printf("SKIP: get_mempolicy refused (%s): the bound policy is not checked\n", strerror(-mode));
        else
            CHECK(mode == MPOL_INTERLEAVE, "interleave bound: the page's policy is %d", mode);
        CHECK(placement_mbind(p, len, CX_NUMA_LOCAL, nodes) == 0, "mbind local");
        mode = policy_at(p + 2 * page);
        if (mode >= 0) CHECK(mode == MPOL_LOCAL || mode == MPOL_PREFERRED, "local bound: the page's policy is %d", mode);
    }
    munmap(p, len);
    CHECK(cx_set_placement(CX_PIN_NONE, CX_NUMA_DEFAULT, &err) == 0, "back to the defaults: %s", err.msg);
}

static void run_all(void) {
    test_lists();
    test_names();
    test_orders();
    test_pinning();
    test_numa();
    fx_cleanup();
}

TEST_MAIN(run_all())
