/* SPDX-License-Identifier: MIT */
/*
 * trace.c: the recording of traced steps and its Chrome Trace Event writer
 * (trace.h says what a recording holds and what the JSON looks like).
 *
 * The recording is a few flat arrays (steps, slices, flows, counter
 * samples) that grow by doubling, so a traced step costs amortised appends
 * and nothing at all is allocated while tracing is off.
 *
 * The writer builds every event with json-c and serialises it at once into
 * one growing buffer between the fixed head `{"traceEvents":[` and tail
 * `],"displayTimeUnit":"ms"}`. Building the whole document as one json-c
 * tree would hold every event as a hash table at once: for the daemon's
 * largest trace (100 steps of a graph of a few thousand nodes, a few hundred
 * thousand events) that is gigabytes, where one event at a time is a few
 * hundred bytes beside the output.
 *
 * Threads: none of its own; a recording belongs to one thread at a time.
 */
#include "runtime/trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

/* The one process of a trace, and its tracks: thread id = stream + 1. */
#define TRACE_PID 1
#define N_TRACKS  3

static const char *const track_names[N_TRACKS] = {"compute", "h2d", "d2h"};

struct trace_step {
    uint64_t step;
    bool masked;
    int64_t start_ns, end_ns; /* since the time base */
    size_t first_slice, n_slices;
    size_t first_flow, n_flows;
    size_t first_counter, n_counters;
};

struct trace_flow {
    uint32_t from, to; /* slice indices within the step */
};

struct trace_counter {
    int64_t ts_ns; /* since the start of the step */
    uint64_t device_bytes;
    uint64_t host_bytes;
};

struct tide_trace {
    const struct tide_graph *graph; /* borrowed */
    bool has_origin;
    int64_t origin_ns; /* host monotonic time of the first step's start */
    bool in_step;
    struct tide_error error; /* the first recording error; TIDE_OK when none */

    struct trace_step *steps;
    size_t n_steps, cap_steps;
    struct tide_trace_slice *slices; /* start_ns relative to their step */
    size_t n_slices, cap_slices;
    struct trace_flow *flows;
    size_t n_flows, cap_flows;
    struct trace_counter *counters;
    size_t n_counters, cap_counters;
};

/* ============================================================================
 * The recording
 * ========================================================================== */

enum tide_status tide_trace_new(const struct tide_graph *graph, struct tide_trace **out,
                                struct tide_error *err)
{
    *out = NULL;
    if (!graph)
        return tide_error_set(err, TIDE_INVALID, "trace: a recording needs the graph it traces");
    struct tide_trace *t = calloc(1, sizeof(*t));
    if (!t)
        return tide_error_set(err, TIDE_NOMEM, "trace: out of memory for a recording");
    t->graph = graph;
    *out = t;
    return TIDE_OK;
}

void tide_trace_free(struct tide_trace *trace)
{
    if (!trace)
        return;
    free(trace->steps);
    free(trace->slices);
    free(trace->flows);
    free(trace->counters);
    free(trace);
}

void tide_trace_clear(struct tide_trace *trace)
{
    trace->has_origin = false;
    trace->in_step = false;
    tide_error_clear(&trace->error);
    trace->n_steps = trace->n_slices = trace->n_flows = trace->n_counters = 0;
}

const struct tide_graph *tide_trace_graph(const struct tide_trace *trace)
{
    return trace->graph;
}

uint32_t tide_trace_steps(const struct tide_trace *trace, uint32_t *full_steps)
{
    uint32_t full = 0;
    for (size_t i = 0; i < trace->n_steps; i++)
        full += !trace->steps[i].masked;
    if (full_steps)
        *full_steps = full;
    return (uint32_t)trace->n_steps;
}

void tide_trace_counts(const struct tide_trace *trace, size_t *slices, size_t *flows,
                       size_t *counters)
{
    if (slices)
        *slices = trace->n_slices;
    if (flows)
        *flows = trace->n_flows;
    if (counters)
        *counters = trace->n_counters;
}

/* Makes room for one more element of size bytes in *array; false (and the error kept) on OOM. */
static bool reserve(struct tide_trace *t, void **array, size_t n, size_t *cap, size_t size,
                    const char *what)
{
    if (t->error.status != TIDE_OK)
        return false;
    if (n < *cap)
        return true;
    size_t grown = *cap ? *cap * 2 : 256;
    void *p = realloc(*array, grown * size);
    if (!p) {
        tide_error_set(&t->error, TIDE_NOMEM,
                       "trace: out of memory for %zu %s in step %zu of the recording: the trace "
                       "is incomplete",
                       grown, what, t->n_steps);
        return false;
    }
    *array = p;
    *cap = grown;
    return true;
}

/* The step being recorded, or NULL outside a step or after an error. */
static struct trace_step *current(struct tide_trace *t)
{
    return t->in_step && t->error.status == TIDE_OK ? &t->steps[t->n_steps - 1] : NULL;
}

void tide_trace_step_begin(struct tide_trace *trace, uint64_t step, bool masked, int64_t host_ns)
{
    if (!reserve(trace, (void **)&trace->steps, trace->n_steps, &trace->cap_steps,
                 sizeof(*trace->steps), "steps"))
        return;
    if (!trace->has_origin) {
        trace->has_origin = true;
        trace->origin_ns = host_ns;
    }
    int64_t start = host_ns - trace->origin_ns;
    trace->steps[trace->n_steps++] = (struct trace_step){
        .step = step,
        .masked = masked,
        .start_ns = start,
        .end_ns = start,
        .first_slice = trace->n_slices,
        .first_flow = trace->n_flows,
        .first_counter = trace->n_counters,
    };
    trace->in_step = true;
}

uint32_t tide_trace_add_slice(struct tide_trace *trace, const struct tide_trace_slice *slice)
{
    struct trace_step *s = current(trace);
    if (!s || s->n_slices >= UINT32_MAX ||
        !reserve(trace, (void **)&trace->slices, trace->n_slices, &trace->cap_slices,
                 sizeof(*trace->slices), "slices"))
        return UINT32_MAX;
    trace->slices[trace->n_slices++] = *slice;
    return (uint32_t)s->n_slices++;
}

void tide_trace_add_flow(struct tide_trace *trace, uint32_t from, uint32_t to)
{
    struct trace_step *s = current(trace);
    if (!s || from >= s->n_slices || to >= s->n_slices ||
        !reserve(trace, (void **)&trace->flows, trace->n_flows, &trace->cap_flows,
                 sizeof(*trace->flows), "flows"))
        return;
    trace->flows[trace->n_flows++] = (struct trace_flow){from, to};
    s->n_flows++;
}

void tide_trace_add_counter(struct tide_trace *trace, int64_t ts_ns, uint64_t device_bytes,
                            uint64_t host_bytes)
{
    struct trace_step *s = current(trace);
    if (!s || !reserve(trace, (void **)&trace->counters, trace->n_counters, &trace->cap_counters,
                       sizeof(*trace->counters), "counter samples"))
        return;
    trace->counters[trace->n_counters++] = (struct trace_counter){ts_ns, device_bytes, host_bytes};
    s->n_counters++;
}

void tide_trace_step_end(struct tide_trace *trace, int64_t host_ns)
{
    struct trace_step *s = current(trace);
    if (s) {
        int64_t end = host_ns - trace->origin_ns;
        s->end_ns = end > s->start_ns ? end : s->start_ns;
    }
    trace->in_step = false;
}

/* ============================================================================
 * The writer
 * ========================================================================== */

struct writer {
    const struct tide_trace *trace;
    char *buf;
    size_t len, cap, max;
    size_t events;
    uint64_t next_flow_id;
    enum tide_status status;
    struct tide_error *err;
};

static void put_text(struct writer *w, const char *text, size_t n)
{
    if (w->status != TIDE_OK)
        return;
    if (w->max && w->len + n > w->max) {
        w->status = tide_error_set(w->err, TIDE_LIMIT,
                                   "trace: the trace of %zu steps is more than %zu bytes, the "
                                   "limit (%zu events written so far): trace fewer steps",
                                   w->trace->n_steps, w->max, w->events);
        return;
    }
    if (w->len + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 1 << 16;
        while (cap < w->len + n + 1)
            cap *= 2;
        char *p = realloc(w->buf, cap);
        if (!p) {
            w->status = tide_error_set(w->err, TIDE_NOMEM,
                                       "trace: out of memory for %zu bytes of JSON", cap);
            return;
        }
        w->buf = p;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, text, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

/* Serialises one event (NULL: json-c ran out of memory) after a comma if needed; frees it. */
static void put_event(struct writer *w, json_object *event)
{
    if (!event) {
        if (w->status == TIDE_OK)
            w->status = tide_error_set(w->err, TIDE_NOMEM, "trace: out of memory building JSON");
        return;
    }
    size_t n = 0;
    const char *text = json_object_to_json_string_length(
        event, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
    if (!text && w->status == TIDE_OK)
        w->status = tide_error_set(w->err, TIDE_NOMEM, "trace: out of memory serialising JSON");
    if (w->events++)
        put_text(w, ",", 1);
    if (text)
        put_text(w, text, n);
    json_object_put(event);
}

/* Microseconds with three decimals: exactly the nanoseconds, whatever the double rounds to. */
static json_object *micros(int64_t ns)
{
    if (ns < 0)
        ns = 0;
    char text[32];
    snprintf(text, sizeof(text), "%" PRId64 ".%03d", ns / 1000, (int)(ns % 1000));
    return json_object_new_double_s((double)ns / 1e3, text);
}

/* Adds key to object (json-c takes the value; a NULL value leaves the event short of it). */
static void add(json_object *object, const char *key, json_object *value)
{
    if (object && value)
        json_object_object_add(object, key, value);
}

/* {"name":..., "ph":..., "pid":1, "tid":...}: the fields every event has. */
static json_object *event(const char *name, const char *phase, int tid)
{
    json_object *e = json_object_new_object();
    add(e, "name", json_object_new_string(name));
    add(e, "ph", json_object_new_string(phase));
    add(e, "pid", json_object_new_int(TRACE_PID));
    add(e, "tid", json_object_new_int(tid));
    return e;
}

/* A complete event ("X") on a stream's track. */
static json_object *complete(const char *name, const char *category, uint8_t stream,
                             int64_t ts_ns, int64_t dur_ns, json_object *args)
{
    json_object *e = event(name, "X", stream + 1);
    add(e, "cat", json_object_new_string(category));
    add(e, "ts", micros(ts_ns));
    add(e, "dur", micros(dur_ns > 0 ? dur_ns : 0));
    add(e, "args", args);
    if (!e)
        json_object_put(args);
    return e;
}

/* One metadata event: {"name":what, "ph":"M", ..., "args":{key: value}}. */
static void put_metadata(struct writer *w, const char *what, int tid, const char *key,
                         json_object *value)
{
    json_object *e = event(what, "M", tid);
    json_object *args = json_object_new_object();
    add(args, key, value);
    add(e, "args", args);
    if (!e || !args) {
        json_object_put(args);
        json_object_put(e);
        e = NULL;
    }
    put_event(w, e);
}

static void put_tracks(struct writer *w)
{
    put_metadata(w, "process_name", 0, "name", json_object_new_string("tide"));
    for (int s = 0; s < N_TRACKS; s++) {
        put_metadata(w, "thread_name", s + 1, "name", json_object_new_string(track_names[s]));
        put_metadata(w, "thread_sort_index", s + 1, "sort_index", json_object_new_int(s));
    }
}

static const char *step_name(const struct trace_step *s, char *buf, size_t size)
{
    if (s->masked)
        snprintf(buf, size, "evaluation after step %" PRIu64, s->step);
    else
        snprintf(buf, size, "step %" PRIu64, s->step);
    return buf;
}

/* Slices of a step on its tracks: the step, runs of one partition, then positions and waits. */
static void put_slices(struct writer *w, const struct trace_step *s)
{
    const struct tide_trace *t = w->trace;
    const struct tide_graph *g = t->graph;
    const struct tide_trace_slice *slices = &t->slices[s->first_slice];
    char name[64];
    step_name(s, name, sizeof(name));
    for (uint8_t track = 0; track < N_TRACKS; track++) {
        json_object *args = json_object_new_object();
        add(args, "step", json_object_new_uint64(s->step));
        add(args, "evaluation", json_object_new_boolean(s->masked));
        put_event(w, complete(name, "step", track, s->start_ns, s->end_ns - s->start_ns, args));

        /* Runs of one partition: positions of a stream run one after another. */
        size_t i = 0;
        while (i < s->n_slices) {
            if (slices[i].stream != track) {
                i++;
                continue;
            }
            int32_t partition = g->nodes[slices[i].node].partition;
            int64_t begin = slices[i].start_ns, end = slices[i].start_ns + slices[i].dur_ns;
            size_t j = i + 1;
            for (; j < s->n_slices; j++) {
                if (slices[j].stream != track)
                    continue;
                if (g->nodes[slices[j].node].partition != partition)
                    break;
                if (slices[j].start_ns < begin)
                    begin = slices[j].start_ns;
                if (slices[j].start_ns + slices[j].dur_ns > end)
                    end = slices[j].start_ns + slices[j].dur_ns;
            }
            char pname[48];
            snprintf(pname, sizeof(pname), "partition %" PRId32, partition);
            json_object *pargs = json_object_new_object();
            add(pargs, "partition", json_object_new_int(partition));
            add(pargs, "step", json_object_new_uint64(s->step));
            put_event(w, complete(pname, "partition", track, s->start_ns + begin, end - begin,
                                  pargs));
            i = j;
        }
    }
    for (size_t i = 0; i < s->n_slices; i++) {
        const struct tide_trace_slice *x = &slices[i];
        const struct tide_node *node = &g->nodes[x->node];
        json_object *args = json_object_new_object();
        const char *category;
        if (x->kind == TIDE_TRACE_WAIT) {
            category = "wait";
            add(args, "before", json_object_new_string(node->name));
        } else {
            category = x->stream == TIDE_STREAM_COMPUTE && x->bytes == 0 ? "kernel" : "copy";
            add(args, "op", json_object_new_string(tide_op_info(node->op)->name));
            if (x->stream != TIDE_STREAM_COMPUTE)
                add(args, "bytes", json_object_new_uint64(x->bytes));
        }
        add(args, "partition", json_object_new_int(node->partition));
        add(args, "node", json_object_new_int64(x->node));
        add(args, "step", json_object_new_uint64(s->step));
        put_event(w, complete(x->kind == TIDE_TRACE_WAIT ? "wait" : node->name, category,
                              x->stream, s->start_ns + x->start_ns, x->dur_ns, args));
    }
}

/* One end of a flow, at the middle of its slice so that it binds to that slice. */
static json_object *flow_end(const char *name, const char *phase, uint64_t id, int64_t step_ns,
                             const struct tide_trace_slice *x)
{
    json_object *e = event(name, phase, x->stream + 1);
    add(e, "cat", json_object_new_string("flow"));
    add(e, "id", json_object_new_uint64(id));
    add(e, "ts", micros(step_ns + x->start_ns + x->dur_ns / 2));
    if (phase[0] == 'f')
        add(e, "bp", json_object_new_string("e"));
    return e;
}

static void put_flows(struct writer *w, const struct trace_step *s)
{
    const struct tide_trace *t = w->trace;
    const struct tide_trace_slice *slices = &t->slices[s->first_slice];
    for (size_t i = 0; i < s->n_flows; i++) {
        const struct trace_flow *f = &t->flows[s->first_flow + i];
        const struct tide_trace_slice *from = &slices[f->from], *to = &slices[f->to];
        const char *name =
            t->graph->nodes[from->node].op == TIDE_OP_FETCH ? "fetch to use" : "swap-in to use";
        uint64_t id = ++w->next_flow_id;
        put_event(w, flow_end(name, "s", id, s->start_ns, from));
        put_event(w, flow_end(name, "f", id, s->start_ns, to));
    }
}

/* A counter sample of one series ("C"), at ts. */
static json_object *counter(const char *series, int64_t ts_ns, uint64_t bytes)
{
    json_object *e = event(series, "C", 0);
    json_object *args = json_object_new_object();
    add(args, "bytes in use", json_object_new_uint64(bytes));
    add(e, "ts", micros(ts_ns));
    add(e, "args", args);
    if (!e)
        json_object_put(args);
    return e;
}

/* Counter samples of a step; a sample that repeats its series' previous value is left out. */
static void put_counters(struct writer *w, const struct trace_step *s)
{
    const struct trace_counter *c = &w->trace->counters[s->first_counter];
    for (size_t i = 0; i < s->n_counters; i++) {
        if (i == 0 || c[i].device_bytes != c[i - 1].device_bytes)
            put_event(w, counter("device", s->start_ns + c[i].ts_ns, c[i].device_bytes));
        if (i == 0 || c[i].host_bytes != c[i - 1].host_bytes)
            put_event(w, counter("host", s->start_ns + c[i].ts_ns, c[i].host_bytes));
    }
}

enum tide_status tide_trace_json(const struct tide_trace *trace, size_t max_bytes, char **json,
                                 size_t *len, struct tide_error *err)
{
    *json = NULL;
    *len = 0;
    if (trace->error.status != TIDE_OK) {
        if (err)
            *err = trace->error;
        return trace->error.status;
    }
    struct writer w = {.trace = trace, .max = max_bytes, .status = TIDE_OK, .err = err};
    static const char head[] = "{\"traceEvents\":[";
    static const char tail[] = "],\"displayTimeUnit\":\"ms\"}";
    put_text(&w, head, sizeof(head) - 1);
    put_tracks(&w);
    for (size_t i = 0; i < trace->n_steps && w.status == TIDE_OK; i++) {
        put_slices(&w, &trace->steps[i]);
        put_flows(&w, &trace->steps[i]);
        put_counters(&w, &trace->steps[i]);
    }
    put_text(&w, tail, sizeof(tail) - 1);
    if (w.status != TIDE_OK) {
        free(w.buf);
        return w.status;
    }
    *json = w.buf;
    *len = w.len;
    return TIDE_OK;
}

enum tide_status tide_trace_write_file(const struct tide_trace *trace, const char *path,
                                       struct tide_error *err)
{
    char *json;
    size_t len;
    enum tide_status st = tide_trace_json(trace, 0, &json, &len, err);
    if (st != TIDE_OK)
        return st;
    FILE *f = fopen(path, "w");
    if (!f) {
        st = tide_error_set(err, TIDE_IO, "trace: cannot create %s: %s", path, strerror(errno));
        free(json);
        return st;
    }
    size_t written = fwrite(json, 1, len, f);
    int write_errno = errno;
    int closed = fclose(f);
    if (written != len || closed != 0)
        st = tide_error_set(err, TIDE_IO, "trace: cannot write %zu bytes to %s: %s", len, path,
                            strerror(written != len ? write_errno : errno));
    free(json);
    return st;
}
