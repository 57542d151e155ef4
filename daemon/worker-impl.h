/* SPDX-License-Identifier: MIT */
/*
 * worker-impl.h: what worker.c shares with the files of its task bodies
 * (variables.c). Not for the rest of the daemon: it talks to the worker
 * through worker.h.
 */
#ifndef TIDED_WORKER_IMPL_H
#define TIDED_WORKER_IMPL_H

#include <stdint.h>

#include "daemon/worker.h"

/* Frees n strings and the array; NULL is fine. */
void tided__free_strings(char **v, uint32_t n);

/* Packs m into out->data (malloc'd; the task frees it). */
enum tide_status tided__pack(const ProtobufCMessage *m, ProtobufCBinaryData *out,
                             struct tide_error *err);

/* CHECKPOINT: every Variable of t->session into t->checkpoint.dir (variables.c). */
void tided__task_checkpoint(struct tided_task *t);

/* READ from the live session, or from t->read.checkpoint_path (variables.c). */
void tided__task_read_session(struct tided_task *t);
void tided__task_read_checkpoint(struct tided_task *t);

#endif /* TIDED_WORKER_IMPL_H */
