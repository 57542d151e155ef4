/* SPDX-License-Identifier: MIT */
/*
 * memplan.c: static arena offsets for every device tensor of a planned graph.
 *
 * The plan is built in four passes over the execution order:
 *
 *  1. Intervals. Each device-homed output becomes a region alive from its
 *     producer's position to its last reader's position (a reader is a node
 *     with a data input from it; an output nobody reads lives at its
 *     producer's position only). Each node's kernel workspace becomes a
 *     region alive at the node's position only. Variables, Consts and pinned
 *     nodes' outputs are persistent: alive over the whole order.
 *     In place: a node whose op may overwrite an input
 *     (tide_graph_may_overwrite) and that is the last reader of that input,
 *     which is not persistent, writes its output over it: the output's
 *     region takes over the input's (inplace_of), so the output of
 *     GeluGrad(dy, x) costs nothing beyond dy.
 *  2. Placement. Persistent regions go first, back to back from offset 0, in
 *     order of position, so they are never shared with anything. The others
 *     are placed greedily, largest first (ties: earlier first position, then
 *     lower node id, then lower output index, so the plan is a pure function
 *     of its input), each at the lowest aligned offset that does not overlap
 *     a placed region alive at an overlapping time. A chain of in-place
 *     regions is placed as its first region alive until the chain's last
 *     position; the others take its offset.
 *  3. Reuse edges. A region that takes over addresses of a region that died
 *     earlier must not be written before every reader of the old occupant
 *     has finished — on every stream, not only the last reader by position:
 *     a tensor read by kernels on compute and by a SwapOut on d2h dies after
 *     whichever comes last in the order, but the other may still run. On
 *     the new producer's own stream the stream's order guarantees it; for
 *     each other stream we add one control edge (reader -> new producer)
 *     from the latest reader on that stream of any earlier occupant, which
 *     follows all the others there. A region that takes over an input in
 *     place waits so for that input's readers on other streams too.
 *  4. Death lists: per position, the regions whose last reader it is, so
 *     the executor can account (and poison) regions as it goes.
 *  5. The host arena: in order of position, each host-homed output's home
 *     and each Placeholder's staging buffer, then the scratch buffer for
 *     initial values (as large as the largest device-homed Variable or
 *     Const), packed back to back at TIDE_MEMPLAN_HOST_ALIGNMENT. Nothing
 *     shares host addresses: every host buffer lives for the whole job.
 *
 * Both placement and reuse edges ask, for each region, about the regions
 * alive at an overlapping time or dead before it: a scan of all placed
 * regions per region is quadratic (a 4,000-layer ResNet's training graph,
 * 200,000 nodes, took seconds). Placement finds its conflicts through a
 * segment tree over positions whose nodes keep merged address runs
 * (placed_index); reuse edges sweep the regions in order of first position
 * over a segment tree of address segments (latest_tree). Both are
 * O(R log R) in practice and give the same offsets and edges as the scans
 * did: the lowest offset that fits, and the latest access per stream.
 */
#include "memplan/memplan.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_ALIGNMENT 256
/* ============================================================================
 * The placed regions, indexed by time
 *
 * A region being placed conflicts with the placed regions alive at some
 * position of its own interval [a, b]: those alive at a, and those that
 * start in (a, b]. Both are found through a segment tree over positions:
 *
 *  - cover: each placed region is put in the O(log n) tree nodes that
 *    decompose its interval; those on the path from the root to leaf a are
 *    exactly the regions alive at a;
 *  - start: each placed region is put in every node above the leaf of its
 *    first position; the O(log n) nodes that decompose [a, b] hold exactly
 *    the regions that start in [a, b].
 *
 * Every region in one of those sets conflicts, so a set keeps only the
 * union of its regions' address ranges, merged into disjoint sorted runs.
 * The lowest offset that fits is found by moving the candidate past any run
 * it overlaps, set after set, until a whole round moves it no further: the
 * smallest offset above base at which no conflicting region overlaps the
 * candidate, which is what a scan of every placed region in order of
 * offset finds, in O(log n) binary searches per run passed instead.
 * ========================================================================== */

/* Disjoint, non-adjacent address ranges [lo, hi), sorted. */
struct runs {
    uint64_t *bounds; /* lo0, hi0, lo1, hi1, ... */
    uint32_t n;
    uint32_t cap;
};

struct placed_index {
    uint32_t leaves; /* a power of two >= the positions */
    struct runs *cover; /* 2 * leaves tree nodes, 1-based */
    struct runs *start;
};

static void placed_index_free(struct placed_index *x)
{
    for (size_t i = 0; x->cover && i < 2 * (size_t)x->leaves; i++) {
        free(x->cover[i].bounds);
        free(x->start[i].bounds);
    }
    free(x->cover);
    free(x->start);
    memset(x, 0, sizeof(*x));
}

static enum tide_status placed_index_init(struct placed_index *x, uint32_t positions)
{
    memset(x, 0, sizeof(*x));
    x->leaves = 1;
    while (x->leaves < positions)
        x->leaves *= 2;
    x->cover = calloc(2 * (size_t)x->leaves, sizeof(*x->cover));
    x->start = calloc(2 * (size_t)x->leaves, sizeof(*x->start));
    if (!x->cover || !x->start) {
        placed_index_free(x);
        return TIDE_NOMEM;
    }
    return TIDE_OK;
}

/* The index of the first run whose end is above offset (runs->n: none). */
static uint32_t runs_after(const struct runs *runs, uint64_t offset)
{
    uint32_t lo = 0, hi = runs->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (runs->bounds[2 * mid + 1] <= offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Adds [lo, hi) to runs, merging it with the runs it overlaps or touches. */
static enum tide_status runs_add(struct runs *runs, uint64_t lo, uint64_t hi)
{
    /* The first run that ends at or above lo, and the first that starts above hi. */
    uint32_t first = 0, count = runs->n;
    while (count > 0) {
        uint32_t half = count / 2;
        if (runs->bounds[2 * (first + half) + 1] < lo) {
            first += half + 1;
            count -= half + 1;
        } else {
            count = half;
        }
    }
    uint32_t last = first;
    while (last < runs->n && runs->bounds[2 * last] <= hi)
        last++;
    if (last > first) {
        /* Merge runs first..last-1 with [lo, hi) into run first. */
        uint64_t merged_lo = runs->bounds[2 * first] < lo ? runs->bounds[2 * first] : lo;
        uint64_t merged_hi = runs->bounds[2 * (last - 1) + 1] > hi ? runs->bounds[2 * (last - 1) + 1]
                                                                  : hi;
        runs->bounds[2 * first] = merged_lo;
        runs->bounds[2 * first + 1] = merged_hi;
        memmove(runs->bounds + 2 * (first + 1), runs->bounds + 2 * last,
                (size_t)(runs->n - last) * 2 * sizeof(*runs->bounds));
        runs->n -= last - first - 1;
        return TIDE_OK;
    }
    if (runs->n == runs->cap) {
        uint32_t cap = runs->cap ? runs->cap * 2 : 4;
        uint64_t *bounds = realloc(runs->bounds, (size_t)cap * 2 * sizeof(*bounds));
        if (!bounds)
            return TIDE_NOMEM;
        runs->bounds = bounds;
        runs->cap = cap;
    }
    memmove(runs->bounds + 2 * (first + 1), runs->bounds + 2 * first,
            (size_t)(runs->n - first) * 2 * sizeof(*runs->bounds));
    runs->bounds[2 * first] = lo;
    runs->bounds[2 * first + 1] = hi;
    runs->n++;
    return TIDE_OK;
}

static enum tide_status placed_index_insert(struct placed_index *x, uint64_t offset,
                                            uint64_t end, uint32_t first, uint32_t last)
{
    enum tide_status st = TIDE_OK;
    for (size_t l = (size_t)first + x->leaves, r = (size_t)last + x->leaves + 1;
         l < r && st == TIDE_OK; l /= 2, r /= 2) {
        if (l & 1)
            st = runs_add(&x->cover[l++], offset, end);
        if (st == TIDE_OK && (r & 1))
            st = runs_add(&x->cover[--r], offset, end);
    }
    for (size_t v = (size_t)first + x->leaves; v >= 1 && st == TIDE_OK; v /= 2)
        st = runs_add(&x->start[v], offset, end);
    return st;
}

/*
 * The lowest offset >= base at which [offset, offset + bytes) overlaps no
 * placed region alive at some time in [first, last]. All offsets and sizes
 * are multiples of the alignment, so every candidate stays aligned.
 */
static uint64_t placed_index_fit(const struct placed_index *x, uint64_t base, uint64_t bytes,
                                 uint32_t first, uint32_t last)
{
    /* The sets that conflict: at most two per level of the tree. */
    const struct runs *sets[4 * 33];
    uint32_t n_sets = 0;
    for (size_t v = (size_t)first + x->leaves; v >= 1; v /= 2) {
        if (x->cover[v].n)
            sets[n_sets++] = &x->cover[v];
    }
    for (size_t l = (size_t)first + x->leaves, r = (size_t)last + x->leaves + 1; l < r;
         l /= 2, r /= 2) {
        if ((l & 1) && x->start[l].n)
            sets[n_sets++] = &x->start[l];
        l += l & 1;
        if ((r & 1) && x->start[r - 1].n)
            sets[n_sets++] = &x->start[r - 1];
        r -= r & 1;
    }
    /*
     * Round the sets until n_sets in a row leave the candidate where it is.
     * A set that moved it is clear of it afterwards (its next run starts at
     * or above the candidate's end), so it counts as the first of them.
     */
    uint64_t candidate = base;
    for (uint32_t i = 0, quiet = 0; quiet < n_sets; i = i + 1 == n_sets ? 0 : i + 1) {
        const struct runs *runs = sets[i];
        bool moved = false;
        for (uint32_t k = runs_after(runs, candidate);
             k < runs->n && runs->bounds[2 * k] < candidate + bytes; k++) {
            candidate = runs->bounds[2 * k + 1];
            moved = true;
        }
        quiet = moved ? 1 : quiet + 1;
    }
    return candidate;
}

/* ============================================================================
 * Helpers
 * ========================================================================== */

static bool is_persistent_op(enum tide_op op)
{
    return op == TIDE_OP_VARIABLE || op == TIDE_OP_CONST;
}

/* Rounds bytes up to the alignment; false if that overflows. */
static bool round_up(uint64_t bytes, uint64_t alignment, uint64_t *out)
{
    uint64_t rem = bytes % alignment;
    if (rem == 0) {
        *out = bytes;
        return true;
    }
    if (bytes > UINT64_MAX - (alignment - rem))
        return false;
    *out = bytes + (alignment - rem);
    return true;
}

/* A region's sort key, self-contained so that qsort needs no context. */
struct sort_key {
    uint64_t bytes;
    uint64_t offset;
    uint32_t first;
    uint32_t node;
    uint32_t output;
    uint32_t region;
};

/* Largest first; then earlier first position, lower node id, lower output index. */
static int compare_by_size(const void *a, const void *b)
{
    const struct sort_key *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->first != y->first)
        return x->first < y->first ? -1 : 1;
    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    if (x->output != y->output)
        return x->output < y->output ? -1 : 1;
    return 0;
}

static struct sort_key key_of(const struct tide_memplan_region *regions, uint32_t r)
{
    return (struct sort_key){.bytes = regions[r].bytes,
                             .offset = regions[r].offset,
                             .first = regions[r].first,
                             .node = regions[r].node,
                             .output = regions[r].output,
                             .region = r};
}

void tide_memplan_release(struct tide_memplan *plan)
{
    if (!plan)
        return;
    free(plan->order);
    free(plan->position);
    free(plan->regions);
    free(plan->workspace_offset);
    free(plan->workspace_bytes);
    free(plan->death_offsets);
    free(plan->deaths);
    free(plan->host_buffers);
    memset(plan, 0, sizeof(*plan));
}

/* ============================================================================
 * Pass 1: intervals
 * ========================================================================== */

/* Checks the order and fills plan->order and plan->position. */
static enum tide_status check_order(const struct tide_graph *graph, const uint32_t *order,
                                    uint32_t n, struct tide_memplan *plan, struct tide_error *err)
{
    if (n > graph->n_nodes)
        return tide_error_set(err, TIDE_INVALID, "memplan: the order has %u nodes, the graph %u", n,
                              graph->n_nodes);
    for (uint32_t v = 0; v < graph->n_nodes; v++)
        plan->position[v] = UINT32_MAX;
    for (uint32_t p = 0; p < n; p++) {
        uint32_t v = order[p];
        if (v >= graph->n_nodes)
            return tide_error_set(err, TIDE_INVALID,
                                  "memplan: position %u of the order is node id %u of %u", p, v,
                                  graph->n_nodes);
        if (plan->position[v] != UINT32_MAX)
            return tide_node_error(err, TIDE_INVALID, &graph->nodes[v],
                                   "appears twice in the order (positions %u and %u)",
                                   plan->position[v], p);
        plan->position[v] = p;
        plan->order[p] = v;
    }
    for (uint32_t p = 0; p < n; p++) {
        const struct tide_node *node = &graph->nodes[order[p]];
        for (uint32_t i = 0; i < node->n_inputs + node->n_controls; i++) {
            uint32_t u =
                i < node->n_inputs ? node->inputs[i].node : node->controls[i - node->n_inputs];
            if (u >= graph->n_nodes || plan->position[u] == UINT32_MAX || plan->position[u] >= p)
                return tide_node_error(err, TIDE_INVALID, node,
                                       "runs at position %u of the order, before its %s input "
                                       "\"%s\"",
                                       p, i < node->n_inputs ? "data" : "control",
                                       u < graph->n_nodes ? graph->nodes[u].name : "?");
        }
    }
    return TIDE_OK;
}

/* Builds plan->regions: device outputs and workspaces, in order of position. */
static enum tide_status build_regions(const struct tide_graph *graph,
                                      const struct tide_memplan_options *options,
                                      uint64_t alignment, struct tide_memplan *plan,
                                      struct tide_error *err)
{
    uint32_t n = plan->n_order;
    uint64_t count = 0;
    for (uint32_t p = 0; p < n; p++) {
        const struct tide_node *node = &graph->nodes[plan->order[p]];
        for (uint32_t k = 0; k < node->n_outputs; k++)
            count += node->outputs[k].home == TIDE_HOME_DEVICE;
        uint64_t ws = 0;
        if (options->workspace_bytes)
            ws = options->workspace_bytes(options->workspace_ctx, graph, node);
        plan->workspace_bytes[plan->order[p]] = ws;
        count += ws > 0;
    }
    if (count >= UINT32_MAX)
        return tide_error_set(err, TIDE_LIMIT, "memplan: %" PRIu64 " regions is too many", count);
    plan->regions = calloc(count + 1, sizeof(*plan->regions));
    if (!plan->regions)
        return tide_error_set(err, TIDE_NOMEM, "memplan: out of memory for %" PRIu64 " regions",
                              count);

    /* Last reader of each output: scan readers once, in order. */
    for (uint32_t p = 0; p < n; p++) {
        uint32_t v = plan->order[p];
        const struct tide_node *node = &graph->nodes[v];
        bool persistent = is_persistent_op(node->op) || (options->pinned && options->pinned[v]);
        for (uint32_t k = 0; k < node->n_outputs; k++) {
            const struct tide_output *out = &node->outputs[k];
            if (out->home != TIDE_HOME_DEVICE)
                continue;
            struct tide_memplan_region *r = &plan->regions[plan->n_regions++];
            r->node = v;
            r->output = k;
            r->first = p;
            r->last = p;
            r->offset = TIDE_NO_OFFSET;
            r->persistent = persistent;
            r->inplace_of = TIDE_MEMPLAN_NO_REGION;
            if (!round_up(out->nbytes, alignment, &r->bytes))
                return tide_node_error(err, TIDE_LIMIT, node,
                                       "output %u of %" PRIu64 " bytes overflows when aligned", k,
                                       out->nbytes);
        }
        uint64_t ws = plan->workspace_bytes[v];
        if (ws) {
            struct tide_memplan_region *r = &plan->regions[plan->n_regions++];
            r->node = v;
            r->output = UINT32_MAX;
            r->first = p;
            r->last = p;
            r->offset = TIDE_NO_OFFSET;
            r->inplace_of = TIDE_MEMPLAN_NO_REGION;
            if (!round_up(ws, alignment, &r->bytes))
                return tide_node_error(err, TIDE_LIMIT, node,
                                       "workspace of %" PRIu64 " bytes overflows when aligned", ws);
        }
    }
    return TIDE_OK;
}

/* The region of output k of node v (device-homed). */
static uint32_t region_of_output(const struct tide_graph *graph, const uint32_t *first_region,
                                 uint32_t v, uint32_t k)
{
    uint32_t r = first_region[v];
    for (uint32_t j = 0; j < k; j++)
        r += graph->nodes[v].outputs[j].home == TIDE_HOME_DEVICE;
    return r;
}

/*
 * Extends each output region to its last reader. Output regions of a node
 * are contiguous in plan->regions (built in order), so first_region[v]
 * locates (v, k) without a search.
 */
static void extend_to_readers(const struct tide_graph *graph, struct tide_memplan *plan,
                              const uint32_t *first_region)
{
    for (uint32_t p = 0; p < plan->n_order; p++) {
        const struct tide_node *node = &graph->nodes[plan->order[p]];
        for (uint32_t i = 0; i < node->n_inputs; i++) {
            const struct tide_edge *e = &node->inputs[i];
            const struct tide_node *src = &graph->nodes[e->node];
            if (src->outputs[e->output].home != TIDE_HOME_DEVICE)
                continue;
            uint32_t r = region_of_output(graph, first_region, e->node, e->output);
            if (plan->regions[r].last < p)
                plan->regions[r].last = p;
        }
    }
    for (uint32_t r = 0; r < plan->n_regions; r++) {
        if (plan->regions[r].persistent) {
            plan->regions[r].first = 0;
            plan->regions[r].last = plan->n_order - 1;
        }
    }
}

/*
 * In place: the output of a node whose op may overwrite input i takes over
 * that input's region when the node is its last reader and it is neither
 * persistent nor empty nor a Fetch's (the first such input). Regions are in order of
 * position, so the region taken over always comes before the one taking it.
 */
static void pick_inplace(const struct tide_graph *graph, struct tide_memplan *plan,
                         const uint32_t *first_region)
{
    for (uint32_t p = 0; p < plan->n_order; p++) {
        uint32_t v = plan->order[p];
        const struct tide_node *node = &graph->nodes[v];
        if (!(tide_op_info(node->op)->flags & TIDE_OP_F_INPLACE) || node->n_outputs != 1 ||
            node->outputs[0].home != TIDE_HOME_DEVICE)
            continue;
        struct tide_memplan_region *out = &plan->regions[first_region[v]];
        for (uint32_t i = 0; i < node->n_inputs && !out->persistent && out->bytes; i++) {
            const struct tide_edge *e = &node->inputs[i];
            /* A Fetch's copy of a Variable stays whole, as the swapper's simulation has it. */
            if (!tide_graph_may_overwrite(graph, node, i) ||
                graph->nodes[e->node].outputs[e->output].home != TIDE_HOME_DEVICE ||
                graph->nodes[e->node].op == TIDE_OP_FETCH)
                continue;
            uint32_t r = region_of_output(graph, first_region, e->node, e->output);
            const struct tide_memplan_region *in = &plan->regions[r];
            if (in->persistent || in->last != p || in->bytes != out->bytes)
                continue;
            out->inplace_of = r;
            break;
        }
    }
}

/* ============================================================================
 * Pass 2: placement
 * ========================================================================== */

static enum tide_status place(struct tide_memplan *plan, struct tide_error *err)
{
    uint32_t n_regions = plan->n_regions;
    struct tide_memplan_region *regions = plan->regions;

    /*
     * In-place chains: each region's first (chain[r]); the first is placed
     * alive until the chain's last position (its own last is kept in
     * own_last and put back once placed).
     */
    uint32_t *chain = malloc(((size_t)n_regions + 1) * sizeof(*chain));
    uint32_t *own_last = malloc(((size_t)n_regions + 1) * sizeof(*own_last));
    if (!chain || !own_last) {
        free(chain);
        free(own_last);
        return tide_error_set(err, TIDE_NOMEM, "memplan: out of memory placing regions");
    }
    for (uint32_t r = 0; r < n_regions; r++) {
        own_last[r] = regions[r].last;
        chain[r] =
            regions[r].inplace_of == TIDE_MEMPLAN_NO_REGION ? r : chain[regions[r].inplace_of];
        if (regions[chain[r]].last < regions[r].last)
            regions[chain[r]].last = regions[r].last;
    }

    /* Persistent regions: back to back from 0, in order of position (regions are). */
    uint64_t top = 0;
    for (uint32_t r = 0; r < n_regions; r++) {
        if (!regions[r].persistent)
            continue;
        if (top > UINT64_MAX - regions[r].bytes)
            return tide_error_set(err, TIDE_LIMIT, "memplan: persistent tensors overflow");
        regions[r].offset = top;
        top += regions[r].bytes;
    }
    plan->persistent_bytes = top;

    struct sort_key *by_size = malloc(((size_t)n_regions + 1) * sizeof(*by_size));
    if (!by_size) {
        free(chain);
        free(own_last);
        return tide_error_set(err, TIDE_NOMEM, "memplan: out of memory sorting regions");
    }
    uint32_t n_sorted = 0;
    for (uint32_t r = 0; r < n_regions; r++) {
        if (!regions[r].persistent && chain[r] == r)
            by_size[n_sorted++] = key_of(regions, r);
    }
    qsort(by_size, n_sorted, sizeof(*by_size), compare_by_size);

    struct placed_index index;
    enum tide_status st = TIDE_OK;
    if (placed_index_init(&index, plan->n_order) != TIDE_OK) {
        free(by_size);
        free(chain);
        free(own_last);
        return tide_error_set(err, TIDE_NOMEM, "memplan: out of memory placing regions");
    }
    for (uint32_t i = 0; i < n_sorted && st == TIDE_OK; i++) {
        struct tide_memplan_region *r = &regions[by_size[i].region];
        if (r->bytes == 0) {
            /* An empty tensor overlaps nothing; any valid offset does. */
            r->offset = top;
            continue;
        }
        r->offset = placed_index_fit(&index, top, r->bytes, r->first, r->last);
        if (r->offset > UINT64_MAX - r->bytes) {
            st = tide_error_set(err, TIDE_LIMIT, "memplan: the arena overflows 64 bits");
            break;
        }
        if (placed_index_insert(&index, r->offset, r->offset + r->bytes, r->first, r->last) !=
            TIDE_OK)
            st = tide_error_set(err, TIDE_NOMEM, "memplan: out of memory placing regions");
    }
    placed_index_free(&index);
    free(by_size);
    for (uint32_t r = 0; r < n_regions; r++) {
        regions[r].last = own_last[r];
        regions[r].offset = regions[chain[r]].offset;
    }
    free(chain);
    free(own_last);
    if (st != TIDE_OK)
        return st;

    uint64_t peak = 0;
    for (uint32_t r = 0; r < n_regions; r++) {
        if (regions[r].offset + regions[r].bytes > peak)
            peak = regions[r].offset + regions[r].bytes;
    }
    plan->peak_bytes = peak;
    return TIDE_OK;
}

/* ============================================================================
 * Pass 3: reuse edges
 * ========================================================================== */

enum { N_STREAMS = 3 };

/*
 * The accesses that a new occupant of a region's addresses must wait for:
 * per stream, 1 + the latest position of a reader of the region on that
 * stream (0: none). A region nobody reads (an unread output, a workspace) is
 * accessed by its producer alone, at its only position. Readers on several
 * streams are common once memory ops exist: a SwapOut on d2h reads a tensor
 * that kernels on compute read too, and the last reader by position need not
 * be the last one to finish.
 */
static enum tide_status collect_accesses(const struct tide_graph *graph,
                                         const struct tide_memplan *plan,
                                         const uint32_t *first_region, uint32_t **out)
{
    uint32_t *access = calloc((size_t)plan->n_regions * N_STREAMS + 1, sizeof(*access));
    if (!access)
        return TIDE_NOMEM;
    for (uint32_t p = 0; p < plan->n_order; p++) {
        const struct tide_node *node = &graph->nodes[plan->order[p]];
        if (node->stream >= N_STREAMS)
            continue;
        for (uint32_t i = 0; i < node->n_inputs; i++) {
            const struct tide_edge *e = &node->inputs[i];
            const struct tide_node *src = &graph->nodes[e->node];
            if (src->outputs[e->output].home != TIDE_HOME_DEVICE)
                continue;
            uint32_t r = region_of_output(graph, first_region, e->node, e->output);
            access[(size_t)r * N_STREAMS + node->stream] = p + 1;
        }
    }
    for (uint32_t r = 0; r < plan->n_regions; r++) {
        uint32_t *a = &access[(size_t)r * N_STREAMS];
        if (a[0] || a[1] || a[2])
            continue;
        uint8_t s = graph->nodes[plan->order[plan->regions[r].last]].stream;
        if (s < N_STREAMS)
            a[s] = plan->regions[r].last + 1;
    }
    *out = access;
    return TIDE_OK;
}

/*
 * The latest access on one stream to the regions seen so far, over address
 * ranges: a segment tree over the elementary address segments (between
 * consecutive distinct offsets and ends of regions), where a region's value
 * is recorded in the nodes that decompose its range (tag) and in their
 * ancestors (most). Values only grow, so no update needs pushing down: the
 * most over a range is the most of its decomposing nodes and the tags of
 * the nodes above them, which all lie on the paths from its two ends.
 */
struct latest_tree {
    uint32_t leaves;
    uint32_t *tag;  /* the largest value of a range that covers the node */
    uint32_t *most; /* the largest value of a range that meets the node */
};

static void latest_tree_record(struct latest_tree *t, uint32_t lo, uint32_t hi, uint32_t value)
{
    for (size_t l = (size_t)lo + t->leaves, r = (size_t)hi + t->leaves; l < r; l /= 2, r /= 2) {
        if (l & 1) {
            t->tag[l] = value > t->tag[l] ? value : t->tag[l];
            t->most[l] = value > t->most[l] ? value : t->most[l];
            l++;
        }
        if (r & 1) {
            r--;
            t->tag[r] = value > t->tag[r] ? value : t->tag[r];
            t->most[r] = value > t->most[r] ? value : t->most[r];
        }
    }
    for (size_t v = ((size_t)lo + t->leaves) / 2; v >= 1; v /= 2)
        t->most[v] = value > t->most[v] ? value : t->most[v];
    for (size_t v = ((size_t)hi - 1 + t->leaves) / 2; v >= 1; v /= 2)
        t->most[v] = value > t->most[v] ? value : t->most[v];
}

static uint32_t latest_tree_query(const struct latest_tree *t, uint32_t lo, uint32_t hi)
{
    uint32_t best = 0;
    for (size_t l = (size_t)lo + t->leaves, r = (size_t)hi + t->leaves; l < r; l /= 2, r /= 2) {
        if (l & 1) {
            best = t->most[l] > best ? t->most[l] : best;
            l++;
        }
        if (r & 1) {
            r--;
            best = t->most[r] > best ? t->most[r] : best;
        }
    }
    for (size_t v = (size_t)lo + t->leaves; v >= 1; v /= 2)
        best = t->tag[v] > best ? t->tag[v] : best;
    for (size_t v = (size_t)hi - 1 + t->leaves; v >= 1; v /= 2)
        best = t->tag[v] > best ? t->tag[v] : best;
    return best;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The index of value in the sorted, distinct coords (it is there). */
static uint32_t coord_of(const uint64_t *coords, uint32_t n, uint64_t value)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (coords[mid] < value)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Region indices sorted by one of their positions (counting sort: positions are small). */
static void sort_regions_by(const struct tide_memplan *plan, const uint32_t *ids, uint32_t n,
                            bool by_last, uint32_t *count, uint32_t *out)
{
    memset(count, 0, ((size_t)plan->n_order + 1) * sizeof(*count));
    for (uint32_t i = 0; i < n; i++) {
        const struct tide_memplan_region *r = &plan->regions[ids[i]];
        count[(by_last ? r->last : r->first) + 1]++;
    }
    for (uint32_t p = 0; p < plan->n_order; p++)
        count[p + 1] += count[p];
    for (uint32_t i = 0; i < n; i++) {
        const struct tide_memplan_region *r = &plan->regions[ids[i]];
        out[count[by_last ? r->last : r->first]++] = ids[i];
    }
}

/*
 * A region R that takes over addresses of earlier-dying regions must not be
 * written before every access to them has finished. Accesses on R's
 * producer's stream come earlier on that stream, so the stream's order
 * holds. For the accesses on another stream s, one control edge is enough:
 * from the one that runs latest on s, over every earlier occupant of R's
 * addresses (not only each occupant's last reader by position), since s
 * runs its work in order and every other such access precedes it there.
 *
 * "Earlier occupant" means a region whose addresses meet R's and whose last
 * position is before R's first. One sweep over the regions in order of
 * first position finds each R's latest access per stream: before R is
 * asked, every region that died before R's first position has recorded its
 * accesses in one latest_tree per stream; R asks its own address range.
 * That is O(R log R); the edges are then added region by region, stream by
 * stream, as before.
 */
static enum tide_status add_reuse_edges(struct tide_graph *graph, struct tide_memplan *plan,
                                        const uint32_t *first_region, struct tide_error *err)
{
    uint32_t n_regions = plan->n_regions;
    const struct tide_memplan_region *regions = plan->regions;
    uint32_t *access = NULL;
    uint32_t *ids = malloc(((size_t)n_regions + 1) * sizeof(*ids));
    uint32_t *by_first = malloc(((size_t)n_regions + 1) * sizeof(*by_first));
    uint32_t *by_last = malloc(((size_t)n_regions + 1) * sizeof(*by_last));
    uint32_t *count = malloc(((size_t)plan->n_order + 2) * sizeof(*count));
    uint32_t *latest = calloc((size_t)n_regions * N_STREAMS + 1, sizeof(*latest));
    uint64_t *coords = malloc(((size_t)n_regions * 2 + 1) * sizeof(*coords));
    struct latest_tree trees[N_STREAMS] = {{0}};
    enum tide_status st = TIDE_OK;
    if (!ids || !by_first || !by_last || !count || !latest || !coords ||
        collect_accesses(graph, plan, first_region, &access) != TIDE_OK) {
        st = tide_error_set(err, TIDE_NOMEM, "memplan: out of memory for reuse edges");
        goto done;
    }

    /* The regions that can share addresses, and the elementary segments of their ranges. */
    uint32_t n = 0, n_coords = 0;
    for (uint32_t r = 0; r < n_regions; r++) {
        if (regions[r].persistent || regions[r].bytes == 0)
            continue;
        ids[n++] = r;
        coords[n_coords++] = regions[r].offset;
        coords[n_coords++] = regions[r].offset + regions[r].bytes;
    }
    qsort(coords, n_coords, sizeof(*coords), compare_u64);
    uint32_t distinct = 0;
    for (uint32_t i = 0; i < n_coords; i++) {
        if (distinct == 0 || coords[i] != coords[distinct - 1])
            coords[distinct++] = coords[i];
    }
    uint32_t leaves = 1;
    while (leaves < distinct)
        leaves *= 2;
    for (int s = 0; s < N_STREAMS; s++) {
        trees[s].leaves = leaves;
        trees[s].tag = calloc(2 * (size_t)leaves, sizeof(*trees[s].tag));
        trees[s].most = calloc(2 * (size_t)leaves, sizeof(*trees[s].most));
        if (!trees[s].tag || !trees[s].most) {
            st = tide_error_set(err, TIDE_NOMEM, "memplan: out of memory for reuse edges");
            goto done;
        }
    }
    sort_regions_by(plan, ids, n, false, count, by_first);
    sort_regions_by(plan, ids, n, true, count, by_last);

    /* The sweep: each region asks after every region that died before it started recorded. */
    uint32_t dead = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = by_first[i];
        const struct tide_memplan_region *r = &regions[x];
        for (; dead < n && regions[by_last[dead]].last < r->first; dead++) {
            uint32_t q = by_last[dead];
            uint32_t lo = coord_of(coords, distinct, regions[q].offset);
            uint32_t hi = coord_of(coords, distinct, regions[q].offset + regions[q].bytes);
            for (int s = 0; s < N_STREAMS; s++) {
                uint32_t at = access[(size_t)q * N_STREAMS + s];
                if (at)
                    latest_tree_record(&trees[s], lo, hi, at);
            }
        }
        uint32_t lo = coord_of(coords, distinct, r->offset);
        uint32_t hi = coord_of(coords, distinct, r->offset + r->bytes);
        for (int s = 0; s < N_STREAMS; s++) {
            if (s == graph->nodes[r->node].stream)
                continue;
            uint32_t at = latest_tree_query(&trees[s], lo, hi);
            /* The input it overwrites dies at its first position, not before: ask it too. */
            if (r->inplace_of != TIDE_MEMPLAN_NO_REGION &&
                access[(size_t)r->inplace_of * N_STREAMS + s] > at)
                at = access[(size_t)r->inplace_of * N_STREAMS + s];
            latest[(size_t)x * N_STREAMS + s] = at;
        }
    }

    for (uint32_t i = 0; i < n_regions && st == TIDE_OK; i++) {
        const struct tide_memplan_region *r = &regions[i];
        if (r->persistent || r->bytes == 0)
            continue;
        uint32_t producer = r->node;
        for (int s = 0; s < N_STREAMS && st == TIDE_OK; s++) {
            uint32_t at = latest[(size_t)i * N_STREAMS + s]; /* 1 + position; 0: none */
            if (s == graph->nodes[producer].stream || !at)
                continue;
            uint32_t reader = plan->order[at - 1];
            const struct tide_node *pn = &graph->nodes[producer];
            bool present = false;
            for (uint32_t c = 0; c < pn->n_controls && !present; c++)
                present = pn->controls[c] == reader;
            if (present)
                continue;
            st = tide_graph_add_control(graph, producer, reader, err);
            if (st == TIDE_OK)
                plan->reuse_edges++;
        }
    }

done:
    for (int s = 0; s < N_STREAMS; s++) {
        free(trees[s].tag);
        free(trees[s].most);
    }
    free(access);
    free(ids);
    free(by_first);
    free(by_last);
    free(count);
    free(latest);
    free(coords);
    return st;
}

/* ============================================================================
 * Pass 4: death lists
 * ========================================================================== */

static enum tide_status build_deaths(struct tide_memplan *plan, struct tide_error *err)
{
    uint32_t n = plan->n_order;
    plan->death_offsets = calloc((size_t)n + 2, sizeof(*plan->death_offsets));
    plan->deaths = malloc(((size_t)plan->n_regions + 1) * sizeof(*plan->deaths));
    if (!plan->death_offsets || !plan->deaths)
        return tide_error_set(err, TIDE_NOMEM, "memplan: out of memory for death lists");
    for (uint32_t r = 0; r < plan->n_regions; r++) {
        if (!plan->regions[r].persistent)
            plan->death_offsets[plan->regions[r].last + 1]++;
    }
    for (uint32_t p = 0; p < n; p++)
        plan->death_offsets[p + 1] += plan->death_offsets[p];
    uint32_t *fill = malloc(((size_t)n + 1) * sizeof(*fill));
    if (!fill)
        return tide_error_set(err, TIDE_NOMEM, "memplan: out of memory for death lists");
    memcpy(fill, plan->death_offsets, ((size_t)n + 1) * sizeof(*fill));
    for (uint32_t r = 0; r < plan->n_regions; r++) {
        if (!plan->regions[r].persistent)
            plan->deaths[fill[plan->regions[r].last]++] = r;
    }
    free(fill);
    return TIDE_OK;
}

/* ============================================================================
 * Pass 5: the host arena, and the entry point
 * ========================================================================== */

/* Appends a host buffer of at least nbytes (and at least one alignment unit) at the top. */
static enum tide_status host_push(struct tide_memplan *plan, uint32_t node, uint32_t output,
                                  uint64_t nbytes, struct tide_error *err)
{
    uint64_t bytes;
    if (!round_up(nbytes ? nbytes : 1, TIDE_MEMPLAN_HOST_ALIGNMENT, &bytes) ||
        plan->host_bytes > UINT64_MAX - bytes)
        return tide_error_set(err, TIDE_LIMIT, "memplan: the host arena overflows 64 bits");
    plan->host_buffers[plan->n_host_buffers++] = (struct tide_memplan_host_buffer){
        .node = node, .output = output, .offset = plan->host_bytes, .bytes = bytes};
    plan->host_bytes += bytes;
    return TIDE_OK;
}

static enum tide_status plan_host(const struct tide_graph *graph, struct tide_memplan *plan,
                                  struct tide_error *err)
{
    uint64_t count = 1; /* the scratch buffer */
    uint64_t scratch = 0;
    for (uint32_t p = 0; p < plan->n_order; p++) {
        const struct tide_node *node = &graph->nodes[plan->order[p]];
        count += node->op == TIDE_OP_PLACEHOLDER;
        for (uint32_t k = 0; k < node->n_outputs; k++)
            count += node->outputs[k].home == TIDE_HOME_HOST;
        if (is_persistent_op(node->op) && node->n_outputs &&
            node->outputs[0].home == TIDE_HOME_DEVICE && node->outputs[0].nbytes > scratch)
            scratch = node->outputs[0].nbytes;
    }
    plan->host_buffers = calloc(count, sizeof(*plan->host_buffers));
    if (!plan->host_buffers)
        return tide_error_set(err, TIDE_NOMEM,
                              "memplan: out of memory for %" PRIu64 " host buffers", count);
    enum tide_status st = TIDE_OK;
    for (uint32_t p = 0; p < plan->n_order && st == TIDE_OK; p++) {
        uint32_t v = plan->order[p];
        const struct tide_node *node = &graph->nodes[v];
        for (uint32_t k = 0; k < node->n_outputs && st == TIDE_OK; k++) {
            if (node->outputs[k].home != TIDE_HOME_HOST)
                continue;
            plan->host_home_bytes += node->outputs[k].nbytes;
            st = host_push(plan, v, k, node->outputs[k].nbytes, err);
        }
        if (st == TIDE_OK && node->op == TIDE_OP_PLACEHOLDER)
            st = host_push(plan, v, TIDE_MEMPLAN_STAGING,
                           node->n_outputs ? node->outputs[0].nbytes : 0, err);
    }
    if (st == TIDE_OK && scratch)
        st = host_push(plan, TIDE_MEMPLAN_SCRATCH, 0, scratch, err);
    return st;
}

enum tide_status tide_memplan_build(struct tide_graph *graph, const uint32_t *order, uint32_t n,
                                    const struct tide_memplan_options *options,
                                    struct tide_memplan *out, struct tide_error *err)
{
    static const struct tide_memplan_options no_options;
    if (!options)
        options = &no_options;
    uint64_t alignment = options->alignment ? options->alignment : DEFAULT_ALIGNMENT;
    memset(out, 0, sizeof(*out));
    struct tide_memplan *plan = out;
    size_t nn = (size_t)graph->n_nodes + 1;
    plan->n_order = n;
    plan->order = malloc(((size_t)n + 1) * sizeof(*plan->order));
    plan->position = malloc(nn * sizeof(*plan->position));
    plan->workspace_offset = malloc(nn * sizeof(*plan->workspace_offset));
    plan->workspace_bytes = calloc(nn, sizeof(*plan->workspace_bytes));
    uint32_t *first_region = malloc(nn * sizeof(*first_region));
    enum tide_status st = TIDE_OK;
    if (!plan->order || !plan->position || !plan->workspace_offset || !plan->workspace_bytes ||
        !first_region) {
        st = tide_error_set(err, TIDE_NOMEM, "memplan: out of memory for %u nodes", graph->n_nodes);
        goto fail;
    }
    for (uint32_t v = 0; v < graph->n_nodes; v++)
        plan->workspace_offset[v] = TIDE_NO_OFFSET;

    st = check_order(graph, order, n, plan, err);
    if (st == TIDE_OK)
        st = build_regions(graph, options, alignment, plan, err);
    if (st != TIDE_OK)
        goto fail;
    for (uint32_t r = plan->n_regions; r-- > 0;)
        first_region[plan->regions[r].node] = r;
    extend_to_readers(graph, plan, first_region);
    pick_inplace(graph, plan, first_region);
    st = place(plan, err);
    if (st == TIDE_OK)
        st = add_reuse_edges(graph, plan, first_region, err);
    if (st == TIDE_OK)
        st = build_deaths(plan, err);
    if (st == TIDE_OK)
        st = plan_host(graph, plan, err);
    if (st != TIDE_OK)
        goto fail;

    for (uint32_t r = 0; r < plan->n_regions; r++) {
        const struct tide_memplan_region *region = &plan->regions[r];
        if (region->output == UINT32_MAX)
            plan->workspace_offset[region->node] = region->offset;
        else
            graph->nodes[region->node].outputs[region->output].offset = region->offset;
    }
    free(first_region);
    return TIDE_OK;

fail:
    free(first_region);
    tide_memplan_release(plan);
    return st;
}
