/* SPDX-License-Identifier: MIT */
/*
 * common.c: what the oneDNN files share (onednn-impl.h): the settings from
 * TIDE_CPU_ONEDNN, read at the first use, the CPU engine, the per-op run
 * counters, the primitive cache of pool.c and norm.c, and one call that runs
 * a primitive on the calling thread.
 *
 * TIDE_CPU_ONEDNN: 0 or off turns oneDNN off (the CPU kernels' own run
 * everything); plain keeps convolutions on plain layouts (conv.c); all makes
 * pooling and BatchNorm go through oneDNN for every shape it has a primitive
 * for, not only where it measured faster (pool.c, norm.c say where); unset,
 * oneDNN runs the convolutions and the measured-faster shapes.
 *
 * Threads and state: the settings are made once under pthread_once; the two
 * switches (enabled, everywhere) and the counters are atomics. cache.lock
 * guards the cache list; an entry is built under it and never changed or
 * freed after it is published, so any thread may read it.
 */
#include "kernels/onednn/onednn-impl.h"

#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The settings, from TIDE_CPU_ONEDNN at the first use; the switches can be flipped later. */
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;
static atomic_bool enabled;
static atomic_bool everywhere;
static bool plain_layouts;
static dnnl_engine_t engine;

static void settings_init(void)
{
    const char *env = getenv("TIDE_CPU_ONEDNN");
    bool on = true;
    if (env && (strcmp(env, "0") == 0 || strcmp(env, "off") == 0))
        on = false;
    if (env && strcmp(env, "plain") == 0)
        plain_layouts = true;
    if (env && strcmp(env, "all") == 0)
        atomic_store(&everywhere, true);
    if (on && dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
        on = false; /* no CPU engine: the fallback runs everything */
    atomic_store(&enabled, on);
}

/* Kernel calls run through oneDNN, by op. */
static atomic_uint_fast64_t runs[TIDE_OP_COUNT];

uint64_t tide_cpu_kernels_onednn_runs(enum tide_op op)
{
    if ((unsigned)op >= TIDE_OP_COUNT)
        return 0;
    return atomic_load(&runs[op]);
}

void tide__onednn_count_run(enum tide_op op)
{
    if ((unsigned)op < TIDE_OP_COUNT)
        atomic_fetch_add(&runs[op], 1);
}

bool tide__onednn_enabled(void)
{
    pthread_once(&settings_once, settings_init);
    return atomic_load(&enabled) && engine != NULL;
}

dnnl_engine_t tide__onednn_engine(void)
{
    pthread_once(&settings_once, settings_init);
    return engine;
}

bool tide__onednn_plain_layouts(void)
{
    pthread_once(&settings_once, settings_init);
    return plain_layouts;
}

bool tide__onednn_everywhere(void)
{
    pthread_once(&settings_once, settings_init);
    return atomic_load(&everywhere);
}

void tide_cpu_kernels_use_onednn(bool on)
{
    pthread_once(&settings_once, settings_init);
    atomic_store(&enabled, on);
}

void tide_cpu_kernels_onednn_everywhere(bool on)
{
    pthread_once(&settings_once, settings_init);
    atomic_store(&everywhere, on);
}

bool tide_cpu_kernels_onednn_available(void)
{
    pthread_once(&settings_once, settings_init);
    return engine != NULL;
}

dnnl_primitive_attr_t tide__onednn_attr_new(void)
{
    dnnl_primitive_attr_t attr;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success)
        return NULL;
    if (dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) != dnnl_success) {
        dnnl_primitive_attr_destroy(attr);
        return NULL;
    }
    return attr;
}

dnnl_primitive_desc_t tide__onednn_pass_pd(const_dnnl_op_desc_t fwd_d, const_dnnl_op_desc_t bwd_d,
                                           const_dnnl_primitive_attr_t attr)
{
    dnnl_primitive_desc_t fwd = NULL, pd = NULL;
    if (dnnl_primitive_desc_create(&fwd, fwd_d, attr, tide__onednn_engine(), NULL) != dnnl_success)
        return NULL;
    if (!bwd_d)
        return fwd;
    if (dnnl_primitive_desc_create(&pd, bwd_d, attr, tide__onednn_engine(), fwd) != dnnl_success)
        pd = NULL;
    dnnl_primitive_desc_destroy(fwd);
    return pd;
}

/* ============================================================================
 * Cache
 * ========================================================================== */

struct cache_node {
    void (*build)(void *entry); /* whose entry it is: keys of two modules never match */
    size_t key_bytes;
    void *entry; /* starts with its key */
    struct cache_node *next;
};

static struct {
    pthread_mutex_t lock;
    struct cache_node *head;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

const void *tide__onednn_cache_get(const void *key, size_t key_bytes, size_t entry_bytes,
                                   void (*build)(void *entry))
{
    pthread_mutex_lock(&cache.lock);
    struct cache_node *node;
    for (node = cache.head; node; node = node->next)
        if (node->build == build && node->key_bytes == key_bytes &&
            memcmp(node->entry, key, key_bytes) == 0)
            break;
    if (!node) {
        node = calloc(1, sizeof(*node));
        void *entry = node ? calloc(1, entry_bytes) : NULL;
        if (entry) {
            memcpy(entry, key, key_bytes);
            omp_set_num_threads(1);
            build(entry);
            node->build = build;
            node->key_bytes = key_bytes;
            node->entry = entry;
            node->next = cache.head;
            cache.head = node;
        } else {
            free(node);
            node = NULL;
        }
    }
    pthread_mutex_unlock(&cache.lock);
    return node ? node->entry : NULL;
}

/* ============================================================================
 * Execution
 * ========================================================================== */

/* Most arguments a primitive here takes (BatchNorm's backward: nine and a scratchpad). */
#define MAX_ARGS 12

dnnl_status_t tide__onednn_execute(dnnl_primitive_t p, const struct tide__onednn_arg *args, int n,
                                   const char **failed)
{
    dnnl_stream_t stream = NULL;
    dnnl_memory_t memory[MAX_ARGS] = {NULL};
    dnnl_exec_arg_t exec[MAX_ARGS];
    int used = 0;
    const char *call = "dnnl_stream_create";
    dnnl_status_t s = n <= MAX_ARGS ? dnnl_success : dnnl_invalid_arguments;

    omp_set_num_threads(1);
    if (s == dnnl_success)
        s = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
    for (int i = 0; s == dnnl_success && i < n; i++) {
        if (dnnl_memory_desc_get_size(args[i].md) == 0)
            continue;
        call = "dnnl_memory_create";
        s = dnnl_memory_create(&memory[used], args[i].md, engine, args[i].data);
        if (s == dnnl_success) {
            exec[used] = (dnnl_exec_arg_t){args[i].arg, memory[used]};
            used++;
        }
    }
    if (s == dnnl_success) {
        call = "dnnl_primitive_execute";
        s = dnnl_primitive_execute(p, stream, used, exec);
    }
    if (s == dnnl_success) {
        call = "dnnl_stream_wait";
        s = dnnl_stream_wait(stream);
    }
    if (s != dnnl_success)
        *failed = call;
    for (int i = 0; i < used; i++)
        dnnl_memory_destroy(memory[i]);
    if (stream)
        dnnl_stream_destroy(stream);
    return s;
}

void tide__onednn_record_failure(pthread_mutex_t *lock, dnnl_status_t *status, const char **failed,
                                 dnnl_status_t s, const char *call)
{
    pthread_mutex_lock(lock);
    if (*status == dnnl_success) {
        *status = s;
        *failed = call;
    }
    pthread_mutex_unlock(lock);
}
