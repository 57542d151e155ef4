/* SPDX-License-Identifier: MIT */
/*
 * client/dataset-impl.h: the inside of a tide_dataset, shared by the
 * built-in datasets (dataset.c) and the datasets read from NumPy and IDX
 * files (dataset-files.c), so that both are batched and shuffled by one
 * iterator. Not installed: users see the opaque handle of tide/dataset.h.
 *
 * A dataset's examples are bytes (pixels, scaled to [0, 1] when copied
 * out) or floats (values, copied as they are), and its labels bytes or
 * int32s; exactly one of each pair is set, except for the synthetic
 * dataset, which computes both.
 */
#ifndef TIDE_CLIENT_DATASET_IMPL_H
#define TIDE_CLIENT_DATASET_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tide/dataset.h"
#include "tide/dataset-files.h"

/* The most dimensions of an array read from a file: examples, then the sample's. */
#define TIDE__ARRAY_MAX_RANK (1 + TIDE_DATASET_MAX_SAMPLE_RANK)

enum tide__dataset_kind {
    TIDE__DATASET_FASHION_MNIST,
    TIDE__DATASET_SYNTHETIC,
    TIDE__DATASET_FILES, /* tide_dataset_open_files (dataset-files.c) */
};

struct tide_dataset {
    enum tide__dataset_kind kind;
    int64_t count; /* examples */
    int64_t channels, height, width;
    int32_t classes;
    int64_t image_size; /* channels * height * width */

    /* Fashion-MNIST, and files of bytes. */
    uint8_t *pixels; /* count * image_size bytes, file order */
    uint8_t *labels; /* count bytes */

    /* Files: float examples, int32 labels, and the shape of one example as the file has it. */
    float *values;     /* count * image_size floats, file order (when pixels is NULL) */
    int32_t *labels32; /* count * label_size labels (when labels and targets are NULL) */
    /*
     * Files of int labels: a class index per example (label_rank 0, label_size 1), or one per
     * position of an example of shape label_dims (a language model's next tokens, [N, S]).
     */
    int64_t label_size;
    int32_t label_rank;
    int64_t label_dims[TIDE_DATASET_MAX_SAMPLE_RANK];
    /* Files of float32 labels: regression targets of any per-example shape (classes is 0). */
    float *targets;        /* count * target_size floats, file order */
    int64_t target_size;   /* the product of target_dims */
    int32_t target_rank;
    int64_t target_dims[TIDE_DATASET_MAX_SAMPLE_RANK];
    int32_t sample_rank;
    int64_t sample_dims[TIDE_DATASET_MAX_SAMPLE_RANK];
    char *inputs_path; /* what messages call the examples' file */
    /* Files of int32 or int64 examples (for a model's int32 input), kept as int32. */
    int32_t *ints; /* count * image_size, file order (when pixels and values are NULL) */
    /*
     * The examples of a model's further inputs (a BERT's attention_mask), one
     * file each: datasets of inputs alone (no labels), of this count.
     */
    struct tide_dataset *more[TIDE_DATASET_MAX_INPUTS - 1];
    int32_t n_more;

    /* Synthetic. */
    uint64_t seed;    /* of W and the images */
    uint64_t stream;  /* separates the splits' images */
    int64_t features; /* P: columns of W */
    float *weights;   /* W: classes x features, uniform in [-1, 1) */
};

/* The element types of the arrays read from files (dataset-files.c). */
enum tide__array_type {
    TIDE__ARRAY_FLOAT32,
    TIDE__ARRAY_INT32,
    TIDE__ARRAY_INT64,
    TIDE__ARRAY_UINT8,
};

/* An array of a .npy file's bytes (tide__npy_parse); data points into them. */
struct tide__npy {
    enum tide__array_type type;
    char descr[8]; /* as the header spells it: "<f4", "<i4", "<i8" or "|u1" */
    int major;     /* format version: 1, 2 or 3 */
    int32_t rank;
    int64_t dims[TIDE__ARRAY_MAX_RANK];
    const uint8_t *data; /* count * itemsize bytes, little endian, C order */
    uint64_t count;      /* elements */
};

/*
 * Parses the len bytes of a .npy file at buf, named path in messages.
 * Returns 0 and fills *out, or TIDE_DATASET_INVALID with what is wrong and
 * where in err: not NPY, a version other than 1, 2 or 3, a malformed header
 * dict (the offset and what was expected), an unsupported dtype (naming
 * it), fortran_order True, more than TIDE__ARRAY_MAX_RANK dimensions, or
 * data shorter or longer than the shape says.
 */
int tide__npy_parse(const uint8_t *buf, size_t len, const char *path, struct tide__npy *out,
                    char *err, size_t err_size);

/*
 * Encodes array (float32 or int32) as a .npy file (format 1.0) into a
 * malloc'd buffer *out of *len bytes, which the caller frees. Returns 0, or
 * a negative code with a message in err.
 */
int tide__npy_encode(const struct tide_tensor *array, uint8_t **out, size_t *len, char *err,
                     size_t err_size);

#endif /* TIDE_CLIENT_DATASET_IMPL_H */
