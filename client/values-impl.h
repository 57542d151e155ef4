/* SPDX-License-Identifier: MIT */
/*
 * values-impl.h: Variable values taken out of a serialized tide.v1.Graph,
 * for libtide's submit path (values.c). Private to libtide; never installed.
 *
 * A Submit is one gRPC message, which tided caps at its max-message; a
 * model's weights may be larger. So libtide sends big float32 values apart:
 * tide__graph_strip_values copies the graph without them (each such
 * Variable gets init "zeros" instead, which keeps it valid), lists them with
 * pointers into the original bytes, and libtide streams them to the job with
 * WriteVariables right after the Submit.
 *
 * It reads the wire format directly, as libtide.c's "wire trick" does, so
 * that the values are never copied: a stripped value is a pointer into the
 * caller's graph bytes, which must outlive the strip.
 *
 * Example usage:
 *
 *     struct tide__stripped s;
 *     if (tide__graph_strip_values(graph, len, TIDE__STREAM_VALUE_MIN, &s) != 0) ... out of memory;
 *     ... submit s.graph (s.graph_len bytes), naming s.names, then stream s.data[i] ...
 *     tide__stripped_free(&s);
 */
#ifndef TIDE_CLIENT_VALUES_IMPL_H
#define TIDE_CLIENT_VALUES_IMPL_H

#include <stddef.h>
#include <stdint.h>

/* Values of at least this many bytes travel in a WriteVariables stream, not in the graph. */
#define TIDE__STREAM_VALUE_MIN (64u << 10)

/* The data bytes of one VariableChunk libtide sends: room for the rest under tided's 1 MiB floor.
 */
#define TIDE__STREAM_CHUNK_BYTES ((1u << 20) - (4u << 10))

struct tide__stripped {
    uint8_t *graph; /* the graph without the values (malloc'd); NULL: nothing was stripped */
    size_t graph_len;
    size_t n;             /* the Variables whose values were taken out */
    char **names;         /* n names (malloc'd) */
    const uint8_t **data; /* n pointers into the original graph bytes */
    uint64_t *bytes;      /* n lengths */
};

/*
 * Scans a serialized tide.v1.Graph for Variables with init "value" whose
 * value is a float32 tensor of at least min_bytes bytes. When there are
 * none, *out is zeroed (out->graph NULL: send the graph as it is). Else
 * out->graph is a copy of the graph without those values, their inits set
 * to "zeros", and names, data and bytes list them in graph order. Bytes
 * that are not a well-formed graph are left for the daemon to refuse: they
 * are treated as having nothing to strip. Returns 0, or -1 when out of
 * memory (*out then holds nothing to free).
 */
int tide__graph_strip_values(const uint8_t *graph, size_t len, uint64_t min_bytes,
                             struct tide__stripped *out);

/* Frees what tide__graph_strip_values allocated and zeroes *s. */
void tide__stripped_free(struct tide__stripped *s);

#endif /* TIDE_CLIENT_VALUES_IMPL_H */
