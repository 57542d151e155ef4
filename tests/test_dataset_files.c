/* SPDX-License-Identifier: MIT */
/*
 * test_dataset_files.c: datasets from NumPy .npy and IDX files, and .npz out
 * (client/dataset-files.c, tide/dataset-files.h).
 *
 * Every file is written here byte by byte (headers spelled out as NumPy
 * and MNIST spell them), so the reader is checked against the formats, not
 * against our own writer; then the writer's .npz is read back through
 * libzip and the .npy parser. Every refusal is checked with its exact
 * message, and the header parser is fuzzed: malformed headers by hand,
 * random byte flips and every truncation of a good file.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>
#include <zlib.h>

#include "client/dataset-impl.h"
#include "tide/dataset-files.h"
#include "float_assert.h"

static char dir[64];
static char err[1024];

static const char *path_of(const char *name)
{
    static char paths[8][256];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}

static void write_bytes(const char *name, const void *data, size_t len)
{
    FILE *f = fopen(path_of(name), "wb");
    assert_non_null(f);
    if (len)
        assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/*
 * Writes a .npy file of format version major: the magic, the version, the
 * header length (2 bytes for 1.0, 4 for 2.0 and 3.0), the dict padded with
 * spaces and a newline to a multiple of 64 bytes, then data.
 */
static void write_npy(const char *name, int major, const char *dict, const void *data,
                      size_t data_len)
{
    size_t prefix = major == 1 ? 10 : 12;
    size_t dict_len = strlen(dict);
    size_t total = (prefix + dict_len + 1 + 63) / 64 * 64;
    size_t header_len = total - prefix;
    uint8_t *buf = malloc(total + data_len);
    assert_non_null(buf);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    buf[8] = (uint8_t)header_len;
    buf[9] = (uint8_t)(header_len >> 8);
    if (major > 1)
        buf[10] = buf[11] = 0;
    memcpy(buf + prefix, dict, dict_len);
    memset(buf + prefix + dict_len, ' ', header_len - dict_len - 1);
    buf[total - 1] = '\n';
    if (data_len)
        memcpy(buf + total, data, data_len);
    write_bytes(name, buf, total + data_len);
    free(buf);
}

/* Writes an IDX file: 0, 0, type, rank, big-endian dims, then data (already big endian). */
static void write_idx(const char *name, uint8_t type, int rank, const uint32_t *dims,
                      const void *data, size_t data_len, bool gzip)
{
    size_t header = 4 + 4 * (size_t)rank;
    uint8_t *buf = malloc(header + data_len);
    assert_non_null(buf);
    buf[0] = buf[1] = 0;
    buf[2] = type;
    buf[3] = (uint8_t)rank;
    for (int i = 0; i < rank; i++) {
        buf[4 + 4 * i] = (uint8_t)(dims[i] >> 24);
        buf[5 + 4 * i] = (uint8_t)(dims[i] >> 16);
        buf[6 + 4 * i] = (uint8_t)(dims[i] >> 8);
        buf[7 + 4 * i] = (uint8_t)dims[i];
    }
    if (data_len)
        memcpy(buf + header, data, data_len);
    if (gzip) {
        gzFile gz = gzopen(path_of(name), "wb");
        assert_non_null(gz);
        assert_int_equal(gzwrite(gz, buf, (unsigned)(header + data_len)), (int)(header + data_len));
        assert_int_equal(gzclose(gz), Z_OK);
    } else {
        write_bytes(name, buf, header + data_len);
    }
    free(buf);
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* Opens inputs/labels (names in dir), expecting code and exactly the message want (%s: dir). */
static void expect_error(const char *inputs, const char *labels, const tide_dataset *like,
                         int code, const char *want_format, ...)
{
    char want[1024];
    va_list args;
    va_start(args, want_format);
    vsnprintf(want, sizeof(want), want_format, args);
    va_end(args);
    tide_dataset *ds = (tide_dataset *)0x1;
    int rc = tide_dataset_open_files(path_of(inputs), path_of(labels), like, &ds, err,
                                     sizeof(err));
    if (rc != code || strcmp(err, want) != 0)
        fail_msg("rc %d (want %d)\n  got:  %s\n  want: %s", rc, code, err, want);
    assert_null(ds);
}

static tide_dataset *open_ok(const char *inputs, const char *labels, const tide_dataset *like)
{
    tide_dataset *ds = NULL;
    int rc = tide_dataset_open_files(path_of(inputs), path_of(labels), like, &ds, err,
                                     sizeof(err));
    if (rc != 0)
        fail_msg("open %s, %s: %d: %s", inputs, labels, rc, err);
    return ds;
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/tide-test-dsfiles-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    static const char *const names[] = {
        "x.npy",     "y.npy",       "xu8.npy",     "y64.npy",   "yu8.npy", "x3.npy",   "ximg.idx",
        "ylab.idx",  "ximg.idx.gz", "xf.idx",      "yi.idx",    "bad.npy", "bad.idx",  "bad2.npy",
        "xt.npy",    "yt.npy",      "weights.npz", "empty.npz", "x2.npy",  "y2.npy",   "yf.npy",
        "xi.npy",    "ybig.npy",    "fuzz.npy",    "y3.npy",    "xs.npy",  "ids.npy",  "mask.npy",
        "mask5.npy", "idsbig.npy",  "idst.npy",    "maskt.npy", "tok.npy", "next.npy", "next2.npy",
        "next3.npy", "next4.npy"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        unlink(path_of(names[i]));
    return rmdir(dir);
}

/* ============================================================================
 * Good files
 * ========================================================================== */

/* float32 inputs (version 1.0) and int32 labels: values as they are, shape, classes, batches. */
static void test_npy_float32_and_int32(void **state)
{
    (void)state;
    float x[6 * 2 * 3];
    for (int i = 0; i < 6 * 2 * 3; i++)
        x[i] = (float)i * 0.5f - 3.25f;
    int32_t y[6] = {0, 4, 1, 4, 2, 3};
    write_npy("x.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6, 2, 3), }", x,
              sizeof(x));
    write_npy("y.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (6,), }", y,
              sizeof(y));
    tide_dataset *ds = open_ok("x.npy", "y.npy", NULL);
    assert_int_equal(tide_dataset_count(ds), 6);
    assert_int_equal(tide_dataset_classes(ds), 5);
    int64_t dims[TIDE_DATASET_MAX_SAMPLE_RANK];
    assert_int_equal(tide_dataset_sample_shape(ds, dims), 2);
    assert_int_equal(dims[0], 2);
    assert_int_equal(dims[1], 3);
    assert_int_equal(tide_dataset_channels(ds), 1);
    assert_int_equal(tide_dataset_height(ds), 2);
    assert_int_equal(tide_dataset_width(ds), 3);
    for (int64_t i = 0; i < 6; i++) {
        float image[6];
        int32_t label;
        assert_int_equal(tide_dataset_example(ds, i, image, &label), 0);
        assert_memory_equal(image, x + i * 6, sizeof(image));
        assert_int_equal(label, y[i]);
    }

    /* Batches: without shuffling in file order; shuffled, each example once an epoch. */
    tide_dataset_iter *it;
    assert_int_equal(tide_dataset_iter_new(ds, 3, 7, 0, &it, err, sizeof(err)), 0);
    float images[3 * 6];
    int32_t labels[3];
    assert_int_equal(tide_dataset_iter_next(it, images, labels), 3);
    assert_memory_equal(images, x, sizeof(images));
    assert_memory_equal(labels, y, sizeof(labels));
    tide_dataset_iter_free(it);
    assert_int_equal(tide_dataset_iter_new(ds, 2, 7, TIDE_DATASET_SHUFFLE, &it, err, sizeof(err)),
                     0);
    int seen[6] = {0};
    for (int b = 0; b < 3; b++) {
        float pair[2 * 6];
        int32_t pair_labels[2];
        assert_int_equal(tide_dataset_iter_next(it, pair, pair_labels), 2);
        for (int k = 0; k < 2; k++) {
            int index = (int)((pair[k * 6] + 3.25f) / 0.5f) / 6; /* its first value says which */
            assert_memory_equal(pair + k * 6, x + index * 6, 6 * sizeof(float));
            assert_int_equal(pair_labels[k], y[index]);
            seen[index]++;
        }
    }
    for (int i = 0; i < 6; i++)
        assert_int_equal(seen[i], 1);
    assert_int_equal(tide_dataset_iter_next(it, images, labels), 0); /* the epoch ends */
    tide_dataset_iter_free(it);
    tide_dataset_free(ds);
}

/*
 * Several files of examples (a model's input_ids and attention_mask, int64
 * and int32, beside float features): one permutation picks the same rows of
 * each; ints stay ints; counts that differ, values outside int32 and test
 * files unlike the training ones are refused by name.
 */
/*
 * int64 labels data (bytes) of the given npy shape, written as name, are refused as the labels
 * of the inputs paths (like: the training dataset they must match, or NULL) with want after
 * the file's path.
 */
static void expect_labels_refused(const char *const *paths, const char *name, const char *shape,
                                  const int64_t *data, size_t bytes, const tide_dataset *like,
                                  const char *want)
{
    char dict[128], full[768];
    snprintf(dict, sizeof(dict), "{'descr': '<i8', 'fortran_order': False, 'shape': %s, }",
             shape);
    write_npy(name, 1, dict, data, bytes);
    tide_dataset *out = (tide_dataset *)0x1;
    assert_int_equal(
        tide_dataset_open_files_n(paths, 1, path_of(name), like, &out, err, sizeof(err)),
        TIDE_DATASET_INVALID);
    snprintf(full, sizeof(full), "%s: %s", path_of(name), want);
    assert_string_equal(err, full);
}

/*
 * Int labels [N, S]: a class index per position (a language model's next tokens, as
 * examples/onnx/gpt_labels.npy). The label shape is [S], a batch hands out S labels an
 * example through tide_dataset_iter_next_inputs (the images path and tide_dataset_example,
 * which give one label an example, refuse the dataset); classes are the largest + 1; a
 * negative label names its example and position; a test file of another label shape, and
 * one with a class the training labels lack, are refused naming both.
 */
static void test_labels_per_position(void **state)
{
    (void)state;
    enum { N = 4, S = 3 };
    int64_t tokens[N * S], next[N * S];
    for (int i = 0; i < N * S; i++)
        tokens[i] = (7 * i) % 11, next[i] = (7 * i + 7) % 11;
    write_npy("tok.npy", 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (4, 3), }", tokens,
              sizeof(tokens));
    write_npy("next.npy", 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (4, 3), }", next,
              sizeof(next));
    const char *paths[1] = {path_of("tok.npy")};
    tide_dataset *ds = NULL;
    if (tide_dataset_open_files_n(paths, 1, path_of("next.npy"), NULL, &ds, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_int_equal(tide_dataset_label_dtype(ds), TIDE_DT_INT32);
    int64_t dims[TIDE_DATASET_MAX_SAMPLE_RANK];
    assert_int_equal(tide_dataset_label_shape(ds, dims), 1);
    assert_int_equal(dims[0], S);
    assert_int_equal(tide_dataset_classes(ds), 11);
    int32_t one;
    assert_int_equal(tide_dataset_example(ds, 0, NULL, &one), TIDE_DATASET_INVALID);
    tide_dataset_iter *it;
    assert_int_equal(tide_dataset_iter_new(ds, 2, 5, TIDE_DATASET_SHUFFLE, &it, err, sizeof(err)),
                     0);
    int32_t btok[2 * S], labels[2 * S];
    float images[2 * S];
    assert_int_equal(tide_dataset_iter_next(it, images, labels), -1);
    for (int b = 0; b < 2; b++) {
        assert_int_equal(tide_dataset_iter_next_inputs(it, (void *[]){btok}, labels), 2);
        for (int r = 0; r < 2; r++) {
            int i = -1; /* the example the row comes from: its first token is 7 * i * S % 11 */
            for (int e = 0; e < N; e++)
                if (btok[r * S] == (7 * e * S) % 11)
                    i = e;
            assert_true(i >= 0);
            for (int p = 0; p < S; p++) {
                assert_int_equal(btok[r * S + p], tokens[i * S + p]);
                assert_int_equal(labels[r * S + p], next[i * S + p]);
            }
        }
    }
    tide_dataset_iter_free(it);

    /* Test files: the same label shape, classes within the training labels'. */
    expect_labels_refused(paths, "next2.npy", "(4, 1, 3)", next, sizeof(next), ds,
                          "class labels of shape [1, 3] an example, but the training labels are "
                          "of shape [3]");
    next[5] = 11;
    expect_labels_refused(paths, "next3.npy", "(4, 3)", next, sizeof(next), ds,
                          "label 11 at index 5 (example 1, position 2) is out of range for the "
                          "model's 11 classes (0..10, from the training labels)");
    tide_dataset_free(ds);
    next[5] = -1;
    expect_labels_refused(paths, "next4.npy", "(4, 3)", next, sizeof(next), NULL,
                          "label -1 at index 5 (example 1, position 2) is negative; labels are "
                          "class indices 0, 1, ...");
}

static void test_several_inputs(void **state)
{
    (void)state;
    float x[5 * 2];
    int64_t ids[5 * 3];
    int32_t mask[5 * 3], y[5] = {0, 1, 2, 1, 0};
    for (int i = 0; i < 5; i++) {
        x[i * 2] = (float)i, x[i * 2 + 1] = -(float)i;
        for (int k = 0; k < 3; k++)
            ids[i * 3 + k] = 100 * i + k, mask[i * 3 + k] = (i + k) % 2;
    }
    write_npy("x.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 2), }", x,
              sizeof(x));
    write_npy("ids.npy", 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (5, 3), }", ids,
              sizeof(ids));
    write_npy("mask.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (5, 3), }", mask,
              sizeof(mask));
    write_npy("y.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }", y,
              sizeof(y));
    const char *paths[3] = {path_of("x.npy"), path_of("ids.npy"), path_of("mask.npy")};
    tide_dataset *ds = NULL;
    if (tide_dataset_open_files_n(paths, 3, path_of("y.npy"), NULL, &ds, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_int_equal(tide_dataset_inputs(ds), 3);
    assert_int_equal(tide_dataset_count(ds), 5);
    assert_int_equal(tide_dataset_classes(ds), 3);
    assert_int_equal(tide_dataset_input_dtype(ds, 0), TIDE_DT_FLOAT32);
    assert_int_equal(tide_dataset_input_dtype(ds, 1), TIDE_DT_INT32);
    assert_int_equal(tide_dataset_input_dtype(ds, 2), TIDE_DT_INT32);
    int64_t dims[TIDE_DATASET_MAX_SAMPLE_RANK];
    assert_int_equal(tide_dataset_input_shape(ds, 1, dims), 1);
    assert_int_equal(dims[0], 3);
    assert_int_equal(tide_dataset_input_shape(ds, 3, dims), 0);
    tide_dataset_iter *it;
    assert_int_equal(tide_dataset_iter_new(ds, 2, 11, TIDE_DATASET_SHUFFLE, &it, err, sizeof(err)),
                     0);
    float bx[2 * 2], images[2 * 2];
    int32_t bids[2 * 3], bmask[2 * 3], labels[2];
    /* A dataset of several inputs has no batches of one images buffer. */
    assert_int_equal(tide_dataset_iter_next(it, images, labels), -1);
    int seen[5] = {0};
    for (int b = 0; b < 2; b++) {
        assert_int_equal(tide_dataset_iter_next_inputs(it, (void *[]){bx, bids, bmask}, labels), 2);
        for (int r = 0; r < 2; r++) {
            int i = (int)bx[r * 2]; /* the row the features come from */
            assert_float_equal(bx[r * 2 + 1], -(float)i, 0);
            for (int k = 0; k < 3; k++) {
                assert_int_equal(bids[r * 3 + k], 100 * i + k);
                assert_int_equal(bmask[r * 3 + k], (i + k) % 2);
            }
            assert_int_equal(labels[r], y[i]);
            seen[i]++;
        }
    }
    int twice = 0;
    for (int i = 0; i < 5; i++)
        twice += seen[i] > 1;
    assert_int_equal(twice, 0);
    tide_dataset_iter_free(it);

    /* Test files: as many, each like its training file. */
    tide_dataset *test = NULL;
    assert_int_equal(
        tide_dataset_open_files_n(paths, 3, path_of("y.npy"), ds, &test, err, sizeof(err)), 0);
    tide_dataset_free(test);
    test = (tide_dataset *)0x1;
    assert_int_equal(
        tide_dataset_open_files_n(paths, 2, path_of("y.npy"), ds, &test, err, sizeof(err)),
        TIDE_DATASET_INVALID);
    assert_null(test);
    assert_string_equal(err, "2 files of examples, but the training examples come in 3 (one per "
                             "model input)");
    const char *swapped[3] = {paths[0], paths[1], path_of("x.npy")};
    char want[1024];
    assert_int_equal(
        tide_dataset_open_files_n(swapped, 3, path_of("y.npy"), ds, &test, err, sizeof(err)),
        TIDE_DATASET_INVALID);
    snprintf(want, sizeof(want),
             "%s: examples of shape [2], but the training examples of %s are [3]", path_of("x.npy"),
             path_of("mask.npy"));
    assert_string_equal(err, want);
    tide_dataset_free(ds);

    /* A mask file of another count. */
    write_npy("mask5.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (4, 3), }", mask,
              4 * 3 * sizeof(int32_t));
    const char *short_mask[2] = {path_of("x.npy"), path_of("mask5.npy")};
    ds = (tide_dataset *)0x1;
    assert_int_equal(
        tide_dataset_open_files_n(short_mask, 2, path_of("y.npy"), NULL, &ds, err, sizeof(err)),
        TIDE_DATASET_INVALID);
    assert_null(ds);
    snprintf(want, sizeof(want),
             "%s holds 5 examples but %s holds 4: every input's file has one row per example",
             path_of("x.npy"), path_of("mask5.npy"));
    assert_string_equal(err, want);
    /* int64 outside int32, by file and index. */
    ids[7] = INT64_C(1) << 31;
    write_npy("idsbig.npy", 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (5, 3), }", ids,
              sizeof(ids));
    const char *big[2] = {path_of("x.npy"), path_of("idsbig.npy")};
    assert_int_equal(
        tide_dataset_open_files_n(big, 2, path_of("y.npy"), NULL, &ds, err, sizeof(err)),
        TIDE_DATASET_INVALID);
    snprintf(want, sizeof(want),
             "%s: value 2147483648 at index 7 (example 2) does not fit the model's int32 input",
             path_of("idsbig.npy"));
    assert_string_equal(err, want);
    /* Nine files are more than any model input list. */
    const char *nine[9] = {paths[0], paths[0], paths[0], paths[0], paths[0],
                           paths[0], paths[0], paths[0], paths[0]};
    assert_int_equal(
        tide_dataset_open_files_n(nine, 9, path_of("y.npy"), NULL, &ds, err, sizeof(err)),
        TIDE_DATASET_INVALID);
    assert_string_equal(err, "9 files of examples; at most 8, one per model input, are read");
    /* One int file alone: the files of tide_dataset_open_files stay float or bytes. */
    expect_error("ids.npy", "y.npy", NULL, TIDE_DATASET_INVALID,
                 "%s: inputs of dtype int64 '<i8' are not supported; want float32 '<f4' or "
                 "uint8 '|u1' (IDX: float32 0x0D or unsigned byte 0x08)",
                 path_of("ids.npy"));
}

/* uint8 inputs (version 2.0) become byte / 255 exactly; int64 (3.0) and uint8 labels. */
/* Float32 labels are targets of any per-example shape, batched as the inputs are. */
static void test_npy_float_targets(void **state)
{
    (void)state;
    float x[5 * 2], y[5 * 2 * 3];
    for (int i = 0; i < 5 * 2; i++)
        x[i] = (float)i;
    for (int i = 0; i < 5 * 2 * 3; i++)
        y[i] = (float)i * 0.25f - 1.0f;
    write_npy("x.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 2), }", x,
              sizeof(x));
    write_npy("yf.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 2, 3), }", y,
              sizeof(y));
    tide_dataset *ds = open_ok("x.npy", "yf.npy", NULL);
    assert_int_equal(tide_dataset_classes(ds), 0);
    assert_int_equal(tide_dataset_label_dtype(ds), TIDE_DT_FLOAT32);
    int64_t dims[TIDE_DATASET_MAX_SAMPLE_RANK];
    assert_int_equal(tide_dataset_label_shape(ds, dims), 2);
    assert_int_equal(dims[0], 2);
    assert_int_equal(dims[1], 3);
    /* Int32 labels are not asked for of targets, by example or by batch. */
    int32_t label;
    float image[2];
    assert_int_equal(tide_dataset_example(ds, 0, image, &label), TIDE_DATASET_INVALID);
    assert_int_equal(tide_dataset_example(ds, 4, image, NULL), 0);
    assert_memory_equal(image, x + 8, sizeof(image));

    tide_dataset_iter *it;
    assert_int_equal(tide_dataset_iter_new(ds, 2, 7, TIDE_DATASET_KEEP_LAST, &it, err,
                                           sizeof(err)),
                     0);
    float images[2 * 2], targets[2 * 6];
    int32_t labels[2];
    assert_int_equal(tide_dataset_iter_next(it, images, labels), -1);
    assert_int_equal(tide_dataset_iter_next_targets(it, images, targets), 2);
    assert_memory_equal(images, x, sizeof(images));
    assert_memory_equal(targets, y, sizeof(targets));
    assert_int_equal(tide_dataset_iter_next_targets(it, images, targets), 2);
    assert_memory_equal(targets, y + 12, sizeof(targets));
    /* The short last batch: example 4, then the epoch's first example as padding. */
    assert_int_equal(tide_dataset_iter_next_targets(it, images, targets), 1);
    assert_memory_equal(targets, y + 24, 6 * sizeof(float));
    assert_memory_equal(targets + 6, y, 6 * sizeof(float));
    assert_int_equal(tide_dataset_iter_next_targets(it, images, targets), 0);
    tide_dataset_iter_free(it);

    /* A test split: targets of the training targets' shape, not class labels. */
    tide_dataset *test = open_ok("x.npy", "yf.npy", ds);
    assert_int_equal(tide_dataset_label_dtype(test), TIDE_DT_FLOAT32);
    tide_dataset_free(test);
    write_npy("yt.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 6), }", y,
              sizeof(y));
    expect_error("x.npy", "yt.npy", ds, TIDE_DATASET_INVALID,
                 "%s/yt.npy: float32 targets of shape [6] an example, but the training labels "
                 "are [2, 3]",
                 dir);
    int32_t yi[5] = {0, 1, 2, 0, 1};
    write_npy("yi.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }", yi,
              sizeof(yi));
    expect_error("x.npy", "yi.npy", ds, TIDE_DATASET_INVALID,
                 "%s/yi.npy: labels of dtype int32 '<i4', but the training labels are float32 "
                 "targets",
                 dir);
    tide_dataset *classes = open_ok("x.npy", "yi.npy", NULL);
    assert_int_equal(tide_dataset_label_dtype(classes), TIDE_DT_INT32);
    assert_int_equal(tide_dataset_label_shape(classes, dims), 0);
    expect_error("x.npy", "yf.npy", classes, TIDE_DATASET_INVALID,
                 "%s/yf.npy: float32 targets of shape [2, 3] an example, but the training labels "
                 "are int class indices",
                 dir);
    tide_dataset_free(classes);
    tide_dataset_free(ds);
}

static void test_npy_uint8_int64_versions(void **state)
{
    (void)state;
    uint8_t x[4 * 5];
    for (int i = 0; i < 20; i++)
        x[i] = (uint8_t)(i * 13 + 1);
    x[0] = 0, x[1] = 255, x[2] = 51;
    int64_t y64[4] = {1, 0, 2, 1};
    uint8_t yu8[4] = {3, 3, 0, 1};
    write_npy("xu8.npy", 2, "{\"descr\": \"|u1\", \"shape\": (4, 5), \"fortran_order\": False}",
              x, sizeof(x));
    write_npy("y64.npy", 3, "{'shape':(4,1),'descr':'<i8','fortran_order':False,}", y64,
              sizeof(y64));
    write_npy("yu8.npy", 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (4L,), }", yu8,
              sizeof(yu8));
    tide_dataset *ds = open_ok("xu8.npy", "y64.npy", NULL);
    assert_int_equal(tide_dataset_classes(ds), 3);
    float image[5];
    int32_t label;
    assert_int_equal(tide_dataset_example(ds, 0, image, &label), 0);
    assert_true(image[0] == 0.0f);
    assert_true(image[1] == 1.0f);
    assert_true(image[2] == 51 / 255.0f);
    assert_int_equal(label, 1);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(tide_dataset_example(ds, i, image, &label), 0);
        for (int j = 0; j < 5; j++)
            assert_true(image[j] == x[i * 5 + j] / 255.0f);
        assert_int_equal(label, y64[i]);
    }
    int64_t dims[TIDE_DATASET_MAX_SAMPLE_RANK];
    assert_int_equal(tide_dataset_sample_shape(ds, dims), 1);
    assert_int_equal(dims[0], 5);
    tide_dataset_free(ds);

    ds = open_ok("xu8.npy", "yu8.npy", NULL);
    assert_int_equal(tide_dataset_classes(ds), 4);
    assert_int_equal(tide_dataset_example(ds, 1, NULL, &label), 0);
    assert_int_equal(label, 3);
    tide_dataset_free(ds);
}

/* IDX: unsigned-byte images and labels (plain and gzipped), float32 inputs, int32 labels. */
static void test_idx_files(void **state)
{
    (void)state;
    uint8_t pixels[3 * 2 * 2] = {0, 255, 51, 102, 1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t labels[3] = {9, 0, 2};
    uint32_t image_dims[3] = {3, 2, 2}, label_dims[1] = {3};
    write_idx("ximg.idx", 0x08, 3, image_dims, pixels, sizeof(pixels), false);
    write_idx("ximg.idx.gz", 0x08, 3, image_dims, pixels, sizeof(pixels), true);
    write_idx("ylab.idx", 0x08, 1, label_dims, labels, sizeof(labels), false);
    for (int gz = 0; gz < 2; gz++) {
        tide_dataset *ds = open_ok(gz ? "ximg.idx.gz" : "ximg.idx", "ylab.idx", NULL);
        assert_int_equal(tide_dataset_count(ds), 3);
        assert_int_equal(tide_dataset_classes(ds), 10);
        float image[4];
        int32_t label;
        assert_int_equal(tide_dataset_example(ds, 0, image, &label), 0);
        assert_true(image[0] == 0.0f && image[1] == 1.0f && image[2] == 0.2f);
        assert_true(image[3] == 102 / 255.0f);
        assert_int_equal(label, 9);
        tide_dataset_free(ds);
    }

    /* Big-endian float32 inputs and int32 labels. */
    float values[2 * 3] = {1.5f, -2.0f, 0.0f, 3.25f, 1e-3f, -7.0f};
    uint8_t be_values[sizeof(values)];
    for (int i = 0; i < 6; i++) {
        uint32_t u;
        memcpy(&u, &values[i], 4);
        put_be32(be_values + 4 * i, u);
    }
    int32_t ints[2] = {1, 6};
    uint8_t be_ints[8];
    put_be32(be_ints, (uint32_t)ints[0]);
    put_be32(be_ints + 4, (uint32_t)ints[1]);
    uint32_t value_dims[2] = {2, 3}, int_dims[1] = {2};
    write_idx("xf.idx", 0x0D, 2, value_dims, be_values, sizeof(be_values), false);
    write_idx("yi.idx", 0x0C, 1, int_dims, be_ints, sizeof(be_ints), false);
    tide_dataset *ds = open_ok("xf.idx", "yi.idx", NULL);
    assert_int_equal(tide_dataset_classes(ds), 7);
    float image[3];
    int32_t label;
    assert_int_equal(tide_dataset_example(ds, 1, image, &label), 0);
    assert_memory_equal(image, values + 3, sizeof(image));
    assert_int_equal(label, 6);
    tide_dataset_free(ds);
}

/* Test files take the training files' classes, and must have their sample shape. */
static void test_test_split_like_training(void **state)
{
    (void)state;
    float x[4 * 2 * 3] = {0};
    int32_t y[4] = {0, 1, 2, 1};
    write_npy("x.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2, 3), }", x,
              sizeof(x));
    write_npy("y.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }", y,
              sizeof(y));
    tide_dataset *train = open_ok("x.npy", "y.npy", NULL);
    int32_t yt[2] = {0, 0};
    write_npy("xt.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2, 3), }", x,
              2 * 6 * sizeof(float));
    write_npy("yt.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", yt,
              sizeof(yt));
    tide_dataset *test = open_ok("xt.npy", "yt.npy", train);
    assert_int_equal(tide_dataset_classes(test), 3); /* not 1, the largest test label + 1 */
    tide_dataset_free(test);

    yt[1] = 3;
    write_npy("yt.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", yt,
              sizeof(yt));
    expect_error("xt.npy", "yt.npy", train, TIDE_DATASET_INVALID,
                 "%s/yt.npy: label 3 at index 1 is out of range for the model's 3 classes (0..2, "
                 "from the training labels)",
                 dir);
    yt[1] = 0;
    write_npy("yt.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", yt,
              sizeof(yt));
    write_npy("xt.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 2), }", x,
              2 * 6 * sizeof(float));
    expect_error("xt.npy", "yt.npy", train, TIDE_DATASET_INVALID,
                 "%s/xt.npy: examples of shape [3, 2], but the training examples of %s/x.npy are "
                 "[2, 3]",
                 dir, dir);
    tide_dataset_free(train);
}

/* The sample shape decides each model's input; what a model cannot read is refused. */
static void test_model_input_rules(void **state)
{
    (void)state;
    float x[2 * 3 * 4 * 4] = {0};
    int32_t y[2] = {0, 1};
    write_npy("y2.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", y,
              sizeof(y));
    int64_t c, h, w;

    write_npy("x3.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4, 4), }",
              x, sizeof(x));
    tide_dataset *ds = open_ok("x3.npy", "y2.npy", NULL);
    static const char *const image_models[] = {"mlp", "cnn", "resnet"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(tide_dataset_model_input(ds, image_models[i], &c, &h, &w, err,
                                                  sizeof(err)),
                         0);
        assert_true(c == 3 && h == 4 && w == 4);
    }
    assert_int_equal(tide_dataset_model_input(ds, "lstm", &c, &h, &w, err, sizeof(err)),
                     TIDE_DATASET_INVALID);
    char want[512];
    snprintf(want, sizeof(want),
             "--model lstm reads examples of shape [S, F] or [1, S, F] (S time steps of F "
             "features), but the examples of %s/x3.npy are [3, 4, 4]",
             dir);
    assert_string_equal(err, want);
    /* A placeholder of another size is refused naming both shapes. */
    int64_t placeholder[4] = {64, 1, 20, 28};
    assert_int_equal(tide_dataset_check_input(ds, placeholder, 4, err, sizeof(err)),
                     TIDE_DATASET_INVALID);
    snprintf(want, sizeof(want),
             "the model's input placeholder is [64, 1, 20, 28] (560 values an example), but the "
             "examples of %s/x3.npy are [3, 4, 4] (48 values)",
             dir);
    assert_string_equal(err, want);
    int64_t flat[4] = {64, 1, 1, 48};
    assert_int_equal(tide_dataset_check_input(ds, flat, 4, err, sizeof(err)), 0);
    tide_dataset_free(ds);

    /* [F]: the mlp only. */
    write_npy("x3.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 12), }", x,
              2 * 12 * sizeof(float));
    ds = open_ok("x3.npy", "y2.npy", NULL);
    assert_int_equal(tide_dataset_model_input(ds, "mlp", &c, &h, &w, err, sizeof(err)), 0);
    assert_true(c * h * w == 12);
    assert_int_equal(tide_dataset_model_input(ds, "cnn", &c, &h, &w, err, sizeof(err)),
                     TIDE_DATASET_INVALID);
    snprintf(want, sizeof(want),
             "--model cnn reads examples of shape [C, H, W] or [H, W], but the examples of "
             "%s/x3.npy are [12]",
             dir);
    assert_string_equal(err, want);
    tide_dataset_free(ds);

    /* [S, F]: the LSTM's time steps; a cnn reads it as one channel; resnet wants it square. */
    write_npy("x3.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }", x,
              2 * 12 * sizeof(float));
    ds = open_ok("x3.npy", "y2.npy", NULL);
    assert_int_equal(tide_dataset_model_input(ds, "lstm", &c, &h, &w, err, sizeof(err)), 0);
    assert_true(c == 1 && h == 3 && w == 4);
    assert_int_equal(tide_dataset_model_input(ds, "cnn", &c, &h, &w, err, sizeof(err)), 0);
    assert_true(c == 1 && h == 3 && w == 4);
    assert_int_equal(tide_dataset_model_input(ds, "resnet", &c, &h, &w, err, sizeof(err)),
                     TIDE_DATASET_INVALID);
    snprintf(want, sizeof(want),
             "--model resnet reads square images [C, S, S], but the examples of %s/x3.npy are "
             "[3, 4]",
             dir);
    assert_string_equal(err, want);
    assert_int_equal(tide_dataset_model_input(ds, "gpt", &c, &h, &w, err, sizeof(err)),
                     TIDE_DATASET_INVALID);
    assert_string_equal(err, "unknown model \"gpt\", wants mlp, cnn, resnet or lstm");
    tide_dataset_free(ds);

    /* The built-in datasets answer with [C, H, W]. */
    tide_dataset *synthetic;
    struct tide_synthetic_options o = {.count = 4, .channels = 2, .height = 5, .width = 5};
    assert_int_equal(tide_dataset_open_synthetic(&o, "train", &synthetic, err, sizeof(err)), 0);
    int64_t dims[TIDE_DATASET_MAX_SAMPLE_RANK];
    assert_int_equal(tide_dataset_sample_shape(synthetic, dims), 3);
    assert_true(dims[0] == 2 && dims[1] == 5 && dims[2] == 5);
    assert_int_equal(tide_dataset_model_input(synthetic, "resnet", &c, &h, &w, err, sizeof(err)),
                     0);
    assert_true(c == 2 && h == 5 && w == 5);
    tide_dataset_free(synthetic);
}

/* ============================================================================
 * Bad files: each refusal with its exact message
 * ========================================================================== */

static void test_bad_files(void **state)
{
    (void)state;
    float x[3 * 2] = {0};
    int32_t y[3] = {0, 1, 0};
    write_npy("x.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", x,
              sizeof(x));
    write_npy("y.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", y,
              sizeof(y));

    expect_error("nope.npy", "y.npy", NULL, TIDE_DATASET_NOT_FOUND,
                 "cannot open %s/nope.npy: No such file or directory", dir);
    expect_error("x.npy", "nope.npy", NULL, TIDE_DATASET_NOT_FOUND,
                 "cannot open %s/nope.npy: No such file or directory", dir);

    write_bytes("bad.npy", "hello, world\n", 13);
    expect_error("bad.npy", "y.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/bad.npy is neither a NumPy .npy file (\\x93NUMPY...) nor an IDX file (0x00 "
                 "0x00, a type byte, the number of dimensions)",
                 dir);
    write_bytes("bad.npy", "", 0);
    expect_error("bad.npy", "y.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/bad.npy is neither a NumPy .npy file (\\x93NUMPY...) nor an IDX file (0x00 "
                 "0x00, a type byte, the number of dimensions): it is shorter than 4 bytes",
                 dir);

    /* Truncated data, and bytes after the array. */
    write_npy("bad.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", x,
              sizeof(x) - 3);
    expect_error("bad.npy", "y.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/bad.npy is truncated: its data is 21 bytes, but shape [3, 2] of '<f4' is 24 "
                 "bytes",
                 dir);
    float more[7] = {0};
    write_npy("bad.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", more,
              sizeof(more));
    expect_error("bad.npy", "y.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/bad.npy has bytes after its array: its data is 28 bytes, but shape [3, 2] "
                 "of '<f4' is 24 bytes",
                 dir);
    /* A header cut short. */
    static const char cut[] = "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortr";
    write_bytes("bad.npy", cut, sizeof(cut) - 1);
    expect_error("bad.npy", "y.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/bad.npy is truncated: its header wants 118 bytes, the file has 23 after the "
                 "preamble",
                 dir);
    write_bytes("bad.npy", "\x93NUMPY\x04\x00", 8);
    expect_error("bad.npy", "y.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/bad.npy is truncated: 8 bytes, shorter than a .npy preamble", dir);
    write_bytes("bad.npy", "\x93NUMPY\x04\x00\x00\x00", 10);
    expect_error("bad.npy", "y.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/bad.npy: .npy format version 4.0 is not supported (1.0, 2.0 and 3.0 are)",
                 dir);

    /* Unsupported dtypes, named. */
    write_npy("bad.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), }", x,
              sizeof(x));
    expect_error("bad.npy", "y.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/bad.npy: dtype '<f8' is not supported (tide reads float32 '<f4', int32 "
                 "'<i4', int64 '<i8' and uint8 '|u1')",
                 dir);
    write_npy("bad.npy", 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (3, 2), }", x,
              sizeof(x));
    expect_error("bad.npy", "y.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/bad.npy: dtype '>f4' is not supported (tide reads float32 '<f4', int32 "
                 "'<i4', int64 '<i8' and uint8 '|u1')",
                 dir);
    write_npy("xi.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3, 2), }", x,
              sizeof(x));
    expect_error("xi.npy", "y.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/xi.npy: inputs of dtype int32 '<i4' are not supported; want float32 '<f4' "
                 "or uint8 '|u1' (IDX: float32 0x0D or unsigned byte 0x08)",
                 dir);
    /* Labels of one file per example, [N, ...] with N the inputs' count. */
    write_npy("yf.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", x,
              6 * sizeof(float));
    expect_error("x.npy", "yf.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/x.npy holds 3 examples (shape [3, 2]) but %s/yf.npy holds 2 labels (shape "
                 "[2, 3])",
                 dir, dir);

    /* Fortran order, refused naming the file. */
    write_npy("bad.npy", 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2), }", x,
              sizeof(x));
    expect_error("bad.npy", "y.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/bad.npy: fortran_order is True; tide reads C-order arrays only (save "
                 "numpy.ascontiguousarray(a))",
                 dir);

    /* Inputs and labels of different lengths, both named. */
    int32_t y2[2] = {0, 1};
    write_npy("y2.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", y2,
              sizeof(y2));
    expect_error("x.npy", "y2.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/x.npy holds 3 examples (shape [3, 2]) but %s/y2.npy holds 2 labels (shape "
                 "[2])",
                 dir, dir);

    /* Shapes that are no dataset. */
    expect_error("y.npy", "y.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/y.npy: inputs of shape [3]; want one row per example, [N, ...] with at "
                 "least two dimensions",
                 dir);
    write_npy("bad.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 2), }", x, 0);
    expect_error("bad.npy", "y.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/bad.npy holds no examples (shape [0, 2])", dir);

    /* Labels out of range. */
    int32_t negative[3] = {0, -1, 0};
    write_npy("y3.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", negative,
              sizeof(negative));
    expect_error("x.npy", "y3.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/y3.npy: label -1 at index 1 is negative; labels are class indices 0, 1, ...",
                 dir);
    int64_t huge[3] = {0, 1, INT64_C(1) << 40};
    write_npy("ybig.npy", 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", huge,
              sizeof(huge));
    expect_error("x.npy", "ybig.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/ybig.npy: label 1099511627776 at index 2 would make more than 65536 classes",
                 dir);
    int64_t wrapped[3] = {0, 1, -(INT64_C(1) << 32) + 1}; /* 1 as an int32 if cut to 32 bits */
    write_npy("ybig.npy", 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", wrapped,
              sizeof(wrapped));
    expect_error("x.npy", "ybig.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/ybig.npy: label -4294967295 at index 2 is negative; labels are class "
                 "indices 0, 1, ...",
                 dir);

    /* IDX: unsupported types, truncation, extra bytes. */
    uint32_t dims[2] = {3, 2};
    write_idx("bad.idx", 0x0E, 2, dims, x, sizeof(x), false);
    expect_error("bad.idx", "y.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/bad.idx: IDX type float64 (0x0E) is not supported (tide reads unsigned byte "
                 "0x08, int32 0x0C and float32 0x0D)",
                 dir);
    write_idx("bad.idx", 0x07, 2, dims, x, sizeof(x), false);
    expect_error("bad.idx", "y.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/bad.idx: IDX type byte 0x07 is not an IDX type", dir);
    write_idx("bad.idx", 0x08, 2, dims, x, 5, false);
    expect_error("bad.idx", "y.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/bad.idx is truncated: its data is 5 bytes, but IDX shape [3, 2] of unsigned "
                 "byte (0x08) is 6 bytes",
                 dir);
    write_idx("bad.idx", 0x08, 2, dims, x, 7, false);
    expect_error("bad.idx", "y.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/bad.idx has bytes after its array: its data is 7 bytes, but IDX shape [3, 2] "
                 "of unsigned byte (0x08) is 6 bytes",
                 dir);
    /* A header that claims 3 dimensions and ends after 2. */
    uint8_t short_header[12] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2};
    write_bytes("bad.idx", short_header, sizeof(short_header));
    expect_error("bad.idx", "y.npy", NULL, TIDE_DATASET_INVALID,
                 "%s/bad.idx is truncated: 12 bytes, shorter than the IDX header of 3 dimensions "
                 "(16 bytes)",
                 dir);
}

/* ============================================================================
 * The header parser, fuzzed
 * ========================================================================== */

/* Parses a version-1.0 file with header dict (no data) and returns the message. */
static int parse_dict(const char *dict, const void *data, size_t data_len)
{
    write_npy("fuzz.npy", 1, dict, data, data_len);
    FILE *f = fopen(path_of("fuzz.npy"), "rb");
    assert_non_null(f);
    uint8_t buf[4096];
    size_t len = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    struct tide__npy npy;
    err[0] = '\0';
    return tide__npy_parse(buf, len, "f.npy", &npy, err, sizeof(err));
}

static void test_header_malformed(void **state)
{
    (void)state;
    static const struct {
        const char *dict, *message;
    } cases[] = {
        {"", "f.npy: malformed .npy header at byte 53 of the dict: expected '{' opening the header "
             "dict, found the end"},
        {"['descr']", "f.npy: malformed .npy header at byte 0 of the dict: expected '{' opening "
                      "the header dict, found \"['descr']   \""},
        {"{descr: '<f4'}", "f.npy: malformed .npy header at byte 1 of the dict: expected a key "
                           "('descr', 'fortran_order' or 'shape') or '}', found \"descr: '<f4'\""},
        {"{'descr' '<f4'}", "f.npy: malformed .npy header at byte 9 of the dict: expected ':' "
                            "after a key, found \"'<f4'}      \""},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
         "f.npy: malformed .npy header: unknown key 'x' (wants 'descr', 'fortran_order' and "
         "'shape')"},
        {"{'descr': '<f4', 'descr': '<f4'}",
         "f.npy: malformed .npy header: key 'descr' appears twice"},
        {"{'descr': '<f4', 'shape': (2,)}", "f.npy: malformed .npy header: key 'fortran_order' is "
                                            "missing"},
        {"{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}",
         "f.npy: malformed .npy header at byte 34 of the dict: expected True or False, found "
         "\"false, 'shap\""},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [2]}",
         "f.npy: malformed .npy header at byte 50 of the dict: expected '(' opening the shape "
         "tuple, found \"[2]}        \""},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2)}",
         "f.npy: malformed .npy header at byte 53 of the dict: expected ',' after the one "
         "dimension of the shape (5,), found \"}           \""},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
         "f.npy: malformed .npy header at byte 51 of the dict: expected a dimension (a "
         "non-negative integer), found \"-2,)}       \""},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}",
         "f.npy: malformed .npy header at byte 53 of the dict: expected ',' or ')' in the shape "
         "tuple, found \"3)}         \""},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
         "f.npy: malformed .npy header at byte 69 of the dict: expected a dimension below 2^63, "
         "found \"99,)}       \""},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1)}",
         "f.npy: malformed .npy header at byte 67 of the dict: expected at most 8 dimensions, "
         "found \"1)}         \""},
        {"{'descr': '<f4\\n', 'fortran_order': False, 'shape': (2,)}",
         "f.npy: malformed .npy header at byte 14 of the dict: expected no escapes in a string "
         "(the dtype and keys need none), found \"\\n', 'fortra\""},
        /* A " inside '...' is part of the string, as in Python: the dict goes wrong after it. */
        {"{'descr': '<f4\", 'fortran_order': False, 'shape': (2,)}",
         "f.npy: malformed .npy header at byte 18 of the dict: expected ',' or '}' after a "
         "value, found \"fortran_orde\""},
        {"{'descr': '<f4", "f.npy: malformed .npy header at byte 10 of the dict: expected a "
                          "closing quote for the string that starts here, found \"'<f4        \""},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x",
         "f.npy: malformed .npy header at byte 56 of the dict: expected only spaces and a newline "
         "after the dict, found \"x           \""},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,),,}",
         "f.npy: malformed .npy header at byte 55 of the dict: expected a key ('descr', "
         "'fortran_order' or 'shape') or '}', found \",}          \""},
        {"{'descr': 5, 'fortran_order': False, 'shape': (2,)}",
         "f.npy: malformed .npy header at byte 10 of the dict: expected a dtype string such as "
         "'<f4', found \"5, 'fortran_\""},
        {"{'descr': '<f4', 'fortran_order': False 'shape': (2,)}",
         "f.npy: malformed .npy header at byte 40 of the dict: expected ',' or '}' after a "
         "value, found \"'shape': (2,\""},
    };
    float data[2] = {1, 2};
    int wrong = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = parse_dict(cases[i].dict, data, sizeof(data));
        if (rc != TIDE_DATASET_INVALID || strcmp(err, cases[i].message) != 0) {
            print_error("case %zu: %s\n  rc %d\n  got:  %s\n  want: %s\n", i, cases[i].dict, rc,
                        err, cases[i].message);
            wrong++;
        }
    }
    assert_int_equal(wrong, 0);
    /* The spellings NumPy and people use are all accepted: shape (), (2,), (2, 3,), 2L. */
    assert_int_equal(parse_dict("{'descr':'<f4','fortran_order':False,'shape':()}", data, 4), 0);
    assert_int_equal(parse_dict(" { 'shape' : ( 1 , 2 , ) , 'fortran_order' : False , "
                                "\"descr\" : \"<f4\" , } ",
                                data, 8),
                     0);
    assert_int_equal(parse_dict("{'descr':'<f4','fortran_order':False,'shape':(2L,)}", data, 8),
                     0);

    /* A header without its newline, and a NUL or non-ASCII byte in a 1.0 header. */
    uint8_t buf[64];
    memcpy(buf, "\x93NUMPY\x01\x00\x06\x00{}    ", 16);
    struct tide__npy npy;
    assert_int_equal(tide__npy_parse(buf, 16, "f.npy", &npy, err, sizeof(err)),
                     TIDE_DATASET_INVALID);
    assert_string_equal(err, "f.npy: malformed .npy header: it does not end with a newline");
    memcpy(buf, "\x93NUMPY\x01\x00\x06\x00{}\xe9  \n", 16);
    assert_int_equal(tide__npy_parse(buf, 16, "f.npy", &npy, err, sizeof(err)),
                     TIDE_DATASET_INVALID);
    assert_string_equal(err, "f.npy: malformed .npy header: byte 2 is 0xe9, not ASCII");
}

/* splitmix64, for reproducible fuzzing. */
static uint64_t next_random(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/*
 * Every truncation of a good file fails, and random changes to its header
 * bytes either parse to a consistent array or fail with a message — never
 * crash or read past the buffer (AddressSanitizer watches; each candidate
 * lives in a buffer of its exact size).
 */
static void test_header_fuzz(void **state)
{
    (void)state;
    float data[6] = {1, 2, 3, 4, 5, 6};
    assert_int_equal(
        parse_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", data,
                   sizeof(data)),
        0);
    FILE *f = fopen(path_of("fuzz.npy"), "rb");
    assert_non_null(f);
    uint8_t good[256];
    size_t len = fread(good, 1, sizeof(good), f);
    fclose(f);
    assert_int_equal(len, 128 + sizeof(data));
    struct tide__npy npy;
    for (size_t k = 0; k < len; k++) {
        uint8_t *cut = malloc(k ? k : 1);
        assert_non_null(cut);
        memcpy(cut, good, k);
        err[0] = '\0';
        assert_int_equal(tide__npy_parse(cut, k, "f.npy", &npy, err, sizeof(err)),
                         TIDE_DATASET_INVALID);
        assert_true(strncmp(err, "f.npy", 5) == 0);
        free(cut);
    }
    static const char alphabet[] = "{}()[]':,\" \n0123456789LTrueFalsdcip<>|f4u1-";
    uint64_t seed = 42;
    int parsed = 0, refused = 0;
    for (int round = 0; round < 20000; round++) {
        uint8_t *m = malloc(len);
        assert_non_null(m);
        memcpy(m, good, len);
        int flips = 1 + (int)(next_random(&seed) % 4);
        for (int i = 0; i < flips; i++) {
            size_t at = 6 + next_random(&seed) % 70; /* version, length and the dict */
            uint64_t r = next_random(&seed);
            m[at] = r & 1 ? (uint8_t)alphabet[(r >> 8) % (sizeof(alphabet) - 1)] : (uint8_t)(r >> 8);
        }
        err[0] = '\0';
        int rc = tide__npy_parse(m, len, "f.npy", &npy, err, sizeof(err));
        if (rc == 0) {
            parsed++;
            uint64_t count = 1;
            for (int32_t i = 0; i < npy.rank; i++)
                count *= (uint64_t)npy.dims[i];
            assert_int_equal(count, npy.count);
            assert_true(npy.data >= m && npy.data <= m + len);
        } else {
            refused++;
            assert_int_equal(rc, TIDE_DATASET_INVALID);
            assert_true(strncmp(err, "f.npy", 5) == 0);
        }
        free(m);
    }
    assert_true(refused > 15000);
    assert_true(parsed > 0); /* spaces for spaces, a digit for a digit where the sizes allow */
}

/* ============================================================================
 * .npz out, read back through libzip and the .npy parser
 * ========================================================================== */

static void test_npz_round_trip(void **state)
{
    (void)state;
    float w[3 * 4], b[4], scalar = 2.5f;
    for (int i = 0; i < 12; i++)
        w[i] = (float)i / 7.0f - 1.0f;
    for (int i = 0; i < 4; i++)
        b[i] = -(float)i;
    int32_t steps[2] = {7, -9};
    struct tide_tensor arrays[4] = {
        {.name = "fc1/w", .dtype = TIDE_DT_FLOAT32, .rank = 2, .dims = {3, 4}, .data = w,
         .bytes = sizeof(w)},
        {.name = "fc1/b", .dtype = TIDE_DT_FLOAT32, .rank = 1, .dims = {4}, .data = b,
         .bytes = sizeof(b)},
        {.name = "scale", .dtype = TIDE_DT_FLOAT32, .rank = 0, .data = &scalar, .bytes = 4},
        {.name = "a/b/steps", .dtype = TIDE_DT_INT32, .rank = 1, .dims = {2}, .data = steps,
         .bytes = sizeof(steps)},
    };
    assert_int_equal(tide_npz_write(path_of("weights.npz"), arrays, 4, err, sizeof(err)), 0);

    int zerr;
    zip_t *za = zip_open(path_of("weights.npz"), ZIP_RDONLY | ZIP_CHECKCONS, &zerr);
    assert_non_null(za);
    assert_int_equal(zip_get_num_entries(za, 0), 4);
    for (int i = 0; i < 4; i++) {
        char member[64];
        snprintf(member, sizeof(member), "%s.npy", arrays[i].name);
        assert_string_equal(zip_get_name(za, (zip_uint64_t)i, 0), member);
        zip_stat_t st;
        assert_int_equal(zip_stat_index(za, (zip_uint64_t)i, 0, &st), 0);
        uint8_t *buf = malloc(st.size);
        zip_file_t *zf = zip_fopen_index(za, (zip_uint64_t)i, 0);
        assert_non_null(zf);
        assert_int_equal(zip_fread(zf, buf, st.size), (zip_int64_t)st.size);
        zip_fclose(zf);
        assert_int_equal((10 + (buf[8] | buf[9] << 8)) % 64, 0); /* data aligned as NumPy's */
        /* The dict spelled as numpy.save spells it: "(3, 4)", "(4,)", "()". */
        static const char *const dicts[] = {
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
            "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }"};
        assert_memory_equal(buf + 10, dicts[i], strlen(dicts[i]));
        struct tide__npy npy;
        assert_int_equal(tide__npy_parse(buf, st.size, member, &npy, err, sizeof(err)), 0);
        assert_int_equal(npy.major, 1);
        assert_string_equal(npy.descr, arrays[i].dtype == TIDE_DT_FLOAT32 ? "<f4" : "<i4");
        assert_int_equal(npy.rank, arrays[i].rank);
        for (int32_t d = 0; d < npy.rank; d++)
            assert_int_equal(npy.dims[d], arrays[i].dims[d]);
        assert_int_equal(npy.count * 4, arrays[i].bytes);
        assert_memory_equal(npy.data, arrays[i].data, arrays[i].bytes);
        free(buf);
    }
    zip_close(za);

    /* No arrays: an empty archive, still a zip. */
    assert_int_equal(tide_npz_write(path_of("empty.npz"), NULL, 0, err, sizeof(err)), 0);
    za = zip_open(path_of("empty.npz"), ZIP_RDONLY | ZIP_CHECKCONS, &zerr);
    assert_non_null(za);
    assert_int_equal(zip_get_num_entries(za, 0), 0);
    zip_close(za);

    /* Refusals: a name that is no path in a zip, a directory that does not exist. */
    struct tide_tensor bad = arrays[1];
    bad.name = "/abs";
    assert_int_equal(tide_npz_write(path_of("weights.npz"), &bad, 1, err, sizeof(err)),
                     TIDE_DATASET_INVALID);
    char want[512];
    snprintf(want, sizeof(want),
             "%s/weights.npz: array 0 has name \"/abs\", which is no path inside a zip", dir);
    assert_string_equal(err, want);
    assert_int_equal(tide_npz_write("/nonexistent-dir/w.npz", arrays, 1, err, sizeof(err)),
                     TIDE_DATASET_IO);
    if (strcmp(err, "writing /nonexistent-dir/w.npz: Failure to create temporary file: No such "
                    "file or directory") != 0)
        fail_msg("%s", err);
    assert_int_equal(access("/nonexistent-dir/w.npz.tmp", F_OK), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_npy_float32_and_int32),
        cmocka_unit_test(test_npy_float_targets),
        cmocka_unit_test(test_npy_uint8_int64_versions),
        cmocka_unit_test(test_idx_files),
        cmocka_unit_test(test_test_split_like_training),
        cmocka_unit_test(test_model_input_rules),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_header_malformed),
        cmocka_unit_test(test_header_fuzz),
        cmocka_unit_test(test_npz_round_trip),
        cmocka_unit_test(test_labels_per_position),
        cmocka_unit_test(test_several_inputs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
