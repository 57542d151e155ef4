/* SPDX-License-Identifier: MIT */
/*
 * rpc-train.c: tide.v1.Jobs/Train: the bidirectional stream of batches and StepResults,
 * with its flow control (jobs.c's DESIGN section), and the STEP task's result.
 *
 * Threads: main thread only (jobs.c's DESIGN section).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "daemon/jobs-impl.h"
#include "daemon/store.h"
#include "graph/import.h"

/* The client half-closed and every step ran: the stream ends OK, the job waits for more. */
static void end_train(struct tided_daemon *d, struct job *j)
{
    tided__job_detach_train(j, GRPC_STATUS_OK, NULL);
    tided__job_set_state(d, j, STATE(READY), NULL);
}

/*
 * TrainRequest.finish, and every step ran: a final checkpoint, the session
 * and the budget released, DONE; the stream ends OK. The checkpoint task is
 * queued before anything that can read it (the worker runs tasks in order).
 */
static void finish_job(struct tided_daemon *d, struct job *j)
{
    uint64_t step = j->dispatched;
    TIDE_LOG_INFO("job %s: finished by its client at step %" PRIu64, j->id, step);
    tided__job_detach_train(j, GRPC_STATUS_OK, NULL);
    tided__job_release_session(d, j, true);
    tided__job_set_state(d, j, STATE(DONE),
                         "finished by its client at step %" PRIu64
                         "; its checkpoint keeps the variables (resume_from continues it)",
                         step);
}

static void pump_train(struct tided_daemon *d, struct job *j);

bool tided__train_check_feeds(const struct tided_tensor_spec *feeds, uint32_t n_feeds,
                              const Tide__V1__TrainRequest *m, const char **names,
                              const void **data, uint64_t *bytes, char *error, size_t size)
{
    char a[96], b[96], buf[80];
    for (size_t k = 0; k < m->n_feeds; k++) {
        const Tide__V1__NamedTensor *nt = m->feeds[k];
        uint32_t i = 0;
        while (i < n_feeds && strcmp(feeds[i].name, nt->name) != 0)
            i++;
        if (i == n_feeds) {
            snprintf(error, size, "feed \"%s\": not a placeholder the job feeds (JobSpec.feeds)",
                     tided__shown(nt->name, buf, sizeof(buf)));
            return false;
        }
        if (names[i]) {
            snprintf(error, size, "feed \"%s\": given twice in one TrainRequest", feeds[i].name);
            return false;
        }
        struct tide_const_tensor value;
        struct tide_error err = {0};
        char what[300];
        snprintf(what, sizeof(what), "feed \"%s\"", feeds[i].name);
        if (tide_tensor_from_proto(nt->tensor, NULL, &value, what, &err) != TIDE_OK) {
            snprintf(error, size, "%s", err.message);
            return false;
        }
        const struct tided_tensor_spec *want = &feeds[i];
        if (value.dtype != want->dtype) {
            snprintf(error, size, "feed \"%s\": dtype %s does not match the placeholder's %s",
                     want->name, tide_dtype_name(value.dtype), tide_dtype_name(want->dtype));
            return false;
        }
        if (!tide_shape_equal(&value.shape, &want->shape)) {
            snprintf(error, size, "feed \"%s\": shape %s does not match the placeholder's %s",
                     want->name, tide_shape_format(&value.shape, a, sizeof(a)),
                     tide_shape_format(&want->shape, b, sizeof(b)));
            return false;
        }
        names[i] = want->name;
        data[i] = value.data;
        bytes[i] = value.nbytes;
    }
    for (uint32_t i = 0; i < n_feeds; i++) {
        if (!names[i]) {
            snprintf(error, size,
                     "feed \"%s\": missing from the TrainRequest (every step feeds "
                     "every JobSpec.feeds entry)",
                     feeds[i].name);
            return false;
        }
    }
    return true;
}

/* Checks a TrainRequest's feeds against the job's placeholders; NULL and error if wrong. */
static struct batch *batch_new(struct job *j, Tide__V1__TrainRequest *m, char *error, size_t size)
{
    struct batch *bt = calloc(1, sizeof(*bt));
    if (bt) {
        bt->names = calloc(j->n_feeds + 1, sizeof(*bt->names));
        bt->data = calloc(j->n_feeds + 1, sizeof(*bt->data));
        bt->bytes = calloc(j->n_feeds + 1, sizeof(*bt->bytes));
    }
    if (!bt || !bt->names || !bt->data || !bt->bytes) {
        snprintf(error, size, "out of memory");
        goto fail;
    }
    if (!tided__train_check_feeds(j->feeds, j->n_feeds, m, bt->names, bt->data, bt->bytes, error,
                                  size))
        goto fail;
    bt->message = m;
    bt->eval = m->eval_only;
    return bt;
fail:
    tided__batch_free(bt);
    return NULL;
}

/* Hands the staged batch to the worker. */
static void dispatch_step(struct tided_daemon *d, struct job *j)
{
    struct batch *bt = j->staged;
    struct tided_task *t = tided_task_new(TIDED_TASK_STEP, j);
    if (!t) {
        tided__job_fail(d, j, TIDE_NOMEM, "out of memory for a step");
        return;
    }
    j->staged = NULL;
    t->session = j->session;
    t->step.batch = bt->message;
    t->step.n_feeds = j->n_feeds;
    t->step.feed_names = bt->names;
    t->step.feed_data = bt->data;
    t->step.feed_bytes = bt->bytes;
    t->step.eval = bt->eval;
    t->step.loss = j->loss;
    t->step.n_fetches = j->n_fetches;
    t->step.fetches = j->fetches;
    free(bt);
    if (!t->step.eval)
        j->dispatched++;
    tided__trace_dispatch(j, t);
    j->step_in_flight = true;
    tided__task_submit(d, t);
}

/* Moves the Train stream along: run what is staged, read the next, or finish. */
static void pump_train(struct tided_daemon *d, struct job *j)
{
    if (!j->train || j->state != STATE(RUNNING))
        return;
    if (j->preempting && !j->step_in_flight) {
        tided__queue_preempt_now(d, j); /* between steps; its stream waits QUEUED */
        return;
    }
    if (!j->step_in_flight && j->staged && tided_call_pending_writes(j->train) < TRAIN_RESULTS_MAX)
        dispatch_step(d, j);
    if (!j->train)
        return;
    if (!j->staged && !j->half_closed && !j->reading && d->phase == TIDED_SERVING) {
        j->reading = true;
        tided_call_read(j->train);
    }
    if (j->half_closed && !j->staged && !j->step_in_flight) {
        if (j->finishing)
            finish_job(d, j);
        else
            end_train(d, j);
    }
}

/* A TrainRequest with finish set is the stream's last: read no more. */
static void note_finish(struct job *j, const Tide__V1__TrainRequest *m)
{
    if (m->finish) {
        j->finishing = true;
        j->half_closed = true;
    }
}

static void train_message(void *owner, struct tided_call *call, ProtobufCMessage *message)
{
    (void)call;
    struct job *j = owner;
    struct tided_daemon *d = j->daemon;
    j->reading = false;
    if (!message) {
        j->half_closed = true;
        pump_train(d, j);
        return;
    }
    Tide__V1__TrainRequest *m = (Tide__V1__TrainRequest *)message;
    char error[600], buf[80];
    if (m->job_id[0] && strcmp(m->job_id, j->id) != 0) {
        snprintf(error, sizeof(error), "TrainRequest.job_id \"%s\": this stream trains %s",
                 tided__shown(m->job_id, buf, sizeof(buf)), j->id);
        tide__v1__train_request__free_unpacked(m, NULL);
        tided__job_detach_train(j, GRPC_STATUS_INVALID_ARGUMENT, error);
    } else if (m->finish && m->n_feeds == 0) {
        note_finish(j, m);
        tide__v1__train_request__free_unpacked(m, NULL);
    } else {
        struct batch *bt = batch_new(j, m, error, sizeof(error));
        if (!bt) {
            tide__v1__train_request__free_unpacked(m, NULL);
            tided__job_detach_train(j, GRPC_STATUS_INVALID_ARGUMENT, error);
        } else {
            j->staged = bt;
            note_finish(j, m); /* m lives on in the batch */
        }
    }
    if (!j->train && !j->step_in_flight && j->state == STATE(RUNNING))
        tided__job_set_state(d, j, STATE(READY), NULL);
    pump_train(d, j);
}

static void train_drained(void *owner, struct tided_call *call)
{
    (void)call;
    struct job *j = owner;
    pump_train(j->daemon, j);
}

static void train_done(void *owner, struct tided_call *call, bool cancelled)
{
    (void)call;
    struct job *j = owner;
    struct tided_daemon *d = j->daemon;
    TIDE_LOG_INFO("job %s: the Train stream ended (%s)", j->id,
                  cancelled ? "the client went away" : "closed");
    j->train = NULL;
    tided__batch_free(j->staged);
    j->staged = NULL;
    j->reading = false;
    j->half_closed = false;
    j->finishing = false;
    if (j->state == STATE(RUNNING) && !j->step_in_flight)
        tided__job_set_state(d, j, STATE(READY), NULL);
}

static const struct tided_call_ops train_ops = {
    .message = train_message,
    .drained = train_drained,
    .done = train_done,
};

void tided_rpc_train(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request)
{
    Tide__V1__TrainRequest *m = (Tide__V1__TrainRequest *)request;
    if (d->phase != TIDED_SERVING) {
        /* The stream opened before SIGTERM, its first message came after. */
        tided_call_fail(call, GRPC_STATUS_UNAVAILABLE, "tided is shutting down");
        if (m)
            tide__v1__train_request__free_unpacked(m, NULL);
        return;
    }
    if (!m) {
        tided_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT,
                        "Train: the first TrainRequest must name the job (job_id)");
        return;
    }
    struct job *j = tided__job_for_call(d, call, m->job_id, true);
    if (!j) {
        tide__v1__train_request__free_unpacked(m, NULL);
        return;
    }
    const char *why = NULL;
    struct tide_error err = {0};
    switch (j->state) {
    case STATE(READY):
        break;
    case STATE(PARKED):
        if (m->finish && m->n_feeds == 0) {
            /* Nothing to run: the parking's checkpoint is the final one, and no budget is needed.
             */
            tide__v1__train_request__free_unpacked(m, NULL);
            tided_call_finish(call);
            finish_job(d, j);
            return;
        }
        if (tided__job_unpark(d, j, &err) != TIDE_OK) {
            tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                            "job %s is parked and cannot resume now: %s", j->id, err.message);
            tide__v1__train_request__free_unpacked(m, NULL);
            return;
        }
        break;
    case STATE(RUNNING):
        why = "is being trained by another stream";
        break;
    case STATE(QUEUED):
        if (j->train)
            why = "is being trained by another stream";
        break;
    case STATE(SUBMITTED):
    case STATE(COMPILING):
        /* Admitted from the queue (or resuming): the stream waits for the compilation. */
        if ((j->late_start || j->resuming) && !j->train)
            break;
        why = j->train ? "is being trained by another stream" : "is still compiling";
        break;
    default:
        why = "has ended";
        break;
    }
    /* Without a session the stream waits: for admission, or for the compilation in flight. */
    bool waits = j->resuming || j->state == STATE(QUEUED) || j->state == STATE(COMPILING);
    if (why || (!j->session && !waits)) {
        tided_call_fail(call, GRPC_STATUS_FAILED_PRECONDITION, "job %s %s (%s)", j->id,
                        why ? why : "has no session", tided__job_state_name(j->state));
        tide__v1__train_request__free_unpacked(m, NULL);
        return;
    }
    char missing[400];
    if (!tided__streamed_complete(j, missing, sizeof(missing))) {
        tided_call_fail(call, GRPC_STATUS_FAILED_PRECONDITION,
                        "job %s cannot train yet: the values of %u streamed Variable(s) are "
                        "incomplete: %s; send them with WriteVariables",
                        j->id, j->streamed_incomplete, missing);
        tide__v1__train_request__free_unpacked(m, NULL);
        return;
    }
    j->train = call;
    j->half_closed = false;
    j->finishing = false;
    j->reading = false;
    j->last_step_us = 0; /* the time between streams is no step's */
    tided_call_set_owner(call, &train_ops, j);
    /*
     * A resuming, queued or compiling job stays so, its batch staged, until
     * tided__train_resume.
     */
    if (j->session)
        tided__job_set_state(d, j, STATE(RUNNING), NULL);
    TIDE_LOG_DEBUG("job %s: Train stream from %s", j->id, tided_call_identity(call)->peer);
    if (m->n_feeds > 0 && (j->queued_request || (j->late_start && !j->session))) {
        /*
         * A batch for a job not compiled yet: its placeholders are not known,
         * so it is checked in tided__train_resume, before it can run.
         */
        struct batch *raw = calloc(1, sizeof(*raw));
        if (!raw) {
            tide__v1__train_request__free_unpacked(m, NULL);
            tided__job_detach_train(j, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
            return;
        }
        raw->message = m;
        j->staged = raw;
        note_finish(j, m);
    } else if (m->n_feeds > 0) {
        /* The first message may carry a batch too. */
        char error[600];
        struct batch *bt = batch_new(j, m, error, sizeof(error));
        if (!bt) {
            tide__v1__train_request__free_unpacked(m, NULL);
            tided__job_detach_train(j, GRPC_STATUS_INVALID_ARGUMENT, error);
            if (j->session)
                tided__job_set_state(d, j, STATE(READY), NULL);
            return;
        }
        j->staged = bt;
        note_finish(j, m);
    } else {
        note_finish(j, m);
        tide__v1__train_request__free_unpacked(m, NULL);
    }
    pump_train(d, j);
}

void tided__train_resume(struct tided_daemon *d, struct job *j)
{
    if (j->train && j->staged && !j->staged->names) {
        /* The first batch came before the compilation told the placeholders: check it now. */
        Tide__V1__TrainRequest *m = j->staged->message;
        j->staged->message = NULL;
        tided__batch_free(j->staged);
        j->staged = NULL;
        char error[600];
        struct batch *bt = batch_new(j, m, error, sizeof(error));
        if (!bt) {
            tide__v1__train_request__free_unpacked(m, NULL);
            tided__job_detach_train(j, GRPC_STATUS_INVALID_ARGUMENT, error);
        } else {
            j->staged = bt;
        }
    }
    if (!j->train) {
        tided__job_set_state(d, j, STATE(READY), NULL);
        return;
    }
    j->last_step_us = 0;
    tided__job_set_state(d, j, STATE(RUNNING), NULL);
    pump_train(d, j);
}

/*
 * A training step's loss came back NaN or infinite: the update that step
 * applied has made the variables unusable, so the job fails before another
 * step or checkpoint overwrites what it had, instead of spending its share
 * of the device on NaNs until the client stops. Its last checkpoint stays.
 */
static void fail_not_finite(struct tided_daemon *d, struct job *j, float loss)
{
    char kept[128], text[512];
    if (j->has_checkpoint)
        snprintf(kept, sizeof(kept), "its checkpoint of step %" PRIu64 " is kept",
                 j->last_checkpoint_step);
    else
        snprintf(kept, sizeof(kept),
                 "it has no checkpoint (CheckpointPolicy.every_steps, tidectl train's "
                 "--checkpoint-every, keeps one)");
    snprintf(text, sizeof(text),
             "step %" PRIu64 ": the training loss is %s, not finite (a learning rate too high, "
             "or bad data); the job stopped without keeping this step's variables; %s",
             j->steps,
             isnan(loss) ? "nan"
             : loss > 0  ? "inf"
                         : "-inf",
             kept);
    TIDE_LOG_WARN("job %s: %s", j->id, text);
    tided__job_fail(d, j, TIDE_INVALID, text);
}

void tided__step_done(struct tided_daemon *d, struct tided_task *t)
{
    struct job *j = t->job;
    j->step_in_flight = false;
    if (tided__job_terminal(j))
        return; /* cancelled (or failed) while the step ran; its results have no reader */
    if (t->status != TIDE_OK) {
        TIDE_LOG_WARN("job %s: step failed: %s", j->id, t->err.message);
        tided__job_fail(d, j, t->status, t->err.message);
        return;
    }
    const struct tide_step_stats *s = &t->step.stats;
    int64_t now = tided_now_us();
    if (!t->step.eval) {
        j->steps++;
        if (j->loss)
            j->last_loss = t->step.loss_value;
        double rate = 0;
        if (j->last_step_us && now > j->last_step_us)
            rate = 1e6 / (double)(now - j->last_step_us);
        else if (s->step_ms > 0)
            rate = 1e3 / s->step_ms;
        j->steps_per_second =
            j->steps_per_second > 0 ? 0.8 * j->steps_per_second + 0.2 * rate : rate;
        j->last_step_us = now;
    }
    if (s->high_water_bytes > j->high_water)
        j->high_water = s->high_water_bytes;
    j->h2d_total += s->h2d_bytes;
    j->d2h_total += s->d2h_bytes;
    j->updated_us = now;

    Tide__V1__StepResult r = TIDE__V1__STEP_RESULT__INIT;
    r.step = j->steps;
    r.loss = t->step.loss_value;
    r.step_us = (uint64_t)(s->step_ms * 1000.0);
    r.device_high_water_bytes = s->high_water_bytes;
    r.h2d_bytes = s->h2d_bytes;
    r.d2h_bytes = s->d2h_bytes;
    r.stall_us = (uint64_t)(s->stall_ms * 1000.0);
    r.eval_only = t->step.eval;
    tided_metrics_job_step(d->metrics, j, &r);
    tided__job_emit(d, j, TIDE__V1__JOB_EVENT__KIND__STEP, &r, NULL);

    if (j->train) {
        struct tided_named_tensor *nts = calloc(j->n_fetches + 1, sizeof(*nts));
        Tide__V1__NamedTensor **ptrs = calloc(j->n_fetches + 1, sizeof(*ptrs));
        if (nts && ptrs) {
            for (uint32_t i = 0; i < j->n_fetches; i++) {
                const struct tided_tensor_spec *f = &j->fetches[i];
                tided_named_tensor_fill(&nts[i], f->name, f->dtype, &f->shape,
                                        t->step.fetch_data[i], f->nbytes);
                ptrs[i] = &nts[i].named;
            }
            r.n_fetches = j->n_fetches;
            r.fetches = ptrs;
            tided_call_write(j->train, &r.base, NULL);
        } else {
            tided__job_detach_train(j, GRPC_STATUS_RESOURCE_EXHAUSTED,
                                    "out of memory for a StepResult");
        }
        free(nts);
        free(ptrs);
    }

    tided__trace_step_done(d, j, t);
    if (!t->step.eval && j->loss && !isfinite(t->step.loss_value)) {
        fail_not_finite(d, j, t->step.loss_value);
        return;
    }
    if (!t->step.eval && j->every_steps && j->steps % j->every_steps == 0) {
        struct tided_task *c = tided_task_new(TIDED_TASK_CHECKPOINT, j);
        if (c && (c->checkpoint.dir = strdup(j->dir))) {
            c->session = j->session;
            c->checkpoint.step = j->dispatched;
            c->checkpoint.keep = j->keep_checkpoints;
            tided__task_submit(d, c);
        } else {
            tided_task_free(c);
        }
    }
    if (d->phase != TIDED_SERVING) {
        tided__job_stop_for_shutdown(d, j);
        return;
    }
    if (!j->train) {
        if (j->state == STATE(RUNNING))
            tided__job_set_state(d, j, STATE(READY), NULL);
        if (j->preempting)
            tided__queue_preempt_now(d, j);
        return;
    }
    pump_train(d, j);
}
