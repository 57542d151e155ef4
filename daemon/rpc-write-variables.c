/* SPDX-License-Identifier: MIT */
/*
 * rpc-write-variables.c: tide.v1.Jobs/WriteVariables: the initial values of
 * a job's JobSpec.streamed_variables, in chunks, for weights larger than
 * max-message (a Submit is one message), and the WRITE_VARIABLE task's
 * result.
 *
 * DESIGN
 *
 * A client-streaming call, served like Train's stream: the first chunk
 * names the job and attaches the stream to it (one at a time per job); each
 * chunk is checked here, on the main thread, against what the job knows
 * from its compilation (the streamed Variables' sizes and the bytes of each
 * written so far), then goes to the worker as a WRITE_VARIABLE task that
 * copies it straight into the Variable's home in the session (the host
 * pool, or the device arena). The next chunk is read only when that task
 * is back, so tided holds one chunk per stream, whatever the model's size,
 * and a slow device slows the client down instead of growing a queue.
 *
 * Each Variable's bytes arrive in order, from offset 0 on, in one stream or
 * several: the job keeps one count per Variable, which makes a byte given
 * twice or left out an error that names the Variable and both offsets.
 * Writes are taken while the job is READY and has run no step; Train is
 * refused, naming what is missing, until every streamed Variable is whole;
 * and a job whose values are incomplete is not parked (lifecycle.c), since
 * its next stream would find no session to write into. A chunk refused
 * ends the stream with the error; what was written before it stays, so a
 * client may go on from there in a new stream.
 *
 * Threads: main thread only (jobs.c's DESIGN section).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "daemon/jobs-impl.h"

bool tided__streamed_complete(const struct job *j, char *text, size_t size)
{
    if (j->streamed_incomplete == 0)
        return true;
    size_t used = 0;
    text[0] = '\0';
    for (uint32_t i = 0; i < j->n_streamed && used < size; i++) {
        if (j->streamed_written[i] == j->streamed[i].nbytes)
            continue;
        int n = snprintf(text + used, size - used, "%s\"%s\" (%" PRIu64 " of %" PRIu64 " bytes)",
                         used ? ", " : "", j->streamed[i].name, j->streamed_written[i],
                         j->streamed[i].nbytes);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return false;
}

/* Ends the attached stream with a status (OK: the reply) and forgets it. */
static void detach_writes(struct job *j, grpc_status_code code, const char *message)
{
    struct tided_call *c = j->writing;
    if (!c)
        return;
    j->writing = NULL;
    tided_call_set_owner(c, NULL, NULL);
    if (code != GRPC_STATUS_OK) {
        tided_call_fail(c, code, "%s", message);
        return;
    }
    Tide__V1__WriteVariablesResponse r = TIDE__V1__WRITE_VARIABLES_RESPONSE__INIT;
    char **incomplete = calloc(j->n_streamed + 1, sizeof(char *));
    if (!incomplete) {
        tided_call_fail(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    for (uint32_t i = 0; i < j->n_streamed; i++) {
        if (j->streamed_written[i] != j->streamed[i].nbytes)
            incomplete[r.n_incomplete++] = j->streamed[i].name;
    }
    r.bytes = j->writing_bytes;
    r.incomplete = incomplete;
    tided_call_reply(c, &r.base);
    free(incomplete);
}

void tided__writes_job_ended(struct job *j)
{
    if (!j->writing)
        return;
    char text[700];
    snprintf(text, sizeof(text), "job %s is %s%s%s", j->id, tided__job_state_name(j->state),
             j->message[0] ? ": " : "", j->message);
    detach_writes(
        j, j->state == STATE(CANCELLED) ? GRPC_STATUS_CANCELLED : GRPC_STATUS_FAILED_PRECONDITION,
        text);
}

/* Why the job takes no chunk now, or NULL when it does. */
static const char *not_writable(const struct job *j, char *buf, size_t size)
{
    if (j->state == STATE(RUNNING) || j->train)
        return "is training: values are written before its first step";
    if (j->state == STATE(SUBMITTED) || j->state == STATE(COMPILING))
        return "is still compiling";
    if (j->state != STATE(READY) || !j->session) {
        snprintf(buf, size, "is %s: its values can no longer be written",
                 tided__job_state_name(j->state));
        return buf;
    }
    if (j->dispatched > 0) {
        snprintf(buf, size, "has run %" PRIu64 " step(s): values are written before the first",
                 j->dispatched);
        return buf;
    }
    return NULL;
}

bool tided__write_check_chunk(const char *job_id, const struct tided_tensor_spec *streamed,
                              uint32_t n_streamed, const uint64_t *written, char *const *variables,
                              uint32_t n_variables, const Tide__V1__VariableChunk *m,
                              uint32_t *index, grpc_status_code *code, char *error, size_t size)
{
    char buf[80], shape[96];
    uint32_t i = 0;
    while (i < n_streamed && strcmp(streamed[i].name, m->name) != 0)
        i++;
    if (i == n_streamed) {
        bool variable = false;
        for (uint32_t k = 0; k < n_variables && !variable; k++)
            variable = strcmp(variables[k], m->name) == 0;
        *code = GRPC_STATUS_NOT_FOUND;
        if (variable)
            snprintf(error, size,
                     "VariableChunk.name \"%s\": a Variable of job %s that is not in its "
                     "JobSpec.streamed_variables (its value came with the graph)",
                     m->name, job_id);
        else
            snprintf(error, size, "VariableChunk.name \"%s\": job %s has no such Variable",
                     tided__shown(m->name, buf, sizeof(buf)), job_id);
        return false;
    }
    const struct tided_tensor_spec *v = &streamed[i];
    uint64_t done = written[i], len = m->data.len, offset = m->offset;
    *code = GRPC_STATUS_INVALID_ARGUMENT;
    if (len == 0 || len > TIDED_CHUNK_BYTES_MAX) {
        snprintf(error, size,
                 "VariableChunk of \"%s\" at offset %" PRIu64 ": %" PRIu64
                 " bytes of data; a chunk holds 1 byte to %" PRIu64 " (4 MiB)",
                 v->name, offset, len, TIDED_CHUNK_BYTES_MAX);
        return false;
    }
    if (offset > v->nbytes || len > v->nbytes - offset) {
        *code = GRPC_STATUS_OUT_OF_RANGE;
        snprintf(error, size,
                 "VariableChunk of \"%s\": %" PRIu64 " bytes at offset %" PRIu64
                 " go past the end of the Variable, which has %" PRIu64 " (%s %s)",
                 v->name, len, offset, v->nbytes, tide_dtype_name(v->dtype),
                 tide_shape_format(&v->shape, shape, sizeof(shape)));
        return false;
    }
    if (offset < done) {
        snprintf(error, size,
                 "VariableChunk of \"%s\" at offset %" PRIu64 ": bytes %" PRIu64 " to %" PRIu64
                 " were written already; its next chunk starts at offset %" PRIu64
                 " (a Variable's chunks come in order, each byte once)",
                 v->name, offset, offset, done < offset + len ? done : offset + len, done);
        return false;
    }
    if (offset > done) {
        snprintf(error, size,
                 "VariableChunk of \"%s\" at offset %" PRIu64 ": bytes %" PRIu64 " to %" PRIu64
                 " are missing; its next chunk starts at offset %" PRIu64
                 " (a Variable's chunks come in order, each byte once)",
                 v->name, offset, done, offset, done);
        return false;
    }
    *index = i;
    return true;
}

/* Checks a chunk against the job and hands it to the worker; fails the stream if wrong. */
static void write_chunk(struct tided_daemon *d, struct job *j, Tide__V1__VariableChunk *m)
{
    char buf[80], why_buf[160], text[700];
    grpc_status_code code;
    uint32_t i;
    if (m->job_id[0] && strcmp(m->job_id, j->id) != 0) {
        snprintf(text, sizeof(text), "VariableChunk.job_id \"%s\": this stream writes job %s",
                 tided__shown(m->job_id, buf, sizeof(buf)), j->id);
        detach_writes(j, GRPC_STATUS_INVALID_ARGUMENT, text);
        goto out;
    }
    const char *why = not_writable(j, why_buf, sizeof(why_buf));
    if (why) {
        snprintf(text, sizeof(text), "job %s %s", j->id, why);
        detach_writes(j, GRPC_STATUS_FAILED_PRECONDITION, text);
        goto out;
    }
    if (!tided__write_check_chunk(j->id, j->streamed, j->n_streamed, j->streamed_written,
                                  j->user_variables, j->n_user_variables, m, &i, &code, text,
                                  sizeof(text))) {
        detach_writes(j, code, text);
        goto out;
    }
    struct tided_task *t = tided_task_new(TIDED_TASK_WRITE_VARIABLE, j);
    if (!t) {
        detach_writes(j, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        goto out;
    }
    t->session = j->session;
    t->write.chunk = m;
    m = NULL;
    j->write_in_flight = true;
    tided__task_submit(d, t);
out:
    if (m)
        tide__v1__variable_chunk__free_unpacked(m, NULL);
}

static void writes_message(void *owner, struct tided_call *call, ProtobufCMessage *message)
{
    (void)call;
    struct job *j = owner;
    if (!message) {
        detach_writes(j, GRPC_STATUS_OK, NULL); /* the client sent its last chunk */
        return;
    }
    write_chunk(j->daemon, j, (Tide__V1__VariableChunk *)message);
}

static void writes_done(void *owner, struct tided_call *call, bool cancelled)
{
    (void)call;
    struct job *j = owner;
    TIDE_LOG_INFO("job %s: the WriteVariables stream ended (%s) after %" PRIu64 " bytes", j->id,
                  cancelled ? "the client went away" : "closed", j->writing_bytes);
    j->writing = NULL;
}

static const struct tided_call_ops writes_ops = {
    .message = writes_message,
    .done = writes_done,
};

void tided_rpc_write_variables(struct tided_daemon *d, struct tided_call *call,
                               ProtobufCMessage *request)
{
    Tide__V1__VariableChunk *m = (Tide__V1__VariableChunk *)request;
    char why_buf[160];
    if (d->phase != TIDED_SERVING) {
        tided_call_fail(call, GRPC_STATUS_UNAVAILABLE, "tided is shutting down");
        goto out;
    }
    if (!m) {
        tided_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT,
                        "WriteVariables: the first VariableChunk must name the job (job_id)");
        return;
    }
    struct job *j = tided__job_for_call(d, call, m->job_id, true);
    if (!j)
        goto out;
    const char *why = j->n_streamed == 0 ? "streams no Variable (JobSpec.streamed_variables is "
                                           "empty): its values came with the graph"
                      : j->writing       ? "is being written by another WriteVariables stream"
                      : j->write_in_flight
                          ? "is still writing the last chunk of an earlier stream; try again"
                          : not_writable(j, why_buf, sizeof(why_buf));
    if (why) {
        tided_call_fail(call, GRPC_STATUS_FAILED_PRECONDITION, "job %s %s", j->id, why);
        goto out;
    }
    j->writing = call;
    j->writing_bytes = 0;
    tided_call_set_owner(call, &writes_ops, j);
    TIDE_LOG_DEBUG("job %s: WriteVariables stream from %s", j->id, tided_call_identity(call)->peer);
    write_chunk(d, j, m);
    return;
out:
    if (m)
        tide__v1__variable_chunk__free_unpacked(m, NULL);
}

void tided__write_done(struct tided_daemon *d, struct tided_task *t)
{
    (void)d;
    struct job *j = t->job;
    const Tide__V1__VariableChunk *m = t->write.chunk;
    j->write_in_flight = false;
    if (t->status != TIDE_OK) {
        /* The session refused a range the checks passed: nothing was written. */
        TIDE_LOG_WARN("job %s: writing \"%s\" failed: %s", j->id, m->name, t->err.message);
        detach_writes(j, tided_grpc_code(t->status), t->err.message);
        return;
    }
    for (uint32_t i = 0; i < j->n_streamed; i++) {
        if (strcmp(j->streamed[i].name, m->name) != 0)
            continue;
        j->streamed_written[i] += m->data.len;
        if (j->streamed_written[i] == j->streamed[i].nbytes) {
            j->streamed_incomplete--;
            TIDE_LOG_DEBUG("job %s: \"%s\" is whole (%" PRIu64 " bytes)", j->id, m->name,
                           j->streamed[i].nbytes);
        }
        break;
    }
    j->writing_bytes += m->data.len;
    j->updated_us = tided_now_us();
    if (j->writing)
        tided_call_read(j->writing);
}
