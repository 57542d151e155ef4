/* SPDX-License-Identifier: MIT */
/*
 * timemodel.h: how long a planned step takes on a device, predicted.
 *
 * A device profile is four numbers: the FLOP/s of dense matrix products,
 * the device memory bandwidth that bounds element-wise kernels, the
 * host<->device copy bandwidth (each direction on its own stream), and the
 * fixed cost of one kernel or copy (launch and hand-off). A node costs
 *
 *     launch + max(flops / compute, bytes touched / memory bandwidth)
 *
 * with flops from the op's formula (MatMul, BatchMatMul, Conv2D and its two
 * gradients, Attention and its gradient; every other op counts one FLOP per
 * output element, so it is bound by its bytes) and bytes the node's inputs
 * and outputs, plus a convolution's patch matrix (im2col, col2im) written
 * and read once unless its filter is 1x1, that time multiplied by the
 * profile's scale for the op where it has one (the CPU backend's kernels
 * measured against this formula: runtime/calibrate.c). A memory op (Fetch,
 * SwapIn, SwapOut, WriteBack) and a Placeholder's feed cost launch + bytes
 * / copy bandwidth on their stream.
 *
 * tide_time_predict replays a planned order the way the executor issues it
 * (runtime/executor.c): each stream runs its nodes in order, and a node
 * starts when its stream is free and every input and control edge it
 * depends on has finished. The step ends when the last stream does; the
 * compute stream's stall is the time it sat idle waiting for a memory op
 * (a swap-in or fetch not hidden by the compute before it). A profile whose
 * copies share compute's cores (copies_share_compute: the CPU backend) runs
 * everything on one timeline instead.
 *
 * Profiles: "h100" and "h200" from published figures (see timemodel.c for
 * the numbers and why); "cpu", the CPU backend of this machine, is measured
 * (runtime/profile.h: tide_device_profile_local). Named profiles let a plan
 * for a GPU box be made and inspected on any machine.
 *
 * Example usage:
 *
 *     const struct tide_device_profile *p = tide_device_profile_named("h100");
 *     struct tide_time_prediction t;
 *     tide_time_predict(graph, plan.order, plan.n_order, p, &t);
 *     printf("%.2f ms, %.2f ms stalled\n", t.step_ms, t.stall_ms);
 */
#ifndef TIDE_SWAPPER_TIMEMODEL_H
#define TIDE_SWAPPER_TIMEMODEL_H

#include <stdint.h>

#include "graph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tide_device_profile {
    char name[16];             /* "cpu", "h100", "h200" */
    double compute_flops;      /* FLOP/s of float32 matrix products */
    double memory_bytes_per_s; /* device memory bandwidth (element-wise kernels) */
    double copy_bytes_per_s;   /* host<->device copies, per direction */
    double launch_us;          /* fixed cost of one kernel or copy */
    /*
     * Copies take the cores compute runs on (the CPU backend's memcpy on a
     * worker thread), so they cannot hide under it: the replay runs every
     * node on one timeline and counts a Fetch's or SwapIn's time as stall.
     * false on a GPU, whose copy engines run beside its kernels.
     */
    bool copies_share_compute;
    /*
     * Per op, the kernel's measured time over the time the figures above
     * give it (runtime/calibrate.c measures the CPU backend's); 0 where
     * none was measured, which counts as 1. Multiplies a kernel's time,
     * not its launch, nor a copy's.
     */
    double op_scale[TIDE_OP_COUNT];
    /*
     * How many times faster a product in math tf32 (graph.h) computes than
     * in fp32: divides its compute time, not its memory time; 0 counts as 1
     * (the CPU, which has no TF32).
     */
    double tf32_speedup;
};

/* The published profiles' names, for messages: "h100, h200" (the local one is "cpu"). */
#define TIDE_DEVICE_PROFILE_NAMES "cpu, h100, h200"

/* The published profile called name ("h100", "h200"); NULL for any other name. */
const struct tide_device_profile *tide_device_profile_named(const char *name);

/* What one node does: floating-point operations and bytes read and written. */
struct tide_node_work {
    double flops;
    double bytes;
};

/* The work of node in graph (shapes inferred). */
struct tide_node_work tide_time_node_work(const struct tide_graph *graph,
                                          const struct tide_node *node);

/*
 * The predicted time of node on profile, in milliseconds: a copy's for
 * memory ops and Placeholders, a kernel's for the rest; 0 for Variables and
 * Consts (nothing runs).
 */
double tide_time_node_ms(const struct tide_device_profile *profile, const struct tide_graph *graph,
                         const struct tide_node *node);

struct tide_time_prediction {
    double step_ms;    /* from the first node's start to the last one's end */
    double compute_ms; /* busy time of the compute stream */
    double h2d_ms;     /* busy time of the host-to-device stream */
    double d2h_ms;     /* busy time of the device-to-host stream */
    double stall_ms;   /* compute idle, waiting for a Fetch or SwapIn */
};

/*
 * Replays order (n node ids of graph, topological, node->stream set) on
 * profile as the executor issues it; see the top of this file. Returns
 * TIDE_NOMEM or TIDE_INVALID (an order naming a node graph lacks) with err
 * set; *out is zero then.
 */
enum tide_status tide_time_predict(const struct tide_graph *graph, const uint32_t *order,
                                   uint32_t n, const struct tide_device_profile *profile,
                                   struct tide_time_prediction *out, struct tide_error *err);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_SWAPPER_TIMEMODEL_H */
