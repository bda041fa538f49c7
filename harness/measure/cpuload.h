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
 */
#ifndef CB_CPULOAD_H
#define CB_CPULOAD_H

typedef struct cpuload_snap {
    double busy_s, steal_s; /* all CPUs, since boot */
    double self_s;          /* this process's user + system time */
    double wall_s;          /* CLOCK_MONOTONIC */
    int ok;                 /* 0: /proc/stat could not be read */
} cpuload_snap;

/* Take a snapshot now. */
void cpuload_snapshot(cpuload_snap *s);
/* CPUs busy with other work between a and b (>= 0), and of it the steal
 * (time the hypervisor ran other guests); -1 in both when either snapshot
 * failed or no time passed. */
void cpuload_between(const cpuload_snap *a, const cpuload_snap *b, double *other_cpus, double *steal_cpus);
/* Parse /proc/stat's first ("cpu ") line into busy and steal jiffies; 0, or -1 if malformed. */
int cpuload_parse_stat(const char *line, double *busy_jiffies, double *steal_jiffies);

#endif
