/*
 * model_map.h - a whole file in memory, read-only: mapped, or copied into
 * huge pages (model_map.c).
 */
#ifndef CX_MODEL_MAP_H
#define CX_MODEL_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "cortex.h"

/* Map a whole file read-only; *size gets its length. Release with model_unmap_file. */
int model_map_file(const char *path, const uint8_t **map, size_t *size, cx_err *err);
void model_unmap_file(const uint8_t *map, size_t size);
/* Like model_map_file, but the weights-memory policy `weights` (CX_WEIGHTS_*,
 * see model_map.c) may copy the file into huge pages; *copied says which
 * happened. A copy is bound to the process's NUMA policy (placement.h;
 * CX_EIO when that fails on several nodes) and stays writable (for
 * repacking in place) until model_seal_file. Release with model_release_file. */
int model_load_file(const char *path, const uint8_t **map, size_t *size, int *copied, int weights, cx_err *err);
/* Make a copied image read-only, like a mapping (nothing for a mapping). */
void model_seal_file(const uint8_t *map, size_t size, int copied);
void model_release_file(const uint8_t *map, size_t size, int copied);
/* Bytes of the copy at map that the kernel backs with 2 MiB pages (0 if unknown). */
uint64_t model_hugepage_bytes(const void *map);

#endif
