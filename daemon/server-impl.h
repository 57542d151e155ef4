/* SPDX-License-Identifier: MIT */
/*
 * server-impl.h: the server's structs and the internal functions that its
 * files share; nothing outside the server's files includes it.
 *
 * The server is four files around struct tided_server (see server.c's
 * DESIGN section for the threads):
 *
 *   server.c  the method table, call contexts, the completion-queue thread,
 *             start and shutdown
 *   auth.c    who is calling: Unix peers' admin group, TCP bearer tokens,
 *             TLS credentials and the TCP port
 *   listen.c  the Unix socket: creating it, accept and SO_PEERCRED
 *   health.c  grpc.health.v1.Health (Check and Watch)
 *
 * Example usage (server.c, when a request came back):
 *
 *     tided__call_identify(s, c);   // auth.c: fills c->identity
 */
#ifndef TIDE_DAEMON_SERVER_IMPL_H
#define TIDE_DAEMON_SERVER_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <ev.h>
#include <grpc/grpc.h>

#include "daemon/server.h"

/* The rows of server.c's method table (checked there at compile time). */
#define TIDED__SERVER_METHODS 16

struct method_row;

struct method {
    const struct method_row *row;
    const ProtobufCMessageDescriptor *input;
    char path[128];
    void *registered; /* grpc_server_register_method's handle */
};

enum tag_op {
    OP_NEW_CALL,
    OP_RECV_CLOSE,
    OP_RECV,
    OP_SEND,
    OP_STATUS,
    OP_SHUTDOWN,
};

struct tag {
    struct tided_call *call; /* NULL for the server's shutdown tag */
    enum tag_op op;
};

struct out_message {
    struct out_message *next;
    grpc_byte_buffer *buffer;
    const void *key;
};

struct tided_call {
    struct tided_server *server;
    struct method *method; /* NULL: the generic request (unknown methods) */
    struct tided_call *prev, *next;

    grpc_call *call;
    gpr_timespec deadline;
    grpc_metadata_array request_metadata;
    grpc_call_details details; /* generic requests only */
    grpc_byte_buffer *payload; /* unary and server-streaming requests */
    struct tag tag_new, tag_close, tag_recv, tag_send, tag_status;

    int refs;          /* batches (and the request) in flight */
    bool started;      /* the request came back: a live call */
    bool closed;       /* RECV_CLOSE_ON_SERVER came back: the call is over */
    int cancelled;     /* RECV_CLOSE_ON_SERVER's out-parameter */
    bool initial_sent; /* SEND_INITIAL_METADATA was in a batch */
    bool finishing;    /* a status is decided; no more writes */
    bool status_posted;
    bool recv_posted;
    bool first_recv; /* the first RECV_MESSAGE of a stream: goes to the handler */
    grpc_byte_buffer *recv_buffer;

    struct out_message *head, *tail;
    size_t queued;
    bool send_in_flight;
    grpc_byte_buffer *sending;      /* the buffer of the write in flight */
    grpc_byte_buffer *reply_buffer; /* a unary reply, sent with the status */
    grpc_status_code code;
    grpc_slice status_details;
    bool have_details;

    const struct tided_call_ops *ops;
    void *owner;
    struct tided_identity identity;
    bool identified;
    char path[160];

    /* grpc.health.v1.Health/Watch */
    bool health_watch;
    char *health_service;
    int health_sent; /* the status last sent, -1 none */
};

struct event {
    void *tag;
    int ok;
};

struct connection {
    bool used;
    struct tided_identity identity;
};

struct token {
    char *token;
    bool monitor;
    uint32_t uid;
};

struct tided_server {
    struct tided_daemon *daemon;

    /* ---- gRPC ---- */
    grpc_server *server;
    grpc_completion_queue *cq;
    grpc_server_credentials *insecure; /* for channels from accepted fds */
    struct method methods[TIDED__SERVER_METHODS];
    bool grpc_started;

    /* ---- the completion-queue thread's hand-off (mutex) ---- */
    pthread_t cq_thread;
    bool cq_thread_running;
    pthread_mutex_t mutex;
    struct event *events;
    size_t n_events, cap_events;
    ev_async async;

    /* ---- calls (main thread) ---- */
    struct tided_call *calls; /* every context: outstanding requests and live calls */
    size_t n_calls;
    bool shutting_down;
    bool shutdown_tag_seen;
    bool cq_shutdown_requested;
    bool finished;
    struct tag shutdown_tag;
    ev_timer cancel_timer;

    /* ---- the Unix socket (main thread) ---- */
    int listen_fd;
    bool socket_created;
    ev_io accept_io;
    ev_timer accept_pause;    /* after EMFILE: retry later instead of spinning */
    struct connection *conns; /* indexed by fd */
    size_t n_conns;
    gid_t admin_gid;
    bool have_admin_gid;

    /* ---- bearer tokens (token_mutex: read by gRPC's auth threads and tided's HTTP threads) ---- */
    pthread_mutex_t token_mutex;
    struct token *tokens;
    size_t n_tokens;
    bool token_file_loaded; /* a token file was read (it may hold no token) */
};

/* ---- auth.c ---- */

/* Whether uid (with primary group gid) is root or a member of admin-group. */
bool tided__admin_member(struct tided_server *s, uid_t uid, gid_t gid);

/* Fills c->identity from the connection table (Unix) or the auth context (TCP). */
void tided__call_identify(struct tided_server *s, struct tided_call *c);

/* Frees a token table, wiping the tokens first. NULL is a no-op. */
void tided__tokens_free(struct token *tokens, size_t n);

/* Loads the TLS pair and adds the TCP port (the tokens are loaded already); -1 with error. */
int tided__tcp_port_add(struct tided_server *s, char *error, size_t size);

/* ---- listen.c ---- */

/* Creates, binds and listens on the Unix socket of the configuration; -1 with error filled. */
int tided__socket_open(struct tided_server *s, char *error, size_t size);

/* The accept watcher: reads each new connection's SO_PEERCRED and hands it to gRPC. */
void tided__accept_cb(struct ev_loop *loop, ev_io *w, int revents);

/* Restarts accepting after the pause that an EMFILE began. */
void tided__accept_resume_cb(struct ev_loop *loop, ev_timer *w, int revents);

/* ---- health.c ---- */

/* grpc.health.v1.Health/Check and /Watch (handlers of the method table). */
void tided__health_check(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *req);
void tided__health_watch(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *req);

/* Sends every health watcher its service's status where it changed. */
void tided__health_changed(struct tided_server *s);

#endif /* TIDE_DAEMON_SERVER_IMPL_H */
