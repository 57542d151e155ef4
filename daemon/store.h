/* SPDX-License-Identifier: MIT */
/*
 * store.h: files under the state directory, written atomically.
 *
 * A job's files (spec.pb, info.pb, checkpoint.pb, checkpoint-<step>.pb) are replaced, never edited:
 * the new content goes to NAME.tmp, is fsync'd, renamed over NAME, and the
 * directory is fsync'd, so a crash at any point leaves either the old file or
 * the new one. Messages are packed straight into the file through a
 * ProtobufCBuffer, so a checkpoint never needs a second copy in memory.
 *
 * store.c also keeps the job records (info.pb through the worker, listing
 * earlier runs' jobs at start, removing and forgetting ended jobs); those
 * need the job structs and are declared in jobs-impl.h.
 *
 * Threads: the functions keep no state; the worker thread calls them for
 * every write, the main thread reads at start-up.
 *
 * Example usage:
 *
 *     uint64_t bytes;
 *     if (tided_store_write_message(dir, "checkpoint.pb", &msg.base, &bytes, &err) != TIDE_OK)
 *         TIDE_LOG_ERROR("%s", err.message);
 */
#ifndef TIDE_DAEMON_STORE_H
#define TIDE_DAEMON_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "common/status.h"
#include "tide/v1/tide.pb-c.h"

/* Creates dir and its missing parents with mode 0700 (existing ones are kept). */
enum tide_status tided_store_mkdirs(const char *dir, struct tide_error *err);

/* Replaces dir/name with data atomically (see above). */
enum tide_status tided_store_write(const char *dir, const char *name, const void *data, size_t len,
                                   struct tide_error *err);

/* Replaces dir/name with the packed message atomically; *bytes gets its size (may be NULL). */
enum tide_status tided_store_write_message(const char *dir, const char *name,
                                           const ProtobufCMessage *message, uint64_t *bytes,
                                           struct tide_error *err);

/*
 * Replaces dir/name with a hard link to dir/target atomically: the link is
 * made as name.tmp and renamed over name, then the directory is fsync'd.
 * TIDE_UNSUPPORTED when the file system cannot make hard links, so that the
 * caller can write a copy instead.
 */
enum tide_status tided_store_link(const char *dir, const char *target, const char *name,
                                  struct tide_error *err);

/*
 * Deletes the oldest checkpoint-<step>.pb files of dir so that at most keep
 * remain (0 counts as 2: the newest and the one before it, so that a damaged
 * newest checkpoint leaves a good one); the newest steps are kept.
 */
enum tide_status tided_store_prune_checkpoints(const char *dir, uint32_t keep,
                                               struct tide_error *err);

/*
 * Reads a whole file into a malloc'd buffer (*data, freed by the caller).
 * TIDE_NOT_FOUND when it does not exist, with a message naming the path.
 */
enum tide_status tided_store_read(const char *path, uint8_t **data, size_t *len,
                                  struct tide_error *err);

/* Reads and unpacks a message; NULL with err set when missing or malformed. */
ProtobufCMessage *tided_store_read_message(const char *path,
                                           const ProtobufCMessageDescriptor *descriptor,
                                           struct tide_error *err);

/*
 * Checkpoints. A checkpoint file is a 40-byte header, then the variables as
 * a packed tide.v1.ReadVariablesResponse (the payload):
 *
 *   offset  0  8 bytes  magic "TIDECKPT"
 *           8  u32      format version (TIDED_CHECKPOINT_VERSION)
 *          12  u32      flags, 0
 *          16  u64      step (the payload's step, readable without it)
 *          24  u64      payload bytes
 *          32  u64      xxHash64 (seed 0) of the payload
 *
 * integers little-endian. It is written like every file here (temporary
 * file, fsync, rename, directory fsync), so a crash leaves the old file or
 * the new one; the header is what tells a whole file from an empty,
 * truncated or corrupted one, which reading refuses, naming the file and
 * the problem.
 */
#define TIDED_CHECKPOINT_MAGIC "TIDECKPT"
#define TIDED_CHECKPOINT_VERSION 1
#define TIDED_CHECKPOINT_HEADER_BYTES 40

/* Writes dir/name as a checkpoint of message (header + payload); *bytes gets the file's size. */
enum tide_status tided_store_write_checkpoint(const char *dir, const char *name,
                                              const Tide__V1__ReadVariablesResponse *message,
                                              uint64_t *bytes, struct tide_error *err);

/*
 * Reads a checkpoint and checks everything before anything is used: the
 * magic, the version, the payload's length and checksum, the header's step
 * against the payload's, and every variable's name and byte length against
 * its shape and dtype. NULL with err set (TIDE_NOT_FOUND when the file does
 * not exist) otherwise. Freed with tide__v1__read_variables_response__free_unpacked.
 */
Tide__V1__ReadVariablesResponse *tided_store_read_checkpoint(const char *path,
                                                             struct tide_error *err);

/*
 * The step of a checkpoint from its header, without reading the rest; -1
 * when the file is missing or its header is not whole and valid (its length
 * included; the checksum is checked by tided_store_read_checkpoint).
 */
int tided_store_peek_step(const char *path, uint64_t *step);

/*
 * Deletes a job directory: its known files (and their .tmp), every
 * checkpoint-<step>.pb, then the directory. *bytes (may be NULL) gets the
 * bytes the deleted files held, a file with two links counted once; on an
 * error, those deleted before it.
 */
enum tide_status tided_store_remove_dir(const char *dir, uint64_t *bytes, struct tide_error *err);

/*
 * Takes the state directory for this process: an exclusive, non-blocking
 * flock on dir/tided.lock (created 0600), which then holds this process's pid.
 * Returns the open descriptor (>= 0), kept until exit so the lock lasts as
 * long as the daemon; the kernel releases it when the process ends, however
 * it ends. When another process holds it, returns -1 with a message naming
 * the holder's pid as the file records it, so that a second tided on the same
 * state directory exits instead of marking the live daemon's jobs FAILED.
 */
int tided_store_lock(const char *dir, char *error, size_t size);

/* Joins dir and name into a malloc'd path; NULL on OOM. */
char *tided_path_join(const char *dir, const char *name);

#endif /* TIDE_DAEMON_STORE_H */
