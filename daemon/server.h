/* SPDX-License-Identifier: MIT */
/*
 * server.h: tided's gRPC server on gRPC's C core, driven from the libev loop.
 *
 * The server owns the method table (which handler serves which path, and
 * whether it is unary, server-streaming, client-streaming or
 * bidirectional), the calls, the Unix socket with each connection's peer
 * credentials, the optional TCP port with TLS and bearer tokens, and
 * grpc.health.v1.Health.
 *
 * A handler gets a call and, for unary and server-streaming methods, the
 * unpacked request (the handler owns it and frees it with
 * protobuf_c_message_free_unpacked); for a client-streaming or bidirectional
 * method it gets the first message of the stream, or NULL when the client
 * half-closed at once.
 * It answers with tided_call_reply or tided_call_fail, or — for streams and
 * replies that wait for the worker — takes ownership of the call's events
 * with tided_call_set_owner and writes, reads and finishes later.
 *
 * A call stays valid for its owner until the owner's done callback ran
 * (the call is over: the status went out, or the client went away); after
 * that the owner must forget it. A call without an owner is answered by
 * whoever holds it, once.
 *
 * Threads: every function here runs on the main thread (the loop's); see
 * server.c's DESIGN section.
 *
 * Example usage (a unary handler, and a stream answered later):
 *
 *     void tided_rpc_get(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *req)
 *     {
 *         ...
 *         if (!job)
 *             tided_call_fail(call, GRPC_STATUS_NOT_FOUND, "no job \"%s\"", id);
 *         else
 *             tided_call_reply(call, &info.base);
 *         protobuf_c_message_free_unpacked(req, NULL);
 *     }
 *
 *     tided_call_set_owner(call, &train_ops, job);   // message, drained, done callbacks
 *     tided_call_read(call);                         // -> train_ops.message(job, call, msg)
 *     tided_call_write(call, &result.base, NULL);    // queued; one write in flight
 *     tided_call_finish(call);                       // OK after the queued writes
 */
#ifndef TIDE_DAEMON_SERVER_H
#define TIDE_DAEMON_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grpc/status.h>
#include <protobuf-c/protobuf-c.h>

#include "common/status.h"
#include "daemon/daemon.h"

struct tided_call;

/* Who is calling: a local user (from SO_PEERCRED) or a token holder over TCP. */
struct tided_identity {
    uint32_t uid;
    uint32_t gid;
    int32_t pid;     /* -1 for remote callers */
    bool admin;      /* root, the admin group, or a monitor token: may see every job */
    bool read_only;  /* a monitor token: may get, list and watch, nothing else */
    bool remote;     /* came over TCP with a token */
    char peer[64];   /* for logs: "uid 1000 pid 4242" or "ipv4:10.0.0.2:5555 (submit)" */
};

/*
 * Whether who may see (get, list, watch, and read the metrics of) a job of
 * owner: its owner, an admin or a monitor token. Thread-safe: it reads only
 * its arguments.
 */
bool tided_identity_may_see(const struct tided_identity *who, uint32_t owner);

/*
 * Whether the user uid is a member of group gid, primary or supplementary
 * (the admin group, quota-groups). It asks NSS: it may block on a remote
 * directory, as admission's checks do once per call.
 */
bool tided_uid_in_group(uint32_t uid, uint32_t gid);

/* What tided_server_authorize found. */
enum tided_authorization {
    TIDED_AUTH_OK = 0,         /* a known token: who is filled */
    TIDED_AUTH_NO_TOKENS = 1,  /* the daemon has no token file: no caller can be identified */
    TIDED_AUTH_MISSING = -1,   /* no authorization header */
    TIDED_AUTH_MALFORMED = -2, /* the header is not "Bearer TOKEN" */
    TIDED_AUTH_UNKNOWN = -3,   /* no such token */
};

/*
 * Checks an authorization header's value ("Bearer TOKEN", len bytes, not
 * NUL-terminated; NULL when the request had none) against the token file:
 * a monitor token gives an admin, read-only identity, a submit token its
 * UID. why gets a static message for anything but TIDED_AUTH_OK. The token
 * comparison takes the same time wherever the strings differ.
 *
 * Thread-safe (the token table is read under its mutex): gRPC's auth
 * threads and the HTTP listener's threads call it.
 */
enum tided_authorization tided_server_authorize(struct tided_server *server, const char *header,
                                                size_t len, struct tided_identity *who,
                                                const char **why);

/*
 * Reads tls-cert and tls-key into NUL-terminated PEM strings; -1 with error
 * naming the file otherwise. Free both with tided_tls_pair_free, which
 * wipes the key first.
 */
int tided_tls_pair_load(const struct tided_config *config, char **cert, char **key, char *error,
                        size_t error_size);
void tided_tls_pair_free(char *cert, char *key);

/* A handler of one method; request is NULL for a stream the client half-closed at once. */
typedef void (*tided_handler)(struct tided_daemon *daemon, struct tided_call *call,
                              ProtobufCMessage *request);

/* The events of a call whose owner streams or answers later. Every entry may be NULL. */
struct tided_call_ops {
    /* A message from a stream (after tided_call_read); NULL: the client half-closed. */
    void (*message)(void *owner, struct tided_call *call, ProtobufCMessage *message);
    /* Every queued write went out. */
    void (*drained)(void *owner, struct tided_call *call);
    /* The call is over; cancelled: the client went away (or gRPC cancelled it). */
    void (*done)(void *owner, struct tided_call *call, bool cancelled);
};

/* Maps a tide status to the gRPC code the wire gets (generated from status.def). */
grpc_status_code tided_grpc_code(enum tide_status status);

const struct tided_identity *tided_call_identity(const struct tided_call *call);

/* Sets (or with ops NULL clears) who receives the call's events. */
void tided_call_set_owner(struct tided_call *call, const struct tided_call_ops *ops, void *owner);

/* Answers a unary call: the response and status OK. */
void tided_call_reply(struct tided_call *call, const ProtobufCMessage *response);
/* Answers a unary call with an already packed response (copied). */
void tided_call_reply_packed(struct tided_call *call, const void *data, size_t len);
/* Ends any call with a status and message (after queued writes of a stream went out). */
void tided_call_fail(struct tided_call *call, grpc_status_code code, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
/* tided_call_fail with the code mapped from a tide status. */
void tided_call_fail_status(struct tided_call *call, enum tide_status status, const char *message);
/* Ends a stream with OK once its queued writes went out. */
void tided_call_finish(struct tided_call *call);

/*
 * Queues a message on a stream; one write is in flight at a time, which is
 * the backpressure. With coalesce_key non-NULL, a queued, not yet sent
 * message with the same key is replaced instead (Watch's STEP events).
 * Returns false when the call is over or finishing, or on OOM.
 */
bool tided_call_write(struct tided_call *call, const ProtobufCMessage *message,
                      const void *coalesce_key);
/* Messages queued or in flight. */
size_t tided_call_pending_writes(const struct tided_call *call);
/* Posts one RECV_MESSAGE on a request stream; the owner's message callback gets it. */
void tided_call_read(struct tided_call *call);
/* Cancels the call now with a status (queued writes are dropped). */
void tided_call_abort(struct tided_call *call, grpc_status_code code, const char *message);

/* Creates the server (nothing listens yet). NULL with error filled on failure. */
struct tided_server *tided_server_new(struct tided_daemon *daemon, char *error, size_t error_size);
/*
 * Checks the method table against the services' descriptors, starts gRPC
 * (and TCP with TLS when configured), the completion-queue thread and the
 * Unix socket. Returns 0, or -1 with error filled.
 */
int tided_server_start(struct tided_server *server, char *error, size_t error_size);
/* Stops accepting connections, removes the socket, reports NOT_SERVING to health watchers. */
void tided_server_stop_accepting(struct tided_server *server);
/*
 * Ends every open call with UNAVAILABLE and shuts gRPC down; when the last
 * call is gone, tided_daemon_server_finished runs.
 */
void tided_server_shutdown(struct tided_server *server);
/* Destroys gRPC's server and queue; after the loop ended. NULL is a no-op. */
void tided_server_free(struct tided_server *server);
/* Reads the token file again (SIGHUP); on an error keeps the old tokens. */
int tided_server_reload_tokens(struct tided_server *server, char *error, size_t error_size);

/* The handlers of the tide.v1 services (jobs.c). */
void tided_rpc_submit(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request);
void tided_rpc_plan(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request);
void tided_rpc_train(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request);
void tided_rpc_get(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request);
void tided_rpc_list(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request);
void tided_rpc_cancel(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request);
void tided_rpc_watch(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request);
void tided_rpc_read_variables(struct tided_daemon *d, struct tided_call *call,
                              ProtobufCMessage *request);
void tided_rpc_checkpoint(struct tided_daemon *d, struct tided_call *call,
                          ProtobufCMessage *request);
void tided_rpc_trace(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request);
void tided_rpc_remove(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request);
void tided_rpc_set_priority(struct tided_daemon *d, struct tided_call *call,
                            ProtobufCMessage *request);
void tided_rpc_write_variables(struct tided_daemon *d, struct tided_call *call,
                               ProtobufCMessage *request);
void tided_rpc_status(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request);

#endif /* TIDE_DAEMON_SERVER_H */
