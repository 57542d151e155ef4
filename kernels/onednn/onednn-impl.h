/* SPDX-License-Identifier: MIT */
/*
 * onednn-impl.h: what the oneDNN files (conv.c, pool.c, norm.c) share, and
 * only they: the settings from TIDE_CPU_ONEDNN, the CPU engine, the run
 * counters, the primitive cache and one call to run a primitive. Built
 * only with oneDNN (it includes dnnl.h); the CPU kernels see onednn.h.
 *
 * Threads: the settings are read once (pthread_once) and then only the two
 * switches change, atomically; the cache has its own lock (common.c).
 */
#ifndef TIDE_KERNELS_ONEDNN_IMPL_H
#define TIDE_KERNELS_ONEDNN_IMPL_H

#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/onednn/onednn.h"

/* Offsets in a workspace are multiples of this (a cache line). */
#define TIDE__ONEDNN_ALIGN 64

static inline uint64_t tide__onednn_align(uint64_t n)
{
    return (n + TIDE__ONEDNN_ALIGN - 1) / TIDE__ONEDNN_ALIGN * TIDE__ONEDNN_ALIGN;
}

/*
 * The CPU engine, or NULL where there is none. It stays valid when oneDNN is
 * turned off: callers ask tide__onednn_enabled before they choose oneDNN.
 */
dnnl_engine_t tide__onednn_engine(void);

/* Whether TIDE_CPU_ONEDNN=plain asked for convolutions on plain layouts (conv.c). */
bool tide__onednn_plain_layouts(void);

/*
 * Whether pooling and BatchNorm go through oneDNN for every shape it has a
 * primitive for (TIDE_CPU_ONEDNN=all, tide_cpu_kernels_onednn_everywhere),
 * rather than for the shapes where it measured faster only.
 */
bool tide__onednn_everywhere(void);

/* Counts one kernel call of op run through oneDNN (tide_cpu_kernels_onednn_runs). */
void tide__onednn_count_run(enum tide_op op);

/* A primitive attribute in user scratchpad mode (NULL on failure); the caller destroys it. */
dnnl_primitive_attr_t tide__onednn_attr_new(void);

/*
 * The primitive descriptor of one pass under attr: fwd_d's (a forward
 * training pass), or, when bwd_d is not NULL, bwd_d's with fwd_d's as the
 * hint oneDNN's backward passes need (that one is destroyed before
 * returning: the backward descriptor keeps what it needs). NULL when oneDNN
 * has no implementation; the caller destroys the result.
 */
dnnl_primitive_desc_t tide__onednn_pass_pd(const_dnnl_op_desc_t fwd_d, const_dnnl_op_desc_t bwd_d,
                                           const_dnnl_primitive_attr_t attr);

/*
 * The cache entry whose key (its first key_bytes bytes) equals key, else a
 * new zeroed entry of entry_bytes with the key copied in, filled by
 * build(entry) under the cache's lock with OpenMP at one thread (building
 * is rare: once per shape, at plan time). Entries are never changed once
 * published, and never freed. Keys are compared with memcmp: zero them
 * before filling, padding included. NULL when out of memory.
 */
const void *tide__onednn_cache_get(const void *key, size_t key_bytes, size_t entry_bytes,
                                   void (*build)(void *entry));

/* One argument of a primitive: which (DNNL_ARG_*), its layout and its data. */
struct tide__onednn_arg {
    int arg;
    const dnnl_memory_desc_t *md;
    void *data;
};

/*
 * Runs primitive p on args[0 .. n) on the calling thread (OpenMP set to
 * one thread first): a stream and the memory objects live for this call
 * only, so several threads may run one primitive at once. An argument
 * whose descriptor has zero size (a scratchpad that needs none) is left
 * out. On a failure returns oneDNN's status and names the call in *failed.
 */
dnnl_status_t tide__onednn_execute(dnnl_primitive_t p, const struct tide__onednn_arg *args, int n,
                                   const char **failed);

/*
 * Keeps the first failure of a job's pieces: under lock, if *status is
 * still dnnl_success, sets it to s and *failed to call (the pieces run on
 * several threads; the kernel reports the one kept once they are done).
 */
void tide__onednn_record_failure(pthread_mutex_t *lock, dnnl_status_t *status, const char **failed,
                                 dnnl_status_t s, const char *call);

#endif /* TIDE_KERNELS_ONEDNN_IMPL_H */
