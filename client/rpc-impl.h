/* SPDX-License-Identifier: MIT */
/*
 * rpc-impl.h: the private parts of libtide's RPC client (libtide.c) — the
 * gRPC C core call helpers and the wire names of the daemon's methods.
 *
 * Only libtide.c includes this header; it is never installed. It is split
 * out so that the call machinery (how a batch is started and waited for,
 * how a status becomes the client's error) reads on its own, apart from the
 * conversions between tide.v1 messages and the public structs.
 *
 * Threads: everything here runs on the thread that called into libtide.
 * Each call gets its own pluck completion queue, so two clients used from
 * two threads share no state but gRPC's own (which is thread-safe).
 */
#ifndef TIDE_CLIENT_RPC_IMPL_H
#define TIDE_CLIENT_RPC_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>

#include "tide/client.h"

/* The daemon's methods, as "/" + service descriptor name + "/" + method. */
#define TIDE__RPC_SUBMIT          "/tide.v1.Jobs/Submit"
#define TIDE__RPC_PLAN            "/tide.v1.Jobs/Plan"
#define TIDE__RPC_TRAIN           "/tide.v1.Jobs/Train"
#define TIDE__RPC_GET             "/tide.v1.Jobs/Get"
#define TIDE__RPC_LIST            "/tide.v1.Jobs/List"
#define TIDE__RPC_CANCEL          "/tide.v1.Jobs/Cancel"
#define TIDE__RPC_WATCH           "/tide.v1.Jobs/Watch"
#define TIDE__RPC_READ_VARIABLES  "/tide.v1.Jobs/ReadVariables"
#define TIDE__RPC_CHECKPOINT      "/tide.v1.Jobs/Checkpoint"
#define TIDE__RPC_TRACE           "/tide.v1.Jobs/Trace"
#define TIDE__RPC_REMOVE          "/tide.v1.Jobs/Remove"
#define TIDE__RPC_WRITE_VARIABLES "/tide.v1.Jobs/WriteVariables"
#define TIDE__RPC_SET_PRIORITY    "/tide.v1.Jobs/SetPriority"
#define TIDE__RPC_STATUS          "/tide.v1.Daemon/Status"

/* Default time limits, in milliseconds. */
#define TIDE__CONNECT_TIMEOUT_MS 5000u
#define TIDE__CALL_TIMEOUT_MS    120000u

/* The connection behind a tide_client handle. */
struct tide_client {
    char *target;      /* as the caller gave it */
    char *grpc_target; /* as gRPC wants it ("unix:/..." or "host:port") */
    bool is_unix;
    grpc_channel *channel;
    bool grpc_initialized; /* grpc_init() was called and needs its grpc_shutdown() */
    uint32_t call_timeout_ms;
    uint32_t stream_timeout_ms; /* 0: wait forever for each stream message */
    int code;                   /* the last call's enum tide_code */
    char *message;              /* its message, malloc'd; NULL means "" */
};

/*
 * One call in progress: its queue, the gRPC call, and where the status goes.
 * Streams post one batch at a time per kind of op and wait for each by tag.
 */
struct tide__rpc {
    tide_client *client;
    grpc_completion_queue *cq;
    grpc_call *call;
    grpc_metadata_array initial_metadata;
    grpc_metadata_array trailing_metadata;
    grpc_status_code status;
    grpc_slice details;
    bool timed_out;      /* a wait passed the stream timeout; the call was cancelled */
    bool initial_posted; /* RECV_INITIAL_METADATA was posted (exactly once per call) */
};

/* Tags of a call's batches; one batch of each kind is in flight at most. */
enum tide__rpc_tag {
    TIDE__TAG_START = 1,
    TIDE__TAG_SEND,
    TIDE__TAG_RECV,
    TIDE__TAG_CLOSE,
    TIDE__TAG_STATUS,
};

/* Records the client's error (code and printf message) and returns code. */
int tide__client_fail(tide_client *c, int code, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

#endif /* TIDE_CLIENT_RPC_IMPL_H */
