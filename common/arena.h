/* SPDX-License-Identifier: MIT */
/*
 * arena.h: a bump allocator for metadata that lives and dies together.
 *
 * A graph's names, nodes, attributes and constant values are allocated from
 * one arena and freed in one call (tide_arena_free). Allocations are never
 * freed one by one. Not thread-safe: an arena belongs to one thread at a time.
 *
 * Example usage:
 *
 *     struct tide_arena *a = tide_arena_new(0);
 *     char *name = tide_arena_strdup(a, "conv1");
 *     tide_arena_free(a);   // name is gone too
 */
#ifndef TIDE_COMMON_ARENA_H
#define TIDE_COMMON_ARENA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tide_arena;

/* Creates an arena whose chunks are at least chunk_bytes (0: 64 KiB). NULL on OOM. */
struct tide_arena *tide_arena_new(size_t chunk_bytes);

/* Frees the arena and everything allocated from it. NULL is a no-op. */
void tide_arena_free(struct tide_arena *arena);

/* Returns size zeroed bytes aligned to 64, or NULL on OOM (or size overflow). */
void *tide_arena_alloc(struct tide_arena *arena, size_t size);

/* Returns n * size zeroed bytes, or NULL on OOM or if n * size overflows. */
void *tide_arena_calloc(struct tide_arena *arena, size_t n, size_t size);

/* Copies a NUL-terminated string (or the first n bytes for _strndup). */
char *tide_arena_strdup(struct tide_arena *arena, const char *s);
char *tide_arena_strndup(struct tide_arena *arena, const char *s, size_t n);

/* Bytes handed out so far, for limits and reports. */
size_t tide_arena_used(const struct tide_arena *arena);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_COMMON_ARENA_H */
