/*
 * model_map.c - a whole file in memory, read-only: mmap'd (pages shared with
 * the page cache), or copied into anonymous memory advised for 2 MiB
 * transparent huge pages, which the loader may write (repack) before
 * sealing it read-only. Also the unmapping, and how much of a copy the
 * kernel actually backs with huge pages. Knows nothing of file formats.
 *
 * The process's NUMA policy (placement.c) is bound to a copy before the
 * file is read into it, since a page's node is chosen when it is first
 * touched; a mapping is page cache, which mbind does not place, and is only
 * noted as such.
 */
#include "model_map.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "placement.h"
#include "util.h"

#define HUGE_2M ((size_t)2 << 20)
/* Files at least this large are copied into huge pages by default. */
#define COPY_MIN_BYTES ((size_t)64 << 20)

/* Bytes a copied image occupies: whole 2 MiB pages. */
static size_t copy_len(size_t size) { return (size + HUGE_2M - 1) & ~(HUGE_2M - 1); }

/*
 * Weights memory policy (cx_model_params.weights, see cortex.h): CX_WEIGHTS_MMAP
 * maps the file (pages shared with the page cache, 4 KiB each);
 * CX_WEIGHTS_HUGEPAGES copies it into anonymous memory advised for 2 MiB
 * transparent huge pages (measured on tinyllama q8_0: docs/performance.md).
 * CX_WEIGHTS_AUTO copies files of 64 MiB and more when the kernel offers
 * transparent huge pages (enabled = always or madvise), maps everything else.
 */
static int model_want_copy(size_t size, int weights) {
    if (weights == CX_WEIGHTS_MMAP) return 0;
    if (weights == CX_WEIGHTS_HUGEPAGES) return 1;
    if (size < COPY_MIN_BYTES) return 0;
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return 0;
    char line[128] = "";
    int ok = fgets(line, sizeof line, f) && !strstr(line, "[never]");
    fclose(f);
    return ok;
}

/* Read the whole file into anonymous memory advised for huge pages and
 * bound to the NUMA policy, left writable until model_seal_file makes it
 * read-only like a mapping. 0 with *out; 1 when memory or reading fails
 * (the caller falls back to mmap); CX_EIO when the NUMA policy cannot be
 * bound (an error: the run asked for it). */
static int model_copy_hugepages(int fd, size_t size, const char *path, void **out, cx_err *err) {
    size_t len = copy_len(size);
    /* over-allocate by one huge page so the image can start 2 MiB-aligned */
    uint8_t *raw = mmap(NULL, len + HUGE_2M, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return 1;
    uint8_t *p = (uint8_t *)(((uintptr_t)raw + HUGE_2M - 1) & ~(uintptr_t)(HUGE_2M - 1));
    if (p > raw) munmap(raw, (size_t)(p - raw));
    size_t tail = (size_t)(raw + len + HUGE_2M - (p + len));
    if (tail) munmap(p + len, tail);
    madvise(p, len, MADV_HUGEPAGE);
    char what[320];
    snprintf(what, sizeof what, "%s: weights", path);
    int rc = placement_bind(p, len, what, err); /* before pread touches a page */
    if (rc) {
        munmap(p, len);
        return rc;
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = pread(fd, p + got, size - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            munmap(p, len);
            return 1;
        }
        got += (size_t)r;
    }
    *out = p; /* writable until model_seal_file: cx_model_load may repack weights in place */
    return 0;
}

/* Bytes of the anonymous mapping holding p that the kernel backs with huge
 * pages (its AnonHugePages line in /proc/self/smaps), 0 when not found. A
 * copy advised MADV_HUGEPAGE gets 2 MiB pages only while the kernel has free
 * 2 MiB blocks, and decode speed depends on it (TLB misses), so a benchmark
 * must be able to say how much it got. */
uint64_t model_hugepage_bytes(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return 0;
    char line[512];
    int inside = 0;
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char dash;
        if (sscanf(line, "%lx%c%lx ", &lo, &dash, &hi) == 3 && dash == '-') {
            if (inside) break; /* past the mapping's own block */
            inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        } else if (inside && sscanf(line, "AnonHugePages: %" SCNu64 " kB", &kb) == 1) {
            break;
        }
    }
    fclose(f);
    return kb * 1024;
}

/* model_map_file and model_load_file: `place` says whether the file is a
 * model's weights, the memory the NUMA policy is about. */
static int load_file(const char *path, const uint8_t **map, size_t *size, int *copied, int weights, int place,
                     cx_err *err) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return cx_fail(err, CX_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return cx_fail(err, CX_EIO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return cx_fail(err, CX_EFORMAT, "%s: empty file", path);
    }
    void *p = MAP_FAILED;
    if (model_want_copy((size_t)st.st_size, weights)) {
        int rc = model_copy_hugepages(fd, (size_t)st.st_size, path, &p, err);
        if (rc < 0) {
            close(fd);
            return rc;
        }
        if (rc) p = MAP_FAILED;
    }
    if (p != MAP_FAILED) {
        *copied = 1;
    } else {
        *copied = 0;
        p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (place && p != MAP_FAILED) placement_note_mapped();
    }
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return cx_fail(err, CX_EIO, "%s: mmap failed: %s", path, strerror(e));
    *map = p;
    *size = (size_t)st.st_size;
    return 0;
}

int model_map_file(const char *path, const uint8_t **map, size_t *size, cx_err *err) {
    int copied_unused;
    return load_file(path, map, size, &copied_unused, CX_WEIGHTS_MMAP, 0, err);
}

int model_load_file(const char *path, const uint8_t **map, size_t *size, int *copied, int weights, cx_err *err) {
    return load_file(path, map, size, copied, weights, 1, err);
}

void model_unmap_file(const uint8_t *map, size_t size) {
    if (map) munmap((void *)map, size);
}

/* See model_map.h: once the loader has repacked the weights. */
void model_seal_file(const uint8_t *map, size_t size, int copied) {
    if (copied) mprotect((void *)(uintptr_t)map, copy_len(size), PROT_READ);
}

void model_release_file(const uint8_t *map, size_t size, int copied) {
    if (map) munmap((void *)map, copied ? copy_len(size) : size);
}
