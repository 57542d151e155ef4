/* SPDX-License-Identifier: MIT */
/*
 * tide/dataset.h: image classification datasets for feeding tide's models,
 * and a batch iterator with deterministic shuffling; and, at the end, the
 * byte-level text corpora of the language models (tide_corpus).
 *
 * Two datasets share one API:
 *
 *   - "fashion-mnist": Zalando's Fashion-MNIST, read from the four IDX gzip
 *     files of Debian's dataset-fashion-mnist package (by default in
 *     TIDE_DATASET_FASHION_MNIST_DIR): split "train" (60,000 images) or
 *     "test" (10,000), 1 x 28 x 28, 10 classes. Every header, dimension and
 *     file size is checked; the pixels are kept as bytes (47 MB for "train").
 *   - "synthetic": images of uniform random pixels, generated on the fly from
 *     a seed and the example's index (no memory, any size), each labelled by
 *     a fixed random linear function of its pixels — the argmax over classes
 *     of W (x - 0.5), with W drawn from the seed — so that a model can learn
 *     it. "train" and "test" draw different images from one W.
 *
 * Images come out as float32 in [0, 1] (a byte's value / 255 for
 * Fashion-MNIST), NCHW, with no mean or standard deviation taken off;
 * labels as int32 class indices in 0 .. classes - 1.
 *
 * Results. Functions that can fail return 0, or a negative code with the
 * values of libtide's status codes (TIDE_DATASET_INVALID and friends below),
 * and write a message naming the file and the numbers into err (err_size
 * bytes, always NUL-terminated; err may be NULL).
 *
 * Ownership. tide_dataset_open() returns a dataset that the caller frees
 * with tide_dataset_free(); tide_dataset_iter_new() returns an iterator that
 * the caller frees with tide_dataset_iter_free(), before the dataset it
 * reads. A dataset is read-only once open, so several threads may read it
 * (through one iterator each) at once.
 *
 * Example usage:
 *
 *     char err[256];
 *     tide_dataset *train;
 *     tide_dataset_iter *it;
 *     if (tide_dataset_open("fashion-mnist", NULL, "train", &train, err, sizeof(err)) != 0)
 *         die("%s", err);
 *     if (tide_dataset_iter_new(train, 64, 42, TIDE_DATASET_SHUFFLE, &it, err,
 *                               sizeof(err)) != 0)
 *         die("%s", err);
 *     float images[64 * 1 * 28 * 28];
 *     int32_t labels[64];
 *     while (tide_dataset_iter_next(it, images, labels) > 0)
 *         train_step(images, labels);           // one epoch of 937 full batches
 *     tide_dataset_iter_free(it);
 *     tide_dataset_free(train);
 */
#ifndef TIDE_DATASET_H
#define TIDE_DATASET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A dataset open for reading. Opaque; see tide_dataset_open(). */
typedef struct tide_dataset tide_dataset;

/* A position in a dataset's (shuffled) order, handing out batches. Opaque. */
typedef struct tide_dataset_iter tide_dataset_iter;

/* Where Debian's dataset-fashion-mnist package puts the files. */
#define TIDE_DATASET_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

/* Result codes: the same numbers as libtide's status codes. */
#define TIDE_DATASET_OK        0
#define TIDE_DATASET_INVALID   (-1) /* a bad argument, or a file that is not what it should be */
#define TIDE_DATASET_NOMEM     (-2) /* out of memory */
#define TIDE_DATASET_NOT_FOUND (-3) /* a missing file or directory, or an unknown dataset */
#define TIDE_DATASET_IO        (-8) /* a read failed, or gzip data is corrupt */

/* Flags of tide_dataset_iter_new. */
#define TIDE_DATASET_SHUFFLE   1u /* a new order each epoch, from the seed and the epoch */
#define TIDE_DATASET_KEEP_LAST 2u /* hand out the short last batch, padded (see _iter_next) */

/* The shape and size of a synthetic dataset; a zero field takes its default. */
struct tide_synthetic_options {
    int64_t count;    /* examples; default 60000 for "train", 10000 for "test" */
    int64_t channels; /* default 1 */
    int64_t height;   /* default 28 */
    int64_t width;    /* default 28 */
    int32_t classes;  /* default 10; at most 65536 */
    uint64_t seed;    /* chooses W and the images; 0 is a seed like any other */
};

/*
 * Opens split `split` ("train" or "test") of dataset `name`:
 * "fashion-mnist", read from directory dir (NULL: the default directory), or
 * "synthetic" (dir is ignored) with the default tide_synthetic_options and
 * seed 0. Returns 0 and sets *out, or a negative code with a message in err:
 * a missing file names its path and suggests `apt install
 * dataset-fashion-mnist`; a malformed one names the file, what was expected
 * and what was found.
 */
int tide_dataset_open(const char *name, const char *dir, const char *split, tide_dataset **out,
                      char *err, size_t err_size);

/*
 * Opens split `split` ("train" or "test") of a synthetic dataset shaped by
 * options (NULL: every default). Returns 0 and sets *out, or a negative code
 * with a message in err.
 */
int tide_dataset_open_synthetic(const struct tide_synthetic_options *options, const char *split,
                                tide_dataset **out, char *err, size_t err_size);

/* Frees a dataset. NULL is a no-op. Free its iterators first. */
void tide_dataset_free(tide_dataset *ds);

/* The number of examples, and the shape of one image; 0 for a NULL dataset. */
int64_t tide_dataset_count(const tide_dataset *ds);
int64_t tide_dataset_channels(const tide_dataset *ds);
int64_t tide_dataset_height(const tide_dataset *ds);
int64_t tide_dataset_width(const tide_dataset *ds);

/* The number of classes; labels lie in 0 .. classes - 1. */
int32_t tide_dataset_classes(const tide_dataset *ds);

/*
 * Copies example `index` (0 .. count - 1, in file order): its image
 * (channels * height * width floats, NCHW) into image and its label into
 * *label. Either pointer may be NULL to skip it. Returns 0, or
 * TIDE_DATASET_INVALID for a bad index or dataset.
 */
int tide_dataset_example(const tide_dataset *ds, int64_t index, float *image, int32_t *label);

/*
 * Creates an iterator handing out batches of `batch` examples of ds. With
 * TIDE_DATASET_SHUFFLE, epoch e visits the examples in a Fisher-Yates
 * shuffle drawn from a splitmix64 generator seeded with seed + e *
 * 0x9E3779B97F4A7C15, so one seed always gives the same batches; without
 * it, in file order. Without TIDE_DATASET_KEEP_LAST a batch larger than the
 * dataset is refused. Returns 0 and sets *out, or a negative code with a
 * message in err.
 */
int tide_dataset_iter_new(const tide_dataset *ds, int64_t batch, uint64_t seed, unsigned flags,
                          tide_dataset_iter **out, char *err, size_t err_size);

/* Frees an iterator. NULL is a no-op. */
void tide_dataset_iter_free(tide_dataset_iter *it);

/*
 * Copies the next batch into images (batch * channels * height * width
 * floats, [B, C, H, W]) and labels (batch int32s). Returns the number of
 * real examples in it: `batch` for a full batch; with TIDE_DATASET_KEEP_LAST,
 * fewer for the epoch's short last batch, whose remaining slots repeat the
 * epoch's first examples (so a static graph always gets full buffers). At
 * the end of an epoch (the short remainder is skipped without
 * TIDE_DATASET_KEEP_LAST) it returns 0 and moves to the next epoch, in a new
 * order when shuffling. Returns -1 for NULL arguments.
 */
int64_t tide_dataset_iter_next(tide_dataset_iter *it, float *images, int32_t *labels);

/* The epoch the iterator is in, counting from 0. */
int64_t tide_dataset_iter_epoch(const tide_dataset_iter *it);

/* ============================================================================
 * Byte-level text corpora, for the language models (tide_model_transformer)
 *
 * "fortunes": Debian's fortunes package, the files of
 * TIDE_CORPUS_FORTUNES_DIR whose names hold no '.' (so not the .dat indexes
 * nor the .u8 links), read whole and concatenated in strcmp order of their
 * names (2,576,674 bytes in 43 files for fortunes 1:1.99.1-7.3). Split
 * "train" is the first 90 % of the bytes (floor(total * 9 / 10)), "test" the
 * last 10 %, held out. Every byte is a token (vocabulary TIDE_CORPUS_VOCAB).
 *
 * A window of seq_len tokens starting at byte s is tokens[i] = byte[s + i]
 * and labels[i] = byte[s + i + 1], the next byte, for i in 0 .. seq_len - 1;
 * a batch is batch windows, row-major [batch, seq_len] int32 each.
 *
 * Example usage:
 *
 *     tide_corpus *train;
 *     tide_corpus_iter *it;
 *     if (tide_corpus_open("fortunes", NULL, "train", &train, err, sizeof(err)) != 0 ||
 *         tide_corpus_iter_new(train, 32, 128, 42, TIDE_CORPUS_RANDOM, &it, err,
 *                              sizeof(err)) != 0)
 *         die("%s", err);
 *     int32_t tokens[32 * 128], labels[32 * 128];
 *     for (int step = 0; step < 300; step++)
 *         tide_corpus_iter_next(it, tokens, labels), train_step(tokens, labels);
 * ========================================================================== */

/* A text corpus split open for reading, its bytes in memory. Opaque. */
typedef struct tide_corpus tide_corpus;

/* A source of batches of windows of a corpus. Opaque. */
typedef struct tide_corpus_iter tide_corpus_iter;

/* Where Debian's fortunes package puts its files. */
#define TIDE_CORPUS_FORTUNES_DIR "/usr/share/games/fortunes"

/* The vocabulary of byte-level tokens. */
#define TIDE_CORPUS_VOCAB 256

/* Flags of tide_corpus_iter_new. */
#define TIDE_CORPUS_RANDOM 1u /* random windows (training) instead of consecutive ones */

/*
 * Opens split `split` ("train" or "test") of corpus `name` ("fortunes"),
 * read from directory dir (NULL: TIDE_CORPUS_FORTUNES_DIR). Returns 0 and
 * sets *out, or a negative TIDE_DATASET_* code with a message in err: a
 * missing directory names it and suggests `apt install fortunes`; a
 * directory without corpus files, or one too small to split, names it and
 * the byte counts. The caller frees *out with tide_corpus_free().
 */
int tide_corpus_open(const char *name, const char *dir, const char *split, tide_corpus **out,
                     char *err, size_t err_size);

/* Frees a corpus. NULL is a no-op. Free its iterators first. */
void tide_corpus_free(tide_corpus *corpus);

/* The bytes of the split (0 for NULL), and a pointer to them, owned by the corpus. */
int64_t tide_corpus_size(const tide_corpus *corpus);
const uint8_t *tide_corpus_bytes(const tide_corpus *corpus);

/* The bytes of the whole corpus, both splits, and the number of files they came from. */
int64_t tide_corpus_total_size(const tide_corpus *corpus);
int32_t tide_corpus_files(const tide_corpus *corpus);

/*
 * The number of consecutive, non-overlapping windows of seq_len tokens the
 * split holds: (size - 1) / seq_len, since each window also needs the byte
 * after it. 0 for a NULL corpus or seq_len < 1.
 */
int64_t tide_corpus_windows(const tide_corpus *corpus, int64_t seq_len);

/*
 * Creates an iterator handing out batches of `batch` windows of seq_len
 * tokens. With TIDE_CORPUS_RANDOM (training), each window starts at a byte
 * drawn uniformly from 0 .. size - seq_len - 1 by a splitmix64 generator
 * seeded with seed, so one seed gives one sequence of batches, which never
 * ends. Without it (evaluation), the windows are the split's consecutive
 * windows 0, 1, ... (window k starts at byte k * seq_len), and an epoch ends
 * after the last one (see _iter_next). A split shorter than seq_len + 1
 * bytes is refused. Returns 0 and sets *out, or a negative code with a
 * message in err. Free the iterator before its corpus.
 */
int tide_corpus_iter_new(const tide_corpus *corpus, int64_t batch, int64_t seq_len, uint64_t seed,
                         unsigned flags, tide_corpus_iter **out, char *err, size_t err_size);

/* Frees an iterator. NULL is a no-op. */
void tide_corpus_iter_free(tide_corpus_iter *it);

/*
 * Copies the next batch into tokens and labels (batch * seq_len int32s
 * each). Returns the number of real windows in it: always `batch` for
 * random windows; for consecutive ones, `batch`, then fewer for the epoch's
 * short last batch, whose remaining rows repeat the first windows (so that a
 * static graph always gets full buffers), then 0 at the end of the epoch,
 * after which the next call starts over at window 0. Returns -1 for NULL
 * arguments.
 */
int64_t tide_corpus_iter_next(tide_corpus_iter *it, int32_t *tokens, int32_t *labels);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_DATASET_H */
