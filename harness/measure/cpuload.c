/*
 * cpuload.c - other work on the machine during a repetition (see cpuload.h).
 */
#include "cpuload.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

int cpuload_parse_stat(const char *line, double *busy, double *steal) {
    /* cpu  user nice system idle iowait irq softirq steal [guest guest_nice] */
    unsigned long long f[8];
    if (strncmp(line, "cpu ", 4) ||
        sscanf(line + 4, "%llu %llu %llu %llu %llu %llu %llu %llu", &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6],
               &f[7]) != 8)
        return -1;
    *busy = (double)(f[0] + f[1] + f[2] + f[5] + f[6] + f[7]);
    *steal = (double)f[7];
    return 0;
}

void cpuload_snapshot(cpuload_snap *s) {
    memset(s, 0, sizeof *s);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    s->wall_s = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        s->self_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
                    ru.ru_stime.tv_usec * 1e-6;
        s->preempted = ru.ru_nivcsw;
    }
    FILE *f = fopen("/proc/stat", "r");
    char line[512];
    double busy, steal;
    long hz = sysconf(_SC_CLK_TCK);
    if (f && fgets(line, sizeof line, f) && hz > 0 && cpuload_parse_stat(line, &busy, &steal) == 0) {
        s->busy_s = busy / (double)hz;
        s->steal_s = steal / (double)hz;
        s->ok = 1;
    }
    if (f) fclose(f);
}

void cpuload_between(const cpuload_snap *a, const cpuload_snap *b, double *other, double *steal) {
    double wall = b->wall_s - a->wall_s;
    *other = *steal = -1;
    if (!a->ok || !b->ok || !(wall > 0)) return;
    double o = (b->busy_s - a->busy_s - (b->self_s - a->self_s)) / wall, st = (b->steal_s - a->steal_s) / wall;
    *other = o > 0 ? o : 0; /* jiffy rounding can make it slightly negative on an idle machine */
    *steal = st > 0 ? st : 0;
}

/* See cpuload.h. */
double cpuload_preempt_rate(const cpuload_snap *a, const cpuload_snap *b) {
    double wall = b->wall_s - a->wall_s;
    return wall > 0 ? (double)(b->preempted - a->preempted) / wall : -1;
}

/* Recent snapshots (cpuload_settle), oldest first: a repetition's end is the next one's history. */
#define HISTORY 32
static cpuload_snap history[HISTORY];
static int n_history;

static void remember(const cpuload_snap *s) {
    if (!s->ok) return;
    if (n_history == HISTORY) { /* drop the oldest but one: the oldest anchors a run that is still young */
        memmove(&history[1], &history[2], sizeof history[0] * (HISTORY - 2));
        n_history--;
    }
    history[n_history++] = *s;
}

/* See cpuload.h. */
void cpuload_settle(cpuload_snap *a, cpuload_snap *b) {
    if (!a->ok || !b->ok) return;
    if (!n_history) remember(a); /* the first repetition's start anchors the process's history */
    if (b->wall_s - a->wall_s < CPULOAD_MIN_S) {
        const cpuload_snap *best = NULL;
        for (int i = n_history - 1; i >= 0 && !best; i--)
            if (history[i].wall_s <= b->wall_s - CPULOAD_MIN_S) best = &history[i];
        if (best) {
            *a = *best;
        } else { /* the process is younger than a window here: wait for one, once */
            if (history[0].wall_s < a->wall_s) *a = history[0];
            double left = a->wall_s + CPULOAD_MIN_S - b->wall_s;
            struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
            while (nanosleep(&ts, &ts) == -1) {}
            cpuload_snapshot(b);
        }
    }
    remember(b);
}
