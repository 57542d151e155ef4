/* SPDX-License-Identifier: MIT */
/* arena.c: a linked list of chunks, each bump-allocated, freed together. */
#include "arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN 64

struct chunk {
    struct chunk *next;
    size_t size; /* usable bytes after the header */
    size_t used;
    max_align_t data[]; /* aligned start of the usable bytes */
};

struct tide_arena {
    struct chunk *head;
    size_t chunk_bytes;
    size_t used;
};

struct tide_arena *tide_arena_new(size_t chunk_bytes)
{
    struct tide_arena *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->chunk_bytes = chunk_bytes ? chunk_bytes : (size_t)64 << 10;
    return a;
}

void tide_arena_free(struct tide_arena *arena)
{
    if (!arena)
        return;
    struct chunk *c = arena->head;
    while (c) {
        struct chunk *next = c->next;
        free(c);
        c = next;
    }
    free(arena);
}

void *tide_arena_alloc(struct tide_arena *arena, size_t size)
{
    if (size > SIZE_MAX / 2)
        return NULL;
    if (size == 0)
        size = 1;
    struct chunk *c = arena->head;
    if (c) {
        uintptr_t base = (uintptr_t)c->data;
        size_t off = ((base + c->used + ARENA_ALIGN - 1) & ~(uintptr_t)(ARENA_ALIGN - 1)) - base;
        if (off <= c->size && size <= c->size - off) {
            c->used = off + size;
            arena->used += size;
            void *p = (char *)c->data + off;
            memset(p, 0, size);
            return p;
        }
    }
    size_t usable = size + ARENA_ALIGN > arena->chunk_bytes ? size + ARENA_ALIGN : arena->chunk_bytes;
    c = malloc(sizeof(*c) + usable);
    if (!c)
        return NULL;
    c->size = usable;
    c->next = arena->head;
    arena->head = c;
    uintptr_t base = (uintptr_t)c->data;
    size_t off = ((base + ARENA_ALIGN - 1) & ~(uintptr_t)(ARENA_ALIGN - 1)) - base;
    c->used = off + size;
    arena->used += size;
    void *p = (char *)c->data + off;
    memset(p, 0, size);
    return p;
}

void *tide_arena_calloc(struct tide_arena *arena, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / 2 / size)
        return NULL;
    return tide_arena_alloc(arena, n * size);
}

char *tide_arena_strndup(struct tide_arena *arena, const char *s, size_t n)
{
    char *p = tide_arena_alloc(arena, n + 1);
    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *tide_arena_strdup(struct tide_arena *arena, const char *s)
{
    return tide_arena_strndup(arena, s, strlen(s));
}

size_t tide_arena_used(const struct tide_arena *arena)
{
    return arena->used;
}
