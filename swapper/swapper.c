/* SPDX-License-Identifier: MIT */
/*
 * swapper.c: tide_plan_memory — admission, the choice of a memory policy,
 * and the plan that fits.
 *
 * DESIGN
 *
 * A choice (swapper-impl.h) says where Variables and Consts live and which
 * feature maps move: vars on the device or the host, the threshold that
 * splits use groups, the prefetch distance. What happens to a feature map
 * with far uses is the business of the memory actions (actions.def,
 * actions.c): the search here knows none of them, it ranks the costs that
 * the simulation sums over them. Planning is:
 *
 *  1. Partition once (the passes never reorder original nodes, so every
 *     trial shares the partitioning) and size every kernel's workspace once.
 *  2. Admission: a kernel's working set — its inputs, outputs and workspace,
 *     which must all be on the device while it runs — larger than the
 *     budget can never fit, whatever is swapped; refuse it naming the node.
 *  3. Candidates, in order of preference:
 *       swap off:  resident feature maps; vars per vars_home (auto: the
 *                  device if it fits, else the host);
 *       swap on:   the policy's threshold and prefetch; vars as above;
 *       swap auto without autotune: off, then on, as above;
 *       swap auto with autotune: every vars home allowed × thresholds
 *                  {0, 1, 2, 4, ..., n_partitions, never} × prefetch
 *                  {0, 1, 2}, sorted — with a device profile
 *                  (policy->profile, swapper/timemodel.h) — by predicted
 *                  step time first (rank_by_time: compute, plus the copies
 *                  that cannot hide under it), then by bytes moved per step
 *                  (fewest first: nothing moved comes first and wins when
 *                  it fits), then
 *                  bytes made again by recomputing actions, then
 *                  the larger prefetch (prefetch moves no bytes, it only
 *                  buys overlap of copies with compute, so among equal
 *                  traffic the most overlap that fits is the best plan),
 *                  then the lower peak.
 *     Recompute allowed (policy AUTO): every candidate that splits feature
 *     maps comes also with the RECOMPUTE action on; where that one's
 *     simulation exceeds the budget and its original's does not, also
 *     with RECOMPUTE limited to tensors of at most budget / 4, / 16, / 64
 *     (the first that fits): a copy's tensor, chain and pulled inputs live
 *     at once, and at tight budgets only small tensors afford that.
 *     Budget 0 means no limit: the first candidate is the plan (nothing
 *     moved, unless the policy asks for swap on or vars on the host).
 *     Partition size 0 (auto) with autotune and a budget: when nothing
 *     moved does not fit (at TIDE_PARTITION_SIZE_DEFAULT; without memory
 *     ops the plan is the same at every size), every size of auto_sizes
 *     (powers of two, 1 to 256) gets its own planner, each chain of its
 *     thresholds is bisected against the budget (search_chains), and the
 *     candidates simulated are ranked together: fewest bytes moved still
 *     decides, then the
 *     larger prefetch distance in nodes (prefetch × partition size: the
 *     compute a copy may overlap), then the lower peak. Small partitions
 *     load tensors right before their use and so reach the lowest peaks
 *     (the floor, on a ResNet); large ones prefetch further ahead.
 *  4. Each candidate is first simulated (estimate.c: the exact live bytes
 *     and bytes moved, in linear time and without a graph — Le et al.'s
 *     simulation-based tuning). One whose live bytes exceed the budget
 *     cannot fit. The first that may fit is built for real on a clone of
 *     the graph (tide_graph_clone), and memplan's peak decides: arena
 *     fragmentation can still push it over, and then the next is tried. At
 *     most MAX_BUILDS are built, then the most aggressive choice as a last
 *     resort, and under autotune then the smallest budget's plan (below).
 *     Under autotune, nothing moved is simulated (and built) before
 *     anything else, and wins when it fits.
 *  5. The candidate that fit is applied to the caller's graph, and its
 *     trial's memplan adopted rather than run again (tide__adopt): the
 *     passes are deterministic, so the rewritten graph is the clone's.
 *     With a profile, the report's predicted_step_ms is the exact replay of
 *     that plan (tide_time_predict), not the ranking's estimate.
 *  6. Host budget (policy->host_budget_bytes): a built plan whose host
 *     arena (host homes, swap slots, staging) exceeds it does not fit, and
 *     the next candidate is tried; when only such plans fit the device, the
 *     refusal names the fewest host bytes one needed and the host budget.
 *
 * Cost: the simulations are linear and cheap (a 2,000-layer ResNet at batch
 * 16, 75,000 nodes before the memory passes: under 1 ms each; about 70
 * candidates at a fixed size, about 200 over the automatic sizes); one or
 * two memplan runs over the swapped graph (100,000 nodes) and the rewrite
 * are most of the rest. Planning that ResNet under a budget that needs
 * swapping takes 0.4 s of CPU at size 64 and 0.5 to 0.8 s with the size
 * searched (docs/benchmarks.md, "Planner").
 *
 * When nothing fits, the smallest budget's plan (the lowest peak of the most
 * aggressive choices — threshold 0, prefetch 0, each vars home allowed —
 * over the sizes searched; see "The smallest budget") reports the budget
 * that would do and the node at its peak, and the caller's
 * graph is left as it was (partition annotations aside). Any other error
 * (out of memory) may leave it partly rewritten: the caller drops the job.
 *
 * Threads: tide_plan_memory keeps no state between calls; one call works
 * on one graph on the caller's thread.
 */
#include "swapper/swapper-impl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Real builds of candidates that the simulation let through, before the last resort. */
#define MAX_BUILDS 6
/* The prefetch distances autotune tries. */
#define MAX_PREFETCH 2

struct tide_memory_policy tide_memory_policy_default(void)
{
    return (struct tide_memory_policy){.partition_size = 0,
                                       .swap = TIDE_SWAP_AUTO,
                                       .swap_threshold = 1,
                                       .prefetch_distance = 1,
                                       .vars_home = TIDE_VARS_HOME_AUTO,
                                       .autotune = true};
}

void tide_memory_plan_release(struct tide_memory_plan *plan)
{
    if (!plan)
        return;
    tide_memplan_release(&plan->memplan);
    free(plan->report.partitions);
    memset(plan, 0, sizeof(*plan));
}

static double clock_ms(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The report's message is shorter than an error's: keep its start. */
static void copy_message(struct tide_plan_report *report, const char *message)
{
    size_t len = strnlen(message, sizeof(report->message) - 1);
    memcpy(report->message, message, len);
    report->message[len] = '\0';
}

static double mib(uint64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

/* ============================================================================
 * Admission
 * ========================================================================== */

struct working_set {
    uint32_t node;
    uint64_t inputs, outputs, workspace;
};

static uint64_t working_set_total(const struct working_set *w)
{
    uint64_t sum = w->inputs + w->outputs;
    sum = sum < w->inputs ? UINT64_MAX : sum;
    return sum + w->workspace < sum ? UINT64_MAX : sum + w->workspace;
}

static uint64_t add_saturating(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

/*
 * The kernel with the largest working set: what it reads (each distinct
 * tensor once), writes and scratches, in aligned bytes, as memplan counts
 * them. Sources and memory ops are not kernels: a source's output is some
 * kernel's input, and memory ops move one tensor each. A kernel that may
 * write its output over an input it reads last (tide__overwrites_input)
 * does so in every plan, and its output costs nothing more.
 */
static struct working_set largest_working_set(const struct tide__planner *pl)
{
    const struct tide_graph *g = pl->graph;
    struct working_set best = {.node = TIDE_NO_NODE};
    for (uint32_t v = 0; v < pl->n_original; v++) {
        const struct tide_node *node = &g->nodes[v];
        if (tide_op_info(node->op)->flags & (TIDE_OP_F_SOURCE | TIDE_OP_F_MEMORY))
            continue;
        struct working_set w = {.node = v, .workspace = tide__align(pl, pl->workspace[v])};
        for (uint32_t i = 0; i < node->n_inputs; i++) {
            bool seen = false;
            for (uint32_t j = 0; j < i && !seen; j++)
                seen = node->inputs[j].node == node->inputs[i].node &&
                       node->inputs[j].output == node->inputs[i].output;
            if (!seen)
                w.inputs =
                    add_saturating(w.inputs, tide__align(pl, tide_graph_input(g, node, i)->nbytes));
        }
        for (uint32_t k = 0; k < node->n_outputs; k++)
            w.outputs = add_saturating(w.outputs, tide__align(pl, node->outputs[k].nbytes));
        for (uint32_t i = 0; i < node->n_inputs; i++) {
            uint32_t t = pl->part.tensor_of[node->inputs[i].node] + node->inputs[i].output;
            const struct tide_tensor_life *life = &pl->part.tensors[t];
            if (life->n_uses && life->uses[life->n_uses - 1] == v &&
                tide__overwrites_input(pl, v, t)) {
                w.outputs = 0;
                break;
            }
        }
        if (best.node == TIDE_NO_NODE || working_set_total(&w) > working_set_total(&best))
            best = w;
    }
    return best;
}

/* ============================================================================
 * Candidates
 * ========================================================================== */

/* The partition sizes of the automatic search; the default first (a plan that moves nothing). */
static const uint32_t auto_sizes[] = {TIDE_PARTITION_SIZE_DEFAULT, 1, 2, 4, 8, 16, 32, 128, 256};
#define MAX_PLANNERS (sizeof(auto_sizes) / sizeof(auto_sizes[0]))

struct candidate {
    struct tide__choice choice;
    uint32_t planner;        /* index into the search's planners */
    uint32_t partition_size; /* that planner's */
    struct tide__estimate estimate;
    bool estimated;
    bool built; /* built for real: a second build would only repeat the result */
    double predicted_ms; /* with a profile: the step time rank_by_time estimates; else 0 */
};

struct candidates {
    struct candidate *items;
    uint32_t n;
    uint32_t cap;
};

static bool candidates_push(struct candidates *list, uint32_t planner, uint32_t partition_size,
                            bool vars_host, uint32_t var_threshold, uint32_t swap_threshold,
                            uint32_t prefetch)
{
    if (list->n == list->cap) {
        uint32_t cap = list->cap ? list->cap * 2 : 16;
        struct candidate *items = realloc(list->items, (size_t)cap * sizeof(*items));
        if (!items)
            return false;
        list->items = items;
        list->cap = cap;
    }
    list->items[list->n++] = (struct candidate){.choice = {.vars_host = vars_host,
                                                           .var_threshold = var_threshold,
                                                           .swap_threshold = swap_threshold,
                                                           .prefetch = prefetch},
                                                .planner = planner,
                                                .partition_size = partition_size};
    return true;
}

/*
 * With a profile, the lowest predicted step time first (rank_by_time). Then
 * the fewest bytes moved; then the fewest bytes made again; then the larger
 * prefetch distance in nodes (prefetch partitions times the partition size:
 * the compute a copy may overlap); then the lower peak; then a fixed order.
 */
static int compare_candidates(const void *a, const void *b)
{
    const struct candidate *x = a, *y = b;
    if (x->predicted_ms != y->predicted_ms)
        return x->predicted_ms < y->predicted_ms ? -1 : 1;
    uint64_t mx = tide__moved_total(&x->estimate.moved), my = tide__moved_total(&y->estimate.moved);
    if (mx != my)
        return mx < my ? -1 : 1;
    uint64_t rx = tide__moved_remade(&x->estimate.moved);
    uint64_t ry = tide__moved_remade(&y->estimate.moved);
    if (rx != ry)
        return rx < ry ? -1 : 1;
    uint64_t px = (uint64_t)x->choice.prefetch * x->partition_size;
    uint64_t py = (uint64_t)y->choice.prefetch * y->partition_size;
    if (px != py)
        return px > py ? -1 : 1;
    if (x->estimate.live_bytes != y->estimate.live_bytes)
        return x->estimate.live_bytes < y->estimate.live_bytes ? -1 : 1;
    if (x->choice.vars_host != y->choice.vars_host)
        return x->choice.vars_host ? 1 : -1;
    if (x->choice.swap_threshold != y->choice.swap_threshold)
        return x->choice.swap_threshold > y->choice.swap_threshold ? -1 : 1;
    if (x->choice.var_threshold != y->choice.var_threshold)
        return x->choice.var_threshold > y->choice.var_threshold ? -1 : 1;
    if (x->partition_size != y->partition_size)
        return x->partition_size > y->partition_size ? -1 : 1;
    return 0;
}

/* The vars homes a policy allows: [0] the device, [1] the host. */
static void vars_homes(const struct tide_memory_policy *policy, bool homes[2])
{
    homes[0] = policy->vars_home != TIDE_VARS_HOME_HOST;   /* device */
    homes[1] = policy->vars_home != TIDE_VARS_HOME_DEVICE; /* host */
}

/*
 * The candidates of a policy on planner i, in order of preference (see the
 * file comment). Only the first planner offers "nothing moved": without a
 * memory op the plan is the same at every partition size.
 */
static bool make_candidates(const struct tide__planner *pl, uint32_t planner,
                            const struct tide_memory_policy *policy, struct candidates *list)
{
    bool homes[2];
    vars_homes(policy, homes);
    uint32_t t = policy->swap_threshold, pf = policy->prefetch_distance;
    uint32_t size = pl->part.partition_size;
    bool ok = true;
    if (policy->recompute == TIDE_RECOMPUTE_CHECKPOINT_SQRT) {
        /* Every use in a later partition is far; far cheap maps are made again, the rest kept. */
        for (int h = 0; h < 2 && ok; h++) {
            if (!homes[h])
                continue;
            ok = candidates_push(list, planner, size, h == 1, 0, 0, 0);
            list->items[list->n - 1].choice.recompute = ok;
            list->items[list->n - 1].choice.no_swap = ok;
        }
        return ok;
    }
    if (policy->swap == TIDE_SWAP_AUTO && policy->autotune && policy->budget_bytes > 0) {
        /* Thresholds past the last partition all mean "one group": one of them will do. */
        uint32_t n_parts = pl->part.n_partitions;
        for (int h = 0; h < 2; h++) {
            if (!homes[h])
                continue;
            for (uint32_t th = 0;; th = th ? th * 2 : 1) {
                /* On the device, "one group" is the nothing-moved candidate below. */
                for (uint32_t p = 0; p <= MAX_PREFETCH && ok && (h == 1 || th < n_parts); p++)
                    ok = candidates_push(list, planner, size, h == 1, th,
                                         th >= n_parts ? TIDE__NEVER : th, p);
                if (th >= n_parts || th >= UINT32_MAX / 2)
                    break;
            }
            /* Swapping nothing with vars on the device: what is left is "nothing moved". */
            if (h == 0 && planner == 0)
                ok = ok && candidates_push(list, planner, size, false, t, TIDE__NEVER, pf);
        }
        return ok;
    }
    bool off = policy->swap != TIDE_SWAP_ON, on = policy->swap != TIDE_SWAP_OFF;
    for (int h = 0; h < 2 && off; h++)
        ok = ok && (!homes[h] || candidates_push(list, planner, size, h == 1, t, TIDE__NEVER, pf));
    for (int h = 0; h < 2 && on; h++)
        ok = ok && (!homes[h] || candidates_push(list, planner, size, h == 1, t, t, pf));
    return ok;
}

static struct tide_memory_policy chosen_policy(const struct tide_memory_policy *policy,
                                               uint64_t budget, const struct candidate *c)
{
    struct tide_memory_policy chosen = *policy;
    const struct tide__choice *ch = &c->choice;
    chosen.budget_bytes = budget;
    chosen.partition_size = c->partition_size;
    chosen.swap = ch->swap_threshold == TIDE__NEVER ? TIDE_SWAP_OFF : TIDE_SWAP_ON;
    chosen.swap_threshold =
        ch->swap_threshold == TIDE__NEVER ? ch->var_threshold : ch->swap_threshold;
    chosen.prefetch_distance = ch->prefetch;
    chosen.vars_home = ch->vars_host ? TIDE_VARS_HOME_HOST : TIDE_VARS_HOME_DEVICE;
    if (!ch->recompute && policy->recompute == TIDE_RECOMPUTE_AUTO)
        chosen.recompute = TIDE_RECOMPUTE_OFF;
    if (ch->no_swap)
        chosen.swap = TIDE_SWAP_OFF;
    return chosen;
}

/* ============================================================================
 * The search's state
 * ========================================================================== */

/* A choice built for real on a clone of the planner's graph. */
struct trial {
    struct tide_graph *graph; /* the clone, rewritten */
    struct tide_memplan plan;
    uint32_t peak_node;
};

static void trial_release(struct trial *t)
{
    tide_memplan_release(&t->plan);
    tide_graph_free(t->graph);
    memset(t, 0, sizeof(*t));
}

struct search {
    struct tide_graph *graph;
    const struct tide_plan_env *env;
    const struct tide_memory_policy *policy;
    uint64_t budget;
    uint32_t n_sizes; /* partition sizes to try: 1 (given or default), or every auto size */
    uint32_t sizes[MAX_PLANNERS];
    uint32_t n_planners; /* initialised so far, in the order of sizes */
    struct tide__planner planners[MAX_PLANNERS];
    struct candidates list;
    struct tide_plan_report *report;
    double compute_ms; /* with a profile: the original kernels' predicted time, summed */
    /*
     * With a host budget: the fewest host bytes of a built plan that fit the
     * device budget but not the host's (0: none was refused for host bytes).
     */
    uint64_t host_refused;
    /* The smallest budget's plan, once found (see "The smallest budget"). */
    bool least_found;
    struct candidate least;
    struct trial least_trial; /* released with the search unless adopted */
};

/* TIDE_CANCELLED when the policy's cancellation hook says so. */
static enum tide_status search_cancelled(const struct search *s, struct tide_error *err)
{
    const struct tide_memory_policy *p = s->policy;
    if (p->cancelled && p->cancelled(p->cancel_context))
        return tide_error_set(err, TIDE_CANCELLED, "swapper: the plan's search was cancelled");
    return TIDE_OK;
}

/* Initialises the planners of every size not yet initialised, from the first one's. */
static enum tide_status planners_init(struct search *s, struct tide_error *err)
{
    while (s->n_planners < s->n_sizes) {
        enum tide_status cst = search_cancelled(s, err);
        if (cst != TIDE_OK)
            return cst;
        enum tide_status st = tide__planner_init_from(&s->planners[s->n_planners], &s->planners[0],
                                                      s->sizes[s->n_planners], err);
        if (st != TIDE_OK)
            return st;
        s->n_planners++;
    }
    return TIDE_OK;
}

static void search_release(struct search *s)
{
    trial_release(&s->least_trial);
    for (uint32_t i = 0; i < s->n_planners; i++)
        tide__planner_release(&s->planners[i]);
    free(s->list.items);
}

/* ============================================================================
 * Trials
 * ========================================================================== */

static enum tide_status build_trial(const struct tide__planner *pl, const struct tide__choice *c,
                                    struct trial *t, struct tide_error *err)
{
    memset(t, 0, sizeof(*t));
    tide__planner_stamp(pl);
    t->graph = tide_graph_clone(pl->graph);
    if (!t->graph)
        return tide_error_set(err, TIDE_NOMEM, "swapper: out of memory cloning %u nodes",
                              pl->graph->n_nodes);
    enum tide_status st = tide__apply(pl, t->graph, c, &t->plan, NULL, err);
    if (st != TIDE_OK) {
        trial_release(t);
        return st;
    }
    t->peak_node = tide__peak_node(t->graph, &t->plan);
    return TIDE_OK;
}

/* Remembers the smallest peak any built plan reached. */
static void note_peak(struct tide_plan_report *report, const struct trial *t)
{
    if (report->min_budget_node == TIDE_NO_NODE || t->plan.peak_bytes < report->min_budget_bytes) {
        report->min_budget_bytes = t->plan.peak_bytes;
        report->min_budget_node = t->peak_node;
    }
}

/* ============================================================================
 * The smallest budget
 *
 * What the report calls min_budget_bytes when nothing fits, and the search's
 * last resort: the lowest peak of the most aggressive choices — every vars
 * home allowed, threshold 0, prefetch 0 — at every partition size searched.
 * It depends on the graph and the policy only, not on the budget, and the
 * search ends with it whenever nothing else fit: so a plan at exactly that
 * budget fits, and the number is exact. (The peaks of other plans built on
 * the way depend on the budget, which decides what is built; reporting one
 * of them would promise a plan that a search at that budget may not build.)
 * The simulation's live bytes bound each peak from below, so the choices
 * are built in order of live bytes and the walk stops at the first whose
 * live bytes reach the best peak so far: usually one or two builds.
 * ========================================================================== */

static int compare_by_live(const void *a, const void *b)
{
    const struct candidate *x = a, *y = b;
    if (x->estimate.live_bytes != y->estimate.live_bytes)
        return x->estimate.live_bytes < y->estimate.live_bytes ? -1 : 1;
    if (x->planner != y->planner)
        return x->planner < y->planner ? -1 : 1;
    return (int)x->choice.vars_host - (int)y->choice.vars_host;
}

/* Finds the smallest budget's plan once: s->least, its trial s->least_trial. */
static enum tide_status smallest(struct search *s, struct tide_error *err)
{
    if (s->least_found)
        return TIDE_OK;
    enum tide_status st = planners_init(s, err);
    if (st != TIDE_OK)
        return st;
    bool homes[2];
    vars_homes(s->policy, homes);
    struct candidate aggressive[4 * MAX_PLANNERS];
    uint32_t n = 0;
    int recompute = s->policy->recompute == TIDE_RECOMPUTE_AUTO ? 2 : 1;
    /* Checkpoint-sqrt has one plan per vars home: its candidates are the aggressive ones. */
    bool checkpoint = s->policy->recompute == TIDE_RECOMPUTE_CHECKPOINT_SQRT;
    if (checkpoint && s->list.n == 0 && !make_candidates(&s->planners[0], 0, s->policy, &s->list))
        return tide_error_set(err, TIDE_NOMEM, "swapper: out of memory");
    for (uint32_t i = 0; s->policy->recompute == TIDE_RECOMPUTE_CHECKPOINT_SQRT && i < s->list.n;
         i++) {
        struct candidate *c = &aggressive[n++];
        *c = s->list.items[i];
        tide__estimate(&s->planners[c->planner], &c->choice, &c->estimate);
        s->report->trials++;
    }
    for (uint32_t i = 0;
         s->policy->recompute != TIDE_RECOMPUTE_CHECKPOINT_SQRT && i < s->n_planners; i++) {
        for (int h = 0; h < 4; h++) {
            if (!homes[h % 2] || h / 2 >= recompute)
                continue;
            struct candidate *c = &aggressive[n++];
            *c = (struct candidate){.choice = {.vars_host = h % 2 == 1, .recompute = h / 2 == 1},
                                    .planner = i,
                                    .partition_size = s->sizes[i]};
            tide__estimate(&s->planners[i], &c->choice, &c->estimate);
            s->report->trials++;
        }
    }
    qsort(aggressive, n, sizeof(*aggressive), compare_by_live);
    struct trial *best = &s->least_trial;
    for (uint32_t i = 0; i < n; i++) {
        if (best->graph && aggressive[i].estimate.live_bytes >= best->plan.peak_bytes)
            break;
        struct trial t;
        st = search_cancelled(s, err);
        if (st == TIDE_OK)
            st = build_trial(&s->planners[aggressive[i].planner], &aggressive[i].choice, &t, err);
        if (st != TIDE_OK) {
            trial_release(best);
            return st;
        }
        if (!best->graph || t.plan.peak_bytes < best->plan.peak_bytes) {
            trial_release(best);
            *best = t;
            s->least = aggressive[i];
        } else {
            trial_release(&t);
        }
    }
    s->least_found = true;
    return TIDE_OK;
}

/*
 * The "nothing fits" outcome: the smallest budget's plan fills the report
 * (the budget, the node at its peak, its partitions), and err says the
 * admission failure or that budget.
 */
static enum tide_status does_not_fit(struct search *s, const struct working_set *admission,
                                     struct tide_error *err)
{
    struct tide_plan_report *report = s->report;
    enum tide_status st = smallest(s, err);
    if (st != TIDE_OK)
        return st;
    const struct candidate c = s->least;
    const struct trial *t = &s->least_trial;
    const struct tide__planner *pl = &s->planners[c.planner];
    st = tide__report_fill(pl, t->graph, &t->plan, report, err);
    if (st != TIDE_OK)
        return st;
    report->min_budget_bytes = t->plan.peak_bytes;
    report->min_budget_node = t->peak_node;
    /*
     * The report's nodes must name nodes of the caller's graph, which keeps
     * none of the trial's memory ops: a partition whose peak is at one names
     * the node whose tensor it moves.
     */
    for (uint32_t i = 0; i < report->n_partitions; i++) {
        uint32_t *peak = &report->partitions[i].peak_node;
        if (*peak != TIDE_NO_NODE && *peak >= s->graph->n_nodes)
            *peak = t->graph->nodes[*peak].subject;
    }
    tide__planner_stamp(pl);
    uint64_t budget = s->budget;
    report->budget_bytes = budget;
    report->fits = false;
    report->chosen = chosen_policy(s->policy, budget, &c);

    const struct tide_graph *g = s->graph;
    if (admission) {
        const struct tide_node *n = &g->nodes[admission->node];
        uint64_t total = working_set_total(admission);
        tide_error_set(err, TIDE_DOES_NOT_FIT,
                       "node \"%s\" (%s) needs %.1f MiB by itself (inputs %" PRIu64
                       " + outputs %" PRIu64 " + workspace %" PRIu64 " = %" PRIu64
                       " bytes), budget is %" PRIu64 " bytes (%.1f MiB)",
                       n->name, tide_op_info(n->op)->name, mib(total), admission->inputs,
                       admission->outputs, admission->workspace, total, budget, mib(budget));
    } else {
        const struct tide_node *n = &g->nodes[report->min_budget_node];
        tide_error_set(err, TIDE_DOES_NOT_FIT,
                       "plan needs %" PRIu64 " bytes (%.1f MiB) at best (node \"%s\" (%s) at "
                       "its peak, in partition %d of %u (of %u nodes), with %s and %s), "
                       "budget is %" PRIu64 " bytes (%.1f MiB)",
                       report->min_budget_bytes, mib(report->min_budget_bytes), n->name,
                       tide_op_info(n->op)->name, n->partition, report->n_partitions,
                       c.partition_size,
                       c.choice.vars_host ? "variables on the host" : "variables on the device",
                       c.choice.no_swap ? "checkpoint-sqrt: cheap feature maps recomputed, the "
                                          "rest kept"
                                        : "every feature map swapped",
                       budget, mib(budget));
    }
    if (err)
        copy_message(report, err->message);
    return TIDE_DOES_NOT_FIT;
}

/*
 * The refusal of a plan whose host arena (host bytes: the least a plan that
 * fits the device budget needs) exceeds the policy's host budget.
 */
static enum tide_status host_does_not_fit(struct search *s, uint64_t host, struct tide_error *err)
{
    uint64_t limit = s->policy->host_budget_bytes;
    tide_error_set(err, TIDE_DOES_NOT_FIT,
                   "plan needs %" PRIu64 " bytes (%.1f MiB) of host memory (host-homed variables, "
                   "swap slots and staging), host budget is %" PRIu64 " bytes (%.1f MiB)",
                   host, mib(host), limit, mib(limit));
    if (err)
        copy_message(s->report, err->message);
    return TIDE_DOES_NOT_FIT;
}

/* ============================================================================
 * Choosing
 * ========================================================================== */

/* True if a candidate would build exactly like an earlier one that was built and did not fit. */
static bool repeats_a_failure(const struct candidates *list, uint32_t i)
{
    const struct candidate *c = &list->items[i];
    for (uint32_t j = 0; j < i; j++) {
        const struct candidate *d = &list->items[j];
        if (d->built && d->planner == c->planner && d->choice.vars_host == c->choice.vars_host &&
            d->choice.prefetch == c->choice.prefetch &&
            d->choice.recompute == c->choice.recompute &&
            d->choice.recompute_limit == c->choice.recompute_limit &&
            d->estimate.live_bytes == c->estimate.live_bytes &&
            memcmp(&d->estimate.moved, &c->estimate.moved, sizeof(c->estimate.moved)) == 0)
            return true;
    }
    return false;
}

/*
 * Whether a built plan's host arena fits the policy's host budget; notes the
 * fewest host bytes refused (for the message when nothing fits).
 */
static bool host_fits(struct search *s, const struct trial *t)
{
    uint64_t limit = s->policy->host_budget_bytes;
    if (limit == 0 || t->plan.host_bytes <= limit)
        return true;
    if (t->plan.peak_bytes <= s->budget &&
        (s->host_refused == 0 || t->plan.host_bytes < s->host_refused))
        s->host_refused = t->plan.host_bytes;
    return false;
}

/*
 * Builds candidate i; on a fit, *fit keeps the trial for adoption.
 * Returns true in *done when it fit.
 */
static enum tide_status try_candidate(struct search *s, uint32_t i, struct trial *fit, bool *done,
                                      struct tide_error *err)
{
    struct candidate *c = &s->list.items[i];
    struct trial t;
    enum tide_status st = search_cancelled(s, err);
    if (st == TIDE_OK)
        st = build_trial(&s->planners[c->planner], &c->choice, &t, err);
    if (st != TIDE_OK)
        return st;
    c->built = true;
    note_peak(s->report, &t);
    *done = t.plan.peak_bytes <= s->budget && host_fits(s, &t);
    if (*done)
        *fit = t;
    else
        trial_release(&t);
    return TIDE_OK;
}

/*
 * Walks the candidates in order, building those the simulation lets
 * through, until one fits (*chosen, with its trial in *fit) or none is
 * left (*found false).
 */
static enum tide_status choose(struct search *s, struct candidate *chosen, bool *found,
                               struct trial *fit, struct tide_error *err)
{
    struct candidates *list = &s->list;
    uint64_t budget = s->budget;
    *found = false;
    uint32_t builds = 0;
    bool done = false;
    for (uint32_t i = 0; i < list->n && builds < MAX_BUILDS; i++) {
        const struct candidate *c = &list->items[i];
        if (c->estimate.live_bytes > budget || c->built || repeats_a_failure(list, i))
            continue;
        enum tide_status st = try_candidate(s, i, fit, &done, err);
        builds++;
        if (st != TIDE_OK || done) {
            *found = done;
            *chosen = list->items[i];
            return st;
        }
    }
    /* Past the limit: the most aggressive candidates, if the simulation let them through. */
    for (uint32_t i = 0; i < list->n; i++) {
        const struct candidate *c = &list->items[i];
        if (c->built || c->estimate.live_bytes > budget || c->choice.swap_threshold != 0 ||
            c->choice.var_threshold != 0 || c->choice.prefetch != 0)
            continue;
        enum tide_status st = try_candidate(s, i, fit, &done, err);
        if (st != TIDE_OK || done) {
            *found = done;
            *chosen = list->items[i];
            return st;
        }
    }
    /*
     * Under autotune, the last resort: the smallest budget's plan, so that
     * the budget a report names always fits (other policies keep their swap
     * mode and threshold, which the smallest budget's plan may not).
     */
    if (!(s->policy->swap == TIDE_SWAP_AUTO && s->policy->autotune))
        return TIDE_OK;
    enum tide_status st = smallest(s, err);
    if (st == TIDE_OK && s->least_trial.plan.peak_bytes <= budget &&
        host_fits(s, &s->least_trial)) {
        note_peak(s->report, &s->least_trial);
        *found = true;
        *chosen = s->least;
        *fit = s->least_trial;
        memset(&s->least_trial, 0, sizeof(s->least_trial));
    }
    return st;
}

/* ============================================================================
 * The entry point
 * ========================================================================== */

static enum tide_status check_policy(const struct tide_memory_policy *p, struct tide_error *err)
{
    if (p->swap != TIDE_SWAP_AUTO && p->swap != TIDE_SWAP_ON && p->swap != TIDE_SWAP_OFF)
        return tide_error_set(err, TIDE_INVALID,
                              "memory policy: swap is %d; want auto (0), on (1) or off (2)",
                              (int)p->swap);
    if (p->vars_home != TIDE_VARS_HOME_AUTO && p->vars_home != TIDE_VARS_HOME_HOST &&
        p->vars_home != TIDE_VARS_HOME_DEVICE)
        return tide_error_set(err, TIDE_INVALID,
                              "memory policy: vars_home is %d; want auto (0), host (1) or "
                              "device (2)",
                              (int)p->vars_home);
    if (p->recompute != TIDE_RECOMPUTE_DEVICE && p->recompute != TIDE_RECOMPUTE_OFF &&
        p->recompute != TIDE_RECOMPUTE_AUTO && p->recompute != TIDE_RECOMPUTE_CHECKPOINT_SQRT)
        return tide_error_set(err, TIDE_INVALID,
                              "memory policy: recompute is %d; want device (0), auto (1), "
                              "checkpoint-sqrt (2) or off (3)",
                              (int)p->recompute);
    return TIDE_OK;
}

/*
 * The automatic size's candidates on planner j. Every size has as many
 * candidates as the default one, and simulating them all would cost most of
 * the planning time, so each chain — one vars home and one prefetch, the
 * thresholds of make_candidates in increasing order — is bisected instead:
 * a larger threshold moves fewer bytes and holds more, so the chain's best
 * candidate is the largest threshold whose live bytes fit the budget, found
 * in about log2 of the chain's length simulations. Every candidate
 * simulated joins the list, which is then ranked as usual. (Where live
 * bytes are not monotone in the threshold, the bisection may settle on a
 * smaller threshold than the best: the plan still fits, moving more.)
 */
static bool search_chains(struct search *s, uint32_t j)
{
    struct tide__planner *pl = &s->planners[j];
    struct candidates *list = &s->list;
    bool homes[2];
    vars_homes(s->policy, homes);
    uint32_t n_parts = pl->part.n_partitions, size = pl->part.partition_size;
    for (int h = 0; h < 2; h++) {
        if (!homes[h])
            continue;
        uint32_t thresholds[40], n_th = 0;
        for (uint32_t th = 0;; th = th ? th * 2 : 1) {
            /* On the device, "one group" is nothing moved, tried first. */
            if (h == 0 && th >= n_parts)
                break;
            thresholds[n_th++] = th;
            if (th >= n_parts || th >= UINT32_MAX / 2)
                break;
        }
        for (uint32_t p = 0; p <= MAX_PREFETCH; p++) {
            /* fits(lo) and !fits(hi), with -1 and n_th standing for both ends. */
            int64_t lo = -1, hi = n_th;
            while (hi - lo > 1) {
                int64_t mid = lo + (hi - lo) / 2;
                uint32_t th = thresholds[mid];
                if (!candidates_push(list, j, size, h == 1, th, th >= n_parts ? TIDE__NEVER : th,
                                     p))
                    return false;
                struct candidate *c = &list->items[list->n - 1];
                tide__estimate(pl, &c->choice, &c->estimate);
                c->estimated = true;
                s->report->trials++;
                if (c->estimate.live_bytes <= s->budget)
                    lo = mid;
                else
                    hi = mid;
            }
        }
    }
    return true;
}

/*
 * Each estimated candidate's predicted step time, from its totals (the
 * exact replay, tide_time_predict, needs the built graph): compute is the
 * original kernels' time plus the bytes made again at memory bandwidth;
 * copies take bytes / copy bandwidth on their own stream. A swap-in or
 * fetch can hide under the compute before its consumer: all of it with a
 * prefetch distance of a partition or more, on average half a partition
 * less its consumer without. So
 *
 *     step = max(compute + max(0, h2d - hidden * compute), d2h)
 *
 * Plans whose copies all hide tie at the compute time, and the fewest bytes
 * moved decide among them as before. Where copies share compute's cores
 * (profile->copies_share_compute), nothing hides: step = compute + h2d +
 * d2h.
 */
static void rank_by_time(struct search *s)
{
    const struct tide_device_profile *p = s->policy->profile;
    for (uint32_t i = 0; i < s->list.n; i++) {
        struct candidate *c = &s->list.items[i];
        const struct tide__moved *m = &c->estimate.moved;
        uint64_t to_device = m->fetch, to_host = m->write_back;
        for (int a = 0; a < TIDE__ACTION_COUNT; a++) {
            to_device += m->actions[a].to_device;
            to_host += m->actions[a].to_host;
        }
        double compute =
            s->compute_ms + (double)tide__moved_remade(m) / p->memory_bytes_per_s * 1e3;
        double h2d = (double)to_device / p->copy_bytes_per_s * 1e3;
        double d2h = (double)to_host / p->copy_bytes_per_s * 1e3;
        double size = c->partition_size ? c->partition_size : 1;
        double hidden = c->choice.prefetch >= 1 ? 1.0 : (size - 1) / (2 * size);
        if (p->copies_share_compute)
            hidden = 0, compute += d2h; /* copies take compute's cores: nothing hides */
        double exposed = h2d - hidden * compute;
        double step = compute + (exposed > 0 ? exposed : 0);
        c->predicted_ms = step > d2h ? step : d2h;
    }
}

/*
 * The size limits of the RECOMPUTE action tried with a budget (divisors of
 * the budget; [0], no limit, first): a copy holds its tensor, its chain and
 * the inputs it pulls at once, so recomputing every cheap tensor can exceed
 * a tight budget that recomputing the small ones keeps to (ResNet-200 at
 * 1.05 x its floor: the 512 KiB maps, not the 1 and 4 MiB ones).
 */
static const uint64_t recompute_divisors[] = {0, 4, 16, 64};
#define N_RECOMPUTE_LIMITS (sizeof(recompute_divisors) / sizeof(recompute_divisors[0]))

/*
 * Recompute allowed: every candidate that splits feature maps comes also
 * with the RECOMPUTE action on, first (without autotune the list's order is
 * the order of preference; with it, the ranking decides: fewer bytes moved
 * wins, and a recompute moves none). Size limits come later, where needed
 * (with_recompute_limits).
 */
static bool with_recompute(struct candidates *list)
{
    uint32_t n = list->n;
    for (uint32_t i = 0; i < n; i++) {
        if (list->items[i].choice.swap_threshold == TIDE__NEVER)
            continue;
        if (!candidates_push(list, 0, 0, false, 0, 0, 0))
            return false;
        struct candidate copy = list->items[i];
        copy.choice.recompute = true;
        copy.estimated = copy.built = false;
        list->items[list->n - 1] = copy;
    }
    /* Each recomputing copy ahead of its original, in the original order. */
    struct candidate *sorted = malloc(((size_t)list->n + 1) * sizeof(*sorted));
    if (!sorted)
        return false;
    uint32_t k = 0, extra = n;
    for (uint32_t i = 0; i < n; i++) {
        if (list->items[i].choice.swap_threshold != TIDE__NEVER)
            sorted[k++] = list->items[extra++];
        sorted[k++] = list->items[i];
    }
    memcpy(list->items, sorted, (size_t)k * sizeof(*sorted));
    free(sorted);
    return true;
}

/*
 * A recomputing candidate (estimated, just ahead of its original as
 * with_recompute puts it) whose simulation exceeds the budget where its
 * original's does not gets copies limited to ever smaller tensors
 * (recompute_divisors), down to the first whose simulation fits. Only
 * there: elsewhere the unlimited copy fits, or nothing at that choice does,
 * and the search stays at about twice the candidates of swapping alone.
 */
static bool with_recompute_limits(struct search *s)
{
    struct candidates *list = &s->list;
    uint32_t n = list->n;
    for (uint32_t i = 0; i + 1 < n; i++) {
        struct candidate c = list->items[i];
        const struct candidate *o = &list->items[i + 1];
        if (!c.choice.recompute || c.choice.recompute_limit || o->choice.recompute ||
            c.estimate.live_bytes <= s->budget || o->estimate.live_bytes > s->budget)
            continue;
        for (uint32_t l = 1; l < N_RECOMPUTE_LIMITS; l++) {
            if (!candidates_push(list, 0, 0, false, 0, 0, 0))
                return false;
            struct candidate *copy = &list->items[list->n - 1];
            *copy = c;
            copy->choice.recompute_limit = s->budget / recompute_divisors[l];
            tide__estimate(&s->planners[copy->planner], &copy->choice, &copy->estimate);
            s->report->trials++;
            if (copy->estimate.live_bytes <= s->budget)
                break;
        }
    }
    return true;
}

/* Estimates, orders and tries the candidates; *chosen, *found and *fit as choose() sets them. */
static enum tide_status search(struct search *s, struct candidate *chosen, bool *found,
                               struct trial *fit, struct tide_error *err)
{
    const struct tide_memory_policy *policy = s->policy;
    struct candidates *list = &s->list;
    bool autotune = policy->swap == TIDE_SWAP_AUTO && policy->autotune;
    *found = false;
    /* Autotune: nothing moved, when it fits, is the plan; no need to look further. */
    for (uint32_t i = 0; autotune && i < list->n; i++) {
        struct candidate *c = &list->items[i];
        if (c->choice.vars_host || c->choice.swap_threshold != TIDE__NEVER)
            continue;
        tide__estimate(&s->planners[c->planner], &c->choice, &c->estimate);
        c->estimated = true;
        s->report->trials++;
        bool done = false;
        if (c->estimate.live_bytes > s->budget)
            break;
        enum tide_status st = try_candidate(s, i, fit, &done, err);
        if (st != TIDE_OK || done) {
            *found = done;
            *chosen = list->items[i];
            return st;
        }
        break;
    }
    /*
     * Something must move. With the size searched, every size's chains
     * replace the default size's list (see search_chains).
     */
    if (s->n_sizes > 1) {
        enum tide_status st = planners_init(s, err);
        if (st != TIDE_OK)
            return st;
        list->n = 0;
        for (uint32_t j = 0; j < s->n_planners; j++) {
            if (!search_chains(s, j))
                return tide_error_set(err, TIDE_NOMEM, "swapper: out of memory");
        }
    }
    if (policy->recompute == TIDE_RECOMPUTE_AUTO && !with_recompute(list))
        return tide_error_set(err, TIDE_NOMEM, "swapper: out of memory");
    for (uint32_t i = 0; i < list->n; i++) {
        struct candidate *c = &list->items[i];
        if (!c->estimated) {
            tide__estimate(&s->planners[c->planner], &c->choice, &c->estimate);
            c->estimated = true;
            s->report->trials++;
        }
    }
    if (policy->recompute == TIDE_RECOMPUTE_AUTO && !with_recompute_limits(s))
        return tide_error_set(err, TIDE_NOMEM, "swapper: out of memory");
    if (autotune && policy->profile)
        rank_by_time(s);
    if (autotune)
        qsort(list->items, list->n, sizeof(*list->items), compare_candidates);
    return choose(s, chosen, found, fit, err);
}

static enum tide_status plan(struct tide_graph *graph, const struct tide_memory_policy *policy,
                             const struct tide_plan_env *env, struct tide_memory_plan *out,
                             struct tide_error *err)
{
    struct tide_plan_report *report = &out->report;
    uint64_t budget = policy->budget_bytes;
    report->budget_bytes = budget;
    report->floor_node = TIDE_NO_NODE;
    report->host_budget_bytes = policy->host_budget_bytes;
    if (policy->profile)
        snprintf(report->profile, sizeof(report->profile), "%s", policy->profile->name);

    struct search s = {.graph = graph, .env = env, .policy = policy, .budget = budget,
                       .report = report};
    bool checkpoint = policy->recompute == TIDE_RECOMPUTE_CHECKPOINT_SQRT;
    bool searches_sizes = policy->partition_size == 0 && policy->swap == TIDE_SWAP_AUTO &&
                          policy->autotune && budget > 0 && !checkpoint;
    if (checkpoint && policy->partition_size == 0) {
        /* Chen et al.'s segments: about sqrt(n) of about sqrt(n) nodes each. */
        s.n_sizes = 1;
        uint32_t root = 1;
        while ((uint64_t)root * root < graph->n_nodes)
            root++;
        s.sizes[0] = root;
    } else if (searches_sizes) {
        s.n_sizes = (uint32_t)MAX_PLANNERS;
        memcpy(s.sizes, auto_sizes, sizeof(auto_sizes));
    } else {
        s.n_sizes = 1;
        s.sizes[0] = policy->partition_size ? policy->partition_size : TIDE_PARTITION_SIZE_DEFAULT;
    }
    enum tide_status st = tide__planner_init(&s.planners[0], graph, s.sizes[0], env, err);
    if (st != TIDE_OK)
        return st;
    s.n_planners = 1;
    struct tide__planner *pl = &s.planners[0];

    /* Admission: a kernel that cannot fit by itself. */
    struct working_set largest = largest_working_set(pl);
    if (largest.node != TIDE_NO_NODE) {
        report->floor_bytes = working_set_total(&largest);
        report->floor_node = largest.node;
    }
    if (budget > 0 && largest.node != TIDE_NO_NODE && working_set_total(&largest) > budget) {
        st = does_not_fit(&s, &largest, err);
        search_release(&s);
        return st;
    }

    for (uint32_t v = 0; policy->profile && v < pl->n_original; v++) {
        const struct tide_node *node = &graph->nodes[v];
        if (!(tide_op_info(node->op)->flags & (TIDE_OP_F_SOURCE | TIDE_OP_F_MEMORY)))
            s.compute_ms += tide_time_node_ms(policy->profile, graph, node);
    }

    struct trial fit = {0};
    struct candidate chosen = {0};
    bool found = false;
    if (!make_candidates(pl, 0, policy, &s.list))
        st = tide_error_set(err, TIDE_NOMEM, "swapper: out of memory");
    else if (budget > 0)
        st = search(&s, &chosen, &found, &fit, err);
    else if (policy->recompute == TIDE_RECOMPUTE_AUTO && !with_recompute(&s.list))
        st = tide_error_set(err, TIDE_NOMEM, "swapper: out of memory");
    else if (s.list.n > 0) /* no limit: the first candidate as it is */
        chosen = s.list.items[0], found = true;
    if (st == TIDE_OK && !found && s.host_refused)
        st = host_does_not_fit(&s, s.host_refused, err);
    else if (st == TIDE_OK && !found)
        st = does_not_fit(&s, NULL, err);

    if (st == TIDE_OK) {
        pl = &s.planners[chosen.planner];
        const struct tide__choice *c = &chosen.choice;
        tide__planner_stamp(pl);
        if (fit.graph) {
            st = tide__adopt(pl, graph, c, fit.graph, &fit.plan, err);
            if (st == TIDE_OK) {
                out->memplan = fit.plan;
                memset(&fit.plan, 0, sizeof(fit.plan));
            }
        } else {
            report->trials = 1;
            st = tide__apply(pl, graph, c, &out->memplan, NULL, err);
        }
        if (st == TIDE_OK)
            st = tide__report_fill(pl, graph, &out->memplan, report, err);
        if (st == TIDE_OK) {
            report->chosen = chosen_policy(policy, budget, &chosen);
            report->fits = budget == 0 || out->memplan.peak_bytes <= budget;
            if (report->min_budget_node == TIDE_NO_NODE) {
                report->min_budget_bytes = out->memplan.peak_bytes;
                report->min_budget_node = tide__peak_node(graph, &out->memplan);
            }
        }
        if (st == TIDE_OK && policy->host_budget_bytes &&
            out->memplan.host_bytes > policy->host_budget_bytes) {
            st = host_does_not_fit(&s, out->memplan.host_bytes, err);
            report->fits = false;
        }
        if (st == TIDE_OK && policy->profile) {
            struct tide_time_prediction t;
            st = tide_time_predict(graph, out->memplan.order, out->memplan.n_order, policy->profile,
                                   &t, err);
            report->predicted_step_ms = t.step_ms;
            report->predicted_stall_ms = t.stall_ms;
        }
    }
    trial_release(&fit);
    search_release(&s);
    return st;
}

enum tide_status tide_plan_memory(struct tide_graph *graph, const struct tide_memory_policy *policy,
                                  const struct tide_plan_env *env, struct tide_memory_plan *out,
                                  struct tide_error *err)
{
    if (!out)
        return tide_error_set(err, TIDE_INVALID, "tide_plan_memory: out is NULL");
    memset(out, 0, sizeof(*out));
    out->report.min_budget_node = TIDE_NO_NODE;
    out->report.floor_node = TIDE_NO_NODE;
    if (!graph || !policy)
        return tide_error_set(err, TIDE_INVALID, "tide_plan_memory: %s is NULL",
                              graph ? "the policy" : "the graph");
    enum tide_status st = check_policy(policy, err);
    if (st != TIDE_OK)
        return st;
    /* DEVICE, the default, is AUTO or OFF by the device the plan is for (swapper.h). */
    struct tide_memory_policy resolved = *policy;
    if (resolved.recompute == TIDE_RECOMPUTE_DEVICE) {
        bool gpu = policy->profile && !policy->profile->copies_share_compute;
        resolved.recompute = gpu && policy->swap == TIDE_SWAP_AUTO && policy->autotune
                                 ? TIDE_RECOMPUTE_AUTO
                                 : TIDE_RECOMPUTE_OFF;
    }
    policy = &resolved;
    static const struct tide_plan_env no_env;
    double start = clock_ms(CLOCK_MONOTONIC), cpu = clock_ms(CLOCK_THREAD_CPUTIME_ID);
    st = plan(graph, policy, env ? env : &no_env, out, err);
    out->report.plan_ms = clock_ms(CLOCK_MONOTONIC) - start;
    out->report.plan_cpu_ms = clock_ms(CLOCK_THREAD_CPUTIME_ID) - cpu;
    if (st != TIDE_OK && st != TIDE_DOES_NOT_FIT) {
        /* Keep nothing half-made but the report's words. */
        tide_memplan_release(&out->memplan);
        free(out->report.partitions);
        out->report.partitions = NULL;
        out->report.n_partitions = 0;
    }
    if (st != TIDE_OK && err && out->report.message[0] == '\0')
        copy_message(&out->report, err->message);
    return st;
}
