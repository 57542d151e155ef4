/* SPDX-License-Identifier: MIT */
/*
 * tide/timeline.h: where a job's device memory goes, position by position of
 * its schedule — the data behind a memory picture.
 *
 * The planner (swapper/swapper.h, tide_memory_timeline_build) computes a
 * timeline from a finished plan; the daemon sends it in tide.v1.PlanReport's
 * timeline; libtide decodes it into struct tide_job_plan_report
 * (tide/client.h); tide-bench and tidectl draw it (picture/picture.h). It is
 * plain data, with no pointer into a graph or a plan, so that a program
 * which never links the planner can carry and draw it.
 *
 * The schedule is the plan's execution order: position p is the p-th node
 * run in a step. At each position, device bytes are live by category — the
 * regions of the plan whose interval [first, last] holds p, summed by what
 * produced them:
 *
 *   variables    Variables, Consts and optimizer state homed on the device,
 *                and the device copies Fetch makes of host-homed ones
 *   activations  every other output: batches, feature maps, gradients
 *   swapped in   SwapIn outputs: feature maps brought back from the host
 *   workspace    kernels' scratch, live at its kernel's position only
 *
 * Two peaks, and how they relate. live_peak_bytes is the most bytes live at
 * any one position: the maximum over positions of the category sum, which
 * the points keep exactly (each point is the position of its bucket with
 * the largest sum). predicted_peak_bytes is the arena the plan needs, the
 * largest offset + bytes of any region — what the executor measures as its
 * high-water mark. Regions sit at fixed offsets, so the free gaps between
 * them (fragmentation) count in the arena but hold nothing live:
 *
 *   live_peak_bytes <= predicted_peak_bytes
 *                    = the largest arena_top_bytes of any partition
 *
 * and the difference is the fragmentation at the worst position. A plan
 * fits when predicted_peak_bytes <= budget_bytes.
 *
 * Ownership: every array is malloc'd by whoever filled the timeline (the
 * planner, or libtide when decoding) and freed by
 * tide_memory_timeline_clear(), which tide_job_plan_report_clear() calls for
 * a report's timeline.
 *
 * Example usage:
 *
 *     struct tide_job_plan_report p;
 *     tide_client_plan(c, &spec, &p);
 *     const struct tide_memory_timeline *t = &p.timeline;
 *     for (uint32_t i = 0; i < t->n_points; i++)
 *         printf("%u %llu\n", t->points[i].position,
 *                (unsigned long long)t->points[i].bytes[TIDE_MEMORY_ACTIVATIONS]);
 *     tide_job_plan_report_clear(&p);
 */
#ifndef TIDE_TIMELINE_H
#define TIDE_TIMELINE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most points a timeline keeps: longer schedules are downsampled to this many. */
#define TIDE_MEMORY_TIMELINE_MAX_POINTS 2048

/* What the bytes live at a position are (see the top of this file). */
enum tide_memory_category {
    TIDE_MEMORY_VARIABLES = 0,
    TIDE_MEMORY_ACTIVATIONS = 1,
    TIDE_MEMORY_SWAPPED_IN = 2,
    TIDE_MEMORY_WORKSPACE = 3,
    TIDE_MEMORY_CATEGORY_COUNT
};

/* "variables", "activations", "swapped in", "workspace"; "?" past the last. */
static inline const char *tide_memory_category_name(enum tide_memory_category c)
{
    static const char *const names[TIDE_MEMORY_CATEGORY_COUNT] = {"variables", "activations",
                                                                  "swapped in", "workspace"};
    return (unsigned)c < TIDE_MEMORY_CATEGORY_COUNT ? names[c] : "?";
}

/*
 * One point of the timeline: it stands for the positions first..last of the
 * schedule (one position when the schedule has no more positions than
 * points) and holds the bytes live at the one of them with the largest sum,
 * position, so that the peak survives downsampling.
 */
struct tide_memory_timeline_point {
    uint32_t first;
    uint32_t last;
    uint32_t position;
    uint64_t bytes[TIDE_MEMORY_CATEGORY_COUNT];
};

/*
 * A partition of the schedule: its first and last positions, and the
 * highest arena byte in use while it runs (the largest offset + bytes of a
 * region live at one of its positions) — what the executor measures for it
 * (struct tide_step_stats' partition_high_water_bytes).
 */
struct tide_memory_timeline_partition {
    uint32_t first;
    uint32_t last;
    uint64_t arena_top_bytes;
};

struct tide_memory_timeline {
    uint32_t n_positions;          /* the schedule's length; 0: no timeline (no plan) */
    uint64_t budget_bytes;         /* the job's device budget; 0: none */
    uint64_t predicted_peak_bytes; /* the arena the plan needs: max offset + bytes */
    uint64_t live_peak_bytes;      /* the most bytes live at one position */
    uint32_t n_points;             /* at most TIDE_MEMORY_TIMELINE_MAX_POINTS */
    struct tide_memory_timeline_point *points; /* by position, covering 0..n_positions - 1 */
    uint32_t n_partitions;
    struct tide_memory_timeline_partition *partitions; /* by index */
    uint32_t n_swap_outs;
    uint32_t *swap_outs; /* positions of the SwapOut nodes, ascending */
    uint32_t n_swap_ins;
    uint32_t *swap_ins;  /* positions of the SwapIn nodes, ascending */
};

/* Frees the timeline's arrays and zeroes it. NULL is a no-op. */
static inline void tide_memory_timeline_clear(struct tide_memory_timeline *t)
{
    if (!t)
        return;
    free(t->points);
    free(t->partitions);
    free(t->swap_outs);
    free(t->swap_ins);
    memset(t, 0, sizeof(*t));
}

#ifdef __cplusplus
}
#endif

#endif /* TIDE_TIMELINE_H */
