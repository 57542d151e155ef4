/* SPDX-License-Identifier: MIT */
/*
 * values.c: big Variable values taken out of a serialized tide.v1.Graph
 * (values-impl.h), so that libtide can stream them after the Submit.
 *
 * The graph is read on the wire, field by field, never unpacked: a node
 * that keeps its value is copied as it is, byte for byte; a node whose
 * value goes is copied without its "init" and "value" attribute entries,
 * and gets an "init" of "zeros" instead. The fields this reads
 * (tide.proto):
 *
 *   Graph      1: repeated Node        2: version
 *   Node       1: name   2: op         4: map<string, AttrValue> attrs
 *   map entry  1: key    2: value (AttrValue)
 *   AttrValue  4: s      7: tensor (Tensor)
 *   Tensor     1: dtype  3: data
 */
#include "client/values-impl.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* tide.v1.DataType's DT_FLOAT32. */
#define WIRE_DT_FLOAT32 1

/* ============================================================================
 * Reading
 * ========================================================================== */

struct field {
    uint32_t number;
    uint32_t wire_type;
    const uint8_t *start; /* the tag's first byte */
    const uint8_t *end;   /* one past the field */
    const uint8_t *data;  /* length-delimited: the payload */
    uint64_t len;         /* ... and its length */
    uint64_t varint;      /* varint: the value */
};

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return false;
        uint8_t b = *(*p)++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

/* The next field at *p: 1, 0 at the end of the bytes, -1 when they are malformed. */
static int next_field(const uint8_t **p, const uint8_t *end, struct field *f)
{
    if (*p >= end)
        return 0;
    memset(f, 0, sizeof(*f));
    f->start = *p;
    uint64_t tag;
    if (!read_varint(p, end, &tag))
        return -1;
    f->number = (uint32_t)(tag >> 3);
    f->wire_type = (uint32_t)(tag & 7);
    switch (f->wire_type) {
    case 0:
        if (!read_varint(p, end, &f->varint))
            return -1;
        break;
    case 1:
        if (end - *p < 8)
            return -1;
        *p += 8;
        break;
    case 2:
        if (!read_varint(p, end, &f->len) || f->len > (uint64_t)(end - *p))
            return -1;
        f->data = *p;
        *p += f->len;
        break;
    case 5:
        if (end - *p < 4)
            return -1;
        *p += 4;
        break;
    default:
        return -1;
    }
    f->end = *p;
    return 1;
}

static bool field_is(const struct field *f, const char *s)
{
    size_t n = strlen(s);
    return f->wire_type == 2 && f->len == n && memcmp(f->data, s, n) == 0;
}

/* What a Node says about its value; a node that is not a strippable Variable leaves strip false. */
struct node_scan {
    bool strip;
    struct field name;
    const uint8_t *data; /* the value's bytes */
    uint64_t bytes;
};

/* Reads the value tensor of an AttrValue (field 7): dtype and data. -1 when malformed. */
static int scan_tensor(const struct field *attr, uint64_t *dtype, const uint8_t **data,
                       uint64_t *bytes)
{
    const uint8_t *p = attr->data, *end = attr->data + attr->len;
    struct field f, t;
    int r;
    while ((r = next_field(&p, end, &f)) == 1) {
        if (f.number != 7 || f.wire_type != 2)
            continue;
        const uint8_t *q = f.data, *qend = f.data + f.len;
        *dtype = 0;
        *data = NULL;
        *bytes = 0;
        while ((r = next_field(&q, qend, &t)) == 1) {
            if (t.number == 1 && t.wire_type == 0)
                *dtype = t.varint;
            else if (t.number == 3 && t.wire_type == 2)
                *data = t.data, *bytes = t.len;
        }
        if (r < 0)
            return -1;
    }
    return r;
}

/* Whether an AttrValue is the string s (field 4). */
static bool attr_string_is(const struct field *attr, const char *s)
{
    const uint8_t *p = attr->data, *end = attr->data + attr->len;
    struct field f;
    bool is = false;
    while (next_field(&p, end, &f) == 1) {
        if (f.number == 4)
            is = field_is(&f, s);
    }
    return is;
}

/* A map entry's key and value fields. -1 when malformed. */
static int scan_entry(const struct field *entry, struct field *key, struct field *value)
{
    const uint8_t *p = entry->data, *end = entry->data + entry->len;
    struct field f;
    int r;
    memset(key, 0, sizeof(*key));
    memset(value, 0, sizeof(*value));
    while ((r = next_field(&p, end, &f)) == 1) {
        if (f.number == 1 && f.wire_type == 2)
            *key = f;
        else if (f.number == 2 && f.wire_type == 2)
            *value = f;
    }
    return r;
}

static int scan_node(const struct field *node, uint64_t min_bytes, struct node_scan *ns)
{
    const uint8_t *p = node->data, *end = node->data + node->len;
    struct field f, key, value;
    bool variable = false, init_value = false;
    uint64_t dtype = 0;
    int r;
    memset(ns, 0, sizeof(*ns));
    while ((r = next_field(&p, end, &f)) == 1) {
        if (f.number == 1 && f.wire_type == 2) {
            ns->name = f;
        } else if (f.number == 2) {
            variable = field_is(&f, "Variable");
        } else if (f.number == 4 && f.wire_type == 2) {
            if (scan_entry(&f, &key, &value) < 0)
                return -1;
            if (field_is(&key, "init"))
                init_value = value.data && attr_string_is(&value, "value");
            else if (field_is(&key, "value") && value.data &&
                     scan_tensor(&value, &dtype, &ns->data, &ns->bytes) < 0)
                return -1;
        }
    }
    if (r < 0)
        return -1;
    ns->strip = variable && init_value && dtype == WIRE_DT_FLOAT32 && ns->data &&
                ns->bytes >= min_bytes && ns->name.data;
    return 0;
}

/* ============================================================================
 * Writing
 * ========================================================================== */

struct out {
    uint8_t *data;
    size_t len, cap;
    bool failed;
};

static void out_append(struct out *o, const void *data, size_t len)
{
    if (o->failed || len == 0)
        return;
    if (o->len + len > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->len + len)
            cap *= 2;
        uint8_t *grown = realloc(o->data, cap);
        if (!grown) {
            o->failed = true;
            return;
        }
        o->data = grown;
        o->cap = cap;
    }
    memcpy(o->data + o->len, data, len);
    o->len += len;
}

static void out_varint(struct out *o, uint64_t v)
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
    out_append(o, buf, n);
}

/* attrs {key: "init", value: {s: "zeros"}}: field 4 of a Node. */
static const uint8_t init_zeros[] = {
    0x22, 15,                                     /* Node.attrs (4), 15 bytes */
    0x0a, 4,  'i',  'n', 'i', 't',                /* key (1) */
    0x12, 7,  0x22, 5,   'z', 'e', 'r', 'o', 's', /* value (2): AttrValue.s (4) */
};

/* A node's fields but its "init" and "value" entries, then init "zeros"; its length first. */
static void out_stripped_node(struct out *o, const struct field *node)
{
    const uint8_t *p = node->data, *end = node->data + node->len;
    struct field f, key, value;
    uint64_t len = sizeof(init_zeros);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            out_varint(o, (1u << 3) | 2u); /* Graph.nodes (1) */
            out_varint(o, len);
            p = node->data;
        }
        while (next_field(&p, end, &f) == 1) {
            bool dropped = f.number == 4 && f.wire_type == 2 && scan_entry(&f, &key, &value) == 0 &&
                           (field_is(&key, "init") || field_is(&key, "value"));
            if (dropped)
                continue;
            if (pass == 0)
                len += (uint64_t)(f.end - f.start);
            else
                out_append(o, f.start, (size_t)(f.end - f.start));
        }
    }
    out_append(o, init_zeros, sizeof(init_zeros));
}

/* ============================================================================
 * The strip
 * ========================================================================== */

void tide__stripped_free(struct tide__stripped *s)
{
    if (!s)
        return;
    free(s->graph);
    if (s->names) {
        for (size_t i = 0; i < s->n; i++)
            free(s->names[i]);
    }
    free(s->names);
    free(s->data);
    free(s->bytes);
    memset(s, 0, sizeof(*s));
}

int tide__graph_strip_values(const uint8_t *graph, size_t len, uint64_t min_bytes,
                             struct tide__stripped *out)
{
    memset(out, 0, sizeof(*out));
    const uint8_t *end = graph + len, *p = graph;
    struct field f;
    struct node_scan ns;
    size_t n = 0;
    int r;
    while ((r = next_field(&p, end, &f)) == 1) {
        if (f.number == 1 && f.wire_type == 2) {
            if (scan_node(&f, min_bytes, &ns) < 0)
                return 0; /* malformed: the daemon says what is wrong */
            n += ns.strip;
        }
    }
    if (r < 0 || n == 0)
        return 0;

    out->names = calloc(n, sizeof(*out->names));
    out->data = calloc(n, sizeof(*out->data));
    out->bytes = calloc(n, sizeof(*out->bytes));
    struct out o = {0};
    if (!out->names || !out->data || !out->bytes)
        goto oom;
    p = graph;
    while (next_field(&p, end, &f) == 1) {
        if (f.number != 1 || f.wire_type != 2 || scan_node(&f, min_bytes, &ns) != 0 || !ns.strip) {
            out_append(&o, f.start, (size_t)(f.end - f.start));
            continue;
        }
        out_stripped_node(&o, &f);
        char *name = malloc(ns.name.len + 1);
        if (!name)
            goto oom;
        memcpy(name, ns.name.data, ns.name.len);
        name[ns.name.len] = '\0';
        out->names[out->n] = name;
        out->data[out->n] = ns.data;
        out->bytes[out->n] = ns.bytes;
        out->n++;
    }
    if (o.failed)
        goto oom;
    out->graph = o.data;
    out->graph_len = o.len;
    return 0;
oom:
    free(o.data);
    tide__stripped_free(out);
    return -1;
}
