/* SPDX-License-Identifier: MIT */
/*
 * swapper.h: the memory pipeline — from a training graph to a plan that fits
 * the job's device budget.
 *
 *   partitioner  depth-first order, partitions of partition_size nodes
 *   placement    Variables, Consts and optimizer state homed on the host or
 *                the device (vars_home); Fetch before use, WriteBack after update
 *   actions      a memory action for every feature map (swapper/actions.def):
 *                KEEP it on the device, or SWAP it — SwapOut after the
 *                producer and SwapIn prefetch_distance partitions before the
 *                consumer — when its next use is more than swap_threshold
 *                partitions away, or (policy.recompute) RECOMPUTE it there
 *                from its cheap producer instead
 *   memplan      arena offsets and the predicted peak
 *
 * With swap auto and autotune, tide_plan_memory searches (threshold,
 * prefetch, vars_home, and the partition size when the policy leaves it
 * 0) by running the passes on clones of the graph and memplan — nothing
 * executes — and keeps the plan that fits the budget with the fewest bytes
 * moved (Le et al.'s simulation-based tuning). The chosen plan is then
 * applied to the graph itself.
 *
 * Annotations the executor relies on (the contract between the passes and
 * runtime/executor.c):
 *  - order: every node exactly once, topological; inserted memory ops sit at
 *    their positions (a SwapIn or Fetch at the start of the partition
 *    prefetch_distance before its first consumer; a SwapOut right after its
 *    producer; a WriteBack right after the update it follows).
 *  - node->partition for every node; node->stream: COMPUTE for kernels and
 *    sources, H2D for Placeholders, Fetch and SwapIn, D2H for SwapOut and
 *    WriteBack.
 *  - outputs[k].home: HOST for host-homed Variables and Consts and for SwapOut
 *    outputs; DEVICE for everything else (offsets from memplan).
 *  - Fetch(v): input 0 is a host-homed Variable or Const; output on device.
 *    Consumers in its partition group read the Fetch output instead of v.
 *    An update (Apply*) writes the Fetch output in place; WriteBack(fetch)
 *    with node->subject = v copies it back to v's host home.
 *  - SwapOut(t): input 0 a device tensor; output homed on the host.
 *    SwapIn(s): input 0 a SwapOut output; output on device; consumers of t in
 *    its group read the SwapIn output. node->subject = t's producer for both.
 *  - Control edges keep the in-place update order valid: a Fetch of v that
 *    follows an update of v runs after that update's WriteBack.
 *
 * Adding a memory action. The passes, the simulation and the search iterate
 * the action table, so an action is one entry, in at most four files
 * (RECOMPUTE, in swapper/recompute.c, is the example):
 *
 *  1. swapper/actions.def: one line, placed so that the action claims the
 *     tensors it wants before the actions after it (the first action that
 *     claims a tensor gets it; KEEP stays last).
 *  2. swapper/<action>.c (swapper/CMakeLists.txt globs *.c): defines
 *     const struct tide__memory_action tide__action_<name>
 *     (swapper/swapper-impl.h, "Memory actions") with claims, estimate (its
 *     effect on liveness, in keys, and its cost) and rewrite (its nodes,
 *     pushed into inserted at a key of the final order).
 *  3. graph/ops.def, where the action depends on an op's flags
 *     (TIDE_OP_F_CHEAP for RECOMPUTE).
 *  4. tests/test_swapper.c: a case; the estimate must match memplan and
 *     the rewrite's cost (test_estimate_is_exact and its recompute twin).
 *
 * The search (swapper.c) ranks candidates by predicted step time when the
 * policy has a device profile (copies cost bytes / profile->copy_bytes_per_s
 * where they cannot hide under compute; bytes made again cost bytes /
 * profile->memory_bytes_per_s on compute), then by bytes copied, then by
 * bytes made again, so a recompute that saves copies wins; with
 * policy.recompute AUTO every candidate comes also with RECOMPUTE allowed.
 *
 * Example usage:
 *
 *     struct tide_memory_policy p = tide_memory_policy_default();
 *     p.budget_bytes = 256 << 20;
 *     p.profile = tide_device_profile_named("h100"); // rank by predicted time
 *     p.host_budget_bytes = 64ull << 30;
 *     struct tide_memory_plan plan;
 *     if (tide_plan_memory(graph, &p, &env, &plan, &err) != TIDE_OK)
 *         ... err names the node that cannot fit, and the numbers ...
 *     executor uses plan.memplan;
 *     tide_memory_plan_release(&plan);
 */
#ifndef TIDE_SWAPPER_SWAPPER_H
#define TIDE_SWAPPER_SWAPPER_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"
#include "memplan/memplan.h"
#include "swapper/timemodel.h"
#include "tide/timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Values match tide.v1.SwapMode and tide.v1.VarsHome. */
enum tide_swap_mode {
    TIDE_SWAP_AUTO = 0,
    TIDE_SWAP_ON = 1,
    TIDE_SWAP_OFF = 2,
};

enum tide_vars_home {
    TIDE_VARS_HOME_AUTO = 0,
    TIDE_VARS_HOME_HOST = 1,
    TIDE_VARS_HOME_DEVICE = 2,
};

/*
 * Whether the planner may recompute cheap feature maps instead of keeping
 * or swapping them (swapper/recompute.c):
 *   DEVICE  the default: AUTO where the plan's device profile has copies
 *         that do not share compute's cores (a GPU: a byte over PCIe costs
 *         the time of ~1,000 FLOPs) and the search is automatic (swap auto,
 *         autotune); OFF otherwise — on the CPU backend a copy is a memcpy,
 *         so recomputing saves little, and trying it doubles the search;
 *   OFF   keep and swap only;
 *   AUTO  the search tries every candidate also with the RECOMPUTE action
 *         allowed (per tensor: a far group of a cheap tensor whose inputs
 *         are on the device there, or loaded soon after and then pulled
 *         ahead, is made again, any other is swapped), and with it limited
 *         to tensors of at most a quarter, 1/16 or 1/64 of the budget;
 *   CHECKPOINT_SQRT  Chen et al.'s sqrt(n) checkpointing as a baseline:
 *         no swapping, a checkpoint every ~sqrt(n) partitions, the cheap
 *         tensors between checkpoints recomputed (swapper.c).
 */
enum tide_recompute_mode {
    TIDE_RECOMPUTE_DEVICE = 0,
    TIDE_RECOMPUTE_AUTO = 1,
    TIDE_RECOMPUTE_CHECKPOINT_SQRT = 2,
    TIDE_RECOMPUTE_OFF = 3,
};

/*
 * The partition size of a policy with partition_size 0 that searches none
 * (swap on or off, no autotune, no budget), and of a plan that moves nothing.
 */
#define TIDE_PARTITION_SIZE_DEFAULT 64

struct tide_memory_policy {
    uint64_t budget_bytes;      /* 0: no limit (everything resident, report only) */
    /*
     * Nodes per partition; 0: auto — with swap auto, autotune and a budget,
     * the search tries every power of two from 1 to 256 (swapper.c); else
     * TIDE_PARTITION_SIZE_DEFAULT.
     */
    uint32_t partition_size;
    enum tide_swap_mode swap;
    uint32_t swap_threshold;    /* swap when the next use is more than this many partitions away */
    uint32_t prefetch_distance; /* SwapIn/Fetch this many partitions before the consumer */
    enum tide_vars_home vars_home;
    bool autotune;              /* with swap auto: search threshold and prefetch */
    enum tide_recompute_mode recompute; /* default DEVICE */
    /*
     * The device the plan is for (swapper/timemodel.h), borrowed for the
     * call: autotune ranks the plans that fit by predicted step time, and
     * the report predicts it. NULL: ranked by bytes moved, nothing predicted.
     */
    const struct tide_device_profile *profile;
    /*
     * Host bytes the plan may use (its host arena: host homes, swap slots,
     * staging); 0: no limit. A plan that needs more is refused.
     */
    uint64_t host_budget_bytes;
    /*
     * Polled between the search's steps (each partition size's planner, each
     * built trial): true stops the plan with TIDE_CANCELLED, so that a daemon
     * abandons a big graph's compile within one step of the search. NULL: never.
     */
    bool (*cancelled)(void *context);
    void *cancel_context;
};

/* partition_size 0 (auto), swap auto, threshold 1, prefetch 1, vars auto, autotune on. */
struct tide_memory_policy tide_memory_policy_default(void);

/*
 * What the cost of a memory action is measured against: host<->device copy
 * bandwidth, device memory bandwidth and compute throughput. A device
 * profile (measured, or a GPU's published figures) fills one; NULL where a
 * function takes one means TIDE_DEVICE_RATES_DEFAULT, a PCIe 4 GPU's order
 * of magnitude.
 */
struct tide_device_rates {
    double copy_bytes_per_s;   /* host <-> device, one way */
    double memory_bytes_per_s; /* device memory, read + write */
    double flops_per_s;        /* float32, element-wise work */
};

#define TIDE_DEVICE_RATES_DEFAULT ((struct tide_device_rates){25e9, 2e12, 50e12})

/* What the passes need from the backend. */
struct tide_plan_env {
    uint64_t alignment; /* 0: 256 */
    uint64_t (*workspace_bytes)(void *ctx, const struct tide_graph *graph,
                                const struct tide_node *node);
    void *workspace_ctx;
    const uint8_t *pinned; /* per node id of the input graph (fetches); may be NULL */
    /*
     * What recomputing and copying cost on the device: RECOMPUTE takes a far
     * group only where running its copies again costs less time than
     * swapping it in (tide_recompute_cost_ms against tide_swap_cost_ms).
     * NULL: TIDE_DEVICE_RATES_DEFAULT.
     */
    const struct tide_device_rates *rates;
};

struct tide_partition_report {
    uint32_t nodes;
    uint64_t resident_bytes; /* most arena bytes live at any position of the partition */
    uint64_t swap_in_bytes;
    uint64_t swap_out_bytes;
    uint64_t fetch_bytes;
    uint64_t write_back_bytes;
    uint32_t peak_node; /* the node at the partition's most-live position */
};

struct tide_plan_report {
    uint32_t n_partitions;
    struct tide_partition_report *partitions; /* malloc'd */
    uint32_t nodes;           /* after the memory passes */
    uint64_t budget_bytes;
    uint64_t predicted_peak_bytes;
    bool fits;
    /*
     * When it does not fit: the smallest budget that does, exactly — a plan
     * at this budget fits (swapper.c, "The smallest budget"). When it fits:
     * the smallest peak of the plans built on the way, at most the plan's.
     */
    uint64_t min_budget_bytes;
    uint32_t min_budget_node;  /* the node live at that plan's peak (its working set sets it) */
    /*
     * The physical floor of node-by-node execution: the largest working set
     * of one kernel (its distinct inputs, outputs and workspace, aligned as
     * memplan places them), and that kernel (TIDE_NO_NODE: no kernel). No
     * plan fits a smaller budget, whatever it swaps.
     */
    uint64_t floor_bytes;
    uint32_t floor_node;
    uint64_t swap_in_bytes;
    uint64_t swap_out_bytes;
    uint64_t fetch_bytes;
    uint64_t write_back_bytes;
    uint64_t host_bytes;      /* host homes and swap space */
    /*
     * Bytes the plan's recompute copies make again per step (outputs of
     * nodes the RECOMPUTE action inserted), and that work's estimated time
     * on the compute stream (tide_recompute_cost_ms).
     */
    uint64_t recompute_bytes;
    double recompute_ms;
    /*
     * The job's host arena (memplan's host_bytes): host homes, swap slots,
     * Placeholder staging, the initialisation scratch buffer and alignment;
     * what the executor allocates, and what host-pool admission counts.
     */
    uint64_t host_arena_bytes;
    struct tide_memory_policy chosen; /* after autotune; partition_size the one chosen */
    uint32_t trials;          /* plans simulated by autotune */
    double plan_ms;           /* wall time */
    double plan_cpu_ms;       /* CPU time of the planning thread: plan_ms less waiting for a core */
    /*
     * With a profile (policy.profile): the plan's step replayed on it
     * (tide_time_predict), and the time compute waits in it for copies; 0
     * without. profile names it ("" without).
     */
    double predicted_step_ms;
    double predicted_stall_ms;
    char profile[16];
    uint64_t host_budget_bytes; /* the policy's (0: no limit) */
    char message[256];        /* why it does not fit, when fits is false */
};

struct tide_memory_plan {
    struct tide_memplan memplan; /* order, regions, offsets, peak */
    struct tide_plan_report report;
};

/*
 * Estimated milliseconds of running node (a kernel of graph) once on the
 * compute stream: the bytes it reads and writes against memory bandwidth
 * plus a few operations per output element against compute throughput —
 * what the RECOMPUTE action pays for each copy it inserts. rates may be NULL.
 */
double tide_recompute_cost_ms(const struct tide_graph *graph, const struct tide_node *node,
                              const struct tide_device_rates *rates);

/*
 * Estimated milliseconds of copying bytes one way between host and device:
 * what SWAP pays per SwapOut or SwapIn (overlapped with compute when
 * prefetched). rates may be NULL.
 */
double tide_swap_cost_ms(uint64_t bytes, const struct tide_device_rates *rates);

/*
 * Runs the pipeline on graph (a validated training or forward graph) under
 * policy, rewriting and annotating it in place. Returns TIDE_OK with
 * report.fits true when the plan fits the budget; TIDE_DOES_NOT_FIT when no
 * policy tried fits, with report filled (min budget, node) and err naming
 * the node and the numbers — admission control refuses such a job before it
 * runs. A node whose own inputs + outputs + workspace exceed the budget is
 * named first ("node \"conv1\" (Conv2D) needs 300 MiB by itself ...").
 */
enum tide_status tide_plan_memory(struct tide_graph *graph, const struct tide_memory_policy *policy,
                                  const struct tide_plan_env *env, struct tide_memory_plan *out,
                                  struct tide_error *err);

void tide_memory_plan_release(struct tide_memory_plan *plan);

/*
 * The memory timeline of a finished plan (tide/timeline.h): plan is the
 * memplan of graph as the passes left it (tide_memory_plan's memplan, or a
 * session's), budget_bytes the job's budget (0: none), max_points the most
 * points to keep (0: TIDE_MEMORY_TIMELINE_MAX_POINTS). *out is the caller's
 * to free with tide_memory_timeline_clear, also on failure (then empty).
 * TIDE_INVALID when a region or position of plan names no node of graph.
 */
enum tide_status tide_memory_timeline_build(const struct tide_graph *graph,
                                            const struct tide_memplan *plan,
                                            uint64_t budget_bytes, uint32_t max_points,
                                            struct tide_memory_timeline *out,
                                            struct tide_error *err);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_SWAPPER_SWAPPER_H */
