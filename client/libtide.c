/* SPDX-License-Identifier: MIT */
/*
 * libtide.c: libtide's RPC client (tide/client.h) on gRPC's C core.
 *
 * Debian ships no gRPC code generator for C, so calls are made by hand: the
 * request is packed with protobuf-c into a byte buffer, the call created on
 * the client's channel with a method path ("/tide.v1.Jobs/Submit"), and the
 * ops started in batches on a completion queue of the call's own, which this
 * thread then plucks. The rules that keep a call from hanging
 * (docs/grpc-c-core.md) hold throughout:
 *
 *   - every call posts exactly one RECV_INITIAL_METADATA: unary calls in
 *     their one batch, streams with their first RECV_MESSAGE (so that a
 *     daemon that sends its headers with its first message, as a
 *     server-streaming daemon does, never holds up the start of a call);
 *   - deadlines are monotonic (GPR_CLOCK_MONOTONIC + a timespan);
 *   - at most one op of each kind is in flight per call, and every batch
 *     started is waited for before the call is released.
 *
 * DESIGN: the Train stream. One message is in flight each way: the client
 * sends batch k + 1 while the daemon runs step k, then waits for step k's
 * result, then for batch k + 1 to have left, and only then builds batch
 * k + 2. Each wait is for something the daemon does without needing
 * anything more from the client (a result for a batch it holds; taking a
 * batch once its previous step is done), so waiting for one tag at a time
 * with pluck cannot deadlock, and the daemon always has the next batch at
 * hand when a step ends.
 *
 * Wire trick: a JobSpec's graph is a sub-message, and on the wire a
 * sub-message is just length-delimited bytes. The builder already hands out
 * the bytes of a tide.v1.Graph, so a spec is packed without its graph and
 * the graph's bytes are appended as field 2, rather than unpacked and packed
 * again (a graph with constants can be large). The same goes for wrapping a
 * spec into a SubmitRequest or PlanRequest (field 1).
 *
 * Weights: a Submit is one message, which tided caps at its max-message, so
 * big Variable values do not ride in it. tide_client_submit sends the graph
 * without them (values.c reads the graph on the wire and copies it without
 * those values), names them in the spec's streamed_variables, then writes
 * them with a WriteVariables stream: chunks pointing into the caller's graph
 * bytes, one in flight, each waited for before the next (the daemon reads
 * the next once the last is in the job's memory).
 *
 * Threads: a client is used by one thread at a time (tide/client.h); each
 * call owns its queue. No state is global but gRPC's own, which
 * grpc_init()/grpc_shutdown() count.
 */
#include "tide/client.h"

#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
/* grpc_security.h declares functions with () prototypes, which -Wstrict-prototypes rejects. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <grpc/grpc_security.h>
#pragma GCC diagnostic pop

#include "client/rpc-impl.h"
#include "client/values-impl.h"
#include "tide/v1/tide.pb-c.h"

/* The largest file read for TLS (certificates and keys). */
#define PEM_FILE_MAX (1 << 20)

/* ============================================================================
 * Names
 * ========================================================================== */

const char *tide_code_name(int code)
{
    static const char *const names[] = {
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    };
    if (code < 0 || code >= (int)(sizeof(names) / sizeof(names[0])))
        return "UNKNOWN_CODE";
    return names[code];
}

const char *tide_job_state_name(enum tide_job_state state)
{
    switch (state) {
    case TIDE_JOB_SUBMITTED:
        return "submitted";
    case TIDE_JOB_COMPILING:
        return "compiling";
    case TIDE_JOB_READY:
        return "ready";
    case TIDE_JOB_RUNNING:
        return "running";
    case TIDE_JOB_DONE:
        return "done";
    case TIDE_JOB_FAILED:
        return "failed";
    case TIDE_JOB_CANCELLED:
        return "cancelled";
    case TIDE_JOB_PARKED:
        return "parked";
    case TIDE_JOB_QUEUED:
        return "queued";
    case TIDE_JOB_UNSPECIFIED:
        break;
    }
    return "unknown";
}

/* ============================================================================
 * Errors
 * ========================================================================== */

static void client_clear_error(tide_client *c)
{
    c->code = TIDE_CODE_OK;
    free(c->message);
    c->message = NULL;
}

static int client_failv(tide_client *c, int code, const char *format, va_list args)
{
    va_list copy;
    va_copy(copy, args);
    int n = vsnprintf(NULL, 0, format, copy);
    va_end(copy);
    free(c->message);
    c->message = NULL;
    c->code = code;
    if (n >= 0) {
        c->message = malloc((size_t)n + 1);
        if (c->message)
            vsnprintf(c->message, (size_t)n + 1, format, args);
    }
    return code;
}

int tide__client_fail(tide_client *c, int code, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    client_failv(c, code, format, args);
    va_end(args);
    return code;
}

int tide_client_error_code(const tide_client *c)
{
    return c ? c->code : TIDE_CODE_INVALID_ARGUMENT;
}

const char *tide_client_error_message(const tide_client *c)
{
    if (!c)
        return "libtide: the client is NULL";
    if (c->code == TIDE_CODE_OK)
        return "";
    return c->message ? c->message : "libtide: out of memory formatting the message";
}

const char *tide_client_target(const tide_client *c)
{
    return c && c->target ? c->target : "";
}

/* Copies src into a fixed-size field, cut to fit and always terminated. */
static void copy_text(char *dst, size_t size, const char *src)
{
    if (!src)
        src = "";
    size_t n = strlen(src);
    if (n >= size)
        n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* ============================================================================
 * Time
 * ========================================================================== */

/* A monotonic deadline ms milliseconds from now; 0 means never. */
static gpr_timespec deadline_after(uint32_t ms)
{
    if (ms == 0)
        return gpr_inf_future(GPR_CLOCK_MONOTONIC);
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                        gpr_time_from_millis((int64_t)ms, GPR_TIMESPAN));
}

/* ============================================================================
 * Byte buffers
 * ========================================================================== */

/* Packs a message into a new byte buffer (destroyed by the caller), or NULL. */
static grpc_byte_buffer *pack_message(const ProtobufCMessage *message)
{
    size_t n = protobuf_c_message_get_packed_size(message);
    grpc_slice slice = grpc_slice_malloc(n);
    protobuf_c_message_pack(message, GRPC_SLICE_START_PTR(slice));
    grpc_byte_buffer *buffer = grpc_raw_byte_buffer_create(&slice, 1);
    grpc_slice_unref(slice);
    return buffer;
}

/* Unpacks a byte buffer into a message of descriptor's type, or NULL when it is not one. */
static ProtobufCMessage *unpack_message(const ProtobufCMessageDescriptor *descriptor,
                                        grpc_byte_buffer *buffer)
{
    grpc_byte_buffer_reader reader;
    if (!grpc_byte_buffer_reader_init(&reader, buffer))
        return NULL;
    grpc_slice slice = grpc_byte_buffer_reader_readall(&reader);
    ProtobufCMessage *message = protobuf_c_message_unpack(
        descriptor, NULL, GRPC_SLICE_LENGTH(slice), GRPC_SLICE_START_PTR(slice));
    grpc_slice_unref(slice);
    grpc_byte_buffer_reader_destroy(&reader);
    return message;
}

/* A growable byte string, for messages spliced together on the wire. */
struct bytes {
    uint8_t *data;
    size_t len, cap;
    bool failed;
};

static void bytes_reserve(struct bytes *b, size_t more)
{
    if (b->failed || b->len + more <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more)
        cap *= 2;
    uint8_t *data = realloc(b->data, cap);
    if (!data) {
        b->failed = true;
        return;
    }
    b->data = data;
    b->cap = cap;
}

static void bytes_append(struct bytes *b, const void *data, size_t len)
{
    bytes_reserve(b, len);
    if (b->failed || len == 0)
        return;
    memcpy(b->data + b->len, data, len);
    b->len += len;
}

static void bytes_varint(struct bytes *b, uint64_t v)
{
    uint8_t buf[10];
    size_t n = 0;
    do {
        buf[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            buf[n] |= 0x80;
        n++;
    } while (v);
    bytes_append(b, buf, n);
}

/* Appends a length-delimited field (wire type 2): a sub-message or bytes. */
static void bytes_field(struct bytes *b, uint32_t field, const void *data, size_t len)
{
    bytes_varint(b, ((uint64_t)field << 3) | 2u);
    bytes_varint(b, len);
    bytes_append(b, data, len);
}

static void bytes_message(struct bytes *b, const ProtobufCMessage *message)
{
    size_t n = protobuf_c_message_get_packed_size(message);
    bytes_reserve(b, n);
    if (b->failed)
        return;
    b->len += protobuf_c_message_pack(message, b->data + b->len);
}

/* ============================================================================
 * Calls
 * ========================================================================== */

/* Creates the call: its own pluck queue, a deadline of deadline_ms (0: none). */
static int rpc_open(struct tide__rpc *r, tide_client *c, const char *method, uint32_t deadline_ms)
{
    memset(r, 0, sizeof(*r));
    r->client = c;
    r->status = GRPC_STATUS_UNKNOWN;
    r->details = grpc_empty_slice();
    grpc_metadata_array_init(&r->initial_metadata);
    grpc_metadata_array_init(&r->trailing_metadata);
    r->cq = grpc_completion_queue_create_for_pluck(NULL);
    if (!r->cq)
        return tide__client_fail(c, TIDE_CODE_INTERNAL,
                                 "libtide: cannot create a completion queue");
    grpc_slice path = grpc_slice_from_static_string(method);
    r->call = grpc_channel_create_call(c->channel, NULL, GRPC_PROPAGATE_DEFAULTS, r->cq, path, NULL,
                                       deadline_after(deadline_ms), NULL);
    grpc_slice_unref(path);
    if (!r->call)
        return tide__client_fail(c, TIDE_CODE_INTERNAL, "libtide: cannot create a call to %s",
                                 method);
    return TIDE_CODE_OK;
}

/* Starts a batch; false when gRPC refuses it (then it will never complete). */
static bool rpc_start(struct tide__rpc *r, const grpc_op *ops, size_t n, enum tide__rpc_tag tag)
{
    return grpc_call_start_batch(r->call, ops, n, (void *)(uintptr_t)tag, NULL) == GRPC_CALL_OK;
}

/*
 * Waits for the batch tagged tag; returns its success. With a stream timeout
 * set, a wait longer than it cancels the call (the batch then completes
 * at once, unsuccessfully) and marks the call timed out.
 */
static bool rpc_wait(struct tide__rpc *r, enum tide__rpc_tag tag, uint32_t timeout_ms)
{
    void *t = (void *)(uintptr_t)tag;
    grpc_event ev = grpc_completion_queue_pluck(r->cq, t, deadline_after(timeout_ms), NULL);
    if (ev.type == GRPC_QUEUE_TIMEOUT) {
        r->timed_out = true;
        grpc_call_cancel_with_status(r->call, GRPC_STATUS_DEADLINE_EXCEEDED,
                                     "libtide: the stream timeout passed", NULL);
        ev = grpc_completion_queue_pluck(r->cq, t, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    }
    return ev.type == GRPC_OP_COMPLETE && ev.success;
}

/*
 * Turns the call's status into the client's error and returns its code.
 * Messages the daemon did not write (a deadline, a dropped connection) are
 * rewritten to say what happened in the client's terms.
 */
static int rpc_status_to_error(struct tide__rpc *r, const char *method)
{
    tide_client *c = r->client;
    if (r->status == GRPC_STATUS_OK) {
        client_clear_error(c);
        return TIDE_CODE_OK;
    }
    char *details = grpc_slice_to_c_string(r->details);
    const char *text = details && *details ? details : "no message";
    const char *name = strrchr(method, '/');
    name = name ? name + 1 : method;
    if (r->timed_out)
        tide__client_fail(c, TIDE_CODE_DEADLINE_EXCEEDED,
                          "%s: no message from %s within the stream timeout of %" PRIu32 " ms",
                          name, c->target, c->stream_timeout_ms);
    else if (r->status == GRPC_STATUS_DEADLINE_EXCEEDED && strstr(text, "Deadline Exceeded"))
        tide__client_fail(c, TIDE_CODE_DEADLINE_EXCEEDED,
                          "%s: no reply from %s within %" PRIu32 " ms", name, c->target,
                          c->call_timeout_ms);
    else if (r->status == GRPC_STATUS_UNAVAILABLE && !strstr(text, "tided") &&
             (strstr(text, "connect") || strstr(text, "Socket closed") ||
              strstr(text, "Connection reset") || strstr(text, "Broken pipe") ||
              strstr(text, "GOAWAY") || strstr(text, "transport")))
        tide__client_fail(c, TIDE_CODE_UNAVAILABLE,
                          "%s: lost the connection to %s (%s); is tided still running?", name,
                          c->target, text);
    else
        tide__client_fail(c, (int)r->status, "%s", text);
    gpr_free(details);
    return c->code;
}

/* Posts RECV_STATUS_ON_CLIENT (and RECV_INITIAL_METADATA if never posted), waits, returns the code.
 */
static int rpc_finish(struct tide__rpc *r, const char *method)
{
    grpc_op ops[2];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    if (!r->initial_posted) {
        ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
        ops[n].data.recv_initial_metadata.recv_initial_metadata = &r->initial_metadata;
        n++;
        r->initial_posted = true;
    }
    ops[n].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[n].data.recv_status_on_client.trailing_metadata = &r->trailing_metadata;
    ops[n].data.recv_status_on_client.status = &r->status;
    ops[n].data.recv_status_on_client.status_details = &r->details;
    n++;
    if (!rpc_start(r, ops, n, TIDE__TAG_STATUS))
        return tide__client_fail(r->client, TIDE_CODE_INTERNAL,
                                 "libtide: cannot start the status batch of %s", method);
    /* Unary calls have their deadline; a stream's status may take a stream timeout at most. */
    rpc_wait(r, TIDE__TAG_STATUS, r->client->stream_timeout_ms);
    return rpc_status_to_error(r, method);
}

/* Releases the call and its queue; every batch started must have been waited for. */
static void rpc_close(struct tide__rpc *r)
{
    if (r->call)
        grpc_call_unref(r->call);
    if (r->cq) {
        grpc_completion_queue_shutdown(r->cq);
        grpc_completion_queue_destroy(r->cq);
    }
    grpc_metadata_array_destroy(&r->initial_metadata);
    grpc_metadata_array_destroy(&r->trailing_metadata);
    grpc_slice_unref(r->details);
    r->call = NULL;
    r->cq = NULL;
}

/*
 * A unary call: sends request (consumed: destroyed here) and, on success,
 * unpacks the reply into *reply (a message of reply_type, which the caller
 * frees with protobuf_c_message_free_unpacked). Returns the code.
 */
static int rpc_unary(tide_client *c, const char *method, grpc_byte_buffer *request,
                     const ProtobufCMessageDescriptor *reply_type, ProtobufCMessage **reply)
{
    *reply = NULL;
    if (!request)
        return tide__client_fail(c, TIDE_CODE_RESOURCE_EXHAUSTED,
                                 "libtide: out of memory packing the request");
    struct tide__rpc r;
    int code = rpc_open(&r, c, method, c->call_timeout_ms);
    if (code != TIDE_CODE_OK) {
        grpc_byte_buffer_destroy(request);
        rpc_close(&r);
        return code;
    }
    grpc_byte_buffer *response = NULL;
    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = request;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &r.initial_metadata;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &response;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &r.trailing_metadata;
    ops[5].data.recv_status_on_client.status = &r.status;
    ops[5].data.recv_status_on_client.status_details = &r.details;
    r.initial_posted = true;
    if (!rpc_start(&r, ops, 6, TIDE__TAG_START)) {
        code =
            tide__client_fail(c, TIDE_CODE_INTERNAL, "libtide: cannot start a call to %s", method);
    } else {
        rpc_wait(&r, TIDE__TAG_START, 0);
        code = rpc_status_to_error(&r, method);
        if (code == TIDE_CODE_OK) {
            *reply = response ? unpack_message(reply_type, response) : NULL;
            if (!*reply)
                code =
                    tide__client_fail(c, TIDE_CODE_INTERNAL, "%s: the daemon's reply is not a %s",
                                      method, reply_type->name);
        }
    }
    grpc_byte_buffer_destroy(request);
    if (response)
        grpc_byte_buffer_destroy(response);
    rpc_close(&r);
    return code;
}

/* ============================================================================
 * Connecting
 * ========================================================================== */

/* Reads a whole PEM file into a malloc'd string, or fails with a message. */
static int read_pem(tide_client *c, const char *what, const char *path, char **out)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT, "libtide: cannot open %s %s: %s",
                                 what, path, strerror(errno));
    char *text = malloc(PEM_FILE_MAX + 1);
    size_t n = text ? fread(text, 1, PEM_FILE_MAX + 1, f) : 0;
    bool bad = ferror(f) != 0;
    fclose(f);
    if (!text)
        return tide__client_fail(c, TIDE_CODE_RESOURCE_EXHAUSTED, "libtide: out of memory");
    if (bad || n == 0 || n > PEM_FILE_MAX) {
        free(text);
        return tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT, "libtide: %s %s is %s", what, path,
                                 bad      ? "unreadable"
                                 : n == 0 ? "empty"
                                          : "larger than 1 MiB");
    }
    text[n] = '\0';
    *out = text;
    return TIDE_CODE_OK;
}

/* The channel credentials for c's target under options, or NULL with the client's error set. */
static grpc_channel_credentials *make_credentials(tide_client *c,
                                                  const struct tide_client_options *o)
{
    if (c->is_unix || o->insecure) {
        if (!c->is_unix && o->token) {
            tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT,
                              "libtide: a token is only sent over TLS; drop insecure or the token");
            return NULL;
        }
        /* On the Unix socket the daemon knows the caller by its uid (SO_PEERCRED). */
        return grpc_insecure_credentials_create();
    }
    char *roots = NULL, *cert = NULL, *key = NULL;
    if (o->ca_file && read_pem(c, "CA file", o->ca_file, &roots) != TIDE_CODE_OK)
        return NULL;
    if ((o->cert_file == NULL) != (o->key_file == NULL)) {
        free(roots);
        tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT,
                          "libtide: mutual TLS needs both cert_file and key_file");
        return NULL;
    }
    if (o->cert_file && (read_pem(c, "certificate", o->cert_file, &cert) != TIDE_CODE_OK ||
                         read_pem(c, "key", o->key_file, &key) != TIDE_CODE_OK)) {
        free(roots);
        free(cert);
        return NULL;
    }
    grpc_ssl_pem_key_cert_pair pair = {.private_key = key, .cert_chain = cert};
    grpc_channel_credentials *ssl =
        grpc_ssl_credentials_create_ex(roots, cert ? &pair : NULL, NULL, NULL);
    free(roots);
    free(cert);
    free(key);
    if (!ssl) {
        tide__client_fail(c, TIDE_CODE_INTERNAL, "libtide: cannot create TLS credentials");
        return NULL;
    }
    if (!o->token)
        return ssl;
    grpc_call_credentials *token = grpc_access_token_credentials_create(o->token, NULL);
    grpc_channel_credentials *both =
        token ? grpc_composite_channel_credentials_create(ssl, token, NULL) : NULL;
    grpc_channel_credentials_release(ssl);
    if (token)
        grpc_call_credentials_release(token);
    if (!both)
        tide__client_fail(c, TIDE_CODE_INTERNAL, "libtide: cannot attach the token");
    return both;
}

/* Sets c->grpc_target and c->is_unix from c->target; checks that a socket is there. */
static int parse_target(tide_client *c)
{
    const char *t = c->target;
    const char *path = NULL;
    if (strncmp(t, "unix:", 5) == 0) {
        path = t + 5;
        if (strncmp(path, "//", 2) == 0)
            path += 2; /* unix:///run/... */
    } else if (t[0] == '/' || t[0] == '.') {
        path = t;
    }
    if (!path) {
        if (!*t || !strchr(t, ':'))
            return tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT,
                                     "libtide: target \"%s\" is neither unix:/path nor host:port",
                                     t);
        c->grpc_target = strdup(t);
    } else {
        if (!*path)
            return tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT,
                                     "libtide: target \"%s\" names no socket path", t);
        c->is_unix = true;
        size_t n = strlen(path) + 6;
        c->grpc_target = malloc(n);
        if (c->grpc_target)
            snprintf(c->grpc_target, n, "unix:%s", path);
        struct stat st;
        if (stat(path, &st) != 0)
            return tide__client_fail(c, TIDE_CODE_UNAVAILABLE,
                                     "cannot connect to %s: %s; is tided running, and is that its "
                                     "socket (tidectl --socket, tided --socket)?",
                                     path, strerror(errno));
        if (!S_ISSOCK(st.st_mode))
            return tide__client_fail(c, TIDE_CODE_UNAVAILABLE,
                                     "cannot connect to %s: not a socket; check the socket path",
                                     path);
        /* Connecting needs write permission on the socket; say so, not "is tided running". */
        if (access(path, W_OK) != 0 && errno == EACCES) {
            struct group *g = getgrgid(st.st_gid);
            char group[64];
            if (g)
                snprintf(group, sizeof(group), "%s", g->gr_name);
            else
                snprintf(group, sizeof(group), "%u", (unsigned)st.st_gid);
            return tide__client_fail(c, TIDE_CODE_PERMISSION_DENIED,
                                     "permission denied on %s: the socket is for group %s "
                                     "(mode %03o); join the group (sudo usermod -aG %s $USER, "
                                     "then log in again)",
                                     path, group, (unsigned)(st.st_mode & 0777), group);
        }
    }
    if (!c->grpc_target)
        return tide__client_fail(c, TIDE_CODE_RESOURCE_EXHAUSTED, "libtide: out of memory");
    return TIDE_CODE_OK;
}

/* Waits until the channel is READY, it fails, or timeout_ms pass. */
static int wait_ready(tide_client *c, uint32_t timeout_ms)
{
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
    if (!cq)
        return tide__client_fail(c, TIDE_CODE_INTERNAL,
                                 "libtide: cannot create a completion queue");
    gpr_timespec deadline = deadline_after(timeout_ms);
    grpc_connectivity_state state = grpc_channel_check_connectivity_state(c->channel, 1);
    int code = TIDE_CODE_OK;
    while (state != GRPC_CHANNEL_READY) {
        if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) {
            code = TIDE_CODE_UNAVAILABLE;
            break;
        }
        void *tag = (void *)(uintptr_t)TIDE__TAG_START;
        grpc_channel_watch_connectivity_state(c->channel, state, deadline, cq, tag);
        grpc_event ev =
            grpc_completion_queue_pluck(cq, tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (!ev.success) {
            code = TIDE_CODE_DEADLINE_EXCEEDED;
            break;
        }
        state = grpc_channel_check_connectivity_state(c->channel, 0);
    }
    grpc_completion_queue_shutdown(cq);
    grpc_completion_queue_destroy(cq);
    if (code == TIDE_CODE_UNAVAILABLE)
        return tide__client_fail(c, code,
                                 "cannot connect to %s: the connection failed; is tided running "
                                 "and listening there%s?",
                                 c->target,
                                 c->is_unix ? " (check the socket path)"
                                            : " (check the port, TLS and the CA)");
    if (code != TIDE_CODE_OK)
        return tide__client_fail(c, TIDE_CODE_UNAVAILABLE,
                                 "cannot connect to %s: no answer within %" PRIu32
                                 " ms; is tided running?",
                                 c->target, timeout_ms);
    return TIDE_CODE_OK;
}

int tide_client_connect(const char *target, const struct tide_client_options *options,
                        tide_client **out)
{
    if (!out)
        return TIDE_CODE_INVALID_ARGUMENT;
    *out = NULL;
    tide_client *c = calloc(1, sizeof(*c));
    if (!c)
        return TIDE_CODE_RESOURCE_EXHAUSTED;
    *out = c;
    static const struct tide_client_options defaults;
    const struct tide_client_options *o = options ? options : &defaults;
    c->call_timeout_ms = o->call_timeout_ms ? o->call_timeout_ms : TIDE__CALL_TIMEOUT_MS;
    c->stream_timeout_ms = o->stream_timeout_ms;
    if (!target)
        return tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT, "libtide: the target is NULL");
    c->target = strdup(target);
    if (!c->target)
        return tide__client_fail(c, TIDE_CODE_RESOURCE_EXHAUSTED, "libtide: out of memory");
    int code = parse_target(c);
    if (code != TIDE_CODE_OK)
        return code;

    grpc_init();
    c->grpc_initialized = true;
    grpc_channel_credentials *creds = make_credentials(c, o);
    if (!creds)
        return c->code;
    /*
     * Graphs, batches and variables can be large: no size limit here (the
     * daemon enforces its own). Retries are off: a Train message must never
     * be replayed behind the stream's back.
     */
    grpc_arg args[4];
    size_t n_args = 0;
    args[n_args++] = (grpc_arg){.type = GRPC_ARG_INTEGER,
                                .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                                .value.integer = -1};
    args[n_args++] = (grpc_arg){.type = GRPC_ARG_INTEGER,
                                .key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH,
                                .value.integer = -1};
    args[n_args++] = (grpc_arg){
        .type = GRPC_ARG_INTEGER, .key = (char *)GRPC_ARG_ENABLE_RETRIES, .value.integer = 0};
    if (o->server_name && !c->is_unix)
        args[n_args++] = (grpc_arg){.type = GRPC_ARG_STRING,
                                    .key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG,
                                    .value.string = (char *)o->server_name};
    grpc_channel_args channel_args = {.num_args = n_args, .args = args};
    c->channel = grpc_channel_create(c->grpc_target, creds, &channel_args);
    grpc_channel_credentials_release(creds);
    if (!c->channel)
        return tide__client_fail(c, TIDE_CODE_INTERNAL, "libtide: cannot create a channel to %s",
                                 c->target);
    code = wait_ready(c, o->connect_timeout_ms ? o->connect_timeout_ms : TIDE__CONNECT_TIMEOUT_MS);
    if (code == TIDE_CODE_OK)
        client_clear_error(c);
    return code;
}

void tide_client_free(tide_client *c)
{
    if (!c)
        return;
    if (c->channel)
        grpc_channel_destroy(c->channel);
    if (c->grpc_initialized)
        grpc_shutdown();
    free(c->target);
    free(c->grpc_target);
    free(c->message);
    free(c);
}

/* ============================================================================
 * From tide.v1 messages to the public structs
 * ========================================================================== */

static void plan_from_proto(const Tide__V1__PlanReport *p, struct tide_job_plan_report *out,
                            bool with_partitions)
{
    memset(out, 0, sizeof(*out));
    if (!p)
        return;
    out->nodes = p->nodes;
    out->budget_bytes = p->budget_bytes;
    out->predicted_peak_bytes = p->predicted_peak_bytes;
    out->fits = p->fits;
    out->min_budget_bytes = p->min_budget_bytes;
    copy_text(out->min_budget_node, sizeof(out->min_budget_node), p->min_budget_node);
    out->swap_in_bytes = p->swap_in_bytes;
    out->swap_out_bytes = p->swap_out_bytes;
    out->fetch_bytes = p->fetch_bytes;
    out->write_back_bytes = p->write_back_bytes;
    out->partition_size = p->partition_size;
    out->swap_threshold = p->swap_threshold;
    out->prefetch_distance = p->prefetch_distance;
    out->host_bytes = p->host_bytes;
    out->plan_us = p->plan_us;
    copy_text(out->message, sizeof(out->message), p->message);
    out->floor_bytes = p->floor_bytes;
    copy_text(out->floor_node, sizeof(out->floor_node), p->floor_node);
    out->predicted_step_ms = p->predicted_step_ms;
    out->predicted_stall_ms = p->predicted_stall_ms;
    copy_text(out->device_profile, sizeof(out->device_profile), p->device_profile);
    out->host_budget_bytes = p->host_budget_bytes;
    out->recompute_bytes = p->recompute_bytes;
    out->recompute_ms = p->recompute_ms;
    out->products = p->products;
    out->tf32_products = p->tf32_products;
    if (!with_partitions || p->n_partitions == 0)
        return;
    out->partitions = calloc(p->n_partitions, sizeof(*out->partitions));
    if (!out->partitions)
        return; /* the summary still stands; n_partitions stays 0 */
    out->n_partitions = (uint32_t)p->n_partitions;
    for (size_t i = 0; i < p->n_partitions; i++) {
        const Tide__V1__PartitionReport *q = p->partitions[i];
        struct tide_job_partition_report *d = &out->partitions[i];
        d->index = q->index;
        d->nodes = q->nodes;
        d->resident_bytes = q->resident_bytes;
        d->swap_in_bytes = q->swap_in_bytes;
        d->swap_out_bytes = q->swap_out_bytes;
        d->fetch_bytes = q->fetch_bytes;
        d->write_back_bytes = q->write_back_bytes;
        copy_text(d->peak_node, sizeof(d->peak_node), q->peak_node);
    }
}

/*
 * The plan's memory timeline from the wire into out (empty when m is NULL:
 * a plan that does not fit). Only the lengths are checked here; the
 * picture checks every position before it draws. (A reply is far below
 * 2^32 entries: counts fit the struct's.) TIDE_CODE_OK, or a code with the
 * client's error set.
 */
static int timeline_from_proto(tide_client *c, const Tide__V1__MemoryTimeline *m,
                               struct tide_memory_timeline *out)
{
    memset(out, 0, sizeof(*out));
    if (!m)
        return TIDE_CODE_OK;
    size_t points = m->n_point_first, parts = m->n_partition_first;
    if (m->n_point_last != points || m->n_point_position != points ||
        m->n_variables_bytes != points || m->n_activations_bytes != points ||
        m->n_swapped_in_bytes != points || m->n_workspace_bytes != points ||
        m->n_partition_last != parts || m->n_partition_arena_top_bytes != parts)
        return tide__client_fail(c, TIDE_CODE_INTERNAL,
                                 "Plan: the daemon's memory timeline has lists of unequal lengths "
                                 "(%zu points, %zu activations, %zu partitions, %zu arena tops)",
                                 points, m->n_activations_bytes, parts,
                                 m->n_partition_arena_top_bytes);
    out->points = calloc(points + 1, sizeof(*out->points));
    out->partitions = calloc(parts + 1, sizeof(*out->partitions));
    out->swap_outs = calloc(m->n_swap_out_positions + 1, sizeof(*out->swap_outs));
    out->swap_ins = calloc(m->n_swap_in_positions + 1, sizeof(*out->swap_ins));
    if (!out->points || !out->partitions || !out->swap_outs || !out->swap_ins) {
        tide_memory_timeline_clear(out);
        return tide__client_fail(c, TIDE_CODE_RESOURCE_EXHAUSTED,
                                 "libtide: out of memory for a timeline of %zu points", points);
    }
    out->n_positions = m->positions;
    out->budget_bytes = m->budget_bytes;
    out->predicted_peak_bytes = m->predicted_peak_bytes;
    out->live_peak_bytes = m->live_peak_bytes;
    out->n_points = (uint32_t)points;
    for (size_t i = 0; i < points; i++) {
        struct tide_memory_timeline_point *pt = &out->points[i];
        pt->first = m->point_first[i];
        pt->last = m->point_last[i];
        pt->position = m->point_position[i];
        pt->bytes[TIDE_MEMORY_VARIABLES] = m->variables_bytes[i];
        pt->bytes[TIDE_MEMORY_ACTIVATIONS] = m->activations_bytes[i];
        pt->bytes[TIDE_MEMORY_SWAPPED_IN] = m->swapped_in_bytes[i];
        pt->bytes[TIDE_MEMORY_WORKSPACE] = m->workspace_bytes[i];
    }
    out->n_partitions = (uint32_t)parts;
    for (size_t i = 0; i < parts; i++) {
        out->partitions[i].first = m->partition_first[i];
        out->partitions[i].last = m->partition_last[i];
        out->partitions[i].arena_top_bytes = m->partition_arena_top_bytes[i];
    }
    out->n_swap_outs = (uint32_t)m->n_swap_out_positions;
    if (out->n_swap_outs)
        memcpy(out->swap_outs, m->swap_out_positions, out->n_swap_outs * sizeof(*out->swap_outs));
    out->n_swap_ins = (uint32_t)m->n_swap_in_positions;
    if (out->n_swap_ins)
        memcpy(out->swap_ins, m->swap_in_positions, out->n_swap_ins * sizeof(*out->swap_ins));
    return TIDE_CODE_OK;
}

static void job_from_proto(const Tide__V1__JobInfo *j, struct tide_job_info *out)
{
    memset(out, 0, sizeof(*out));
    if (!j)
        return;
    copy_text(out->id, sizeof(out->id), j->id);
    copy_text(out->name, sizeof(out->name), j->name);
    out->owner_uid = j->owner_uid;
    out->state = (enum tide_job_state)j->state;
    out->steps = j->steps;
    out->last_loss = j->last_loss;
    out->device_budget_bytes = j->device_budget_bytes;
    out->device_high_water_bytes = j->device_high_water_bytes;
    out->host_bytes = j->host_bytes;
    out->h2d_bytes_total = j->h2d_bytes_total;
    out->d2h_bytes_total = j->d2h_bytes_total;
    out->steps_per_second = j->steps_per_second;
    out->created_us = j->created_us;
    out->updated_us = j->updated_us;
    copy_text(out->message, sizeof(out->message), j->message);
    out->last_checkpoint_step = j->last_checkpoint_step;
    out->has_plan = j->plan != NULL;
    plan_from_proto(j->plan, &out->plan, false);
    out->queue_position = j->queue_position;
    out->priority = j->priority;
    out->queued_us = j->queued_us;
    out->device = j->device;
}

/* Fills a public tensor view of t (which keeps owning the bytes). */
static void tensor_from_proto(const char *name, const Tide__V1__Tensor *t, struct tide_tensor *out)
{
    memset(out, 0, sizeof(*out));
    out->name = name ? name : "";
    if (!t)
        return;
    out->dtype = (enum tide_data_type)t->dtype;
    const Tide__V1__TensorShape *s = t->shape;
    size_t rank = s ? s->n_dims : 0;
    if (rank > TIDE_BUILDER_MAX_RANK)
        rank = TIDE_BUILDER_MAX_RANK;
    out->rank = (int32_t)rank;
    for (size_t i = 0; i < rank; i++)
        out->dims[i] = s->dims[i];
    out->data = t->data.data;
    out->bytes = t->data.len;
}

/*
 * Fills a public step result from s; the fetch views go into a malloc'd
 * array (*fetches, freed by the caller). Returns false when out of memory.
 */
static bool step_from_proto(const Tide__V1__StepResult *s, struct tide_step_result *out,
                            struct tide_tensor **fetches)
{
    memset(out, 0, sizeof(*out));
    *fetches = NULL;
    if (!s)
        return true;
    out->step = s->step;
    out->loss = s->loss;
    out->step_us = s->step_us;
    out->device_high_water_bytes = s->device_high_water_bytes;
    out->h2d_bytes = s->h2d_bytes;
    out->d2h_bytes = s->d2h_bytes;
    out->stall_us = s->stall_us;
    out->eval_only = s->eval_only;
    if (s->n_fetches) {
        *fetches = calloc(s->n_fetches, sizeof(**fetches));
        if (!*fetches)
            return false;
        for (size_t i = 0; i < s->n_fetches; i++)
            tensor_from_proto(s->fetches[i]->name, s->fetches[i]->tensor, &(*fetches)[i]);
        out->n_fetches = (uint32_t)s->n_fetches;
        out->fetches = *fetches;
    }
    return true;
}

const struct tide_tensor *tide_step_result_fetch(const struct tide_step_result *r, const char *name)
{
    if (!r || !name)
        return NULL;
    for (uint32_t i = 0; i < r->n_fetches; i++)
        if (strcmp(r->fetches[i].name, name) == 0)
            return &r->fetches[i];
    return NULL;
}

/* ============================================================================
 * Job specs
 * ========================================================================== */

static const char *const default_feeds[] = {"images", "labels"};

void tide_job_spec_init(struct tide_job_spec *spec)
{
    if (!spec)
        return;
    memset(spec, 0, sizeof(*spec));
    spec->loss = "loss";
    spec->optimizer = TIDE_JOB_OPTIMIZER_MOMENTUM;
    spec->learning_rate = 0.02f;
    spec->momentum = 0.9f;
    spec->feeds = default_feeds;
    spec->n_feeds = 2;
    spec->swap = TIDE_JOB_SWAP_AUTO;
    spec->vars_home = TIDE_JOB_VARS_HOME_AUTO;
    spec->autotune = true;
    spec->seed = 1;
}

/*
 * Packs spec as a tide.v1.JobSpec into b: every field but the graph through
 * protobuf-c, then the graph's bytes as field 2 (see "Wire trick" above).
 * With stripped->graph set, that graph goes instead of spec's, and the
 * Variables it lacks the values of are the spec's streamed_variables.
 */
static int spec_to_bytes(tide_client *c, const struct tide_job_spec *spec,
                         const struct tide__stripped *stripped, struct bytes *b)
{
    if (!spec)
        return tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT, "libtide: the job spec is NULL");
    if (!spec->graph || spec->graph_len == 0)
        return tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT,
                                 "libtide: the job spec has no graph (set graph and graph_len, "
                                 "e.g. with tide_builder_serialize)");
    if ((spec->n_feeds && !spec->feeds) || (spec->n_fetches && !spec->fetches) ||
        (spec->n_variables && !spec->variables))
        return tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT,
                                 "libtide: the job spec counts feeds, fetches or variables "
                                 "it does not point to");

    Tide__V1__SGD sgd = TIDE__V1__SGD__INIT;
    Tide__V1__Momentum momentum = TIDE__V1__MOMENTUM__INIT;
    Tide__V1__Adam adam = TIDE__V1__ADAM__INIT;
    Tide__V1__TrainSpec train = TIDE__V1__TRAIN_SPEC__INIT;
    train.loss = (char *)(spec->loss ? spec->loss : "loss");
    switch (spec->optimizer) {
    case TIDE_JOB_OPTIMIZER_SGD:
        sgd.learning_rate = spec->learning_rate;
        train.optimizer_case = TIDE__V1__TRAIN_SPEC__OPTIMIZER_SGD;
        train.sgd = &sgd;
        break;
    case TIDE_JOB_OPTIMIZER_MOMENTUM:
        momentum.learning_rate = spec->learning_rate;
        momentum.momentum = spec->momentum;
        momentum.nesterov = spec->nesterov;
        train.optimizer_case = TIDE__V1__TRAIN_SPEC__OPTIMIZER_MOMENTUM;
        train.momentum = &momentum;
        break;
    case TIDE_JOB_OPTIMIZER_ADAM:
        adam.learning_rate = spec->learning_rate;
        adam.beta1 = spec->beta1;
        adam.beta2 = spec->beta2;
        adam.epsilon = spec->epsilon;
        train.optimizer_case = TIDE__V1__TRAIN_SPEC__OPTIMIZER_ADAM;
        train.adam = &adam;
        break;
    default:
        return tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT,
                                 "libtide: unknown optimizer %d in the job spec",
                                 (int)spec->optimizer);
    }
    train.n_variables = spec->n_variables;
    train.variables = (char **)spec->variables;
    train.clip_norm = spec->clip_norm;

    Tide__V1__MemoryPolicy memory = TIDE__V1__MEMORY_POLICY__INIT;
    memory.device_budget_bytes = spec->budget_bytes;
    memory.partition_size = spec->partition_size;
    memory.swap = (Tide__V1__SwapMode)spec->swap;
    memory.swap_threshold = spec->swap_threshold;
    memory.prefetch_distance = spec->prefetch_distance;
    memory.vars_home = (Tide__V1__VarsHome)spec->vars_home;
    memory.autotune = spec->autotune;
    memory.recompute = (Tide__V1__RecomputeMode)spec->recompute;

    Tide__V1__CheckpointPolicy checkpoint = TIDE__V1__CHECKPOINT_POLICY__INIT;
    checkpoint.every_steps = spec->checkpoint_every;
    checkpoint.keep = spec->checkpoint_keep;

    Tide__V1__JobSpec js = TIDE__V1__JOB_SPEC__INIT;
    js.name = (char *)(spec->name ? spec->name : "");
    js.train = &train;
    js.memory = &memory;
    js.n_feeds = spec->n_feeds;
    js.feeds = (char **)spec->feeds;
    js.n_fetches = spec->n_fetches;
    js.fetches = (char **)spec->fetches;
    js.checkpoint = &checkpoint;
    js.resume_from = (char *)(spec->resume_from ? spec->resume_from : "");
    js.seed = spec->seed;
    js.device_profile = (char *)(spec->device_profile ? spec->device_profile : "");
    js.math = (char *)(spec->math ? spec->math : "");
    js.priority = spec->priority;
    js.n_streamed_variables = stripped->n;
    js.streamed_variables = stripped->names;
    Tide__V1__DeviceChoice device = TIDE__V1__DEVICE_CHOICE__INIT;
    device.index = spec->device;
    js.device = spec->has_device ? &device : NULL;

    bytes_message(b, &js.base);
    if (stripped->graph)
        bytes_field(b, 2, stripped->graph, stripped->graph_len); /* JobSpec.graph */
    else
        bytes_field(b, 2, spec->graph, spec->graph_len);
    if (b->failed)
        return tide__client_fail(c, TIDE_CODE_RESOURCE_EXHAUSTED,
                                 "libtide: out of memory packing the job spec");
    return TIDE_CODE_OK;
}

/* A byte buffer holding {field 1: spec bytes}: a SubmitRequest or a PlanRequest. */
static grpc_byte_buffer *wrap_spec(const void *spec, size_t len)
{
    struct bytes b = {0};
    bytes_field(&b, 1, spec, len);
    if (b.failed) {
        free(b.data);
        return NULL;
    }
    grpc_slice slice = grpc_slice_from_copied_buffer((const char *)b.data, b.len);
    free(b.data);
    grpc_byte_buffer *buffer = grpc_raw_byte_buffer_create(&slice, 1);
    grpc_slice_unref(slice);
    return buffer;
}

/* ============================================================================
 * Unary calls
 * ========================================================================== */

/* Fails with INVALID_ARGUMENT unless c is usable; the check every entry point starts with. */
#define CHECK_CLIENT(c)                                                                            \
    do {                                                                                           \
        if (!(c))                                                                                  \
            return TIDE_CODE_INVALID_ARGUMENT;                                                     \
        if (!(c)->channel)                                                                         \
            return tide__client_fail((c), TIDE_CODE_FAILED_PRECONDITION,                           \
                                     "libtide: the client is not connected");                      \
        client_clear_error(c);                                                                     \
    } while (0)

#define CHECK_JOB_ID(c, id)                                                                        \
    do {                                                                                           \
        if (!(id) || !*(id))                                                                       \
            return tide__client_fail((c), TIDE_CODE_INVALID_ARGUMENT,                              \
                                     "libtide: the job id is empty");                              \
    } while (0)

int tide_client_submit_bytes(tide_client *c, const void *job_spec, size_t len,
                             struct tide_job_info *job)
{
    CHECK_CLIENT(c);
    if (!job_spec && len)
        return tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT, "libtide: the job spec is NULL");
    ProtobufCMessage *reply;
    int code = rpc_unary(c, TIDE__RPC_SUBMIT, wrap_spec(job_spec, len),
                         &tide__v1__submit_response__descriptor, &reply);
    if (code != TIDE_CODE_OK)
        return code;
    const Tide__V1__SubmitResponse *r = (const Tide__V1__SubmitResponse *)reply;
    if (!r->job || !r->job->id || !*r->job->id)
        code = tide__client_fail(c, TIDE_CODE_INTERNAL, "Submit: the daemon's reply names no job");
    else if (job)
        job_from_proto(r->job, job);
    protobuf_c_message_free_unpacked(reply, NULL);
    return code;
}

/*
 * Takes the big Variable values out of spec's graph (values-impl.h), unless
 * resume_from is set: the checkpoint gives the values then, and the daemon
 * takes no streamed Variables with it.
 */
static int strip_values(tide_client *c, const struct tide_job_spec *spec,
                        struct tide__stripped *stripped)
{
    memset(stripped, 0, sizeof(*stripped));
    if (!spec || !spec->graph || (spec->resume_from && spec->resume_from[0]))
        return TIDE_CODE_OK;
    int r =
        tide__graph_strip_values(spec->graph, spec->graph_len, TIDE__STREAM_VALUE_MIN, stripped);
    if (r != 0)
        return tide__client_fail(c, TIDE_CODE_RESOURCE_EXHAUSTED,
                                 "libtide: out of memory taking the values out of the graph");
    return TIDE_CODE_OK;
}

/* Sends one VariableChunk on the WriteVariables stream and waits for it to leave. */
static bool write_chunk(struct tide__rpc *r, const Tide__V1__VariableChunk *chunk, bool first)
{
    grpc_byte_buffer *buffer = pack_message(&chunk->base);
    if (!buffer)
        return false;
    grpc_op ops[2];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    if (first)
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = buffer;
    bool ok = rpc_start(r, ops, n, TIDE__TAG_SEND) &&
              rpc_wait(r, TIDE__TAG_SEND, r->client->stream_timeout_ms);
    grpc_byte_buffer_destroy(buffer);
    return ok;
}

/*
 * Jobs.WriteVariables: the stripped values of job_id, in chunks of
 * TIDE__STREAM_CHUNK_BYTES, one in flight (the daemon reads the next when
 * the last is written, which is the backpressure). A send that fails means
 * the daemon ended the call: its status says why.
 */
static int write_values(tide_client *c, const char *job_id, const struct tide__stripped *s)
{
    struct tide__rpc r;
    int code = rpc_open(&r, c, TIDE__RPC_WRITE_VARIABLES, 0);
    if (code != TIDE_CODE_OK) {
        rpc_close(&r);
        return code;
    }
    bool first = true, sent = true;
    for (size_t i = 0; i < s->n && sent; i++) {
        for (uint64_t off = 0; off < s->bytes[i] && sent; off += TIDE__STREAM_CHUNK_BYTES) {
            uint64_t left = s->bytes[i] - off;
            Tide__V1__VariableChunk chunk = TIDE__V1__VARIABLE_CHUNK__INIT;
            chunk.job_id = (char *)(first ? job_id : "");
            chunk.name = s->names[i];
            chunk.offset = off;
            chunk.data.data = (uint8_t *)s->data[i] + off;
            chunk.data.len = left < TIDE__STREAM_CHUNK_BYTES ? left : TIDE__STREAM_CHUNK_BYTES;
            sent = write_chunk(&r, &chunk, first);
            first = false;
        }
    }
    grpc_byte_buffer *response = NULL;
    grpc_op ops[4];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    if (sent)
        ops[n++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[n++].data.recv_initial_metadata.recv_initial_metadata = &r.initial_metadata;
    ops[n].op = GRPC_OP_RECV_MESSAGE;
    ops[n++].data.recv_message.recv_message = &response;
    ops[n].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[n].data.recv_status_on_client.trailing_metadata = &r.trailing_metadata;
    ops[n].data.recv_status_on_client.status = &r.status;
    ops[n].data.recv_status_on_client.status_details = &r.details;
    n++;
    r.initial_posted = true;
    if (!rpc_start(&r, ops, n, TIDE__TAG_STATUS)) {
        code = tide__client_fail(c, TIDE_CODE_INTERNAL, "libtide: cannot end the %s stream",
                                 TIDE__RPC_WRITE_VARIABLES);
    } else {
        rpc_wait(&r, TIDE__TAG_STATUS, c->stream_timeout_ms);
        code = rpc_status_to_error(&r, TIDE__RPC_WRITE_VARIABLES);
    }
    Tide__V1__WriteVariablesResponse *reply =
        code == TIDE_CODE_OK && response
            ? (Tide__V1__WriteVariablesResponse *)unpack_message(
                  &tide__v1__write_variables_response__descriptor, response)
            : NULL;
    if (code == TIDE_CODE_OK && !reply)
        code = tide__client_fail(c, TIDE_CODE_INTERNAL,
                                 "WriteVariables: the daemon's reply is not a %s",
                                 tide__v1__write_variables_response__descriptor.name);
    else if (code == TIDE_CODE_OK && reply->n_incomplete > 0)
        code = tide__client_fail(c, TIDE_CODE_INTERNAL,
                                 "WriteVariables: the daemon says %zu value(s) are still "
                                 "incomplete (\"%s\" first)",
                                 reply->n_incomplete, reply->incomplete[0]);
    if (reply)
        protobuf_c_message_free_unpacked(&reply->base, NULL);
    if (response)
        grpc_byte_buffer_destroy(response);
    rpc_close(&r);
    return code;
}

int tide_client_submit(tide_client *c, const struct tide_job_spec *spec, struct tide_job_info *job)
{
    CHECK_CLIENT(c);
    struct tide__stripped stripped;
    struct bytes b = {0};
    struct tide_job_info info;
    int code = strip_values(c, spec, &stripped);
    if (code == TIDE_CODE_OK)
        code = spec_to_bytes(c, spec, &stripped, &b);
    if (code == TIDE_CODE_OK)
        code = tide_client_submit_bytes(c, b.data, b.len, &info);
    free(b.data);
    if (code == TIDE_CODE_OK && stripped.n > 0) {
        code = write_values(c, info.id, &stripped);
        if (code != TIDE_CODE_OK) {
            /* The job cannot train without its values: give its budget back. */
            char *why = strdup(tide_client_error_message(c));
            tide_client_cancel(c, info.id, NULL);
            tide__client_fail(c, code, "%s; job %s, which lacks its values, was cancelled",
                              why ? why : "WriteVariables failed", info.id);
            free(why);
        }
    }
    tide__stripped_free(&stripped);
    if (code == TIDE_CODE_OK && job)
        *job = info;
    return code;
}

int tide_client_plan_bytes(tide_client *c, const void *job_spec, size_t len,
                           struct tide_job_plan_report *report)
{
    CHECK_CLIENT(c);
    if (!report)
        return tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT, "libtide: the report is NULL");
    memset(report, 0, sizeof(*report));
    ProtobufCMessage *reply;
    int code = rpc_unary(c, TIDE__RPC_PLAN, wrap_spec(job_spec, len),
                         &tide__v1__plan_report__descriptor, &reply);
    if (code != TIDE_CODE_OK)
        return code;
    const Tide__V1__PlanReport *p = (const Tide__V1__PlanReport *)reply;
    plan_from_proto(p, report, true);
    code = timeline_from_proto(c, p->timeline, &report->timeline);
    protobuf_c_message_free_unpacked(reply, NULL);
    if (code != TIDE_CODE_OK)
        tide_job_plan_report_clear(report);
    return code;
}

int tide_client_plan(tide_client *c, const struct tide_job_spec *spec,
                     struct tide_job_plan_report *report)
{
    CHECK_CLIENT(c);
    /* A plan needs no values: the graph goes without its big ones, as to Submit. */
    struct tide__stripped stripped;
    struct bytes b = {0};
    int code = strip_values(c, spec, &stripped);
    if (code == TIDE_CODE_OK)
        code = spec_to_bytes(c, spec, &stripped, &b);
    if (code == TIDE_CODE_OK)
        code = tide_client_plan_bytes(c, b.data, b.len, report);
    free(b.data);
    tide__stripped_free(&stripped);
    return code;
}

void tide_job_plan_report_clear(struct tide_job_plan_report *report)
{
    if (!report)
        return;
    free(report->partitions);
    tide_memory_timeline_clear(&report->timeline);
    memset(report, 0, sizeof(*report));
}

/* A unary call whose reply is a JobInfo, copied into job (when not NULL). */
static int job_info_call(tide_client *c, const char *method, grpc_byte_buffer *request,
                         struct tide_job_info *job)
{
    ProtobufCMessage *reply;
    int code = rpc_unary(c, method, request, &tide__v1__job_info__descriptor, &reply);
    if (code != TIDE_CODE_OK)
        return code;
    if (job)
        job_from_proto((const Tide__V1__JobInfo *)reply, job);
    protobuf_c_message_free_unpacked(reply, NULL);
    return TIDE_CODE_OK;
}

int tide_client_get(tide_client *c, const char *job_id, struct tide_job_info *job)
{
    CHECK_CLIENT(c);
    CHECK_JOB_ID(c, job_id);
    Tide__V1__GetJobRequest req = TIDE__V1__GET_JOB_REQUEST__INIT;
    req.job_id = (char *)job_id;
    return job_info_call(c, TIDE__RPC_GET, pack_message(&req.base), job);
}

/* Copies n JobInfo messages into a malloc'd array for the caller. */
static int jobs_from_proto(tide_client *c, Tide__V1__JobInfo *const *src, size_t n,
                           struct tide_job_info **jobs, size_t *n_jobs)
{
    *jobs = NULL;
    *n_jobs = 0;
    if (n == 0)
        return TIDE_CODE_OK;
    *jobs = calloc(n, sizeof(**jobs));
    if (!*jobs)
        return tide__client_fail(c, TIDE_CODE_RESOURCE_EXHAUSTED,
                                 "libtide: out of memory for %zu jobs", n);
    for (size_t i = 0; i < n; i++)
        job_from_proto(src[i], &(*jobs)[i]);
    *n_jobs = n;
    return TIDE_CODE_OK;
}

int tide_client_list(tide_client *c, bool all, struct tide_job_info **jobs, size_t *n_jobs)
{
    CHECK_CLIENT(c);
    if (!jobs || !n_jobs)
        return tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT,
                                 "libtide: list needs jobs and n_jobs");
    *jobs = NULL;
    *n_jobs = 0;
    Tide__V1__ListJobsRequest req = TIDE__V1__LIST_JOBS_REQUEST__INIT;
    req.all = all;
    ProtobufCMessage *reply;
    int code = rpc_unary(c, TIDE__RPC_LIST, pack_message(&req.base),
                         &tide__v1__list_jobs_response__descriptor, &reply);
    if (code != TIDE_CODE_OK)
        return code;
    const Tide__V1__ListJobsResponse *r = (const Tide__V1__ListJobsResponse *)reply;
    code = jobs_from_proto(c, r->jobs, r->n_jobs, jobs, n_jobs);
    protobuf_c_message_free_unpacked(reply, NULL);
    return code;
}

int tide_client_cancel(tide_client *c, const char *job_id, struct tide_job_info *job)
{
    CHECK_CLIENT(c);
    CHECK_JOB_ID(c, job_id);
    Tide__V1__CancelJobRequest req = TIDE__V1__CANCEL_JOB_REQUEST__INIT;
    req.job_id = (char *)job_id;
    return job_info_call(c, TIDE__RPC_CANCEL, pack_message(&req.base), job);
}

int tide_client_set_priority(tide_client *c, const char *job_id, int32_t priority,
                             struct tide_job_info *job)
{
    CHECK_CLIENT(c);
    CHECK_JOB_ID(c, job_id);
    Tide__V1__SetPriorityRequest req = TIDE__V1__SET_PRIORITY_REQUEST__INIT;
    req.job_id = (char *)job_id;
    req.priority = priority;
    return job_info_call(c, TIDE__RPC_SET_PRIORITY, pack_message(&req.base), job);
}

int tide_client_checkpoint(tide_client *c, const char *job_id,
                           struct tide_checkpoint_info *checkpoint)
{
    CHECK_CLIENT(c);
    CHECK_JOB_ID(c, job_id);
    Tide__V1__CheckpointRequest req = TIDE__V1__CHECKPOINT_REQUEST__INIT;
    req.job_id = (char *)job_id;
    ProtobufCMessage *reply;
    int code = rpc_unary(c, TIDE__RPC_CHECKPOINT, pack_message(&req.base),
                         &tide__v1__checkpoint_response__descriptor, &reply);
    if (code != TIDE_CODE_OK)
        return code;
    const Tide__V1__CheckpointResponse *r = (const Tide__V1__CheckpointResponse *)reply;
    if (checkpoint) {
        memset(checkpoint, 0, sizeof(*checkpoint));
        checkpoint->step = r->step;
        checkpoint->bytes = r->bytes;
        copy_text(checkpoint->path, sizeof(checkpoint->path), r->path);
    }
    protobuf_c_message_free_unpacked(reply, NULL);
    return TIDE_CODE_OK;
}

int tide_client_trace(tide_client *c, const char *job_id, uint32_t steps,
                      struct tide_job_trace *trace)
{
    CHECK_CLIENT(c);
    CHECK_JOB_ID(c, job_id);
    if (!trace)
        return tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT, "libtide: trace needs trace");
    memset(trace, 0, sizeof(*trace));
    Tide__V1__TraceRequest req = TIDE__V1__TRACE_REQUEST__INIT;
    req.job_id = (char *)job_id;
    req.steps = steps;
    ProtobufCMessage *reply;
    int code = rpc_unary(c, TIDE__RPC_TRACE, pack_message(&req.base),
                         &tide__v1__trace_reply__descriptor, &reply);
    if (code != TIDE_CODE_OK)
        return code;
    const Tide__V1__TraceReply *r = (const Tide__V1__TraceReply *)reply;
    trace->json = malloc(r->trace_json.len + 1);
    if (!trace->json) {
        protobuf_c_message_free_unpacked(reply, NULL);
        return tide__client_fail(c, TIDE_CODE_RESOURCE_EXHAUSTED,
                                 "libtide: out of memory for a trace of %zu bytes",
                                 r->trace_json.len);
    }
    if (r->trace_json.len)
        memcpy(trace->json, r->trace_json.data, r->trace_json.len);
    trace->json[r->trace_json.len] = '\0';
    trace->json_len = r->trace_json.len;
    trace->steps = r->steps;
    trace->first_step = r->first_step;
    trace->last_step = r->last_step;
    protobuf_c_message_free_unpacked(reply, NULL);
    return TIDE_CODE_OK;
}

void tide_job_trace_clear(struct tide_job_trace *trace)
{
    if (!trace)
        return;
    free(trace->json);
    memset(trace, 0, sizeof(*trace));
}

/* The one Remove call behind tide_client_remove() and tide_client_prune(). */
static int remove_jobs(tide_client *c, const char *const *job_ids, size_t n_job_ids,
                       bool all_ended, struct tide_removal *removal)
{
    if (removal)
        memset(removal, 0, sizeof(*removal));
    Tide__V1__RemoveJobsRequest req = TIDE__V1__REMOVE_JOBS_REQUEST__INIT;
    req.job_ids = (char **)job_ids;
    req.n_job_ids = n_job_ids;
    req.all_ended = all_ended;
    ProtobufCMessage *reply;
    int code = rpc_unary(c, TIDE__RPC_REMOVE, pack_message(&req.base),
                         &tide__v1__remove_jobs_response__descriptor, &reply);
    if (code != TIDE_CODE_OK)
        return code;
    const Tide__V1__RemoveJobsResponse *r = (const Tide__V1__RemoveJobsResponse *)reply;
    if (removal && r->n_job_ids) {
        removal->job_ids = calloc(r->n_job_ids, sizeof(*removal->job_ids));
        if (!removal->job_ids) {
            protobuf_c_message_free_unpacked(reply, NULL);
            return tide__client_fail(c, TIDE_CODE_RESOURCE_EXHAUSTED,
                                     "libtide: out of memory for %zu job ids (the jobs were "
                                     "removed)",
                                     r->n_job_ids);
        }
        for (size_t i = 0; i < r->n_job_ids; i++)
            copy_text(removal->job_ids[i], sizeof(removal->job_ids[i]), r->job_ids[i]);
    }
    if (removal) {
        removal->n_jobs = r->n_job_ids;
        removal->bytes_freed = r->bytes_freed;
    }
    protobuf_c_message_free_unpacked(reply, NULL);
    return TIDE_CODE_OK;
}

int tide_client_remove(tide_client *c, const char *const *job_ids, size_t n_job_ids,
                       struct tide_removal *removal)
{
    CHECK_CLIENT(c);
    if (n_job_ids == 0 || !job_ids)
        return tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT,
                                 "libtide: remove needs at least one job id");
    for (size_t i = 0; i < n_job_ids; i++)
        CHECK_JOB_ID(c, job_ids[i]);
    return remove_jobs(c, job_ids, n_job_ids, false, removal);
}

int tide_client_prune(tide_client *c, struct tide_removal *removal)
{
    CHECK_CLIENT(c);
    return remove_jobs(c, NULL, 0, true, removal);
}

void tide_removal_clear(struct tide_removal *removal)
{
    if (!removal)
        return;
    free(removal->job_ids);
    memset(removal, 0, sizeof(*removal));
}

int tide_client_status(tide_client *c, struct tide_daemon_status *status,
                       struct tide_job_info **jobs, size_t *n_jobs)
{
    CHECK_CLIENT(c);
    if (jobs) {
        if (!n_jobs)
            return tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT,
                                     "libtide: status with jobs needs n_jobs");
        *jobs = NULL;
        *n_jobs = 0;
    }
    Tide__V1__StatusRequest req = TIDE__V1__STATUS_REQUEST__INIT;
    ProtobufCMessage *reply;
    int code = rpc_unary(c, TIDE__RPC_STATUS, pack_message(&req.base),
                         &tide__v1__daemon_status__descriptor, &reply);
    if (code != TIDE_CODE_OK)
        return code;
    const Tide__V1__DaemonStatus *s = (const Tide__V1__DaemonStatus *)reply;
    if (status) {
        memset(status, 0, sizeof(*status));
        copy_text(status->version, sizeof(status->version), s->version);
        copy_text(status->backend, sizeof(status->backend), s->backend);
        copy_text(status->device_name, sizeof(status->device_name), s->device_name);
        status->device_total_bytes = s->device_total_bytes;
        status->device_used_bytes = s->device_used_bytes;
        status->device_reserved_bytes = s->device_reserved_bytes;
        status->host_pool_bytes = s->host_pool_bytes;
        status->host_pool_used_bytes = s->host_pool_used_bytes;
        status->started_us = s->started_us;
        status->max_job_budget_bytes = s->max_job_budget_bytes;
        status->default_job_budget_bytes = s->default_job_budget_bytes;
        for (size_t i = 0; i < s->n_devices && i < TIDE_DEVICES_MAX; i++) {
            const Tide__V1__DeviceStatus *v = s->devices[i];
            struct tide_device_status *o = &status->devices[status->n_devices++];
            o->index = v->index;
            copy_text(o->name, sizeof(o->name), v->name);
            o->total_bytes = v->total_bytes;
            o->reserved_bytes = v->reserved_bytes;
            o->used_bytes = v->used_bytes;
            o->jobs = v->jobs;
        }
    }
    if (jobs)
        code = jobs_from_proto(c, s->jobs, s->n_jobs, jobs, n_jobs);
    protobuf_c_message_free_unpacked(reply, NULL);
    return code;
}

/* ============================================================================
 * Variables
 * ========================================================================== */

struct tide_variables {
    Tide__V1__ReadVariablesResponse *reply; /* owns the names, dtypes and shapes (the first page) */
    uint8_t *bytes;                         /* every Variable's bytes, one after the other */
    struct tide_tensor *tensors;
    size_t n;
};

/* ReadVariables in pages of this many bytes (tided caps a page at 64 MiB). */
#define READ_PAGE_BYTES (UINT64_C(32) << 20)
/* Reads started over because the job trained between pages, before giving up. */
#define READ_ATTEMPTS 3

/* One page of a paged ReadVariables: the reply, which the caller frees. */
static int read_page(tide_client *c, const char *job_id, const char *const *names, size_t n_names,
                     uint64_t offset, Tide__V1__ReadVariablesResponse **page)
{
    Tide__V1__ReadVariablesRequest req = TIDE__V1__READ_VARIABLES_REQUEST__INIT;
    req.job_id = (char *)job_id;
    req.n_names = n_names;
    req.names = (char **)names;
    req.offset = offset;
    req.max_bytes = READ_PAGE_BYTES;
    ProtobufCMessage *reply = NULL;
    int code = rpc_unary(c, TIDE__RPC_READ_VARIABLES, pack_message(&req.base),
                         &tide__v1__read_variables_response__descriptor, &reply);
    *page = (Tide__V1__ReadVariablesResponse *)reply;
    return code;
}

/*
 * Reads every page into v (zeroed by the caller; filled also on failure,
 * for tide_variables_free). *moved is set when the job's step changed
 * between two pages: the caller starts over.
 */
static int read_pages(tide_client *c, const char *job_id, const char *const *names, size_t n_names,
                      tide_variables *v, bool *moved)
{
    *moved = false;
    int code = read_page(c, job_id, names, n_names, 0, &v->reply);
    if (code != TIDE_CODE_OK)
        return code;
    const Tide__V1__ReadVariablesResponse *first = v->reply;
    uint64_t total = first->total_bytes, offset = first->page.len, sum = 0;
    v->bytes = malloc(total ? total : 1);
    if (first->n_variables)
        v->tensors = calloc(first->n_variables, sizeof(*v->tensors));
    if (!v->bytes || (first->n_variables && !v->tensors))
        return tide__client_fail(c, TIDE_CODE_RESOURCE_EXHAUSTED,
                                 "libtide: out of memory for %" PRIu64 " bytes of variables",
                                 total);
    if (first->page.len > total)
        return tide__client_fail(c, TIDE_CODE_INTERNAL,
                                 "ReadVariables: a page of %zu bytes of %" PRIu64, first->page.len,
                                 total);
    if (first->page.len)
        memcpy(v->bytes, first->page.data, first->page.len);
    v->n = first->n_variables;
    for (size_t i = 0; i < v->n; i++) {
        const Tide__V1__NamedTensor *nt = first->variables[i];
        tensor_from_proto(nt->name, nt->tensor, &v->tensors[i]);
        uint64_t bytes = 4; /* float32 and int32 */
        for (int32_t d = 0; d < v->tensors[i].rank; d++)
            bytes *= (uint64_t)v->tensors[i].dims[d];
        v->tensors[i].data = v->bytes + sum;
        v->tensors[i].bytes = (size_t)bytes;
        sum += bytes;
    }
    if (sum != total)
        return tide__client_fail(c, TIDE_CODE_INTERNAL,
                                 "ReadVariables: the variables' shapes add up to %" PRIu64
                                 " bytes, the reply says %" PRIu64,
                                 sum, total);
    while (offset < total) {
        Tide__V1__ReadVariablesResponse *page = NULL;
        code = read_page(c, job_id, names, n_names, offset, &page);
        if (code != TIDE_CODE_OK)
            return code;
        bool bad =
            page->page.len == 0 || page->page.len > total - offset || page->total_bytes != total;
        *moved = page->step != first->step;
        if (!bad && !*moved)
            memcpy(v->bytes + offset, page->page.data, page->page.len);
        offset += page->page.len;
        protobuf_c_message_free_unpacked(&page->base, NULL);
        if (*moved)
            return TIDE_CODE_OK;
        if (bad)
            return tide__client_fail(c, TIDE_CODE_INTERNAL,
                                     "ReadVariables: a page at offset %" PRIu64
                                     " does not continue the %" PRIu64 " bytes",
                                     offset, total);
    }
    return TIDE_CODE_OK;
}

int tide_client_read_variables(tide_client *c, const char *job_id, const char *const *names,
                               size_t n_names, tide_variables **out)
{
    CHECK_CLIENT(c);
    CHECK_JOB_ID(c, job_id);
    if (!out || (n_names && !names))
        return tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT,
                                 "libtide: read_variables needs out, and names when n_names > 0");
    *out = NULL;
    for (int attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
        tide_variables *v = calloc(1, sizeof(*v));
        if (!v)
            return tide__client_fail(c, TIDE_CODE_RESOURCE_EXHAUSTED, "libtide: out of memory");
        bool moved;
        int code = read_pages(c, job_id, names, n_names, v, &moved);
        if (code != TIDE_CODE_OK || moved) {
            tide_variables_free(v);
            if (code != TIDE_CODE_OK)
                return code;
            continue;
        }
        *out = v;
        return TIDE_CODE_OK;
    }
    return tide__client_fail(c, TIDE_CODE_ABORTED,
                             "ReadVariables: job %s trained on while its variables were read, "
                             "%d times; read them between steps",
                             job_id, READ_ATTEMPTS);
}

uint64_t tide_variables_step(const tide_variables *v)
{
    return v && v->reply ? v->reply->step : 0;
}

size_t tide_variables_count(const tide_variables *v)
{
    return v ? v->n : 0;
}

const struct tide_tensor *tide_variables_at(const tide_variables *v, size_t i)
{
    return v && i < v->n ? &v->tensors[i] : NULL;
}

const struct tide_tensor *tide_variables_find(const tide_variables *v, const char *name)
{
    if (!v || !name)
        return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->tensors[i].name, name) == 0)
            return &v->tensors[i];
    return NULL;
}

void tide_variables_free(tide_variables *v)
{
    if (!v)
        return;
    if (v->reply)
        protobuf_c_message_free_unpacked(&v->reply->base, NULL);
    free(v->bytes);
    free(v->tensors);
    free(v);
}

/* ============================================================================
 * Feeds
 * ========================================================================== */

struct feed_entry {
    char *name;
    enum tide_data_type dtype;
    int32_t rank;
    int64_t dims[TIDE_BUILDER_MAX_RANK];
    void *data;
    size_t bytes;    /* of this step's value */
    size_t capacity; /* of data */
    bool set;        /* set during this step's callback */
};

struct tide_feeds {
    struct feed_entry *entries;
    size_t n, cap;
    bool eval_only;
    char error[256]; /* the first bad call of this step; "" when none */
};

static void feeds_reset(tide_feeds *f)
{
    for (size_t i = 0; i < f->n; i++)
        f->entries[i].set = false;
    f->eval_only = false;
    f->error[0] = '\0';
}

static void feeds_free(tide_feeds *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->entries[i].name);
        free(f->entries[i].data);
    }
    free(f->entries);
}

static void *feeds_fail(tide_feeds *f, const char *name, const char *why)
{
    if (!f->error[0])
        snprintf(f->error, sizeof(f->error), "libtide: feed \"%s\": %s", name ? name : "(null)",
                 why);
    return NULL;
}

void *tide_feeds_buffer(tide_feeds *f, const char *name, enum tide_data_type dtype, int32_t rank,
                        const int64_t *dims)
{
    if (!f)
        return NULL;
    if (!name || !*name)
        return feeds_fail(f, name, "needs a name");
    if (dtype != TIDE_DT_FLOAT32 && dtype != TIDE_DT_INT32)
        return feeds_fail(f, name, "dtype must be float32 or int32");
    if (rank < 0 || rank > TIDE_BUILDER_MAX_RANK || (rank > 0 && !dims))
        return feeds_fail(f, name, "rank must be 0 to 8, with dims");
    uint64_t count = 1;
    for (int32_t i = 0; i < rank; i++) {
        if (dims[i] < 0 || (dims[i] > 0 && count > (UINT64_C(1) << 40) / (uint64_t)dims[i]))
            return feeds_fail(f, name, "a dimension is negative or the tensor is too large");
        count *= (uint64_t)dims[i];
    }
    size_t bytes = (size_t)count * 4; /* both dtypes are 4 bytes */
    struct feed_entry *e = NULL;
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->entries[i].name, name) == 0)
            e = &f->entries[i];
    if (!e) {
        if (f->n == f->cap) {
            size_t cap = f->cap ? f->cap * 2 : 4;
            struct feed_entry *entries = realloc(f->entries, cap * sizeof(*entries));
            if (!entries)
                return feeds_fail(f, name, "out of memory");
            f->entries = entries;
            f->cap = cap;
        }
        e = &f->entries[f->n];
        memset(e, 0, sizeof(*e));
        e->name = strdup(name);
        if (!e->name)
            return feeds_fail(f, name, "out of memory");
        f->n++;
    }
    if (bytes > e->capacity) {
        void *data = realloc(e->data, bytes);
        if (!data)
            return feeds_fail(f, name, "out of memory");
        e->data = data;
        e->capacity = bytes;
    }
    e->dtype = dtype;
    e->rank = rank;
    for (int32_t i = 0; i < rank; i++)
        e->dims[i] = dims[i];
    e->bytes = bytes;
    e->set = true;
    /* A zero-sized tensor still gets a valid pointer. */
    return e->data ? e->data : (void *)e;
}

int tide_feeds_set(tide_feeds *f, const char *name, enum tide_data_type dtype, int32_t rank,
                   const int64_t *dims, const void *data)
{
    void *dst = tide_feeds_buffer(f, name, dtype, rank, dims);
    if (!dst)
        return -1;
    struct feed_entry *e = NULL;
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->entries[i].name, name) == 0)
            e = &f->entries[i];
    if (e->bytes && !data) {
        e->set = false;
        feeds_fail(f, name, "data is NULL");
        return -1;
    }
    if (e->bytes)
        memcpy(dst, data, e->bytes);
    return 0;
}

void tide_feeds_set_eval_only(tide_feeds *f, bool eval_only)
{
    if (f)
        f->eval_only = eval_only;
}

/* Packs this step's feeds into a TrainRequest byte buffer, or NULL when out of memory. */
static grpc_byte_buffer *pack_feeds(const tide_feeds *f)
{
    size_t n = 0;
    for (size_t i = 0; i < f->n; i++)
        n += f->entries[i].set;
    Tide__V1__NamedTensor *named = calloc(n ? n : 1, sizeof(*named));
    Tide__V1__NamedTensor **named_ptrs = calloc(n ? n : 1, sizeof(*named_ptrs));
    Tide__V1__Tensor *tensors = calloc(n ? n : 1, sizeof(*tensors));
    Tide__V1__TensorShape *shapes = calloc(n ? n : 1, sizeof(*shapes));
    grpc_byte_buffer *buffer = NULL;
    if (named && named_ptrs && tensors && shapes) {
        size_t k = 0;
        for (size_t i = 0; i < f->n; i++) {
            struct feed_entry *e = &f->entries[i];
            if (!e->set)
                continue;
            tide__v1__tensor_shape__init(&shapes[k]);
            shapes[k].n_dims = (size_t)e->rank;
            shapes[k].dims = e->dims;
            tide__v1__tensor__init(&tensors[k]);
            tensors[k].dtype = (Tide__V1__DataType)e->dtype;
            tensors[k].shape = &shapes[k];
            tensors[k].data.len = e->bytes;
            tensors[k].data.data = e->data;
            tide__v1__named_tensor__init(&named[k]);
            named[k].name = e->name;
            named[k].tensor = &tensors[k];
            named_ptrs[k] = &named[k];
            k++;
        }
        Tide__V1__TrainRequest req = TIDE__V1__TRAIN_REQUEST__INIT;
        req.n_feeds = n;
        req.feeds = named_ptrs;
        req.eval_only = f->eval_only;
        buffer = pack_message(&req.base);
    }
    free(named);
    free(named_ptrs);
    free(tensors);
    free(shapes);
    return buffer;
}

/* ============================================================================
 * Train: the bidirectional stream
 * ========================================================================== */

/* The state of one Train stream; see DESIGN at the top of the file. */
struct train_stream {
    struct tide__rpc rpc;
    tide_feeds feeds;
    grpc_byte_buffer *sending; /* the batch in flight, destroyed once sent */
    bool send_posted;          /* a SEND_MESSAGE batch waits to be collected */
    bool closed;               /* SEND_CLOSE_FROM_CLIENT was sent */
    bool stopping;             /* no more batches: feed returned 0, on_step non-zero */
    bool aborted;              /* feed returned < 0 */
    uint64_t outstanding;      /* batches sent whose result has not come back */
    char local_error[320];     /* a failure of ours, which outranks the daemon's status */
};

static bool train_post_send(struct train_stream *t, grpc_byte_buffer *buffer, bool first)
{
    grpc_op ops[2];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    if (first)
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n].data.send_message.send_message = buffer;
    n++;
    t->sending = buffer;
    if (!rpc_start(&t->rpc, ops, n, TIDE__TAG_SEND)) {
        grpc_byte_buffer_destroy(buffer);
        t->sending = NULL;
        return false;
    }
    t->send_posted = true;
    return true;
}

/* Collects the posted send; returns whether the message left. */
static bool train_collect_send(struct train_stream *t)
{
    if (!t->send_posted)
        return true;
    bool ok = rpc_wait(&t->rpc, TIDE__TAG_SEND, t->rpc.client->stream_timeout_ms);
    t->send_posted = false;
    grpc_byte_buffer_destroy(t->sending);
    t->sending = NULL;
    return ok;
}

/* Half-closes the request side once nothing is being sent. */
static void train_close(struct train_stream *t)
{
    if (t->closed || t->send_posted)
        return;
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    t->closed = true;
    if (rpc_start(&t->rpc, &op, 1, TIDE__TAG_CLOSE))
        rpc_wait(&t->rpc, TIDE__TAG_CLOSE, 0);
}

/*
 * Asks the feed callback for the next batch and posts it. Returns false
 * when nothing was posted (stop, abort, or a failure recorded in the stream).
 */
static bool train_feed(struct train_stream *t, tide_feed_fn feed, void *user)
{
    feeds_reset(&t->feeds);
    int r = feed(user, &t->feeds);
    if (r < 0) {
        t->aborted = true;
        t->stopping = true;
        return false;
    }
    if (r == 0) {
        t->stopping = true;
        return false;
    }
    if (t->feeds.error[0]) {
        snprintf(t->local_error, sizeof(t->local_error), "%s", t->feeds.error);
        t->aborted = true;
        t->stopping = true;
        return false;
    }
    grpc_byte_buffer *buffer = pack_feeds(&t->feeds);
    if (!buffer || !train_post_send(t, buffer, false)) {
        snprintf(t->local_error, sizeof(t->local_error),
                 "libtide: cannot send a batch (out of memory)");
        t->aborted = true;
        t->stopping = true;
        return false;
    }
    return true;
}

int tide_client_train(tide_client *c, const char *job_id, tide_feed_fn feed, tide_step_fn on_step,
                      void *user)
{
    CHECK_CLIENT(c);
    CHECK_JOB_ID(c, job_id);
    if (!feed)
        return tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT,
                                 "libtide: train needs a feed callback");
    struct train_stream t;
    memset(&t, 0, sizeof(t));
    int code = rpc_open(&t.rpc, c, TIDE__RPC_TRAIN, 0);
    if (code != TIDE_CODE_OK) {
        rpc_close(&t.rpc);
        return code;
    }
    uint32_t timeout = c->stream_timeout_ms;

    /* The first message names the job. */
    Tide__V1__TrainRequest header = TIDE__V1__TRAIN_REQUEST__INIT;
    header.job_id = (char *)job_id;
    grpc_byte_buffer *first = pack_message(&header.base);
    bool alive = first && train_post_send(&t, first, true) && train_collect_send(&t);

    /* The first batch; from then on the loop keeps one more in flight. */
    if (alive && train_feed(&t, feed, user)) {
        alive = train_collect_send(&t);
        if (alive)
            t.outstanding = 1;
    }
    while (alive && t.outstanding > 0) {
        /* Batch k + 1 travels while the daemon runs step k. */
        if (!t.stopping && t.outstanding < 2)
            train_feed(&t, feed, user);
        if (t.stopping && !t.aborted)
            train_close(&t);
        if (t.aborted)
            break;

        grpc_byte_buffer *reply = NULL;
        grpc_op ops[2];
        size_t n = 0;
        memset(ops, 0, sizeof(ops));
        if (!t.rpc.initial_posted) {
            ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
            ops[n].data.recv_initial_metadata.recv_initial_metadata = &t.rpc.initial_metadata;
            n++;
            t.rpc.initial_posted = true;
        }
        ops[n].op = GRPC_OP_RECV_MESSAGE;
        ops[n].data.recv_message.recv_message = &reply;
        n++;
        if (!rpc_start(&t.rpc, ops, n, TIDE__TAG_RECV)) {
            snprintf(t.local_error, sizeof(t.local_error), "libtide: cannot start a receive");
            alive = false;
            break;
        }
        bool received = rpc_wait(&t.rpc, TIDE__TAG_RECV, timeout) && reply;
        if (!received) {
            /* The daemon ended the stream (its status says why) or the connection broke. */
            if (reply)
                grpc_byte_buffer_destroy(reply);
            alive = false;
            break;
        }
        Tide__V1__StepResult *result =
            (Tide__V1__StepResult *)unpack_message(&tide__v1__step_result__descriptor, reply);
        grpc_byte_buffer_destroy(reply);
        if (!result) {
            snprintf(t.local_error, sizeof(t.local_error),
                     "Train: a reply from the daemon is not a tide.v1.StepResult");
            alive = false;
            break;
        }
        t.outstanding--;
        struct tide_step_result step;
        struct tide_tensor *fetches;
        if (!step_from_proto(result, &step, &fetches)) {
            snprintf(t.local_error, sizeof(t.local_error), "libtide: out of memory for fetches");
            protobuf_c_message_free_unpacked(&result->base, NULL);
            alive = false;
            break;
        }
        int stop = on_step ? on_step(user, &step) : 0;
        free(fetches);
        protobuf_c_message_free_unpacked(&result->base, NULL);
        if (stop)
            t.stopping = true;

        if (t.send_posted) {
            if (!train_collect_send(&t)) {
                alive = false;
                break;
            }
            t.outstanding++;
        }
    }

    /* Collect whatever is still in flight, then learn how the stream ended. */
    bool aborted = t.aborted || t.local_error[0];
    if (aborted)
        grpc_call_cancel(t.rpc.call, NULL);
    train_collect_send(&t);
    if (!aborted)
        train_close(&t);
    code = rpc_finish(&t.rpc, TIDE__RPC_TRAIN);
    if (t.local_error[0])
        code = tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT, "%s", t.local_error);
    else if (t.aborted)
        code = tide__client_fail(c, TIDE_CODE_CANCELLED,
                                 "Train: stopped by the feed callback (it returned < 0)");
    else if (code == TIDE_CODE_OK && t.outstanding > 0)
        code = tide__client_fail(c, TIDE_CODE_INTERNAL,
                                 "Train: the daemon ended the stream with %" PRIu64
                                 " step(s) unanswered",
                                 t.outstanding);
    feeds_free(&t.feeds);
    rpc_close(&t.rpc);
    return code;
}

int tide_client_finish(tide_client *c, const char *job_id)
{
    CHECK_CLIENT(c);
    CHECK_JOB_ID(c, job_id);
    struct train_stream t;
    memset(&t, 0, sizeof(t));
    int code = rpc_open(&t.rpc, c, TIDE__RPC_TRAIN, 0);
    if (code != TIDE_CODE_OK) {
        rpc_close(&t.rpc);
        return code;
    }
    /* One message, no batch: the job's last word. */
    Tide__V1__TrainRequest last = TIDE__V1__TRAIN_REQUEST__INIT;
    last.job_id = (char *)job_id;
    last.finish = true;
    grpc_byte_buffer *buffer = pack_message(&last.base);
    bool sent = buffer && train_post_send(&t, buffer, true) && train_collect_send(&t);
    if (sent)
        train_close(&t);
    code = rpc_finish(&t.rpc, TIDE__RPC_TRAIN);
    if (code == TIDE_CODE_OK && !sent)
        code = tide__client_fail(c, TIDE_CODE_INTERNAL,
                                 "Train: the finish message for %s could not be sent", job_id);
    rpc_close(&t.rpc);
    return code;
}

/* ============================================================================
 * Watch: the server stream
 * ========================================================================== */

int tide_client_watch(tide_client *c, const char *job_id, uint32_t step_stride,
                      tide_event_fn on_event, void *user)
{
    CHECK_CLIENT(c);
    if (!on_event)
        return tide__client_fail(c, TIDE_CODE_INVALID_ARGUMENT,
                                 "libtide: watch needs an event callback");
    struct tide__rpc r;
    int code = rpc_open(&r, c, TIDE__RPC_WATCH, 0);
    if (code != TIDE_CODE_OK) {
        rpc_close(&r);
        return code;
    }
    Tide__V1__WatchRequest req = TIDE__V1__WATCH_REQUEST__INIT;
    req.job_id = (char *)(job_id ? job_id : "");
    req.step_stride = step_stride;
    grpc_byte_buffer *request = pack_message(&req.base);
    grpc_op ops[3];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = request;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    bool alive = request && rpc_start(&r, ops, 3, TIDE__TAG_SEND);
    if (alive)
        alive = rpc_wait(&r, TIDE__TAG_SEND, c->stream_timeout_ms);
    if (request)
        grpc_byte_buffer_destroy(request);

    bool stopped = false;
    char local_error[128] = "";
    while (alive) {
        grpc_byte_buffer *reply = NULL;
        size_t n = 0;
        memset(ops, 0, sizeof(ops));
        if (!r.initial_posted) {
            ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
            ops[n].data.recv_initial_metadata.recv_initial_metadata = &r.initial_metadata;
            n++;
            r.initial_posted = true;
        }
        ops[n].op = GRPC_OP_RECV_MESSAGE;
        ops[n].data.recv_message.recv_message = &reply;
        n++;
        if (!rpc_start(&r, ops, n, TIDE__TAG_RECV))
            break;
        if (!rpc_wait(&r, TIDE__TAG_RECV, c->stream_timeout_ms) || !reply) {
            if (reply)
                grpc_byte_buffer_destroy(reply);
            break; /* the stream ended; its status says how */
        }
        Tide__V1__JobEvent *e =
            (Tide__V1__JobEvent *)unpack_message(&tide__v1__job_event__descriptor, reply);
        grpc_byte_buffer_destroy(reply);
        if (!e) {
            snprintf(local_error, sizeof(local_error),
                     "Watch: a reply from the daemon is not a tide.v1.JobEvent");
            break;
        }
        struct tide_job_info job;
        struct tide_step_result step;
        struct tide_tensor *fetches = NULL;
        job_from_proto(e->job, &job);
        bool have_step = e->step && step_from_proto(e->step, &step, &fetches);
        struct tide_job_event event = {
            .kind = (enum tide_event_kind)e->kind,
            .job = &job,
            .step = have_step ? &step : NULL,
            .message = e->message ? e->message : "",
            .time_us = e->time_us,
        };
        int stop = on_event(user, &event);
        free(fetches);
        protobuf_c_message_free_unpacked(&e->base, NULL);
        if (stop) {
            stopped = true;
            break;
        }
    }
    if (stopped || local_error[0])
        grpc_call_cancel(r.call, NULL);
    code = rpc_finish(&r, TIDE__RPC_WATCH);
    if (local_error[0])
        code = tide__client_fail(c, TIDE_CODE_INTERNAL, "%s", local_error);
    else if (stopped) {
        client_clear_error(c);
        code = TIDE_CODE_OK;
    }
    rpc_close(&r);
    return code;
}
