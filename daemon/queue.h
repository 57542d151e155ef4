/* SPDX-License-Identifier: MIT */
/*
 * queue.h: the admission order of queued jobs, as a pure function over a
 * small array (queue-order.c), so that tests/test_queue.c checks it without
 * a daemon. The rest of the queue (quotas, admission, preemption) is in
 * queue.c, declared in jobs-impl.h.
 *
 * Example usage:
 *
 *     struct tided_queue_entry e[2] = {
 *         {.uid = 1000, .priority = 0, .usage = 5e9, .queued_us = 10, .seq = 1},
 *         {.uid = 1001, .priority = 0, .usage = 0, .queued_us = 20, .seq = 2},
 *     };
 *     tided_queue_order(e, 2);   // uid 1001 first: it used the device less recently
 */
#ifndef TIDE_DAEMON_QUEUE_H
#define TIDE_DAEMON_QUEUE_H

#include <stddef.h>
#include <stdint.h>

/* One queued job as the order sees it. */
struct tided_queue_entry {
    uint32_t uid;      /* its owner */
    int32_t priority;  /* higher goes first */
    double usage;      /* its owner's recent device-byte-seconds (fair share: fewer goes first) */
    int64_t queued_us; /* when it entered the queue: earlier goes first */
    uint64_t seq;      /* arrival order, for jobs queued in the same microsecond */
    void *item;        /* the caller's (the job); not looked at */
};

/* Negative when a goes before b in admission order, positive when after, 0 when tied. */
int tided_queue_compare(const struct tided_queue_entry *a, const struct tided_queue_entry *b);

/*
 * Sorts entries into admission order: priority (higher first), then fair
 * share across users (the lower usage first), then arrival (queued_us,
 * then seq). Entries that compare equal on all of these keep no particular
 * order; seq makes them distinct in the daemon.
 */
void tided_queue_order(struct tided_queue_entry *entries, size_t n);

#endif /* TIDE_DAEMON_QUEUE_H */
