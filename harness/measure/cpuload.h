/*
 * cpuload.h - how much of the machine other work took while a repetition
 * ran: the CPUs busy with anything but this process (other processes, the
 * kernel on their behalf, and time the hypervisor gave to other guests:
 * steal), averaged over the repetition's wall time.
 *
 *   other = (busy(/proc/stat) - own CPU time (getrusage, every thread)) / wall
 *
 * busy counts user, nice, system, irq, softirq and steal jiffies over all
 * CPUs (guest time is inside user). Resolution is the kernel's clock tick
 * (USER_HZ, 10 ms): over a repetition of 0.5 s, about ±0.04 CPUs. A run's
 * median of it says whether it was measured on a quiet machine; a baseline
 * measured under load is refused (docs/gates.md, "Baselines").
 *
 * The same snapshots count the process's involuntary context switches (the
 * kernel taking a core from one of its threads for another runnable thread):
 * their rate says how hard the run's own threads had to fight for cores.
 */
#ifndef CB_CPULOAD_H
#define CB_CPULOAD_H

typedef struct cpuload_snap {
    double busy_s, steal_s; /* all CPUs, since boot */
    double self_s;          /* this process's user + system time */
    long preempted;         /* its involuntary context switches (getrusage ru_nivcsw, every thread) */
    double wall_s;          /* CLOCK_MONOTONIC */
    int ok;                 /* 0: /proc/stat could not be read */
} cpuload_snap;

/* Take a snapshot now. */
void cpuload_snapshot(cpuload_snap *s);

/* The shortest window other work is measured over: /proc/stat counts whole
 * 10 ms ticks, so a repetition of 2 ms reads 0 or 2 CPUs of other work
 * whatever the machine does. */
#define CPULOAD_MIN_S 0.25

/* Make [*a, *b] (a repetition's snapshots, b just taken) a window of at least
 * CPULOAD_MIN_S: unchanged when it is one; else *a becomes the newest
 * snapshot this process took here at least CPULOAD_MIN_S before *b (the
 * repetitions and gaps just before: the machine's load around this one);
 * with none that old yet, the oldest, and this call sleeps until that is
 * CPULOAD_MIN_S old and takes *b again. Remembers *b for the repetitions
 * after. Short runs pay at most one CPULOAD_MIN_S wait. */
void cpuload_settle(cpuload_snap *a, cpuload_snap *b);
/* CPUs busy with other work between a and b (>= 0), and of it the steal
 * (time the hypervisor ran other guests); -1 in both when either snapshot
 * failed or no time passed. */
void cpuload_between(const cpuload_snap *a, const cpuload_snap *b, double *other_cpus, double *steal_cpus);
/* Involuntary context switches per second of wall time between a and b; -1
 * when no time passed. */
double cpuload_preempt_rate(const cpuload_snap *a, const cpuload_snap *b);
/* Parse /proc/stat's first ("cpu ") line into busy and steal jiffies; 0, or -1 if malformed. */
int cpuload_parse_stat(const char *line, double *busy_jiffies, double *steal_jiffies);

#endif
