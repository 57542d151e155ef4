/* SPDX-License-Identifier: MIT */
/* swapper.c: placeholder until the memory pipeline lands. */
#include "swapper/swapper.h"

#include <string.h>

struct tide_memory_policy tide_memory_policy_default(void)
{
    return (struct tide_memory_policy){.partition_size = 64, .swap = TIDE_SWAP_AUTO,
                                       .swap_threshold = 1, .prefetch_distance = 1,
                                       .vars_home = TIDE_VARS_HOME_AUTO, .autotune = true};
}

enum tide_status tide_plan_memory(struct tide_graph *graph, const struct tide_memory_policy *policy,
                                  const struct tide_plan_env *env, struct tide_memory_plan *out,
                                  struct tide_error *err)
{
    (void)graph, (void)policy, (void)env;
    memset(out, 0, sizeof(*out));
    return tide_error_set(err, TIDE_UNSUPPORTED, "memory planning is not implemented yet");
}

void tide_memory_plan_release(struct tide_memory_plan *plan)
{
    (void)plan;
}
