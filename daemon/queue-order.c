/* SPDX-License-Identifier: MIT */
/*
 * queue-order.c: the admission order of queued jobs (queue.h), apart from
 * the job manager so that tests/test_queue.c links it alone.
 *
 * Threads: none of its own; pure functions of their arguments.
 */
#include "daemon/queue.h"

#include <stdlib.h>

int tided_queue_compare(const struct tided_queue_entry *a, const struct tided_queue_entry *b)
{
    if (a->priority != b->priority)
        return a->priority > b->priority ? -1 : 1;
    if (a->usage != b->usage)
        return a->usage < b->usage ? -1 : 1;
    if (a->queued_us != b->queued_us)
        return a->queued_us < b->queued_us ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

static int compare_entries(const void *a, const void *b)
{
    return tided_queue_compare(a, b);
}

void tided_queue_order(struct tided_queue_entry *entries, size_t n)
{
    if (n > 1)
        qsort(entries, n, sizeof(*entries), compare_entries);
}
