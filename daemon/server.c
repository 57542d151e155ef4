/* SPDX-License-Identifier: MIT */
/*
 * server.c: gRPC C core, served from the libev loop (see server.h): the
 * method table, call contexts, the completion-queue thread, start and
 * shutdown. Identity and tokens are in auth.c, the Unix socket in listen.c,
 * grpc.health.v1.Health in health.c (their shared structs: server-impl.h).
 *
 * gRPC's C core has no code generator in Debian, so the services are wired
 * by hand: a table gives each method its kind (protoc-c's service
 * descriptors do not record which methods stream) and handler, and is
 * checked against the descriptors at start, so that a method added to the
 * proto without a row here stops the daemon instead of hanging its callers.
 * The rules of gRPC's C core (docs/grpc-c-core.md) are followed exactly:
 * several request_registered_call outstanding per method, a generic
 * request_call answered UNIMPLEMENTED, SEND_INITIAL_METADATA before or with
 * every status, at most one op of each type in flight per call, and the
 * shutdown sequence that ran clean under ASan.
 *
 * DESIGN
 *
 * Threads and what each touches:
 *  - The completion-queue thread runs grpc_completion_queue_next and does
 *    nothing but append {tag, ok} to `events` (under `mutex`) and
 *    ev_async_send the loop; at GRPC_QUEUE_SHUTDOWN it appends a NULL tag
 *    and exits.
 *  - The main thread (the loop) drains `events` in async_cb and owns all
 *    else: every call context, every grpc_call_start_batch and
 *    request_registered_call, the connection table, the socket, health.
 *  - gRPC's own threads run the auth metadata processor for TCP calls; it
 *    reads the token table under `token_mutex` (SIGHUP replaces the table
 *    under the same lock) and blocks on nothing else.
 *
 * Call contexts: one per outstanding request and per live call. A context
 * counts its batches in flight (`refs`); it is freed when none is left and
 * the call is over (RECV_CLOSE_ON_SERVER came back, which each call posts
 * first, as its cancellation watch), or when its request came back with
 * ok = 0 (shutdown). Tags are small structs inside the context naming the
 * op, so one context can have a receive, a send and the close watch in
 * flight together.
 *
 * Identity: tided accepts Unix connections itself, reads SO_PEERCRED and
 * keeps fd -> credentials; gRPC reports such a connection's calls with the
 * peer "fd:N". A new connection may reuse the fd number of a closed one,
 * so the accept watcher runs at a lower priority than the completion
 * events: a call that arrived on the old connection is identified before
 * the new connection's entry replaces the old one.
 */
#include "daemon/server.h"
#include "daemon/server-impl.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <ev.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_posix.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <grpc/grpc_security.h>
#pragma GCC diagnostic pop

#include "common/log.h"
#include "daemon/metrics.h"
#include "grpc/health/v1/health.pb-c.h"
#include "tide/v1/tide.pb-c.h"

/* request_registered_call kept outstanding per method. */
#define REQUESTS_PER_METHOD 4
/* Grace between asking open calls to end and cancelling them at shutdown. */
#define SHUTDOWN_GRACE_SECONDS 2.0

/* ============================================================================
 * Status codes
 * ========================================================================== */

/* One line per tide status; a status added to status.def without one does not compile. */
#define TIDED_GRPC_OK GRPC_STATUS_OK
#define TIDED_GRPC_INVALID GRPC_STATUS_INVALID_ARGUMENT
#define TIDED_GRPC_NOMEM GRPC_STATUS_RESOURCE_EXHAUSTED
#define TIDED_GRPC_NOT_FOUND GRPC_STATUS_NOT_FOUND
#define TIDED_GRPC_EXISTS GRPC_STATUS_ALREADY_EXISTS
#define TIDED_GRPC_UNSUPPORTED GRPC_STATUS_UNIMPLEMENTED
#define TIDED_GRPC_LIMIT GRPC_STATUS_RESOURCE_EXHAUSTED
#define TIDED_GRPC_DOES_NOT_FIT GRPC_STATUS_RESOURCE_EXHAUSTED
#define TIDED_GRPC_IO GRPC_STATUS_INTERNAL
#define TIDED_GRPC_DEVICE GRPC_STATUS_INTERNAL
#define TIDED_GRPC_PERMISSION GRPC_STATUS_PERMISSION_DENIED
#define TIDED_GRPC_STATE GRPC_STATUS_FAILED_PRECONDITION
#define TIDED_GRPC_CANCELLED GRPC_STATUS_CANCELLED
#define TIDED_GRPC_INTERNAL GRPC_STATUS_INTERNAL
#define TIDED_GRPC_UNAVAILABLE GRPC_STATUS_UNAVAILABLE
#define TIDED_GRPC_TIMEOUT GRPC_STATUS_DEADLINE_EXCEEDED

grpc_status_code tided_grpc_code(enum tide_status status)
{
    switch (status) {
#define TIDE_STATUS(name, value, message) \
    case TIDE_##name:                     \
        return TIDED_GRPC_##name;
#include "common/status.def"
#undef TIDE_STATUS
    }
    return GRPC_STATUS_UNKNOWN;
}

/* ============================================================================
 * Types
 * ========================================================================== */

enum method_kind {
    KIND_UNARY,
    KIND_SERVER_STREAM,
    KIND_CLIENT_STREAM,
    KIND_BIDI,
};

static const char *const kind_names[] = {"unary", "server-streaming", "client-streaming",
                                         "bidirectional"};

/* Whether the requests of a kind arrive as a stream (read with RECV_MESSAGE, not with the call). */
static bool kind_reads_stream(enum method_kind kind)
{
    return kind == KIND_CLIENT_STREAM || kind == KIND_BIDI;
}

struct method_row {
    const ProtobufCServiceDescriptor *service;
    const char *name;
    enum method_kind kind;
    tided_handler handler;
};

/* Every method of every service tided serves. */
static const struct method_row method_table[] = {
    {&tide__v1__jobs__descriptor, "Submit", KIND_UNARY, tided_rpc_submit},
    {&tide__v1__jobs__descriptor, "Plan", KIND_UNARY, tided_rpc_plan},
    {&tide__v1__jobs__descriptor, "Train", KIND_BIDI, tided_rpc_train},
    {&tide__v1__jobs__descriptor, "Get", KIND_UNARY, tided_rpc_get},
    {&tide__v1__jobs__descriptor, "List", KIND_UNARY, tided_rpc_list},
    {&tide__v1__jobs__descriptor, "Cancel", KIND_UNARY, tided_rpc_cancel},
    {&tide__v1__jobs__descriptor, "Watch", KIND_SERVER_STREAM, tided_rpc_watch},
    {&tide__v1__jobs__descriptor, "ReadVariables", KIND_UNARY, tided_rpc_read_variables},
    {&tide__v1__jobs__descriptor, "Checkpoint", KIND_UNARY, tided_rpc_checkpoint},
    {&tide__v1__jobs__descriptor, "Trace", KIND_UNARY, tided_rpc_trace},
    {&tide__v1__jobs__descriptor, "Remove", KIND_UNARY, tided_rpc_remove},
    {&tide__v1__jobs__descriptor, "WriteVariables", KIND_CLIENT_STREAM, tided_rpc_write_variables},
    {&tide__v1__jobs__descriptor, "SetPriority", KIND_UNARY, tided_rpc_set_priority},
    {&tide__v1__daemon__descriptor, "Status", KIND_UNARY, tided_rpc_status},
    {&grpc__health__v1__health__descriptor, "Check", KIND_UNARY, tided__health_check},
    {&grpc__health__v1__health__descriptor, "Watch", KIND_SERVER_STREAM, tided__health_watch},
};

#define N_METHODS (sizeof(method_table) / sizeof(method_table[0]))
_Static_assert(N_METHODS == TIDED__SERVER_METHODS, "server-impl.h: TIDED__SERVER_METHODS");

static const ProtobufCServiceDescriptor *const services[] = {
    &tide__v1__jobs__descriptor,
    &tide__v1__daemon__descriptor,
    &grpc__health__v1__health__descriptor,
};


/* ============================================================================
 * Buffers and messages
 * ========================================================================== */

static grpc_byte_buffer *buffer_from_bytes(const void *data, size_t len)
{
    grpc_slice slice = grpc_slice_malloc(len);
    if (len)
        memcpy(GRPC_SLICE_START_PTR(slice), data, len);
    grpc_byte_buffer *b = grpc_raw_byte_buffer_create(&slice, 1);
    grpc_slice_unref(slice);
    return b;
}

static grpc_byte_buffer *buffer_from_message(const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    grpc_slice slice = grpc_slice_malloc(n);
    protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(slice));
    grpc_byte_buffer *b = grpc_raw_byte_buffer_create(&slice, 1);
    grpc_slice_unref(slice);
    return b;
}

/* Unpacks a received buffer; NULL when it is not a valid message (bad input, never a crash). */
static ProtobufCMessage *unpack(grpc_byte_buffer *b, const ProtobufCMessageDescriptor *d)
{
    grpc_byte_buffer_reader reader;
    if (!grpc_byte_buffer_reader_init(&reader, b))
        return NULL;
    grpc_slice slice = grpc_byte_buffer_reader_readall(&reader);
    grpc_byte_buffer_reader_destroy(&reader);
    ProtobufCMessage *m =
        protobuf_c_message_unpack(d, NULL, GRPC_SLICE_LENGTH(slice), GRPC_SLICE_START_PTR(slice));
    grpc_slice_unref(slice);
    return m;
}

/* ============================================================================
 * Call contexts
 * ========================================================================== */

static struct tided_call *call_new(struct tided_server *s, struct method *m)
{
    struct tided_call *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->server = s;
    c->method = m;
    c->tag_new = (struct tag){c, OP_NEW_CALL};
    c->tag_close = (struct tag){c, OP_RECV_CLOSE};
    c->tag_recv = (struct tag){c, OP_RECV};
    c->tag_send = (struct tag){c, OP_SEND};
    c->tag_status = (struct tag){c, OP_STATUS};
    c->health_sent = -1;
    grpc_metadata_array_init(&c->request_metadata);
    if (!m)
        grpc_call_details_init(&c->details);
    c->next = s->calls;
    if (s->calls)
        s->calls->prev = c;
    s->calls = c;
    s->n_calls++;
    return c;
}

static void drop_queue(struct tided_call *c)
{
    while (c->head) {
        struct out_message *m = c->head;
        c->head = m->next;
        grpc_byte_buffer_destroy(m->buffer);
        free(m);
    }
    c->tail = NULL;
    c->queued = 0;
}

static void check_finished(struct tided_server *s);

static void call_free(struct tided_call *c)
{
    struct tided_server *s = c->server;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->calls = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->n_calls--;
    drop_queue(c);
    if (c->call)
        grpc_call_unref(c->call);
    grpc_metadata_array_destroy(&c->request_metadata);
    if (!c->method)
        grpc_call_details_destroy(&c->details);
    if (c->payload)
        grpc_byte_buffer_destroy(c->payload);
    if (c->recv_buffer)
        grpc_byte_buffer_destroy(c->recv_buffer);
    if (c->sending)
        grpc_byte_buffer_destroy(c->sending);
    if (c->reply_buffer)
        grpc_byte_buffer_destroy(c->reply_buffer);
    if (c->have_details)
        grpc_slice_unref(c->status_details);
    free(c->health_service);
    free(c);
    check_finished(s);
}

/* Frees the context when nothing is in flight and the call is over (or never began). */
static void call_release_if_idle(struct tided_call *c)
{
    if (c->refs == 0 && (c->closed || !c->started))
        call_free(c);
}

static bool start_batch(struct tided_call *c, const grpc_op *ops, size_t n, struct tag *tag)
{
    grpc_call_error e = grpc_call_start_batch(c->call, ops, n, tag, NULL);
    if (e != GRPC_CALL_OK) {
        TIDE_LOG_ERROR("%s: grpc_call_start_batch: %s", c->path, grpc_call_error_to_string(e));
        return false;
    }
    c->refs++;
    return true;
}

static void post_status(struct tided_call *c)
{
    grpc_op ops[3];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    if (!c->initial_sent) {
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
        c->initial_sent = true;
    }
    if (c->reply_buffer) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = c->reply_buffer;
    }
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = c->code;
    ops[n].data.send_status_from_server.status_details = c->have_details ? &c->status_details
                                                                         : NULL;
    n++;
    c->status_posted = true;
    start_batch(c, ops, n, &c->tag_status);
}

/* Sends the next queued message, or the status once the queue is empty. */
static void pump(struct tided_call *c)
{
    if (c->send_in_flight || c->closed || c->status_posted)
        return;
    if (c->head) {
        struct out_message *m = c->head;
        c->head = m->next;
        if (!c->head)
            c->tail = NULL;
        c->queued--;
        grpc_op ops[2];
        size_t n = 0;
        memset(ops, 0, sizeof(ops));
        if (!c->initial_sent) {
            ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
            c->initial_sent = true;
        }
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = m->buffer;
        c->sending = m->buffer;
        free(m);
        if (start_batch(c, ops, n, &c->tag_send)) {
            c->send_in_flight = true;
        } else {
            grpc_byte_buffer_destroy(c->sending);
            c->sending = NULL;
        }
        return;
    }
    if (c->finishing)
        post_status(c);
}

/* ============================================================================
 * The call API (server.h)
 * ========================================================================== */

const struct tided_identity *tided_call_identity(const struct tided_call *c)
{
    return &c->identity;
}

void tided_call_set_owner(struct tided_call *c, const struct tided_call_ops *ops, void *owner)
{
    c->ops = ops;
    c->owner = ops ? owner : NULL;
}

static void set_status(struct tided_call *c, grpc_status_code code, const char *message)
{
    c->finishing = true;
    c->code = code;
    if (message && message[0]) {
        c->status_details = grpc_slice_from_copied_string(message);
        c->have_details = true;
    }
}

void tided_call_reply(struct tided_call *c, const ProtobufCMessage *response)
{
    if (c->finishing || c->closed)
        return;
    c->reply_buffer = buffer_from_message(response);
    set_status(c, GRPC_STATUS_OK, NULL);
    pump(c);
}

void tided_call_reply_packed(struct tided_call *c, const void *data, size_t len)
{
    if (c->finishing || c->closed)
        return;
    c->reply_buffer = buffer_from_bytes(data, len);
    set_status(c, GRPC_STATUS_OK, NULL);
    pump(c);
}

void tided_call_fail(struct tided_call *c, grpc_status_code code, const char *format, ...)
{
    if (c->finishing || c->closed)
        return;
    char message[1024];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof(message), format, args);
    va_end(args);
    TIDE_LOG_DEBUG("%s from %s: status %d: %s", c->path, c->identity.peer, (int)code, message);
    set_status(c, code, message);
    pump(c);
}

void tided_call_fail_status(struct tided_call *c, enum tide_status status, const char *message)
{
    tided_call_fail(c, tided_grpc_code(status), "%s",
                    message && message[0] ? message : tide_strerror(status));
}

void tided_call_finish(struct tided_call *c)
{
    if (c->finishing || c->closed)
        return;
    set_status(c, GRPC_STATUS_OK, NULL);
    pump(c);
}

bool tided_call_write(struct tided_call *c, const ProtobufCMessage *message, const void *key)
{
    if (c->finishing || c->closed)
        return false;
    if (key) {
        for (struct out_message *m = c->head; m; m = m->next) {
            if (m->key == key) {
                grpc_byte_buffer_destroy(m->buffer);
                m->buffer = buffer_from_message(message);
                return true;
            }
        }
    }
    struct out_message *m = calloc(1, sizeof(*m));
    if (!m)
        return false;
    m->buffer = buffer_from_message(message);
    m->key = key;
    if (c->tail)
        c->tail->next = m;
    else
        c->head = m;
    c->tail = m;
    c->queued++;
    pump(c);
    return true;
}

size_t tided_call_pending_writes(const struct tided_call *c)
{
    return c->queued + (c->send_in_flight ? 1 : 0);
}

static void post_recv(struct tided_call *c)
{
    grpc_op ops[2];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    if (!c->initial_sent) {
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
        c->initial_sent = true;
    }
    ops[n].op = GRPC_OP_RECV_MESSAGE;
    ops[n++].data.recv_message.recv_message = &c->recv_buffer;
    if (start_batch(c, ops, n, &c->tag_recv))
        c->recv_posted = true;
}

void tided_call_read(struct tided_call *c)
{
    if (c->closed || c->finishing || c->recv_posted)
        return;
    post_recv(c);
}

void tided_call_abort(struct tided_call *c, grpc_status_code code, const char *message)
{
    if (c->closed || c->status_posted)
        return;
    TIDE_LOG_INFO("%s from %s: cancelled: %s", c->path, c->identity.peer, message);
    drop_queue(c);
    c->finishing = true;
    c->status_posted = true;
    c->code = code;
    grpc_call_cancel_with_status(c->call, code, message, NULL);
}

/* ============================================================================
 * Completions (main thread)
 * ========================================================================== */

static void request_call(struct tided_server *s, struct method *m);

static void start_call(struct tided_server *s, struct tided_call *c)
{
    struct tided_daemon *d = s->daemon;
    c->started = true;
    if (c->method) {
        snprintf(c->path, sizeof(c->path), "%s", c->method->path);
    } else {
        char *method = grpc_slice_to_c_string(c->details.method);
        snprintf(c->path, sizeof(c->path), "%s", method ? method : "?");
        gpr_free(method);
    }
    tided__call_identify(s, c);

    /* The cancellation watch, posted first on every call. */
    grpc_op close_op;
    memset(&close_op, 0, sizeof(close_op));
    close_op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    close_op.data.recv_close_on_server.cancelled = &c->cancelled;
    if (!start_batch(c, &close_op, 1, &c->tag_close)) {
        c->closed = true;
        return;
    }
    TIDE_LOG_DEBUG("%s from %s", c->path, c->identity.peer);

    if (!c->method) {
        tided_call_fail(c, GRPC_STATUS_UNIMPLEMENTED, "tided does not serve %s", c->path);
        return;
    }
    bool health = c->method->row->service == &grpc__health__v1__health__descriptor;
    if (!health && d->phase != TIDED_SERVING) {
        tided_call_fail(c, GRPC_STATUS_UNAVAILABLE, "tided is shutting down");
        return;
    }
    if (!health && !c->identified) {
        tided_call_fail(c, GRPC_STATUS_UNAUTHENTICATED, "tided cannot tell who is calling (%s)",
                        c->identity.peer);
        return;
    }
    if (kind_reads_stream(c->method->row->kind)) {
        c->first_recv = true;
        post_recv(c);
        return;
    }
    if (!c->payload) {
        tided_call_fail(c, GRPC_STATUS_INVALID_ARGUMENT, "%s: no request message", c->path);
        return;
    }
    ProtobufCMessage *request = unpack(c->payload, c->method->input);
    grpc_byte_buffer_destroy(c->payload);
    c->payload = NULL;
    if (!request) {
        tided_call_fail(c, GRPC_STATUS_INVALID_ARGUMENT, "%s: the request is not a valid %s",
                        c->path, c->method->input->name);
        return;
    }
    c->method->row->handler(d, c, request);
}

static void on_recv(struct tided_call *c, bool ok)
{
    c->recv_posted = false;
    grpc_byte_buffer *b = c->recv_buffer;
    c->recv_buffer = NULL;
    if (!ok || c->closed || c->finishing) {
        if (b)
            grpc_byte_buffer_destroy(b);
        return;
    }
    ProtobufCMessage *m = NULL;
    if (b) {
        m = unpack(b, c->method->input);
        grpc_byte_buffer_destroy(b);
        if (!m) {
            tided_call_fail(c, GRPC_STATUS_INVALID_ARGUMENT, "%s: a message is not a valid %s",
                            c->path, c->method->input->name);
            return;
        }
    }
    if (c->first_recv) {
        c->first_recv = false;
        c->method->row->handler(c->server->daemon, c, m);
    } else if (c->ops && c->ops->message) {
        c->ops->message(c->owner, c, m);
    } else if (m) {
        protobuf_c_message_free_unpacked(m, NULL);
    }
}

static void on_send(struct tided_call *c, bool ok)
{
    c->send_in_flight = false;
    if (c->sending) {
        grpc_byte_buffer_destroy(c->sending);
        c->sending = NULL;
    }
    if (!ok) {
        drop_queue(c); /* the stream broke; the close watch reports it */
        return;
    }
    pump(c);
    if (!c->head && !c->send_in_flight && !c->finishing && c->ops && c->ops->drained)
        c->ops->drained(c->owner, c);
}

static void on_event(struct tided_server *s, struct tag *tag, bool ok)
{
    if (tag->op == OP_SHUTDOWN) {
        s->shutdown_tag_seen = true;
        check_finished(s);
        return;
    }
    struct tided_call *c = tag->call;
    c->refs--;
    switch (tag->op) {
    case OP_NEW_CALL:
        if (!ok) {
            c->closed = true; /* shutdown: the request will never be a call */
            break;
        }
        request_call(s, c->method); /* keep the number of outstanding requests */
        start_call(s, c);
        break;
    case OP_RECV_CLOSE: {
        c->closed = true;
        drop_queue(c);
        const struct tided_call_ops *ops = c->ops;
        void *owner = c->owner;
        c->ops = NULL;
        c->owner = NULL;
        if (c->cancelled)
            TIDE_LOG_DEBUG("%s from %s: the client went away", c->path, c->identity.peer);
        /* Counted once, by the path tided serves (never a client's made-up one) and code. */
        tided_metrics_rpc_done(s->daemon->metrics, c->method ? c->method->path + 1 : NULL,
                               c->status_posted ? (int)c->code : GRPC_STATUS_CANCELLED);
        if (ops && ops->done)
            ops->done(owner, c, c->cancelled != 0);
        break;
    }
    case OP_RECV:
        on_recv(c, ok);
        break;
    case OP_SEND:
        on_send(c, ok);
        break;
    case OP_STATUS:
        if (c->reply_buffer) {
            grpc_byte_buffer_destroy(c->reply_buffer);
            c->reply_buffer = NULL;
        }
        break;
    case OP_SHUTDOWN:
        break;
    }
    call_release_if_idle(c);
}

static void async_cb(struct ev_loop *loop, ev_async *watcher, int revents)
{
    (void)loop, (void)revents;
    struct tided_server *s = watcher->data;
    for (;;) {
        pthread_mutex_lock(&s->mutex);
        struct event *events = s->events;
        size_t n = s->n_events;
        s->events = NULL;
        s->n_events = s->cap_events = 0;
        pthread_mutex_unlock(&s->mutex);
        if (n == 0) {
            free(events);
            return;
        }
        for (size_t i = 0; i < n; i++) {
            if (!events[i].tag) {
                /* The queue is shut down and its thread has exited. */
                pthread_join(s->cq_thread, NULL);
                s->cq_thread_running = false;
                s->finished = true;
                tided_daemon_server_finished(s->daemon);
                continue;
            }
            on_event(s, events[i].tag, events[i].ok != 0);
        }
        free(events);
    }
}

static void *cq_main(void *arg)
{
    struct tided_server *s = arg;
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_QUEUE_TIMEOUT)
            continue;
        bool last = ev.type == GRPC_QUEUE_SHUTDOWN;
        pthread_mutex_lock(&s->mutex);
        if (s->n_events == s->cap_events) {
            size_t cap = s->cap_events ? s->cap_events * 2 : 64;
            struct event *grown = realloc(s->events, cap * sizeof(*grown));
            if (!grown) {
                /* Losing a completion would leak a call forever: this cannot be survived. */
                pthread_mutex_unlock(&s->mutex);
                TIDE_LOG_ERROR("out of memory in the completion-queue thread");
                abort();
            }
            s->events = grown;
            s->cap_events = cap;
        }
        s->events[s->n_events++] = (struct event){last ? NULL : ev.tag, ev.success};
        pthread_mutex_unlock(&s->mutex);
        ev_async_send(s->daemon->loop, &s->async);
        if (last)
            break;
    }
    return NULL;
}

static void request_call(struct tided_server *s, struct method *m)
{
    if (s->shutting_down)
        return;
    struct tided_call *c = call_new(s, m);
    if (!c) {
        TIDE_LOG_ERROR("out of memory for a call context");
        return;
    }
    grpc_call_error e;
    if (m)
        e = grpc_server_request_registered_call(
            s->server, m->registered, &c->call, &c->deadline, &c->request_metadata,
            kind_reads_stream(m->row->kind) ? NULL : &c->payload, s->cq, s->cq, &c->tag_new);
    else
        e = grpc_server_request_call(s->server, &c->call, &c->details, &c->request_metadata, s->cq,
                                     s->cq, &c->tag_new);
    if (e != GRPC_CALL_OK) {
        TIDE_LOG_ERROR("requesting a call for %s: %s", m ? m->path : "unknown methods",
                       grpc_call_error_to_string(e));
        call_free(c);
        return;
    }
    c->refs++;
}

/* ============================================================================
 * Life cycle
 * ========================================================================== */

static void cancel_timer_cb(struct ev_loop *loop, ev_timer *w, int revents);

struct tided_server *tided_server_new(struct tided_daemon *d, char *error, size_t size)
{
    struct tided_server *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(error, size, "out of memory");
        return NULL;
    }
    s->daemon = d;
    s->listen_fd = -1;
    s->shutdown_tag = (struct tag){NULL, OP_SHUTDOWN};
    pthread_mutex_init(&s->mutex, NULL);
    pthread_mutex_init(&s->token_mutex, NULL);
    ev_async_init(&s->async, async_cb);
    s->async.data = s;
    ev_set_priority(&s->async, EV_MAXPRI);
    ev_async_start(d->loop, &s->async); /* before the completion-queue thread exists */
    ev_io_init(&s->accept_io, tided__accept_cb, -1, EV_READ);
    s->accept_io.data = s;
    ev_set_priority(&s->accept_io, EV_MINPRI);
    ev_timer_init(&s->accept_pause, tided__accept_resume_cb, 1.0, 0.0);
    s->accept_pause.data = s;
    ev_timer_init(&s->cancel_timer, cancel_timer_cb, SHUTDOWN_GRACE_SECONDS, 0.0);
    s->cancel_timer.data = s;
    if (d->config.admin_group[0]) {
        struct group *g = getgrnam(d->config.admin_group);
        if (g) {
            s->admin_gid = g->gr_gid;
            s->have_admin_gid = true;
        } else {
            TIDE_LOG_WARN("admin-group \"%s\": no such group; only root is an admin",
                          d->config.admin_group);
        }
    }
    return s;
}

/* Finds each table row in its service descriptor, and each descriptor method in the table. */
static int check_methods(struct tided_server *s, char *error, size_t size)
{
    for (size_t i = 0; i < N_METHODS; i++) {
        const struct method_row *row = &method_table[i];
        const ProtobufCMethodDescriptor *md =
            protobuf_c_service_descriptor_get_method_by_name(row->service, row->name);
        if (!md) {
            snprintf(error, size, "the method table names %s.%s, which the proto does not have",
                     row->service->name, row->name);
            return -1;
        }
        s->methods[i].row = row;
        s->methods[i].input = md->input;
        snprintf(s->methods[i].path, sizeof(s->methods[i].path), "/%s/%s", row->service->name,
                 md->name);
    }
    for (size_t k = 0; k < sizeof(services) / sizeof(services[0]); k++) {
        for (unsigned j = 0; j < services[k]->n_methods; j++) {
            bool found = false;
            for (size_t i = 0; i < N_METHODS && !found; i++)
                found = method_table[i].service == services[k] &&
                        strcmp(method_table[i].name, services[k]->methods[j].name) == 0;
            if (!found) {
                snprintf(error, size, "the proto's method %s.%s has no row in tided's method "
                                      "table (kind and handler)",
                         services[k]->name, services[k]->methods[j].name);
                return -1;
            }
        }
    }
    return 0;
}

int tided_server_start(struct tided_server *s, char *error, size_t size)
{
    struct tided_daemon *d = s->daemon;
    if (check_methods(s, error, size) != 0)
        return -1;

    s->cq = grpc_completion_queue_create_for_next(NULL);
    grpc_arg args[3];
    memset(args, 0, sizeof(args));
    args[0].type = GRPC_ARG_INTEGER;
    args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[0].value.integer = (int)d->config.max_message;
    args[1].type = GRPC_ARG_INTEGER;
    args[1].key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
    args[1].value.integer = -1;
    /* Without this a second tided would share --listen's port (SO_REUSEPORT) and half the calls. */
    args[2].type = GRPC_ARG_INTEGER;
    args[2].key = (char *)GRPC_ARG_ALLOW_REUSEPORT;
    args[2].value.integer = 0;
    grpc_channel_args channel_args = {.num_args = 3, .args = args};
    s->server = grpc_server_create(&channel_args, NULL);
    grpc_server_register_completion_queue(s->server, s->cq, NULL);
    for (size_t i = 0; i < N_METHODS; i++) {
        struct method *m = &s->methods[i];
        m->registered = grpc_server_register_method(s->server, m->path, NULL,
                                                    kind_reads_stream(m->row->kind)
                                                        ? GRPC_SRM_PAYLOAD_NONE
                                                        : GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER,
                                                    0);
        if (!m->registered) {
            snprintf(error, size, "gRPC refused to register %s", m->path);
            return -1;
        }
        TIDE_LOG_DEBUG("method %s (%s)", m->path, kind_names[m->row->kind]);
    }
    s->insecure = grpc_insecure_server_credentials_create();
    /* Read whenever configured: the TCP port and the HTTP listener both check them. */
    if (d->config.tokens[0] && tided_server_reload_tokens(s, error, size) != 0)
        return -1;
    if (d->config.listen[0] && tided__tcp_port_add(s, error, size) != 0)
        return -1;
    if (tided__socket_open(s, error, size) != 0)
        return -1;

    grpc_server_start(s->server);
    s->grpc_started = true;
    int rc = pthread_create(&s->cq_thread, NULL, cq_main, s);
    if (rc != 0) {
        snprintf(error, size, "cannot start the completion-queue thread: %s", strerror(rc));
        return -1;
    }
    s->cq_thread_running = true;
    for (size_t i = 0; i < N_METHODS; i++) {
        for (int k = 0; k < REQUESTS_PER_METHOD; k++)
            request_call(s, &s->methods[i]);
    }
    request_call(s, NULL);
    ev_io_set(&s->accept_io, s->listen_fd, EV_READ);
    ev_io_start(d->loop, &s->accept_io);
    TIDE_LOG_INFO("serving %zu methods on %s (max message %" PRIu64 " bytes)", N_METHODS,
                  d->config.socket, d->config.max_message);
    return 0;
}

void tided_server_stop_accepting(struct tided_server *s)
{
    struct ev_loop *loop = s->daemon->loop;
    ev_io_stop(loop, &s->accept_io);
    ev_timer_stop(loop, &s->accept_pause);
    if (s->listen_fd >= 0) {
        close(s->listen_fd);
        s->listen_fd = -1;
    }
    if (s->socket_created) {
        unlink(s->daemon->config.socket);
        s->socket_created = false;
    }
    tided__health_changed(s);
}

static void check_finished(struct tided_server *s)
{
    if (!s->shutting_down || !s->shutdown_tag_seen || s->n_calls != 0 || s->cq_shutdown_requested)
        return;
    ev_timer_stop(s->daemon->loop, &s->cancel_timer);
    s->cq_shutdown_requested = true;
    grpc_completion_queue_shutdown(s->cq);
}

static void cancel_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop, (void)revents;
    struct tided_server *s = w->data;
    TIDE_LOG_INFO("cancelling %zu call(s) that did not end in time", s->n_calls);
    grpc_server_cancel_all_calls(s->server);
}

void tided_server_shutdown(struct tided_server *s)
{
    if (s->shutting_down)
        return;
    tided_server_stop_accepting(s);
    s->shutting_down = true;
    if (!s->grpc_started) {
        s->finished = true;
        tided_daemon_server_finished(s->daemon);
        return;
    }
    for (struct tided_call *c = s->calls; c; c = c->next) {
        if (c->started && !c->closed)
            tided_call_fail(c, GRPC_STATUS_UNAVAILABLE, "tided is shutting down");
    }
    grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);
    ev_timer_start(s->daemon->loop, &s->cancel_timer);
    check_finished(s);
}

void tided_server_free(struct tided_server *s)
{
    if (!s)
        return;
    struct ev_loop *loop = s->daemon->loop;
    if (s->server && !s->finished) {
        /*
         * A start that failed part of the way (nothing was served): shut gRPC
         * down here. The queue reports its shutdown only after every pending
         * tag, so draining it to GRPC_QUEUE_SHUTDOWN collects them all.
         */
        grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);
        grpc_server_cancel_all_calls(s->server);
        grpc_completion_queue_shutdown(s->cq);
        if (s->cq_thread_running) {
            pthread_join(s->cq_thread, NULL);
            s->cq_thread_running = false;
        } else {
            while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
                       .type != GRPC_QUEUE_SHUTDOWN) {
            }
        }
    }
    ev_async_stop(loop, &s->async);
    ev_io_stop(loop, &s->accept_io);
    ev_timer_stop(loop, &s->accept_pause);
    ev_timer_stop(loop, &s->cancel_timer);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->socket_created)
        unlink(s->daemon->config.socket);
    while (s->calls) /* left only after a failed start */
        call_free(s->calls);
    if (s->server)
        grpc_server_destroy(s->server);
    if (s->cq)
        grpc_completion_queue_destroy(s->cq);
    if (s->insecure)
        grpc_server_credentials_release(s->insecure);
    free(s->events);
    free(s->conns);
    tided__tokens_free(s->tokens, s->n_tokens);
    pthread_mutex_destroy(&s->mutex);
    pthread_mutex_destroy(&s->token_mutex);
    free(s);
}
