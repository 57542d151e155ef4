/* SPDX-License-Identifier: MIT */
/*
 * dataset.c: Fashion-MNIST and synthetic image datasets, and the batch
 * iterator (tide/dataset.h).
 *
 * Fashion-MNIST is read once, at open, from its IDX files through zlib's
 * gzread (which reads uncompressed files too): a big-endian header — magic,
 * then one 32-bit size per dimension — followed by the bytes. Each file is
 * checked against what its header promises, byte for byte, so a truncated
 * download or a swapped file is caught at open with the numbers, never
 * later as a wrong batch. Pixels stay bytes and become floats only when
 * copied into a batch.
 *
 * The synthetic dataset stores nothing per example: example i of a split is
 * drawn from a splitmix64 stream seeded with (seed, split, i), so any example
 * can be produced in any order, and its label is computed from its pixels.
 * To keep that cheap for large images, W acts on P = min(C*H*W, 1024)
 * features, feature p being the sum of the centred pixels j with j mod P = p;
 * the label rule is linear in the pixels all the same.
 *
 * Datasets read from the user's NumPy and IDX files (dataset-files.c) share
 * the struct (dataset-impl.h), the copying out and the iterator.
 *
 * Shuffling is a Fisher-Yates shuffle driven by splitmix64 with unbiased
 * bounded draws (rejection of the short last range), so the order depends
 * only on the seed and the epoch, on every platform.
 */
#include "tide/dataset.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "common/status.h"
#include "dataset-impl.h"

_Static_assert(TIDE_DATASET_INVALID == TIDE_INVALID, "dataset codes are status codes");
_Static_assert(TIDE_DATASET_NOMEM == TIDE_NOMEM, "dataset codes are status codes");
_Static_assert(TIDE_DATASET_NOT_FOUND == TIDE_NOT_FOUND, "dataset codes are status codes");
_Static_assert(TIDE_DATASET_IO == TIDE_IO, "dataset codes are status codes");

/* IDX magic numbers: 0x08 (unsigned bytes) and the number of dimensions. */
#define IDX_LABELS_MAGIC 0x00000801u
#define IDX_IMAGES_MAGIC 0x00000803u
/* Fashion-MNIST's images, classes, and its largest plausible file. */
#define FMNIST_SIDE      28
#define FMNIST_CLASSES   10
#define FMNIST_MAX_COUNT 10000000u
/* The synthetic dataset's feature count cap (see the file comment) and class cap. */
#define SYNTHETIC_MAX_FEATURES 1024
#define SYNTHETIC_MAX_CLASSES  65536
/* Default seed of "synthetic" opened by name. */
#define SYNTHETIC_DEFAULT_SEED 0
/* The golden-ratio increment of splitmix64, also used to separate epochs. */
#define GOLDEN UINT64_C(0x9E3779B97F4A7C15)

struct tide_dataset_iter {
    const tide_dataset *ds;
    int64_t batch;
    uint64_t seed;
    unsigned flags;
    int64_t *order; /* this epoch's permutation of 0 .. count - 1 */
    int64_t pos;    /* the next position in order */
    int64_t epoch;
};

/* ============================================================================
 * Helpers
 * ========================================================================== */

/* Writes a message into err (when there is one) and returns code. */
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

/* splitmix64 (Steele, Lea and Flood): advances *state and returns the next output. */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += GOLDEN);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* A uniform draw from 0 .. bound - 1 (bound >= 1), without modulo bias. */
static uint64_t bounded(uint64_t *state, uint64_t bound)
{
    uint64_t threshold = (0 - bound) % bound; /* 2^64 mod bound: the short range to reject */
    for (;;) {
        uint64_t r = splitmix64(state);
        if (r >= threshold)
            return r % bound;
    }
}

/* A float in [0, 1) from the top 24 bits of a draw: exact, the same on every platform. */
static float unit_float(uint64_t r)
{
    return (float)(r >> 40) * (1.0f / 16777216.0f);
}

static uint32_t read_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* ============================================================================
 * IDX files
 * ========================================================================== */

/* An open IDX file: path is what we tell the user. */
struct idx_file {
    gzFile gz;
    char path[4096];
};

/*
 * Opens dir/base.gz, or dir/base when only the uncompressed file exists.
 * A missing file gets TIDE_DATASET_NOT_FOUND and the apt hint.
 */
static int idx_open(struct idx_file *f, const char *dir, const char *base, char *err,
                    size_t err_size)
{
    char plain[4096];
    snprintf(f->path, sizeof(f->path), "%s/%s.gz", dir, base);
    snprintf(plain, sizeof(plain), "%s/%s", dir, base);
    errno = 0;
    f->gz = gzopen(f->path, "rb");
    if (!f->gz && errno == ENOENT) {
        f->gz = gzopen(plain, "rb");
        if (f->gz)
            snprintf(f->path, sizeof(f->path), "%s", plain);
        else if (errno != ENOENT)
            snprintf(f->path, sizeof(f->path), "%s", plain); /* report the error it gave */
    }
    if (f->gz)
        return 0;
    int e = errno;
    if (e == ENOENT)
        return fail(err, err_size, TIDE_DATASET_NOT_FOUND,
                    "fashion-mnist: cannot open %s: %s (install the data with `apt install "
                    "dataset-fashion-mnist`, or pass the directory that holds it)",
                    f->path, strerror(e));
    if (e == 0)
        return fail(err, err_size, TIDE_DATASET_NOMEM, "fashion-mnist: cannot open %s: %s", f->path,
                    "out of memory");
    return fail(err, err_size, TIDE_DATASET_IO, "fashion-mnist: cannot open %s: %s", f->path,
                strerror(e));
}

/*
 * Reads exactly n bytes; what names them in messages ("the header", "the
 * pixels"). A short read is a truncated file; a zlib error is corrupt data.
 */
static int idx_read(struct idx_file *f, void *buf, uint64_t n, const char *what,
                    const char *promise, char *err, size_t err_size)
{
    uint64_t done = 0;
    while (done < n) {
        uint64_t want = n - done;
        unsigned chunk = want > (1u << 30) ? (1u << 30) : (unsigned)want;
        int got = gzread(f->gz, (uint8_t *)buf + done, chunk);
        if (got < 0) {
            int zerr;
            const char *message = gzerror(f->gz, &zerr);
            return fail(err, err_size, TIDE_DATASET_IO,
                        "fashion-mnist: %s: reading %s failed after %" PRIu64 " bytes: %s", f->path,
                        what, done, zerr == Z_ERRNO ? strerror(errno) : message);
        }
        if (got == 0)
            return fail(err, err_size, TIDE_DATASET_INVALID,
                        "fashion-mnist: %s is truncated: %s end after %" PRIu64 " of %" PRIu64
                        " bytes%s%s",
                        f->path, what, done, n, promise ? " " : "", promise ? promise : "");
        done += (uint64_t)got;
    }
    return 0;
}

/* Refuses bytes after the payload: a file longer than its header says is not what we think. */
static int idx_expect_end(struct idx_file *f, uint64_t expected_size, char *err, size_t err_size)
{
    uint8_t extra[4096];
    uint64_t more = 0;
    int got;
    while ((got = gzread(f->gz, extra, sizeof(extra))) > 0)
        more += (uint64_t)got;
    if (got < 0) {
        int zerr;
        const char *message = gzerror(f->gz, &zerr);
        return fail(err, err_size, TIDE_DATASET_IO, "fashion-mnist: %s: corrupt data: %s", f->path,
                    zerr == Z_ERRNO ? strerror(errno) : message);
    }
    if (more)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "fashion-mnist: %s holds %" PRIu64 " bytes, %" PRIu64 " more than the %" PRIu64
                    " its header promises",
                    f->path, expected_size + more, more, expected_size);
    return 0;
}

/* Reads the labels file base in dir: count (set) labels, each < FMNIST_CLASSES. */
static int read_labels(const char *dir, const char *base, uint8_t **labels, uint32_t *count,
                       char *err, size_t err_size)
{
    struct idx_file f;
    int rc = idx_open(&f, dir, base, err, err_size);
    if (rc != 0)
        return rc;
    uint8_t header[8];
    rc = idx_read(&f, header, sizeof(header), "the 8-byte IDX header", NULL, err, err_size);
    uint32_t magic = read_be32(header), n = read_be32(header + 4);
    if (rc == 0 && magic != IDX_LABELS_MAGIC)
        rc = fail(err, err_size, TIDE_DATASET_INVALID,
                  "fashion-mnist: %s has IDX magic 0x%08" PRIx32 ", wants 0x%08x (a 1-dimensional "
                  "byte array of labels)%s",
                  f.path, magic, IDX_LABELS_MAGIC,
                  magic == IDX_IMAGES_MAGIC ? "; it holds images: are the files swapped?" : "");
    if (rc == 0 && (n == 0 || n > FMNIST_MAX_COUNT))
        rc = fail(err, err_size, TIDE_DATASET_INVALID,
                  "fashion-mnist: %s claims %" PRIu32 " labels, wants 1 to %u", f.path, n,
                  FMNIST_MAX_COUNT);
    uint8_t *data = NULL;
    if (rc == 0) {
        data = malloc(n);
        if (!data)
            rc = fail(err, err_size, TIDE_DATASET_NOMEM,
                      "fashion-mnist: out of memory for %" PRIu32 " labels of %s", n, f.path);
    }
    char promise[96];
    snprintf(promise, sizeof(promise), "(the header promises %" PRIu32 " labels)", n);
    if (rc == 0)
        rc = idx_read(&f, data, n, "the labels", promise, err, err_size);
    if (rc == 0)
        rc = idx_expect_end(&f, 8 + (uint64_t)n, err, err_size);
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        if (data[i] >= FMNIST_CLASSES)
            rc = fail(err, err_size, TIDE_DATASET_INVALID,
                      "fashion-mnist: %s: label %u at index %" PRIu32 " is out of range 0..%d",
                      f.path, data[i], i, FMNIST_CLASSES - 1);
    }
    gzclose(f.gz);
    if (rc != 0) {
        free(data);
        return rc;
    }
    *labels = data;
    *count = n;
    return 0;
}

/* Reads the images file base in dir: count (set) images of FMNIST_SIDE x FMNIST_SIDE bytes. */
static int read_images(const char *dir, const char *base, uint8_t **pixels, uint32_t *count,
                       char *err, size_t err_size)
{
    struct idx_file f;
    int rc = idx_open(&f, dir, base, err, err_size);
    if (rc != 0)
        return rc;
    uint8_t header[16];
    rc = idx_read(&f, header, sizeof(header), "the 16-byte IDX header", NULL, err, err_size);
    uint32_t magic = read_be32(header), n = read_be32(header + 4);
    uint32_t rows = read_be32(header + 8), cols = read_be32(header + 12);
    if (rc == 0 && magic != IDX_IMAGES_MAGIC)
        rc = fail(err, err_size, TIDE_DATASET_INVALID,
                  "fashion-mnist: %s has IDX magic 0x%08" PRIx32 ", wants 0x%08x (a 3-dimensional "
                  "byte array of images)%s",
                  f.path, magic, IDX_IMAGES_MAGIC,
                  magic == IDX_LABELS_MAGIC ? "; it holds labels: are the files swapped?" : "");
    if (rc == 0 && (n == 0 || n > FMNIST_MAX_COUNT))
        rc = fail(err, err_size, TIDE_DATASET_INVALID,
                  "fashion-mnist: %s claims %" PRIu32 " images, wants 1 to %u", f.path, n,
                  FMNIST_MAX_COUNT);
    if (rc == 0 && (rows != FMNIST_SIDE || cols != FMNIST_SIDE))
        rc = fail(err, err_size, TIDE_DATASET_INVALID,
                  "fashion-mnist: %s holds images of %" PRIu32 "x%" PRIu32 " pixels, wants %dx%d",
                  f.path, rows, cols, FMNIST_SIDE, FMNIST_SIDE);
    uint64_t size = (uint64_t)n * FMNIST_SIDE * FMNIST_SIDE;
    uint8_t *data = NULL;
    if (rc == 0) {
        data = malloc((size_t)size);
        if (!data)
            rc = fail(err, err_size, TIDE_DATASET_NOMEM,
                      "fashion-mnist: out of memory for %" PRIu64 " bytes of pixels of %s", size,
                      f.path);
    }
    char promise[96];
    snprintf(promise, sizeof(promise), "(the header promises %" PRIu32 " images of %ux%u)", n,
             FMNIST_SIDE, FMNIST_SIDE);
    if (rc == 0)
        rc = idx_read(&f, data, size, "the pixels", promise, err, err_size);
    if (rc == 0)
        rc = idx_expect_end(&f, 16 + size, err, err_size);
    gzclose(f.gz);
    if (rc != 0) {
        free(data);
        return rc;
    }
    *pixels = data;
    *count = n;
    return 0;
}

/* ============================================================================
 * Opening
 * ========================================================================== */

static int open_fashion_mnist(const char *dir, bool train, tide_dataset **out, char *err,
                              size_t err_size)
{
    if (!dir)
        dir = TIDE_DATASET_FASHION_MNIST_DIR;
    struct stat st;
    errno = 0;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        int e = errno;
        bool missing = e == ENOENT || e == ENOTDIR;
        const char *why = e == 0 ? "is not a directory" : missing ? "does not exist" : strerror(e);
        return fail(err, err_size, missing || e == 0 ? TIDE_DATASET_NOT_FOUND : TIDE_DATASET_IO,
                    "fashion-mnist: directory %s %s (install the data with `apt install "
                    "dataset-fashion-mnist`, or pass the directory that holds it)",
                    dir, why);
    }
    const char *prefix = train ? "train" : "t10k";
    char images_base[64], labels_base[64];
    snprintf(images_base, sizeof(images_base), "%s-images-idx3-ubyte", prefix);
    snprintf(labels_base, sizeof(labels_base), "%s-labels-idx1-ubyte", prefix);

    tide_dataset *ds = calloc(1, sizeof(*ds));
    if (!ds)
        return fail(err, err_size, TIDE_DATASET_NOMEM, "fashion-mnist: out of memory");
    uint32_t n_labels = 0, n_images = 0;
    int rc = read_labels(dir, labels_base, &ds->labels, &n_labels, err, err_size);
    if (rc == 0)
        rc = read_images(dir, images_base, &ds->pixels, &n_images, err, err_size);
    if (rc == 0 && n_images != n_labels)
        rc = fail(err, err_size, TIDE_DATASET_INVALID,
                  "fashion-mnist: %s/%s.gz holds %" PRIu32 " images but %s/%s.gz holds %" PRIu32
                  " labels",
                  dir, images_base, n_images, dir, labels_base, n_labels);
    if (rc != 0) {
        tide_dataset_free(ds);
        return rc;
    }
    ds->kind = TIDE__DATASET_FASHION_MNIST;
    ds->count = n_images;
    ds->channels = 1;
    ds->height = FMNIST_SIDE;
    ds->width = FMNIST_SIDE;
    ds->classes = FMNIST_CLASSES;
    ds->image_size = FMNIST_SIDE * FMNIST_SIDE;
    *out = ds;
    return 0;
}

/* Parses a split name; returns false for anything but "train" and "test". */
static bool parse_split(const char *split, bool *train)
{
    if (split && strcmp(split, "train") == 0)
        *train = true;
    else if (split && strcmp(split, "test") == 0)
        *train = false;
    else
        return false;
    return true;
}

int tide_dataset_open_synthetic(const struct tide_synthetic_options *options, const char *split,
                                tide_dataset **out, char *err, size_t err_size)
{
    bool train;
    if (!out)
        return fail(err, err_size, TIDE_DATASET_INVALID, "synthetic: out is NULL");
    *out = NULL;
    if (!parse_split(split, &train))
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "synthetic: unknown split \"%.32s\", wants \"train\" or \"test\"",
                    split ? split : "(NULL)");
    struct tide_synthetic_options o = options ? *options : (struct tide_synthetic_options){0};
    if (o.count == 0)
        o.count = train ? 60000 : 10000;
    if (o.channels == 0)
        o.channels = 1;
    if (o.height == 0)
        o.height = FMNIST_SIDE;
    if (o.width == 0)
        o.width = FMNIST_SIDE;
    if (o.classes == 0)
        o.classes = FMNIST_CLASSES;
    const int64_t limit = INT64_C(1) << 31;
    if (o.count < 1 || o.count > limit || o.channels < 1 || o.channels > limit || o.height < 1 ||
        o.height > limit || o.width < 1 || o.width > limit || o.classes < 1 ||
        o.classes > SYNTHETIC_MAX_CLASSES)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "synthetic: count %" PRId64 ", channels %" PRId64 ", height %" PRId64
                    ", width %" PRId64 " and classes %" PRId32
                    " must each be at least 1 (count and sizes at most 2^31, classes at most %d)",
                    o.count, o.channels, o.height, o.width, o.classes, SYNTHETIC_MAX_CLASSES);
    if (o.channels * o.height > limit / o.width)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "synthetic: images of %" PRId64 " x %" PRId64 " x %" PRId64
                    " have more than 2^31 pixels",
                    o.channels, o.height, o.width);

    tide_dataset *ds = calloc(1, sizeof(*ds));
    if (!ds)
        return fail(err, err_size, TIDE_DATASET_NOMEM, "synthetic: out of memory");
    ds->kind = TIDE__DATASET_SYNTHETIC;
    ds->count = o.count;
    ds->channels = o.channels;
    ds->height = o.height;
    ds->width = o.width;
    ds->classes = o.classes;
    ds->image_size = o.channels * o.height * o.width;
    ds->seed = o.seed;
    ds->stream = train ? 1 : 2;
    ds->features =
        ds->image_size < SYNTHETIC_MAX_FEATURES ? ds->image_size : SYNTHETIC_MAX_FEATURES;
    ds->weights = malloc((size_t)ds->classes * (size_t)ds->features * sizeof(float));
    if (!ds->weights) {
        free(ds);
        return fail(err, err_size, TIDE_DATASET_NOMEM, "synthetic: out of memory for W");
    }
    uint64_t state = o.seed ^ UINT64_C(0x5745494748545321); /* W's own stream */
    for (int64_t i = 0; i < (int64_t)ds->classes * ds->features; i++)
        ds->weights[i] = 2.0f * unit_float(splitmix64(&state)) - 1.0f;
    *out = ds;
    return 0;
}

int tide_dataset_open(const char *name, const char *dir, const char *split, tide_dataset **out,
                      char *err, size_t err_size)
{
    if (err && err_size > 0)
        err[0] = '\0';
    if (!out)
        return fail(err, err_size, TIDE_DATASET_INVALID, "tide_dataset_open: out is NULL");
    *out = NULL;
    if (!name)
        return fail(err, err_size, TIDE_DATASET_INVALID, "tide_dataset_open: name is NULL");
    if (strcmp(name, "synthetic") == 0) {
        struct tide_synthetic_options o = {.seed = SYNTHETIC_DEFAULT_SEED};
        return tide_dataset_open_synthetic(&o, split, out, err, err_size);
    }
    if (strcmp(name, "fashion-mnist") != 0)
        return fail(err, err_size, TIDE_DATASET_NOT_FOUND,
                    "unknown dataset \"%.64s\", wants \"fashion-mnist\" or \"synthetic\"", name);
    bool train;
    if (!parse_split(split, &train))
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "fashion-mnist: unknown split \"%.32s\", wants \"train\" or \"test\"",
                    split ? split : "(NULL)");
    return open_fashion_mnist(dir, train, out, err, err_size);
}

void tide_dataset_free(tide_dataset *ds)
{
    if (!ds)
        return;
    free(ds->pixels);
    free(ds->labels);
    free(ds->weights);
    free(ds->values);
    free(ds->labels32);
    free(ds->targets);
    free(ds->inputs_path);
    free(ds->ints);
    for (int32_t k = 0; k < ds->n_more; k++)
        tide_dataset_free(ds->more[k]);
    free(ds);
}

/* ============================================================================
 * Reading
 * ========================================================================== */

int64_t tide_dataset_count(const tide_dataset *ds)
{
    return ds ? ds->count : 0;
}

int64_t tide_dataset_channels(const tide_dataset *ds)
{
    return ds ? ds->channels : 0;
}

int64_t tide_dataset_height(const tide_dataset *ds)
{
    return ds ? ds->height : 0;
}

int64_t tide_dataset_width(const tide_dataset *ds)
{
    return ds ? ds->width : 0;
}

int32_t tide_dataset_classes(const tide_dataset *ds)
{
    return ds ? ds->classes : 0;
}

/*
 * Example index of a synthetic dataset: its pixels (written to image, which
 * must hold image_size floats) and its label.
 */
static int32_t synthetic_example(const tide_dataset *ds, int64_t index, float *image)
{
    uint64_t state = ds->seed ^ (ds->stream * UINT64_C(0xD1B54A32D192ED03)) ^
                     ((uint64_t)index * UINT64_C(0xA24BAED4963EE407));
    splitmix64(&state); /* decorrelate neighbouring seeds */
    float features[SYNTHETIC_MAX_FEATURES] = {0};
    for (int64_t j = 0; j < ds->image_size; j++) {
        float x = unit_float(splitmix64(&state));
        image[j] = x;
        features[j % ds->features] += x - 0.5f;
    }
    int32_t best = 0;
    float best_score = 0;
    for (int32_t k = 0; k < ds->classes; k++) {
        const float *w = ds->weights + (int64_t)k * ds->features;
        float score = 0;
        for (int64_t p = 0; p < ds->features; p++)
            score += w[p] * features[p];
        if (k == 0 || score > best_score) {
            best = k;
            best_score = score;
        }
    }
    return best;
}

/* byte / 255.0f for every byte value, correctly rounded (a multiply by 1/255 is not). */
#define UNIT4(n)  (n) / 255.0f, (n + 1) / 255.0f, (n + 2) / 255.0f, (n + 3) / 255.0f
#define UNIT16(n) UNIT4(n), UNIT4(n + 4), UNIT4(n + 8), UNIT4(n + 12)
#define UNIT64(n) UNIT16(n), UNIT16(n + 16), UNIT16(n + 32), UNIT16(n + 48)
static const float byte_to_unit[256] = {UNIT64(0), UNIT64(64), UNIT64(128), UNIT64(192)};
#undef UNIT64
#undef UNIT16
#undef UNIT4

/*
 * Copies stored example index (valid) of Fashion-MNIST or files into image
 * and *label, either of which may be NULL: bytes scaled to [0, 1], floats as
 * they are.
 */
static void copy_stored(const tide_dataset *ds, int64_t index, float *image, int32_t *label)
{
    if (image && ds->pixels) {
        const uint8_t *src = ds->pixels + index * ds->image_size;
        for (int64_t j = 0; j < ds->image_size; j++)
            image[j] = byte_to_unit[src[j]];
    } else if (image) {
        memcpy(image, ds->values + index * ds->image_size, (size_t)ds->image_size * sizeof(float));
    }
    if (label)
        *label = ds->labels ? ds->labels[index] : ds->labels32[index];
}

/* Copies example index's float targets (target_size floats) into target. */
static void copy_target(const tide_dataset *ds, int64_t index, float *target)
{
    memcpy(target, ds->targets + index * ds->target_size, (size_t)ds->target_size * sizeof(float));
}

/* Copies example index (valid) into image (image_size floats, not NULL) and *label. */
static void copy_example(const tide_dataset *ds, int64_t index, float *image, int32_t *label)
{
    if (ds->kind == TIDE__DATASET_SYNTHETIC) {
        *label = synthetic_example(ds, index, image);
        return;
    }
    copy_stored(ds, index, image, label);
}

int tide_dataset_example(const tide_dataset *ds, int64_t index, float *image, int32_t *label)
{
    if (!ds || index < 0 || index >= ds->count || (label && (ds->targets || ds->label_size > 1)) ||
        (image && ds->ints))
        return TIDE_DATASET_INVALID;
    if (ds->kind != TIDE__DATASET_SYNTHETIC) {
        copy_stored(ds, index, image, label);
        return 0;
    }
    float *scratch = image;
    if (!scratch) {
        scratch = malloc((size_t)ds->image_size * sizeof(float));
        if (!scratch)
            return TIDE_DATASET_NOMEM;
    }
    int32_t y = synthetic_example(ds, index, scratch);
    if (label)
        *label = y;
    if (scratch != image)
        free(scratch);
    return 0;
}

/* ============================================================================
 * Batches
 * ========================================================================== */

/* Sets it->order for it->epoch: the identity, or a Fisher-Yates shuffle. */
static void iter_order(tide_dataset_iter *it)
{
    int64_t n = it->ds->count;
    for (int64_t i = 0; i < n; i++)
        it->order[i] = i;
    if (!(it->flags & TIDE_DATASET_SHUFFLE))
        return;
    uint64_t state = it->seed + (uint64_t)it->epoch * GOLDEN;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)bounded(&state, (uint64_t)i + 1);
        int64_t t = it->order[i];
        it->order[i] = it->order[j];
        it->order[j] = t;
    }
}

int tide_dataset_iter_new(const tide_dataset *ds, int64_t batch, uint64_t seed, unsigned flags,
                          tide_dataset_iter **out, char *err, size_t err_size)
{
    if (err && err_size > 0)
        err[0] = '\0';
    if (!out)
        return fail(err, err_size, TIDE_DATASET_INVALID, "tide_dataset_iter_new: out is NULL");
    *out = NULL;
    if (!ds)
        return fail(err, err_size, TIDE_DATASET_INVALID, "tide_dataset_iter_new: ds is NULL");
    if (flags & ~(TIDE_DATASET_SHUFFLE | TIDE_DATASET_KEEP_LAST))
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "tide_dataset_iter_new: unknown flags 0x%x",
                    flags & ~(TIDE_DATASET_SHUFFLE | TIDE_DATASET_KEEP_LAST));
    if (batch < 1 || batch > (INT64_C(1) << 31))
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "tide_dataset_iter_new: batch is %" PRId64 ", wants 1 to 2^31", batch);
    if (batch > ds->count && !(flags & TIDE_DATASET_KEEP_LAST))
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "tide_dataset_iter_new: batch %" PRId64 " is larger than the dataset's %" PRId64
                    " examples, so no full batch exists (pass TIDE_DATASET_KEEP_LAST to pad)",
                    batch, ds->count);
    tide_dataset_iter *it = calloc(1, sizeof(*it));
    int64_t *order = malloc((size_t)ds->count * sizeof(int64_t));
    if (!it || !order) {
        free(it);
        free(order);
        return fail(err, err_size, TIDE_DATASET_NOMEM,
                    "tide_dataset_iter_new: out of memory for an order of %" PRId64 " examples",
                    ds->count);
    }
    it->ds = ds;
    it->batch = batch;
    it->seed = seed;
    it->flags = flags;
    it->order = order;
    iter_order(it);
    *out = it;
    return 0;
}

void tide_dataset_iter_free(tide_dataset_iter *it)
{
    if (!it)
        return;
    free(it->order);
    free(it);
}

/* Copies example index (valid) of a files dataset into input: floats, or int32 for ints. */
static void copy_input(const tide_dataset *ds, int64_t index, void *input, int64_t slot)
{
    if (ds->ints)
        memcpy((int32_t *)input + slot * ds->image_size, ds->ints + index * ds->image_size,
               (size_t)ds->image_size * sizeof(int32_t));
    else
        copy_stored(ds, index, (float *)input + slot * ds->image_size, NULL);
}

/*
 * The batch of the iter_next functions: int32 labels or float targets, one
 * set; and the examples into images or, for a dataset of several inputs or
 * int ones, into inputs[k] for each input k.
 */
static int64_t iter_next(tide_dataset_iter *it, float *images, void *const *inputs, int32_t *labels,
                         float *targets)
{
    const tide_dataset *ds = it->ds;
    int64_t left = ds->count - it->pos;
    if (left <= 0 || (left < it->batch && !(it->flags & TIDE_DATASET_KEEP_LAST))) {
        it->epoch++;
        it->pos = 0;
        iter_order(it);
        return 0;
    }
    int64_t real = left < it->batch ? left : it->batch;
    for (int64_t i = 0; i < it->batch; i++) {
        /* Padding slots (i >= real) repeat the epoch's first examples. */
        int64_t index = i < real ? it->order[it->pos + i] : it->order[(i - real) % ds->count];
        if (inputs) {
            /* One permutation for every input: example index is row index of each file. */
            copy_input(ds, index, inputs[0], i);
            for (int32_t k = 0; k < ds->n_more; k++)
                copy_input(ds->more[k], index, inputs[k + 1], i);
            if (targets)
                copy_target(ds, index, targets + i * ds->target_size);
            else if (ds->label_size > 1) /* a class index per position */
                memcpy(labels + i * ds->label_size, ds->labels32 + index * ds->label_size,
                       (size_t)ds->label_size * sizeof(int32_t));
            else
                copy_stored(ds, index, NULL, &labels[i]);
        } else if (targets) {
            copy_stored(ds, index, images + i * ds->image_size, NULL);
            copy_target(ds, index, targets + i * ds->target_size);
        } else {
            copy_example(ds, index, images + i * ds->image_size, &labels[i]);
        }
    }
    it->pos += real;
    return real;
}

int64_t tide_dataset_iter_next(tide_dataset_iter *it, float *images, int32_t *labels)
{
    if (!it || !images || !labels || it->ds->targets || it->ds->ints || it->ds->n_more ||
        it->ds->label_size > 1)
        return -1;
    return iter_next(it, images, NULL, labels, NULL);
}

int64_t tide_dataset_iter_next_targets(tide_dataset_iter *it, float *images, float *targets)
{
    if (!it || !images || !targets || !it->ds->targets || it->ds->ints || it->ds->n_more)
        return -1;
    return iter_next(it, images, NULL, NULL, targets);
}

int64_t tide_dataset_iter_next_inputs(tide_dataset_iter *it, void *const *inputs, void *labels)
{
    if (!it || !inputs || !labels || it->ds->kind != TIDE__DATASET_FILES)
        return -1;
    for (int32_t k = 0; k <= it->ds->n_more; k++)
        if (!inputs[k])
            return -1;
    if (it->ds->targets)
        return iter_next(it, NULL, inputs, NULL, labels);
    return iter_next(it, NULL, inputs, labels, NULL);
}

int64_t tide_dataset_iter_epoch(const tide_dataset_iter *it)
{
    return it ? it->epoch : 0;
}
