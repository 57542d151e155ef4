/* SPDX-License-Identifier: MIT */
/*
 * dataset-files.c: datasets read from the user's NumPy .npy and IDX files,
 * the shape rules that fit them to tide's models, and weights written out
 * as NumPy .npz (tide/dataset-files.h).
 *
 * Each file is read whole into memory (through zlib's gzread, which reads
 * plain files as they are and gunzips .gz ones), its format told by its
 * first bytes, then parsed from memory: the same parser serves files and
 * the .npy members of an .npz, and can be fuzzed without a file.
 *
 * The .npy header is a Python dict literal, e.g.
 *
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }
 *
 * There is no C library for it, and no need for a general one: the parser
 * below accepts exactly what NumPy writes and what a person could
 * reasonably write by hand — the three keys in any order, each once, quoted
 * with ' or ", whitespace between tokens, trailing commas, an optional L on
 * Python 2 integers — and refuses anything else with the byte offset and
 * what it expected there. Nothing is evaluated.
 *
 * .npz files are zip archives, written with libzip: one .npy per array,
 * stored (not deflated) as numpy.savez does.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>
#include <zlib.h>

#include "dataset-impl.h"

/* The most labels' classes a file may make, as for the synthetic dataset. */
#define MAX_CLASSES 65536
/* The most values of one example, and of a file (a sanity bound, 64 GiB of floats). */
#define MAX_SAMPLE_VALUES (INT64_C(1) << 31)
#define MAX_FILE_VALUES   (INT64_C(1) << 34)
/* The most header bytes a .npy file may claim (NumPy refuses more than 10000 too). */
#define MAX_NPY_HEADER 65536

static int fail(char *err, size_t err_size, int code, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t err_size, int code, const char *format, ...)
{
    if (err && err_size > 0) {
        va_list args;
        va_start(args, format);
        vsnprintf(err, err_size, format, args);
        va_end(args);
    }
    return code;
}

/* Formats dims as "[60000, 28, 28]" into buf. */
static const char *fmt_shape(const int64_t *dims, int32_t rank, char *buf, size_t size)
{
    size_t at = 0;
    at += (size_t)snprintf(buf, size, "[");
    for (int32_t i = 0; i < rank && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%s%" PRId64, i ? ", " : "", dims[i]);
    if (at < size)
        snprintf(buf + at, size - at, "]");
    return buf;
}

/* ============================================================================
 * The .npy header: a strict parser of its dict literal
 * ========================================================================== */

struct header_parser {
    const char *text;
    size_t len, pos;
    const char *path;
    char *err;
    size_t err_size;
};

static int header_error(struct header_parser *p, const char *expected)
{
    char found[24];
    if (p->pos >= p->len) {
        snprintf(found, sizeof(found), "the end");
    } else {
        size_t n = 0;
        for (size_t i = p->pos; i < p->len && n < 12; i++, n++) {
            char ch = p->text[i];
            found[n] = ch >= 0x20 && ch < 0x7f ? ch : '?';
        }
        found[n] = '\0';
    }
    return fail(p->err, p->err_size, TIDE_DATASET_INVALID,
                "%s: malformed .npy header at byte %zu of the dict: expected %s, found %s%s%s",
                p->path, p->pos, expected, p->pos >= p->len ? "" : "\"", found,
                p->pos >= p->len ? "" : "\"");
}

static void skip_space(struct header_parser *p)
{
    while (p->pos < p->len && (p->text[p->pos] == ' ' || p->text[p->pos] == '\t' ||
                               p->text[p->pos] == '\n' || p->text[p->pos] == '\r'))
        p->pos++;
}

/* Consumes ch (after whitespace) if it is next; returns whether it was. */
static bool accept_char(struct header_parser *p, char ch)
{
    skip_space(p);
    if (p->pos < p->len && p->text[p->pos] == ch) {
        p->pos++;
        return true;
    }
    return false;
}

/* A quoted string ('...' or "..."), without escapes, of at most size - 1 bytes. */
static int parse_string(struct header_parser *p, char *out, size_t size, const char *what)
{
    skip_space(p);
    if (p->pos >= p->len || (p->text[p->pos] != '\'' && p->text[p->pos] != '"'))
        return header_error(p, what);
    char quote = p->text[p->pos];
    size_t start = p->pos + 1, end = start;
    while (end < p->len && p->text[end] != quote) {
        if (p->text[end] == '\\' || p->text[end] == '\n')
            break;
        end++;
    }
    if (end < p->len && p->text[end] == '\\') {
        p->pos = end;
        return header_error(p, "no escapes in a string (the dtype and keys need none)");
    }
    if (end >= p->len || p->text[end] != quote) {
        p->pos = start - 1;
        return header_error(p, "a closing quote for the string that starts here");
    }
    if (end - start >= size) {
        p->pos = start;
        return header_error(p, "a shorter string");
    }
    memcpy(out, p->text + start, end - start);
    out[end - start] = '\0';
    p->pos = end + 1;
    return 0;
}

/* A non-negative decimal integer (an L after it, as Python 2 wrote them, is allowed). */
static int parse_dim(struct header_parser *p, int64_t *out)
{
    skip_space(p);
    if (p->pos >= p->len || p->text[p->pos] < '0' || p->text[p->pos] > '9')
        return header_error(p, "a dimension (a non-negative integer)");
    int64_t v = 0;
    while (p->pos < p->len && p->text[p->pos] >= '0' && p->text[p->pos] <= '9') {
        if (v > (INT64_MAX - 9) / 10)
            return header_error(p, "a dimension below 2^63");
        v = v * 10 + (p->text[p->pos] - '0');
        p->pos++;
    }
    if (p->pos < p->len && p->text[p->pos] == 'L')
        p->pos++;
    *out = v;
    return 0;
}

/* A shape tuple: (), (5,), (5, 6) or (5, 6,). */
static int parse_shape(struct header_parser *p, struct tide__npy *out)
{
    if (!accept_char(p, '('))
        return header_error(p, "'(' opening the shape tuple");
    out->rank = 0;
    if (accept_char(p, ')'))
        return 0;
    for (;;) {
        if (out->rank == TIDE__ARRAY_MAX_RANK)
            return header_error(p, "at most 8 dimensions");
        int rc = parse_dim(p, &out->dims[out->rank]);
        if (rc != 0)
            return rc;
        out->rank++;
        bool comma = accept_char(p, ',');
        if (accept_char(p, ')')) {
            /* (5) is the number 5, not a tuple: Python needs the comma for one element. */
            if (out->rank == 1 && !comma)
                return header_error(p, "',' after the one dimension of the shape (5,)");
            return 0;
        }
        if (!comma)
            return header_error(p, "',' or ')' in the shape tuple");
    }
}

static int parse_bool(struct header_parser *p, bool *out)
{
    skip_space(p);
    if (p->len - p->pos >= 4 && memcmp(p->text + p->pos, "True", 4) == 0) {
        p->pos += 4;
        *out = true;
        return 0;
    }
    if (p->len - p->pos >= 5 && memcmp(p->text + p->pos, "False", 5) == 0) {
        p->pos += 5;
        *out = false;
        return 0;
    }
    return header_error(p, "True or False");
}

/* The dtypes tide reads, as .npy spells them; '|u1' may also be written '<u1' or '>u1'. */
static const struct {
    const char *descr;
    enum tide__array_type type;
    size_t itemsize;
} npy_types[] = {
    {"<f4", TIDE__ARRAY_FLOAT32, 4},
    {"<i4", TIDE__ARRAY_INT32, 4},
    {"<i8", TIDE__ARRAY_INT64, 8},
    {"|u1", TIDE__ARRAY_UINT8, 1},
    {"<u1", TIDE__ARRAY_UINT8, 1},
    {">u1", TIDE__ARRAY_UINT8, 1},
};

static size_t type_size(enum tide__array_type type)
{
    return type == TIDE__ARRAY_INT64 ? 8 : type == TIDE__ARRAY_UINT8 ? 1 : 4;
}

/* Parses the header dict at text[0 .. len - 1] into out (type, descr, rank, dims). */
static int parse_header(const char *text, size_t len, const char *path, struct tide__npy *out,
                        char *err, size_t err_size)
{
    struct header_parser p = {text, len, 0, path, err, err_size};
    bool seen_descr = false, seen_order = false, seen_shape = false, fortran = false;
    char descr[64] = "";
    if (!accept_char(&p, '{'))
        return header_error(&p, "'{' opening the header dict");
    while (!accept_char(&p, '}')) {
        char key[32];
        int rc = parse_string(&p, key, sizeof(key),
                              "a key ('descr', 'fortran_order' or 'shape') or '}'");
        if (rc != 0)
            return rc;
        bool *seen = strcmp(key, "descr") == 0           ? &seen_descr
                     : strcmp(key, "fortran_order") == 0 ? &seen_order
                     : strcmp(key, "shape") == 0         ? &seen_shape
                                                         : NULL;
        if (!seen)
            return fail(err, err_size, TIDE_DATASET_INVALID,
                        "%s: malformed .npy header: unknown key '%s' (wants 'descr', "
                        "'fortran_order' and 'shape')",
                        path, key);
        if (*seen)
            return fail(err, err_size, TIDE_DATASET_INVALID,
                        "%s: malformed .npy header: key '%s' appears twice", path, key);
        *seen = true;
        if (!accept_char(&p, ':'))
            return header_error(&p, "':' after a key");
        if (seen == &seen_descr)
            rc = parse_string(&p, descr, sizeof(descr), "a dtype string such as '<f4'");
        else if (seen == &seen_order)
            rc = parse_bool(&p, &fortran);
        else
            rc = parse_shape(&p, out);
        if (rc != 0)
            return rc;
        if (!accept_char(&p, ',')) {
            if (!accept_char(&p, '}'))
                return header_error(&p, "',' or '}' after a value");
            break;
        }
    }
    skip_space(&p);
    if (p.pos != p.len)
        return header_error(&p, "only spaces and a newline after the dict");
    if (!seen_descr || !seen_order || !seen_shape)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: malformed .npy header: key '%s' is missing", path,
                    !seen_descr ? "descr" : !seen_order ? "fortran_order" : "shape");
    size_t i = 0;
    while (i < sizeof(npy_types) / sizeof(npy_types[0]) && strcmp(npy_types[i].descr, descr) != 0)
        i++;
    if (i == sizeof(npy_types) / sizeof(npy_types[0]))
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: dtype '%s' is not supported (tide reads float32 '<f4', int32 '<i4', "
                    "int64 '<i8' and uint8 '|u1')",
                    path, descr);
    if (fortran)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: fortran_order is True; tide reads C-order arrays only (save "
                    "numpy.ascontiguousarray(a))",
                    path);
    out->type = npy_types[i].type;
    snprintf(out->descr, sizeof(out->descr), "%s", npy_types[i].descr); /* 3 characters */
    return 0;
}

/* Checks that dims hold count elements of itemsize bytes, no more than the bytes there are. */
static int count_elements(const int64_t *dims, int32_t rank, uint64_t *count, const char *path,
                          char *err, size_t err_size)
{
    uint64_t n = 1;
    for (int32_t i = 0; i < rank; i++) {
        if (dims[i] != 0 && n > (uint64_t)MAX_FILE_VALUES / (uint64_t)dims[i]) {
            char shape[160];
            return fail(err, err_size, TIDE_DATASET_INVALID,
                        "%s: shape %s has more than 2^34 values", path,
                        fmt_shape(dims, rank, shape, sizeof(shape)));
        }
        n *= (uint64_t)dims[i];
    }
    *count = n;
    return 0;
}

int tide__npy_parse(const uint8_t *buf, size_t len, const char *path, struct tide__npy *out,
                    char *err, size_t err_size)
{
    memset(out, 0, sizeof(*out));
    if (len < 6 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s is not a NumPy .npy file (it does not start with \\x93NUMPY)", path);
    if (len < 10)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s is truncated: %zu bytes, shorter than a .npy preamble", path, len);
    int major = buf[6], minor = buf[7];
    if (major < 1 || major > 3 || minor != 0)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: .npy format version %d.%d is not supported (1.0, 2.0 and 3.0 are)", path,
                    major, minor);
    size_t prefix = major == 1 ? 10 : 12;
    if (len < prefix)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s is truncated: %zu bytes, shorter than a version %d.0 preamble", path, len,
                    major);
    uint32_t header_len = major == 1 ? (uint32_t)buf[8] | (uint32_t)buf[9] << 8
                                     : (uint32_t)buf[8] | (uint32_t)buf[9] << 8 |
                                           (uint32_t)buf[10] << 16 | (uint32_t)buf[11] << 24;
    if (header_len > MAX_NPY_HEADER)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: .npy header of %" PRIu32 " bytes, more than %d", path, header_len,
                    MAX_NPY_HEADER);
    if (len - prefix < header_len)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s is truncated: its header wants %" PRIu32 " bytes, the file has %zu after "
                    "the preamble",
                    path, header_len, len - prefix);
    const char *text = (const char *)buf + prefix;
    if (header_len == 0 || text[header_len - 1] != '\n')
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: malformed .npy header: it does not end with a newline", path);
    for (uint32_t i = 0; i < header_len; i++) {
        if (text[i] == '\0' || (major < 3 && (unsigned char)text[i] >= 0x80))
            return fail(err, err_size, TIDE_DATASET_INVALID,
                        "%s: malformed .npy header: byte %" PRIu32 " is 0x%02x, not %s", path, i,
                        (unsigned char)text[i], major < 3 ? "ASCII" : "UTF-8 text");
    }
    int rc = parse_header(text, header_len - 1, path, out, err, err_size);
    if (rc != 0)
        return rc;
    out->major = major;
    rc = count_elements(out->dims, out->rank, &out->count, path, err, err_size);
    if (rc != 0)
        return rc;
    uint64_t want = out->count * type_size(out->type), have = len - prefix - header_len;
    if (have != want) {
        char shape[160];
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s %s: its data is %" PRIu64 " bytes, but shape %s of '%s' is %" PRIu64
                    " bytes",
                    path, have < want ? "is truncated" : "has bytes after its array", have,
                    fmt_shape(out->dims, out->rank, shape, sizeof(shape)), out->descr, want);
    }
    out->data = buf + prefix + header_len;
    return 0;
}

/* ============================================================================
 * Reading files: .npy or IDX, told by the first bytes
 * ========================================================================== */

/* An array read from a file: the file's bytes and where the values are in them. */
struct array {
    uint8_t *bytes; /* the whole file, owned */
    size_t len;
    enum tide__array_type type;
    const char *spelled; /* the dtype as the format names it, for messages */
    bool big_endian;     /* IDX */
    int32_t rank;
    int64_t dims[TIDE__ARRAY_MAX_RANK];
    const uint8_t *data;
    uint64_t count;
};

/* Reads the whole of path (gunzipped when it is gzip) into a malloc'd buffer. */
static int read_file(const char *path, uint8_t **out, size_t *len, char *err, size_t err_size)
{
    errno = 0;
    gzFile gz = gzopen(path, "rb");
    if (!gz) {
        int e = errno;
        return fail(err, err_size, e == ENOENT ? TIDE_DATASET_NOT_FOUND : TIDE_DATASET_IO,
                    "cannot open %s: %s", path, e ? strerror(e) : "out of memory");
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    int rc = buf ? 0 : fail(err, err_size, TIDE_DATASET_NOMEM, "%s: out of memory", path);
    while (rc == 0) {
        if (n == cap) {
            uint8_t *bigger = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
            if (!bigger) {
                rc = fail(err, err_size, TIDE_DATASET_NOMEM,
                          "%s: out of memory after %zu bytes", path, n);
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        size_t want = cap - n > (1u << 30) ? (1u << 30) : cap - n;
        int got = gzread(gz, buf + n, (unsigned)want);
        if (got < 0) {
            int zerr;
            const char *message = gzerror(gz, &zerr);
            rc = fail(err, err_size, TIDE_DATASET_IO, "%s: reading failed after %zu bytes: %s",
                      path, n, zerr == Z_ERRNO ? strerror(errno) : message);
        } else if (got == 0) {
            break;
        } else {
            n += (size_t)got;
        }
    }
    gzclose(gz);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = n;
    return 0;
}

static uint32_t read_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* The IDX type byte's name, for messages. */
static const char *idx_type_name(uint8_t t)
{
    switch (t) {
    case 0x08: return "unsigned byte (0x08)";
    case 0x09: return "signed byte (0x09)";
    case 0x0B: return "int16 (0x0B)";
    case 0x0C: return "int32 (0x0C)";
    case 0x0D: return "float32 (0x0D)";
    case 0x0E: return "float64 (0x0E)";
    default: return NULL;
    }
}

static int parse_idx(struct array *a, const char *path, char *err, size_t err_size)
{
    const uint8_t *b = a->bytes;
    uint8_t t = b[2], rank = b[3];
    const char *name = idx_type_name(t);
    if (!name)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: IDX type byte 0x%02x is not an IDX type", path, t);
    if (t == 0x08)
        a->type = TIDE__ARRAY_UINT8;
    else if (t == 0x0C)
        a->type = TIDE__ARRAY_INT32;
    else if (t == 0x0D)
        a->type = TIDE__ARRAY_FLOAT32;
    else
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: IDX type %s is not supported (tide reads unsigned byte 0x08, int32 0x0C "
                    "and float32 0x0D)",
                    path, name);
    a->spelled = name;
    a->big_endian = true;
    if (rank > TIDE__ARRAY_MAX_RANK)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: IDX header claims %u dimensions, at most %d are read", path, rank,
                    TIDE__ARRAY_MAX_RANK);
    size_t header = 4 + 4 * (size_t)rank;
    if (a->len < header)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s is truncated: %zu bytes, shorter than the IDX header of %u dimensions "
                    "(%zu bytes)",
                    path, a->len, rank, header);
    a->rank = rank;
    for (int32_t i = 0; i < rank; i++)
        a->dims[i] = read_be32(b + 4 + 4 * i);
    int rc = count_elements(a->dims, a->rank, &a->count, path, err, err_size);
    if (rc != 0)
        return rc;
    uint64_t want = a->count * type_size(a->type), have = a->len - header;
    if (have != want) {
        char shape[160];
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s %s: its data is %" PRIu64 " bytes, but IDX shape %s of %s is %" PRIu64
                    " bytes",
                    path, have < want ? "is truncated" : "has bytes after its array", have,
                    fmt_shape(a->dims, a->rank, shape, sizeof(shape)), name, want);
    }
    a->data = b + header;
    return 0;
}

/* Reads path as .npy or IDX into *a (free a->bytes after). */
static int read_array(const char *path, struct array *a, char *err, size_t err_size)
{
    memset(a, 0, sizeof(*a));
    int rc = read_file(path, &a->bytes, &a->len, err, err_size);
    if (rc != 0)
        return rc;
    const uint8_t *b = a->bytes;
    if (a->len >= 6 && memcmp(b, "\x93NUMPY", 6) == 0) {
        struct tide__npy npy;
        rc = tide__npy_parse(a->bytes, a->len, path, &npy, err, err_size);
        if (rc == 0) {
            a->type = npy.type;
            a->rank = npy.rank;
            memcpy(a->dims, npy.dims, sizeof(a->dims));
            a->data = npy.data;
            a->count = npy.count;
            static const char *const spelled[] = {
                [TIDE__ARRAY_FLOAT32] = "float32 '<f4'", [TIDE__ARRAY_INT32] = "int32 '<i4'",
                [TIDE__ARRAY_INT64] = "int64 '<i8'", [TIDE__ARRAY_UINT8] = "uint8 '|u1'"};
            a->spelled = spelled[a->type];
        }
    } else if (a->len >= 4 && b[0] == 0 && b[1] == 0 && b[3] >= 1) {
        rc = parse_idx(a, path, err, err_size);
    } else {
        rc = fail(err, err_size, TIDE_DATASET_INVALID,
                  "%s is neither a NumPy .npy file (\\x93NUMPY...) nor an IDX file (0x00 0x00, a "
                  "type byte, the number of dimensions)%s",
                  path, a->len < 4 ? ": it is shorter than 4 bytes" : "");
    }
    if (rc != 0) {
        free(a->bytes);
        a->bytes = NULL;
    }
    return rc;
}

/* Element i of a as an int64 (integer arrays only). */
static int64_t integer_at(const struct array *a, uint64_t i)
{
    const uint8_t *p = a->data + i * type_size(a->type);
    if (a->type == TIDE__ARRAY_UINT8)
        return p[0];
    if (a->type == TIDE__ARRAY_INT32) {
        uint32_t u = a->big_endian ? read_be32(p)
                                   : (uint32_t)p[0] | (uint32_t)p[1] << 8 |
                                         (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        return (int32_t)u;
    }
    uint64_t u = 0;
    for (int k = 7; k >= 0; k--)
        u = u << 8 | p[k];
    return (int64_t)u;
}

/* ============================================================================
 * Datasets
 * ========================================================================== */

/*
 * Fills ds's examples from the inputs array: shape, and pixels or values;
 * with ints_ok, int32 and int64 arrays too, as int32 (for a model's int
 * input: token ids, an attention mask).
 */
static int take_inputs(tide_dataset *ds, const struct array *a, const char *path, bool ints_ok,
                       char *err, size_t err_size)
{
    char shape[160];
    if (a->rank < 2)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: inputs of shape %s; want one row per example, [N, ...] with at least "
                    "two dimensions",
                    path, fmt_shape(a->dims, a->rank, shape, sizeof(shape)));
    if (a->type != TIDE__ARRAY_FLOAT32 && a->type != TIDE__ARRAY_UINT8 && !ints_ok)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: inputs of dtype %s are not supported; want float32 '<f4' or uint8 "
                    "'|u1' (IDX: float32 0x0D or unsigned byte 0x08)",
                    path, a->spelled);
    if (a->dims[0] < 1)
        return fail(err, err_size, TIDE_DATASET_INVALID, "%s holds no examples (shape %s)", path,
                    fmt_shape(a->dims, a->rank, shape, sizeof(shape)));
    ds->count = a->dims[0];
    ds->sample_rank = a->rank - 1;
    int64_t size = 1;
    for (int32_t i = 0; i < ds->sample_rank; i++) {
        ds->sample_dims[i] = a->dims[i + 1];
        size *= a->dims[i + 1];
    }
    if (size < 1 || size > MAX_SAMPLE_VALUES)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: examples of shape %s hold %" PRId64 " values; want 1 to 2^31", path,
                    fmt_shape(ds->sample_dims, ds->sample_rank, shape, sizeof(shape)), size);
    ds->image_size = size;
    /* channels x height x width: the last two dimensions, and every leading one in channels. */
    int32_t r = ds->sample_rank;
    ds->width = ds->sample_dims[r - 1];
    ds->height = r >= 2 ? ds->sample_dims[r - 2] : 1;
    ds->channels = size / (ds->width * ds->height);
    size_t bytes = (size_t)a->count * type_size(a->type);
    if (a->type == TIDE__ARRAY_INT32 || a->type == TIDE__ARRAY_INT64) {
        ds->ints = malloc((size_t)a->count * sizeof(int32_t));
        if (!ds->ints)
            return fail(err, err_size, TIDE_DATASET_NOMEM, "%s: out of memory for %zu bytes", path,
                        (size_t)a->count * sizeof(int32_t));
        for (uint64_t i = 0; i < a->count; i++) {
            int64_t v = integer_at(a, i);
            if (v < INT32_MIN || v > INT32_MAX)
                return fail(err, err_size, TIDE_DATASET_INVALID,
                            "%s: value %" PRId64 " at index %" PRIu64 " (example %" PRIu64
                            ") does not fit the model's int32 input",
                            path, v, i, i / (uint64_t)size);
            ds->ints[i] = (int32_t)v;
        }
        return 0;
    }
    if (a->type == TIDE__ARRAY_UINT8) {
        ds->pixels = malloc(bytes);
        if (!ds->pixels)
            return fail(err, err_size, TIDE_DATASET_NOMEM, "%s: out of memory for %zu bytes",
                        path, bytes);
        memcpy(ds->pixels, a->data, bytes);
        return 0;
    }
    ds->values = malloc(bytes);
    if (!ds->values)
        return fail(err, err_size, TIDE_DATASET_NOMEM, "%s: out of memory for %zu bytes", path,
                    bytes);
    for (uint64_t i = 0; i < a->count; i++) {
        const uint8_t *p = a->data + 4 * i;
        uint32_t u = a->big_endian ? read_be32(p)
                                   : (uint32_t)p[0] | (uint32_t)p[1] << 8 |
                                         (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        memcpy(&ds->values[i], &u, 4);
    }
    return 0;
}

/* Fills ds's float targets from a float32 labels array of any per-example shape. */
static int take_targets(tide_dataset *ds, const struct array *a, const char *path,
                        const tide_dataset *like, char *err, size_t err_size)
{
    char shape[160], want[160];
    ds->target_rank = a->rank - 1;
    ds->target_size = 1;
    for (int32_t i = 0; i < ds->target_rank; i++) {
        ds->target_dims[i] = a->dims[i + 1];
        ds->target_size *= a->dims[i + 1];
    }
    if (ds->target_size < 1 || ds->target_size > MAX_SAMPLE_VALUES)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: targets of shape %s hold %" PRId64 " values an example; want 1 to 2^31",
                    path, fmt_shape(a->dims, a->rank, shape, sizeof(shape)), ds->target_size);
    if (like) {
        bool same = like->targets && like->target_rank == ds->target_rank;
        for (int32_t i = 0; same && i < ds->target_rank; i++)
            same = like->target_dims[i] == ds->target_dims[i];
        if (!same)
            return fail(err, err_size, TIDE_DATASET_INVALID,
                        "%s: float32 targets of shape %s an example, but the training labels are "
                        "%s",
                        path, fmt_shape(ds->target_dims, ds->target_rank, shape, sizeof(shape)),
                        like->targets ? fmt_shape(like->target_dims, like->target_rank, want,
                                                  sizeof(want))
                                      : "int class indices");
    }
    ds->targets = malloc((size_t)a->count * sizeof(float));
    if (!ds->targets)
        return fail(err, err_size, TIDE_DATASET_NOMEM, "%s: out of memory", path);
    for (uint64_t i = 0; i < a->count; i++) {
        const uint8_t *p = a->data + 4 * i;
        uint32_t u = a->big_endian ? read_be32(p)
                                   : (uint32_t)p[0] | (uint32_t)p[1] << 8 |
                                         (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        memcpy(&ds->targets[i], &u, 4);
    }
    ds->classes = 0;
    return 0;
}

/*
 * Fills ds's labels from the labels array: int class indices, and its
 * classes (from like, or the largest + 1); or float32 targets.
 */
static int take_labels(tide_dataset *ds, const struct array *a, const char *path,
                       const char *inputs_path, const struct array *inputs,
                       const tide_dataset *like, char *err, size_t err_size)
{
    char shape[160], inputs_shape[160];
    if (a->rank < 1)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: labels of shape []; want one row per example, [N, ...]", path);
    if (a->dims[0] != ds->count)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s holds %" PRId64 " examples (shape %s) but %s holds %" PRId64
                    " labels (shape %s)",
                    inputs_path, ds->count,
                    fmt_shape(inputs->dims, inputs->rank, inputs_shape, sizeof(inputs_shape)),
                    path, a->dims[0], fmt_shape(a->dims, a->rank, shape, sizeof(shape)));
    if (a->type == TIDE__ARRAY_FLOAT32)
        return take_targets(ds, a, path, like, err, err_size);
    if (like && like->targets)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: labels of dtype %s, but the training labels are float32 targets", path,
                    a->spelled);
    /* [N] or [N, 1]: one class index an example; [N, S, ...]: one per position. */
    ds->label_rank = a->rank == 1 || (a->rank == 2 && a->dims[1] == 1) ? 0 : a->rank - 1;
    ds->label_size = 1;
    for (int32_t i = 0; i < ds->label_rank; i++) {
        ds->label_dims[i] = a->dims[i + 1];
        ds->label_size *= a->dims[i + 1];
    }
    if (ds->label_size < 1 || ds->label_size > MAX_SAMPLE_VALUES)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: labels of shape %s hold %" PRId64 " class indices an example; want 1 "
                    "to 2^31",
                    path, fmt_shape(a->dims, a->rank, shape, sizeof(shape)), ds->label_size);
    if (like) {
        bool same = like->label_rank == ds->label_rank;
        for (int32_t i = 0; same && i < ds->label_rank; i++)
            same = like->label_dims[i] == ds->label_dims[i];
        char want[160];
        if (!same)
            return fail(err, err_size, TIDE_DATASET_INVALID,
                        "%s: class labels of shape %s an example, but the training labels are "
                        "of shape %s",
                        path, fmt_shape(ds->label_dims, ds->label_rank, shape, sizeof(shape)),
                        fmt_shape(like->label_dims, like->label_rank, want, sizeof(want)));
    }
    int64_t n = ds->count * ds->label_size;
    ds->labels32 = malloc((size_t)n * sizeof(int32_t));
    if (!ds->labels32)
        return fail(err, err_size, TIDE_DATASET_NOMEM, "%s: out of memory", path);
    int64_t largest = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = integer_at(a, (uint64_t)i);
        char where[64] = "";
        if (ds->label_rank > 0)
            snprintf(where, sizeof(where), " (example %" PRId64 ", position %" PRId64 ")",
                     i / ds->label_size, i % ds->label_size);
        if (v < 0)
            return fail(err, err_size, TIDE_DATASET_INVALID,
                        "%s: label %" PRId64 " at index %" PRId64
                        "%s is negative; labels are class indices 0, 1, ...",
                        path, v, i, where);
        if (like && v >= like->classes)
            return fail(err, err_size, TIDE_DATASET_INVALID,
                        "%s: label %" PRId64 " at index %" PRId64
                        "%s is out of range for the model's %" PRId32 " classes (0..%" PRId32
                        ", from the training labels)",
                        path, v, i, where, like->classes, like->classes - 1);
        if (v >= MAX_CLASSES)
            return fail(err, err_size, TIDE_DATASET_INVALID,
                        "%s: label %" PRId64 " at index %" PRId64
                        " would make more than %d classes",
                        path, v, i, MAX_CLASSES);
        ds->labels32[i] = (int32_t)v;
        if (v > largest)
            largest = v;
    }
    ds->classes = like ? like->classes : (int32_t)largest + 1;
    return 0;
}

/* Checks that ds's examples are like like's: one sample shape, and both of ints or neither. */
static int same_examples(const tide_dataset *ds, const tide_dataset *like, char *err,
                         size_t err_size)
{
    int64_t dims[TIDE_DATASET_MAX_SAMPLE_RANK];
    int32_t rank = tide_dataset_sample_shape(like, dims);
    bool same = rank == ds->sample_rank;
    for (int32_t i = 0; same && i < rank; i++)
        same = dims[i] == ds->sample_dims[i];
    char a[160], b[160];
    if (!same)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: examples of shape %s, but the training examples%s%s are %s",
                    ds->inputs_path, fmt_shape(ds->sample_dims, ds->sample_rank, a, sizeof(a)),
                    like->inputs_path ? " of " : "", like->inputs_path ? like->inputs_path : "",
                    fmt_shape(dims, rank, b, sizeof(b)));
    if (!ds->ints != !like->ints)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: examples of %s, but the training examples%s%s are of %s", ds->inputs_path,
                    ds->ints ? "ints" : "floats", like->inputs_path ? " of " : "",
                    like->inputs_path ? like->inputs_path : "", like->ints ? "ints" : "floats");
    return 0;
}

/* Opens path as a dataset of inputs alone: a model's further input. */
static int open_more(const char *path, bool ints_ok, tide_dataset **out, char *err, size_t err_size)
{
    struct array a;
    int rc = read_array(path, &a, err, err_size);
    if (rc != 0)
        return rc;
    tide_dataset *ds = calloc(1, sizeof(*ds));
    if (!ds || !(ds->inputs_path = strdup(path)))
        rc = fail(err, err_size, TIDE_DATASET_NOMEM, "%s: out of memory", path);
    if (rc == 0) {
        ds->kind = TIDE__DATASET_FILES;
        rc = take_inputs(ds, &a, path, ints_ok, err, err_size);
    }
    free(a.bytes);
    if (rc != 0) {
        tide_dataset_free(ds);
        return rc;
    }
    *out = ds;
    return 0;
}

static int open_files(const char *const *inputs_paths, int32_t n_inputs, const char *labels_path,
                      const tide_dataset *like, bool ints_ok, tide_dataset **out, char *err,
                      size_t err_size)
{
    if (err && err_size > 0)
        err[0] = '\0';
    if (!out || !inputs_paths || !labels_path || n_inputs < 1 || !inputs_paths[0])
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "tide_dataset_open_files: inputs_path, labels_path and out must not be NULL");
    *out = NULL;
    if (n_inputs > TIDE_DATASET_MAX_INPUTS)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%d files of examples; at most %d, one per model input, are read",
                    (int)n_inputs, TIDE_DATASET_MAX_INPUTS);
    if (like && n_inputs != 1 + like->n_more)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%d files of examples, but the training examples come in %d (one per model "
                    "input)",
                    (int)n_inputs, (int)(1 + like->n_more));
    const char *inputs_path = inputs_paths[0];
    struct array inputs, labels = {0};
    int rc = read_array(inputs_path, &inputs, err, err_size);
    if (rc != 0)
        return rc;
    rc = read_array(labels_path, &labels, err, err_size);
    tide_dataset *ds = NULL;
    if (rc == 0) {
        ds = calloc(1, sizeof(*ds));
        if (!ds || !(ds->inputs_path = strdup(inputs_path)))
            rc = fail(err, err_size, TIDE_DATASET_NOMEM, "%s: out of memory", inputs_path);
    }
    if (rc == 0) {
        ds->kind = TIDE__DATASET_FILES;
        rc = take_inputs(ds, &inputs, inputs_path, ints_ok, err, err_size);
    }
    if (rc == 0)
        rc = take_labels(ds, &labels, labels_path, inputs_path, &inputs, like, err, err_size);
    if (rc == 0 && like)
        rc = same_examples(ds, like, err, err_size);
    for (int32_t k = 1; rc == 0 && k < n_inputs; k++) {
        tide_dataset *more = NULL;
        if (!inputs_paths[k])
            rc = fail(err, err_size, TIDE_DATASET_INVALID,
                      "tide_dataset_open_files_n: inputs_paths[%d] is NULL", (int)k);
        else
            rc = open_more(inputs_paths[k], ints_ok, &more, err, err_size);
        if (rc != 0)
            break;
        ds->more[ds->n_more++] = more;
        if (more->count != ds->count)
            rc = fail(err, err_size, TIDE_DATASET_INVALID,
                      "%s holds %" PRId64 " examples but %s holds %" PRId64
                      ": every input's file has one row per example",
                      inputs_path, ds->count, inputs_paths[k], more->count);
        else if (like)
            rc = same_examples(more, like->more[k - 1], err, err_size);
    }
    free(inputs.bytes);
    free(labels.bytes);
    if (rc != 0) {
        tide_dataset_free(ds);
        return rc;
    }
    *out = ds;
    return 0;
}

int tide_dataset_open_files(const char *inputs_path, const char *labels_path,
                            const tide_dataset *like, tide_dataset **out, char *err,
                            size_t err_size)
{
    return open_files(&inputs_path, 1, labels_path, like, false, out, err, err_size);
}

int tide_dataset_open_files_n(const char *const *inputs_paths, int32_t n_inputs,
                              const char *labels_path, const tide_dataset *like, tide_dataset **out,
                              char *err, size_t err_size)
{
    return open_files(inputs_paths, n_inputs, labels_path, like, true, out, err, err_size);
}

int32_t tide_dataset_inputs(const tide_dataset *ds)
{
    return ds ? 1 + ds->n_more : 0;
}

int32_t tide_dataset_input_shape(const tide_dataset *ds, int32_t k, int64_t *dims)
{
    if (!ds || k < 0 || k > ds->n_more)
        return 0;
    return tide_dataset_sample_shape(k ? ds->more[k - 1] : ds, dims);
}

enum tide_data_type tide_dataset_input_dtype(const tide_dataset *ds, int32_t k)
{
    if (!ds || k < 0 || k > ds->n_more)
        return TIDE_DT_FLOAT32;
    return (k ? ds->more[k - 1] : ds)->ints ? TIDE_DT_INT32 : TIDE_DT_FLOAT32;
}

int32_t tide_dataset_sample_shape(const tide_dataset *ds, int64_t *dims)
{
    if (!ds)
        return 0;
    if (ds->kind != TIDE__DATASET_FILES) {
        dims[0] = ds->channels, dims[1] = ds->height, dims[2] = ds->width;
        return 3;
    }
    memcpy(dims, ds->sample_dims, (size_t)ds->sample_rank * sizeof(int64_t));
    return ds->sample_rank;
}

enum tide_data_type tide_dataset_label_dtype(const tide_dataset *ds)
{
    return ds && ds->targets ? TIDE_DT_FLOAT32 : TIDE_DT_INT32;
}

int32_t tide_dataset_label_shape(const tide_dataset *ds, int64_t *dims)
{
    if (ds && !ds->targets && ds->label_rank > 0) {
        memcpy(dims, ds->label_dims, (size_t)ds->label_rank * sizeof(int64_t));
        return ds->label_rank;
    }
    if (!ds || !ds->targets)
        return 0;
    memcpy(dims, ds->target_dims, (size_t)ds->target_rank * sizeof(int64_t));
    return ds->target_rank;
}

int tide_dataset_model_input(const tide_dataset *ds, const char *model, int64_t *channels,
                             int64_t *height, int64_t *width, char *err, size_t err_size)
{
    if (!ds || !model || !channels || !height || !width)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "tide_dataset_model_input: NULL argument");
    int64_t dims[TIDE_DATASET_MAX_SAMPLE_RANK];
    int32_t rank = tide_dataset_sample_shape(ds, dims);
    char shape[160];
    const char *source = ds->inputs_path ? ds->inputs_path : "the dataset";
    fmt_shape(dims, rank, shape, sizeof(shape));
    if (strcmp(model, "mlp") == 0) {
        *channels = ds->channels, *height = ds->height, *width = ds->width;
        return 0;
    }
    if (strcmp(model, "cnn") == 0 || strcmp(model, "resnet") == 0) {
        if (rank != 2 && rank != 3)
            return fail(err, err_size, TIDE_DATASET_INVALID,
                        "--model %s reads examples of shape [C, H, W] or [H, W], but the "
                        "examples of %s are %s",
                        model, source, shape);
        *channels = rank == 3 ? dims[0] : 1;
        *height = dims[rank - 2];
        *width = dims[rank - 1];
        if (model[0] == 'r' && *height != *width)
            return fail(err, err_size, TIDE_DATASET_INVALID,
                        "--model resnet reads square images [C, S, S], but the examples of %s "
                        "are %s",
                        source, shape);
        return 0;
    }
    if (strcmp(model, "lstm") == 0) {
        if (rank != 2 && !(rank == 3 && dims[0] == 1))
            return fail(err, err_size, TIDE_DATASET_INVALID,
                        "--model lstm reads examples of shape [S, F] or [1, S, F] (S time steps "
                        "of F features), but the examples of %s are %s",
                        source, shape);
        *channels = 1;
        *height = dims[rank - 2];
        *width = dims[rank - 1];
        return 0;
    }
    return fail(err, err_size, TIDE_DATASET_INVALID,
                "unknown model \"%.32s\", wants mlp, cnn, resnet or lstm", model);
}

int tide_dataset_check_input(const tide_dataset *ds, const int64_t *dims, int32_t rank, char *err,
                             size_t err_size)
{
    if (!ds || !dims || rank < 1)
        return fail(err, err_size, TIDE_DATASET_INVALID, "tide_dataset_check_input: bad argument");
    int64_t per_example = 1;
    for (int32_t i = 1; i < rank; i++)
        per_example *= dims[i];
    if (per_example == ds->image_size)
        return 0;
    int64_t sample[TIDE_DATASET_MAX_SAMPLE_RANK];
    int32_t sample_rank = tide_dataset_sample_shape(ds, sample);
    char a[160], b[160];
    return fail(err, err_size, TIDE_DATASET_INVALID,
                "the model's input placeholder is %s (%" PRId64 " values an example), but the "
                "examples of %s are %s (%" PRId64 " values)",
                fmt_shape(dims, rank, a, sizeof(a)), per_example,
                ds->inputs_path ? ds->inputs_path : "the dataset",
                fmt_shape(sample, sample_rank, b, sizeof(b)), ds->image_size);
}

/* ============================================================================
 * Writing .npy and .npz
 * ========================================================================== */

int tide__npy_encode(const struct tide_tensor *array, uint8_t **out, size_t *len, char *err,
                     size_t err_size)
{
    if (array->dtype != TIDE_DT_FLOAT32 && array->dtype != TIDE_DT_INT32)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: dtype %d cannot be written as .npy (float32 and int32 can)",
                    array->name ? array->name : "(unnamed)", (int)array->dtype);
    if (array->rank < 0 || array->rank > TIDE_BUILDER_MAX_RANK)
        return fail(err, err_size, TIDE_DATASET_INVALID, "%s: rank %d", array->name,
                    (int)array->rank);
    uint64_t count = 1;
    for (int32_t i = 0; i < array->rank; i++)
        count *= (uint64_t)array->dims[i];
    if (count * 4 != array->bytes)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "%s: %zu bytes of data for %" PRIu64 " values", array->name, array->bytes,
                    count);
    char header[512];
    int n = snprintf(header, sizeof(header), "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     array->dtype == TIDE_DT_FLOAT32 ? "<f4" : "<i4");
    /* As NumPy spells a tuple: (2, 3), (5,) and (). */
    for (int32_t i = 0; i < array->rank; i++)
        n += snprintf(header + n, sizeof(header) - (size_t)n, "%s%" PRId64 "%s", i ? ", " : "",
                      array->dims[i], array->rank == 1 ? "," : "");
    n += snprintf(header + n, sizeof(header) - (size_t)n, "), }");
    /* Spaces, then a newline, so that the data starts at a multiple of 64 bytes, as NumPy does. */
    size_t total = 10 + (size_t)n + 1;
    size_t padded = (total + 63) / 64 * 64;
    size_t header_len = padded - 10;
    uint8_t *buf = malloc(padded + array->bytes);
    if (!buf)
        return fail(err, err_size, TIDE_DATASET_NOMEM, "%s: out of memory", array->name);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)(header_len & 0xff);
    buf[9] = (uint8_t)(header_len >> 8);
    memcpy(buf + 10, header, (size_t)n);
    memset(buf + 10 + n, ' ', header_len - (size_t)n - 1);
    buf[padded - 1] = '\n';
    if (array->bytes)
        memcpy(buf + padded, array->data, array->bytes);
    *out = buf;
    *len = padded + array->bytes;
    return 0;
}

int tide_npz_write(const char *path, const struct tide_tensor *arrays, size_t n, char *err,
                   size_t err_size)
{
    if (err && err_size > 0)
        err[0] = '\0';
    if (!path || (n && !arrays))
        return fail(err, err_size, TIDE_DATASET_INVALID, "tide_npz_write: NULL argument");
    for (size_t i = 0; i < n; i++) {
        const char *name = arrays[i].name;
        if (!name || !name[0] || name[0] == '/' || strstr(name, "//") || strstr(name, ".."))
            return fail(err, err_size, TIDE_DATASET_INVALID,
                        "%s: array %zu has name \"%s\", which is no path inside a zip", path, i,
                        name ? name : "(NULL)");
    }
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp-%ld", path, (long)getpid()) >= sizeof(tmp))
        return fail(err, err_size, TIDE_DATASET_INVALID, "%s: path too long", path);
    int zerr = 0;
    zip_t *za = zip_open(tmp, ZIP_CREATE | ZIP_TRUNCATE, &zerr);
    if (!za) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, zerr);
        int rc = fail(err, err_size, TIDE_DATASET_IO, "cannot create %s: %s", path,
                      zip_error_strerror(&ze));
        zip_error_fini(&ze);
        return rc;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        uint8_t *npy;
        size_t len;
        rc = tide__npy_encode(&arrays[i], &npy, &len, err, err_size);
        if (rc != 0)
            break;
        char member[1024];
        snprintf(member, sizeof(member), "%s.npy", arrays[i].name);
        zip_source_t *src = zip_source_buffer(za, npy, len, 1);
        if (!src) {
            free(npy);
            rc = fail(err, err_size, TIDE_DATASET_NOMEM, "%s: %s", path, zip_strerror(za));
            break;
        }
        zip_int64_t at = zip_file_add(za, member, src, ZIP_FL_ENC_UTF_8);
        if (at < 0) {
            zip_source_free(src);
            rc = fail(err, err_size, TIDE_DATASET_IO, "%s: adding %s: %s", path, member,
                      zip_strerror(za));
            break;
        }
        if (zip_set_file_compression(za, (zip_uint64_t)at, ZIP_CM_STORE, 0) != 0)
            rc = fail(err, err_size, TIDE_DATASET_IO, "%s: %s", path, zip_strerror(za));
    }
    if (rc != 0) {
        zip_discard(za);
        unlink(tmp);
        return rc;
    }
    if (zip_close(za) != 0) {
        rc = fail(err, err_size, TIDE_DATASET_IO, "writing %s: %s", path, zip_strerror(za));
        zip_discard(za);
        unlink(tmp);
        return rc;
    }
    if (n == 0) {
        /* libzip writes no file for an empty archive: write the 22-byte end record ourselves. */
        static const uint8_t empty[22] = {0x50, 0x4b, 0x05, 0x06};
        FILE *f = fopen(tmp, "wb");
        bool ok = f && fwrite(empty, 1, sizeof(empty), f) == sizeof(empty);
        if (f && fclose(f) != 0)
            ok = false;
        if (!ok) {
            int e = errno;
            unlink(tmp);
            return fail(err, err_size, TIDE_DATASET_IO, "writing %s: %s", path, strerror(e));
        }
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return fail(err, err_size, TIDE_DATASET_IO, "cannot rename %s to %s: %s", tmp, path,
                    strerror(e));
    }
    return 0;
}
