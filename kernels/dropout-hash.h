/* SPDX-License-Identifier: MIT */
/*
 * dropout-hash.h: Dropout's mask, one pure function of integers shared by the
 * CPU kernels (kernels/cpu/dropout.c) and both halves of the CUDA kernels
 * (kernels/cuda/dropout.c, dropout.cu), so that every backend, thread count
 * and re-run (DropoutGrad, a recompute) draws the same mask bit for bit.
 *
 * Element i of a Dropout node is kept when the top 24 bits of
 * splitmix64(key + (i + 1) * golden) are at least threshold, where
 *   key       = tide__dropout_step_key(job seed, step, node key),
 *   node key  = tide__dropout_node_key(the Dropout node's name, its seed),
 *   threshold = tide__dropout_threshold(rate) = ceil(rate * 2^24),
 * i.e. when u_i = bits / 2^24, uniform in [0, 1), is >= rate. The draw is a
 * counter-based generator in the style of kernels/init.c: nothing carries
 * state from one element to the next, so any split of the elements gives
 * the same mask. Only integer arithmetic decides the mask; the float scale
 * 1 / (1 - rate) is computed once, in double, on the host.
 *
 * The functions are `static inline` for C; a CUDA file defines
 * TIDE_DROPOUT_FN as `static inline __host__ __device__` before including
 * this header, so the device uses the same text (no #ifdef for CUDA here).
 */
#ifndef TIDE_KERNELS_DROPOUT_HASH_H
#define TIDE_KERNELS_DROPOUT_HASH_H

#include <stdbool.h>
#include <stdint.h>

#ifndef TIDE_DROPOUT_FN
#define TIDE_DROPOUT_FN static inline
#endif

#define TIDE_DROPOUT_GOLDEN 0x9E3779B97F4A7C15ull

/* The splitmix64 finaliser: a bijective mix of 64 bits. */
TIDE_DROPOUT_FN uint64_t tide__dropout_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/*
 * The identity of a Dropout node: 64-bit FNV-1a of its name mixed with its
 * seed attribute. DropoutGrad passes the forward node's name and seed.
 */
TIDE_DROPOUT_FN uint64_t tide__dropout_node_key(const char *name, int64_t seed)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (; name && *name; name++) {
        h ^= (unsigned char)*name;
        h *= 0x100000001B3ull;
    }
    return tide__dropout_mix(tide__dropout_mix(h + TIDE_DROPOUT_GOLDEN) ^ (uint64_t)seed);
}

/* The key of one node's mask in one step; each ingredient is mixed in turn so that none cancels. */
TIDE_DROPOUT_FN uint64_t tide__dropout_step_key(uint64_t job_seed, uint64_t step, uint64_t node_key)
{
    uint64_t key = tide__dropout_mix(job_seed + TIDE_DROPOUT_GOLDEN);
    key = tide__dropout_mix(key ^ step);
    return tide__dropout_mix(key ^ node_key);
}

/* ceil(rate * 2^24) for rate in [0, 1): the smallest 24-bit draw that keeps its element. */
TIDE_DROPOUT_FN uint32_t tide__dropout_threshold(double rate)
{
    double t = rate * 16777216.0;
    uint32_t k = (uint32_t)t;
    return (double)k < t ? k + 1 : k;
}

/* Whether element i of the mask keyed by key is kept. */
TIDE_DROPOUT_FN bool tide__dropout_keep(uint64_t key, uint64_t i, uint32_t threshold)
{
    uint64_t bits = tide__dropout_mix(key + (i + 1) * TIDE_DROPOUT_GOLDEN);
    return (uint32_t)(bits >> 40) >= threshold;
}

#endif /* TIDE_KERNELS_DROPOUT_HASH_H */
