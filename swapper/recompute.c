/* SPDX-License-Identifier: MIT */
/*
 * recompute.c: the RECOMPUTE memory action — a feature map whose producer is
 * cheap to run (TIDE_OP_F_CHEAP, graph/ops.def) is not kept or copied for
 * its far uses: the producer runs a second time right before them (an entry
 * of actions.def, ahead of SWAP).
 *
 * Chen et al. ("Training deep nets with sublinear memory cost") and Meng et
 * al. drop cheap activations after their forward use and make them again in
 * the backward pass. Here the uses of a feature map are split as SWAP splits
 * them (tide_place_group_uses, the producer first): the production group
 * reads the tensor itself, which then dies at its last near use; every far
 * group gets a copy of the producer — same op, same attributes, on the
 * compute stream — where SWAP would put the group's SwapIn: at the start of
 * its load partition (the first use's partition, or prefetch partitions
 * before it; key tide_place_key_before), and the group's uses read the
 * copy. Nothing is copied between host and device; the bytes the copies
 * make are the cost (tide__action_cost.remade).
 *
 * The copy must make the same bits: the same kernel on the same input bytes.
 * So it reads, for every input of the producer, a version that holds those
 * bytes at the copy's position without being stretched — RECOMPUTE claims a
 * tensor only when each input is one of:
 *  - a device-homed Variable or Const that no update has written before the
 *    copy runs, or a tensor the caller pinned;
 *  - a tensor that stays on the device from its producer to its last use
 *    (FIXED, or a feature map with one use group: KEEP) whose last use is
 *    at or after the copy;
 *  - a host-homed Variable or Const likewise unwritten, whose Fetch (one of
 *    placement's) is loaded by then and read until then;
 *  - a feature map split into groups whose production group's last use is
 *    at or after the copy (the original), or one of whose far groups is
 *    loaded by then (its load partition starts at or before the copy) and
 *    read until then: that group's SwapIn or copy, which sits at the same
 *    place whichever action took the tensor (or, when the choice forbids
 *    swapping, the kept original). The input must be an earlier tensor than
 *    this one, so that its nodes are in the graph (and ahead in the order
 *    at an equal key) when this one's copy is made;
 *  - else, when the input is a host-homed Variable or Const, or a swapped
 *    feature map that RECOMPUTE never takes, its next load after the copy,
 *    pulled up to the copy's position (see "Pulled loads");
 *  - else, the output of a producer that could itself run again (a chain,
 *    below), at most MAX_DEPTH producers back: ResNet's Relu reads a
 *    BatchNorm output nothing keeps, which is made again from the
 *    convolution output that BatchNormGrad loads anyway.
 * And it must be worth it: the copies' estimated time on the compute stream
 * (tide_recompute_cost_ms) below the SwapIn's (tide_swap_cost_ms), under
 * the planner's device rates (tide_plan_env.rates); and the tensor no
 * larger than the choice's recompute_limit, if it has one (a copy holds
 * its tensor, its chain and its pulled inputs at once: at tight budgets the
 * search recomputes only small tensors, swapper.c).
 *
 * Whether an input is swapped or recomputed does not matter to the test, so
 * a claim never depends on another tensor's claim (nor on a pull) and the
 * simulation stays linear. The producer must have no workspace, and one
 * output or MaxPool2D's two (copy_outputs_ok). The copy adds its output
 * from itself to the group's last use, exactly as memplan places it, and
 * its other outputs, which nothing reads, at its key; a chain's links, and
 * the unread outputs of copies that share a key (MaxPool2D's maximum and
 * argmax both made again before one group), live one after the other at
 * the same key but are counted at once, so there the simulation may exceed
 * memplan's most live bytes by their size (estimate.c).
 *
 * Dropout draws its mask from the job's seed, the step and the node's name
 * and seed attribute (kernels/dropout-hash.h); a copy has another name, so
 * a Dropout is run again as DropoutGrad naming the original node as its
 * forward: the same kernel body, the same mask, x * mask / (1 - rate).
 *
 * A copy's node->subject is the original producer, as a memory op's is the
 * node whose output it moves.
 */
#include "swapper/swapper-impl.h"

#include <string.h>

/* The most inputs a recomputed producer may have (AddN and Concat take any number). */
#define MAX_INPUTS 8

/* ============================================================================
 * Inputs
 * ========================================================================== */

/*
 * The original tensor behind an edge of a rewritten graph: a Fetch reads a
 * Variable or Const, a SwapIn the SwapOut of a tensor, a copy stands for its
 * subject's output. The planner's graph is the one being rewritten when the
 * chosen plan is applied, so a producer's inputs may already point at them.
 */
static struct tide_edge original_edge(const struct tide__planner *pl,
                                      const struct tide_graph *graph, struct tide_edge e)
{
    while (e.node >= pl->n_original) {
        const struct tide_node *node = &graph->nodes[e.node];
        if (node->op == TIDE_OP_FETCH)
            e = node->inputs[0];
        else if (node->op == TIDE_OP_SWAP_IN)
            e = graph->nodes[node->inputs[0].node].inputs[0];
        else
            e = (struct tide_edge){node->subject, e.output};
    }
    return e;
}

/* Where a copy finds one input at position at: the original, or a far group's version. */
struct source {
    bool found;
    bool original;  /* the tensor itself */
    uint32_t group; /* else: the group (of the scratch split) whose version to read */
    bool pulled;    /* that group's SwapIn, moved up to at (see "Pulled loads") */
    uint32_t use;   /* the group's first use, indexed as pl->pulled */
};

/* True if an update writes Variable or Const tensor x in place before position at. */
static bool written_before(const struct tide__planner *pl, uint32_t x, uint32_t at)
{
    const struct tide_tensor_life *life = &pl->part.tensors[x];
    const uint8_t *writes = pl->use_writes + (life->uses - pl->part.tensors[0].uses);
    for (uint32_t u = 0; u < life->n_uses && pl->part.position[life->uses[u]] < at; u++) {
        if (writes[u])
            return true;
    }
    return false;
}

/* The tensor index of an original edge. */
static uint32_t tensor_of(const struct tide__planner *pl, struct tide_edge e)
{
    return pl->part.tensor_of[e.node] + e.output;
}

/* True if node may run again in a copy: CHEAP, no workspace, few inputs, a kernel. */
static bool rerunnable(const struct tide__planner *pl, uint32_t id)
{
    const struct tide_node *node = &pl->graph->nodes[id];
    const struct tide_op_info *info = tide_op_info(node->op);
    return (info->flags & TIDE_OP_F_CHEAP) &&
           !(info->flags & (TIDE_OP_F_SOURCE | TIDE_OP_F_MEMORY | TIDE_OP_F_UPDATE)) &&
           node->n_inputs <= MAX_INPUTS && pl->workspace[id] == 0;
}

/*
 * True if RECOMPUTE may copy node id for what it makes: a node of one
 * output, or MaxPool2D with its two. A copy makes all of its producer's outputs, and the
 * ones not claimed die at it (recompute_estimate counts them): MaxPool2D's
 * maximum and argmax are of one shape, so a copy that remakes either makes
 * the other at the same cost, and the search again that MaxPool2DGrad once
 * did itself becomes the copy that remakes the argmax (the planner's choice
 * against keeping or swapping it). BatchNorm's output stays what it was, a
 * link of a chain only: its copies' statistics are claimed by nothing.
 */
static bool copy_outputs_ok(const struct tide_node *node)
{
    return node->n_outputs == 1 || node->op == TIDE_OP_MAX_POOL2D;
}

/* True if RECOMPUTE can never take an output of node id (see recompute_claims). */
static bool never_recomputed(const struct tide__planner *pl, uint32_t id)
{
    return !rerunnable(pl, id) || !copy_outputs_ok(&pl->graph->nodes[id]);
}

/*
 * The first group of x's split, from group `from` on, whose loaded copy (a
 * Fetch or SwapIn) is on the device at position at: loaded at the start of
 * its load partition, at or before at, and read until its last use, at or
 * after at. UINT32_MAX if none.
 */
static uint32_t loaded_group(const struct tide__planner *pl, const struct tide_tensor_life *life,
                             const struct tide_use_group *groups, uint32_t from, uint32_t n_groups,
                             uint32_t at)
{
    const struct tide_partitioning *p = &pl->part;
    for (uint32_t g = from; g < n_groups; g++) {
        uint32_t end = p->position[life->uses[groups[g].first + groups[g].n_uses - 1]];
        if ((uint64_t)groups[g].load_partition * p->partition_size <= at && at <= end)
            return g;
    }
    return UINT32_MAX;
}

/* The first group of the split, from group `from` on, loaded after position at; else UINT32_MAX. */
static uint32_t next_load(const struct tide__planner *pl, const struct tide_use_group *groups,
                          uint32_t from, uint32_t n_groups, uint32_t at)
{
    for (uint32_t g = from; g < n_groups; g++) {
        if ((uint64_t)groups[g].load_partition * pl->part.partition_size > at)
            return g;
    }
    return UINT32_MAX;
}

/* Group g's loaded copy as a source: pulled up to at if it is loaded after at. */
static struct source pulled_or_loaded(const struct tide__planner *pl,
                                      const struct tide_tensor_life *life,
                                      const struct tide_use_group *groups, uint32_t g, uint32_t at)
{
    const struct tide_partitioning *p = &pl->part;
    if (g == UINT32_MAX)
        return (struct source){0};
    return (struct source){
        .found = true,
        .group = g,
        .pulled = (uint64_t)groups[g].load_partition * p->partition_size > at,
        .use = (uint32_t)(life->uses - p->tensors[0].uses) + groups[g].first,
    };
}

/*
 * Which version of tensor x (an input of tensor `self`'s producer or of its
 * chain) holds its bytes at position at under choice, as the file comment
 * lists them. groups is scratch for x's use groups.
 */
static struct source find_source(const struct tide__planner *pl, const struct tide__choice *choice,
                                 uint32_t x, uint32_t self, uint32_t at,
                                 struct tide_use_group *groups)
{
    const struct tide_partitioning *p = &pl->part;
    const struct tide_tensor_life *life = &p->tensors[x];
    struct source none = {0}, original = {.found = true, .original = true};
    uint32_t last =
        life->n_uses ? p->position[life->uses[life->n_uses - 1]] : p->position[life->tensor.node];
    uint32_t n_groups = 1, g;
    switch (pl->kinds[x]) {
    case TIDE__TENSOR_PERSISTENT:
        return original;
    case TIDE__TENSOR_STATE:
        if (written_before(pl, x, at))
            return none;
        if (!choice->vars_host)
            return original;
        /* Host-homed: a Fetch of placement's that holds it at `at`, if one does. */
        n_groups =
            tide_place_group_uses(life, choice->var_threshold, choice->prefetch, false, groups);
        g = loaded_group(pl, life, groups, 0, n_groups, at);
        if (g == UINT32_MAX)
            g = next_load(pl, groups, 0, n_groups, at);
        return pulled_or_loaded(pl, life, groups, g, at);
    case TIDE__TENSOR_FIXED:
        return at <= last ? original : none;
    case TIDE__TENSOR_FEATURE:
        break;
    default: /* TIDE__TENSOR_HOST: a SwapOut's output, never on the device */
        return none;
    }
    if (choice->swap_threshold != TIDE__NEVER)
        n_groups =
            tide_place_group_uses(life, choice->swap_threshold, choice->prefetch, true, groups);
    bool keep_split = choice->no_swap && never_recomputed(pl, life->tensor.node);
    if (n_groups == 1 || keep_split)
        return at <= last ? original : none; /* KEEP */
    if (x >= self)
        return none;
    if (groups[0].n_uses && at <= p->position[life->uses[groups[0].n_uses - 1]])
        return original;
    /* A SwapIn or a copy (both at the load partition's start), or the original if kept. */
    g = loaded_group(pl, life, groups, 1, n_groups, at);
    /* Else the next far group's SwapIn, pulled up to at, where SWAP takes the tensor. */
    if (g == UINT32_MAX && !choice->no_swap && never_recomputed(pl, life->tensor.node))
        g = next_load(pl, groups, 1, n_groups, at);
    return pulled_or_loaded(pl, life, groups, g, at);
}

/* ============================================================================
 * Chains
 *
 * An input that no version holds at the copy's position may itself be made
 * again, when its producer could be: ResNet's Relu reads a BatchNorm output
 * that nothing keeps, and the BatchNorm reads a convolution's output that
 * its gradient needs anyway. A chain is the producers to run again before
 * the tensor's own copy, in an order where each comes after the ones it
 * reads (depth first, inputs first), each once; its inputs' inputs must be
 * found (find_source), at most MAX_DEPTH producers back.
 * ========================================================================== */

#define MAX_DEPTH 3
#define MAX_CHAIN 8

struct chain {
    uint32_t n;
    uint32_t nodes[MAX_CHAIN]; /* original producers, inputs first */
};

static bool chain_has(const struct chain *c, uint32_t node)
{
    for (uint32_t i = 0; i < c->n; i++) {
        if (c->nodes[i] == node)
            return true;
    }
    return false;
}

/*
 * Adds to c what running node `id` again at position at needs: each input
 * found where it is, or its producer run again first. self is the tensor
 * the chain ends in.
 */
static bool chain_add(const struct tide__planner *pl, const struct tide__choice *choice,
                      uint32_t id, uint32_t self, uint32_t at, uint32_t depth, struct chain *c,
                      struct tide_use_group *scratch)
{
    const struct tide_node *node = &pl->graph->nodes[id];
    for (uint32_t i = 0; i < node->n_inputs; i++) {
        struct tide_edge in = original_edge(pl, pl->graph, node->inputs[i]);
        uint32_t x = tensor_of(pl, in);
        if (chain_has(c, in.node) || find_source(pl, choice, x, self, at, scratch).found)
            continue;
        if (depth >= MAX_DEPTH || pl->kinds[x] != TIDE__TENSOR_FEATURE ||
            !rerunnable(pl, in.node) ||
            !chain_add(pl, choice, in.node, self, at, depth + 1, c, scratch) || c->n == MAX_CHAIN)
            return false;
        c->nodes[c->n++] = in.node;
    }
    return true;
}

/*
 * Where far group g's copy runs: at the start of the group's load partition,
 * where SWAP would put its SwapIn (the first use's partition, or prefetch
 * partitions before it), so that an input finds a tensor's version at the
 * same place whichever of the two actions took the tensor.
 */
static uint32_t copy_position(const struct tide__action_tensor *t, uint32_t g)
{
    return t->groups[g].load_partition * t->pl->part.partition_size;
}

/* The chain before far group g's copy of t (*c), or false when t cannot be made there. */
static bool chain_of(const struct tide__action_tensor *t, uint32_t g, struct chain *c)
{
    const struct tide__planner *pl = t->pl;
    /* Scratch of the planner's that no caller of an action holds (swapper-impl.h). */
    struct tide_use_group *scratch = ((struct tide__planner *)pl)->input_groups;
    uint32_t at = copy_position(t, g);
    c->n = 0;
    return chain_add(pl, t->choice, t->life->tensor.node, t->tensor, at, 0, c, scratch);
}

/* ============================================================================
 * Pulled loads
 *
 * At the small partitions of tight budgets, a copy's position (where SWAP
 * would load the tensor: its far group's first use) often comes a few nodes
 * before any version of the convolution output its chain starts from is on
 * the device: ResNet's Relu is first read again by the next convolution's
 * filter gradient, its convolution output only by the BatchNormGrad after
 * it. A copy may then read the convolution output's next SwapIn moved up to
 * its own position: that tensor is loaded anyway, a few nodes earlier, and
 * the Relu's (and BatchNorm's) bytes are not copied at all.
 *
 * Likewise a host-homed Variable or Const (a BatchNorm's scale and shift)
 * whose next Fetch comes after the copy, unless an update writes it before
 * then. Only such sources and feature maps that RECOMPUTE never takes
 * (never_recomputed) and SWAP does are pulled, so a pull never changes a
 * claim: a claim asks only whether a group is loaded by the copy's
 * position or later, which does not depend on pulls. Before a choice with
 * RECOMPUTE is simulated or rewritten, tide__recompute_pulls walks every
 * tensor RECOMPUTE claims and writes, per loaded group of an input, the
 * earliest position a copy reads it at; SWAP puts the group's SwapIn there
 * (tide__action_load_position) and placement its Fetch
 * (tide_place_options.pulled; estimate.c likewise), once however many
 * copies read it.
 * ========================================================================== */

static bool recompute_claims(const struct tide__action_tensor *t);

/*
 * Lowers pulled[use] to far group g's copy position for every input of the
 * copies that group gets (the chain's and the producer's) that add_copy will
 * find in a pulled SwapIn.
 */
static void record_pulls(const struct tide__action_tensor *t, uint32_t g, uint32_t *pulled)
{
    const struct tide__planner *pl = t->pl;
    struct tide_use_group *scratch = ((struct tide__planner *)pl)->input_groups;
    uint32_t at = copy_position(t, g);
    struct chain c;
    if (!chain_of(t, g, &c))
        return;
    c.nodes[c.n] = t->life->tensor.node;
    for (uint32_t k = 0; k <= c.n; k++) {
        const struct tide_node *node = &pl->graph->nodes[c.nodes[k]];
        for (uint32_t i = 0; i < node->n_inputs; i++) {
            struct tide_edge in = original_edge(pl, pl->graph, node->inputs[i]);
            if (chain_has(&c, in.node))
                continue;
            struct source s = find_source(pl, t->choice, tensor_of(pl, in), t->tensor, at, scratch);
            if (s.pulled && at < pulled[s.use])
                pulled[s.use] = at;
        }
    }
}

void tide__recompute_pulls(const struct tide__planner *pl, const struct tide__choice *choice)
{
    const struct tide_partitioning *p = &pl->part;
    size_t n_uses = 0;
    for (uint32_t x = 0; x < p->n_tensors; x++)
        n_uses += p->tensors[x].n_uses;
    memset(pl->pulled, 0xff, n_uses * sizeof(*pl->pulled));
    /* The planner's scratch for a tensor's own groups: no caller holds it now. */
    struct tide_use_group *groups = ((struct tide__planner *)pl)->groups;
    for (uint32_t x = 0; x < p->n_tensors; x++) {
        if (pl->kinds[x] != TIDE__TENSOR_FEATURE || never_recomputed(pl, p->tensors[x].tensor.node))
            continue;
        struct tide__action_tensor t;
        tide__action_tensor_init(&t, pl, choice, x, groups);
        if (!recompute_claims(&t))
            continue;
        for (uint32_t g = 1; g < t.n_groups; g++)
            record_pulls(&t, g, pl->pulled);
    }
}

/* ============================================================================
 * The action
 * ========================================================================== */

static bool recompute_claims(const struct tide__action_tensor *t)
{
    const struct tide__planner *pl = t->pl;
    if (!t->choice->recompute || t->n_groups < 2 ||
        (t->choice->recompute_limit && t->aligned > t->choice->recompute_limit))
        return false;
    uint32_t id = t->life->tensor.node;
    if (never_recomputed(pl, id))
        return false;
    struct chain c;
    for (uint32_t g = 1; g < t->n_groups; g++) {
        if (!chain_of(t, g, &c))
            return false;
        /* Worth it only where running the chain again beats copying the tensor in. */
        double ms = tide_recompute_cost_ms(pl->graph, &pl->graph->nodes[id], pl->env->rates);
        for (uint32_t i = 0; i < c.n; i++)
            ms += tide_recompute_cost_ms(pl->graph, &pl->graph->nodes[c.nodes[i]], pl->env->rates);
        if (ms >= tide_swap_cost_ms(t->bytes, pl->env->rates))
            return false;
    }
    return true;
}

/* Bytes of every output of original node id, as made and as placed. */
static void outputs_bytes(const struct tide__planner *pl, uint32_t id, uint64_t *bytes,
                          uint64_t *aligned)
{
    uint32_t first = pl->part.tensor_of[id];
    *bytes = *aligned = 0;
    for (uint32_t k = 0; k < pl->graph->nodes[id].n_outputs; k++) {
        *bytes += pl->tensor_bytes[first + k];
        *aligned += pl->tensor_aligned[first + k];
    }
}

/*
 * The tensor from its producer to its last near use; each copy from itself
 * to its group's end; a chain's outputs at the copy's key (they live from
 * their copy to the next link, all right before the group's first use).
 */
static void recompute_estimate(const struct tide__action_tensor *t, struct tide__live *live,
                               struct tide__action_cost *cost)
{
    const struct tide_partitioning *p = &t->pl->part;
    const struct tide_tensor_life *life = t->life;
    const struct tide_use_group *groups = t->groups;
    uint64_t near_end = tide_place_key_at(t->made);
    if (groups[0].n_uses)
        near_end = tide_place_key_at(p->position[life->uses[groups[0].n_uses - 1]]);
    tide__live_add(live, tide_place_key_at(t->made), near_end, t->aligned);
    for (uint32_t g = 1; g < t->n_groups; g++) {
        uint32_t at = copy_position(t, g);
        uint32_t end = p->position[life->uses[groups[g].first + groups[g].n_uses - 1]];
        tide__live_add(live, tide_place_key_before(at), tide_place_key_at(end), t->aligned);
        cost->remade += t->bytes;
        /* The copy's other outputs (MaxPool2D's), read by nothing: at the copy's key only. */
        uint32_t first = p->tensor_of[life->tensor.node];
        for (uint32_t k = 0; k < t->pl->graph->nodes[life->tensor.node].n_outputs; k++) {
            if (k == life->tensor.output)
                continue;
            tide__live_add(live, tide_place_key_before(at), tide_place_key_before(at),
                           t->pl->tensor_aligned[first + k]);
            cost->remade += t->pl->tensor_bytes[first + k];
        }
        struct chain c;
        chain_of(t, g, &c);
        for (uint32_t i = 0; i < c.n; i++) {
            uint64_t bytes, aligned;
            outputs_bytes(t->pl, c.nodes[i], &bytes, &aligned);
            tide__live_add(live, tide_place_key_before(at), tide_place_key_before(at), aligned);
            cost->remade += bytes;
        }
    }
}

/*
 * The edge that group g of tensor x's uses reads now that x's own action has
 * rewritten them: the version find_source chose. TIDE_NO_NODE if none.
 */
static struct tide_edge version_of(const struct tide__planner *pl, const struct tide_graph *graph,
                                   struct tide_edge x, const struct tide_use_group *group)
{
    const struct tide_tensor_life *life = &pl->part.tensors[tensor_of(pl, x)];
    const struct tide_node *use = &graph->nodes[life->uses[group->first]];
    for (uint32_t i = 0; i < use->n_inputs; i++) {
        struct tide_edge e = use->inputs[i];
        struct tide_edge o = original_edge(pl, graph, e);
        if (e.node >= pl->n_original && o.node == x.node && o.output == x.output)
            return e;
    }
    /* Kept (no swapping, not recomputed): the group still reads the original. */
    for (uint32_t i = 0; i < use->n_inputs; i++) {
        if (use->inputs[i].node == x.node && use->inputs[i].output == x.output)
            return x;
    }
    return (struct tide_edge){TIDE_NO_NODE, 0};
}

/*
 * A copy of original node id for far group g of t, run at position at: its
 * inputs the chain's copies made before it (made[i] the copy of c->nodes[i])
 * or the versions that hold their bytes there; its attributes and outputs
 * the original's (a Dropout becomes the DropoutGrad that draws its mask).
 */
static enum tide_status add_copy(const struct tide__action_tensor *t, struct tide_graph *graph,
                                 uint32_t id, uint32_t g, const struct chain *c,
                                 const uint32_t *made, uint32_t *copy, struct tide_error *err)
{
    const struct tide__planner *pl = t->pl;
    struct tide_use_group *scratch = ((struct tide__planner *)pl)->input_groups;
    uint32_t at = copy_position(t, g);
    uint32_t n_inputs = graph->nodes[id].n_inputs;
    struct tide_edge inputs[MAX_INPUTS];
    for (uint32_t i = 0; i < n_inputs; i++) {
        struct tide_edge in = original_edge(pl, graph, graph->nodes[id].inputs[i]);
        inputs[i] = (struct tide_edge){TIDE_NO_NODE, 0};
        for (uint32_t k = 0; k < c->n; k++) {
            if (c->nodes[k] == in.node)
                inputs[i] = (struct tide_edge){made[k], in.output};
        }
        if (inputs[i].node != TIDE_NO_NODE)
            continue;
        struct source s = find_source(pl, t->choice, tensor_of(pl, in), t->tensor, at, scratch);
        if (s.found)
            inputs[i] = s.original ? in : version_of(pl, graph, in, &scratch[s.group]);
        if (inputs[i].node == TIDE_NO_NODE)
            return tide_error_set(err, TIDE_INTERNAL,
                                  "swapper: no copy of input %u of node \"%s\" at position %u "
                                  "to recompute it from",
                                  i, graph->nodes[id].name, at);
    }
    enum tide_op op = graph->nodes[id].op;
    enum tide_op copy_op = op == TIDE_OP_DROPOUT ? TIDE_OP_DROPOUT_GRAD : op;
    enum tide_status st = tide_place_add_memory_node(graph, copy_op, "recompute", inputs[0],
                                                     (struct tide_edge){id, 0}, g, copy, err);
    if (st == TIDE_OK)
        st = tide_graph_set_inputs(graph, *copy, inputs, n_inputs, err);
    if (st != TIDE_OK)
        return st;
    /* Nodes may have moved: look both up again. */
    const struct tide_node *producer = &graph->nodes[id];
    struct tide_node *node = &graph->nodes[*copy];
    for (uint32_t k = 0; k < node->n_outputs; k++) {
        node->outputs[k] = producer->outputs[k];
        node->outputs[k].home = TIDE_HOME_DEVICE;
        node->outputs[k].offset = 0;
    }
    if (op == TIDE_OP_DROPOUT) {
        double rate = producer->attrs[TIDE_ATTR_DROPOUT_rate].f;
        int64_t seed = producer->attrs[TIDE_ATTR_DROPOUT_seed].i;
        tide_attr_set_float(graph, *copy, TIDE_ATTR_DROPOUT_GRAD_rate, rate);
        tide_attr_set_int(graph, *copy, TIDE_ATTR_DROPOUT_GRAD_seed, seed);
        return tide_attr_set_string(graph, *copy, TIDE_ATTR_DROPOUT_GRAD_forward,
                                    graph->nodes[id].name);
    }
    /* Same op: the values (strings, arrays, tensors) live in the graph's arena, shared. */
    memcpy(node->attrs, producer->attrs, tide_op_info(op)->n_attrs * sizeof(*node->attrs));
    return TIDE_OK;
}

/*
 * Per far group: the chain's copies, then the producer's, right before the
 * group's first use; the group's uses read the last.
 */
static enum tide_status recompute_rewrite(const struct tide__action_tensor *t,
                                          struct tide_graph *graph,
                                          struct tide_place_insertions *inserted,
                                          struct tide__action_cost *cost, struct tide_error *err)
{
    const struct tide__planner *pl = t->pl;
    for (uint32_t g = 1; g < t->n_groups; g++) {
        uint32_t at = copy_position(t, g);
        struct chain c;
        uint32_t made[MAX_CHAIN + 1];
        if (!chain_of(t, g, &c))
            return tide_error_set(err, TIDE_INTERNAL,
                                  "swapper: node \"%s\" cannot be recomputed at position %u",
                                  graph->nodes[t->life->tensor.node].name, at);
        c.nodes[c.n] = t->life->tensor.node;
        for (uint32_t i = 0; i <= c.n; i++) {
            enum tide_status st = add_copy(t, graph, c.nodes[i], g, &c, made, &made[i], err);
            if (st == TIDE_OK)
                st = tide_place_insertions_push(inserted, made[i], t->groups[g].load_partition,
                                                tide_place_key_before(at), err);
            if (st != TIDE_OK)
                return st;
            uint64_t bytes, aligned;
            outputs_bytes(pl, c.nodes[i], &bytes, &aligned);
            cost->remade += bytes;
        }
        tide__action_rewire(graph, t->life, &t->groups[g], t->life->tensor,
                            (struct tide_edge){made[c.n], t->life->tensor.output});
    }
    return TIDE_OK;
}

const struct tide__memory_action tide__action_recompute = {
    .name = "recompute",
    .claims = recompute_claims,
    .estimate = recompute_estimate,
    .rewrite = recompute_rewrite,
};

/* ============================================================================
 * Cost
 * ========================================================================== */

/* Element-wise work per output element of a cheap op: a handful of operations. */
#define OPS_PER_ELEMENT 8.0

double tide_recompute_cost_ms(const struct tide_graph *graph, const struct tide_node *node,
                              const struct tide_device_rates *rates)
{
    struct tide_device_rates r = rates ? *rates : TIDE_DEVICE_RATES_DEFAULT;
    double bytes = 0, elements = 0;
    for (uint32_t i = 0; i < node->n_inputs; i++)
        bytes += (double)tide_graph_input(graph, node, i)->nbytes;
    for (uint32_t k = 0; k < node->n_outputs; k++) {
        bytes += (double)node->outputs[k].nbytes;
        elements += (double)node->outputs[k].nbytes / 4;
    }
    double ms = 0;
    if (r.memory_bytes_per_s > 0)
        ms += bytes / r.memory_bytes_per_s * 1e3;
    if (r.flops_per_s > 0)
        ms += elements * OPS_PER_ELEMENT / r.flops_per_s * 1e3;
    return ms;
}

double tide_swap_cost_ms(uint64_t bytes, const struct tide_device_rates *rates)
{
    struct tide_device_rates r = rates ? *rates : TIDE_DEVICE_RATES_DEFAULT;
    return r.copy_bytes_per_s > 0 ? (double)bytes / r.copy_bytes_per_s * 1e3 : 0;
}
