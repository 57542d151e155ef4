/* SPDX-License-Identifier: MIT */
/*
 * tide/dataset-files.h: datasets read from the user's own files — NumPy
 * .npy and IDX (the MNIST format) — and weights written out as NumPy .npz.
 *
 * A dataset opened from an inputs file and a labels file is a tide_dataset
 * like the built-in ones (tide/dataset.h): the same iterator shuffles it
 * from a seed and hands out batches; example i is row i of both files.
 *
 * Files read:
 *
 *   - .npy, format versions 1.0, 2.0 and 3.0, C order (fortran_order True is
 *     refused). Inputs: float32 ('<f4'), copied as they are, or uint8
 *     ('|u1'), scaled to [0, 1] as a byte / 255 exactly as Fashion-MNIST's
 *     pixels are; through tide_dataset_open_files_n (a model's inputs, one
 *     file each), int32 ('<i4') and int64 ('<i8') too, kept as int32 for an
 *     int input (token ids, an attention mask). Labels: int32 ('<i4'), int64 ('<i8', each checked
 * to fit an int32) or uint8 ('|u1', taken as they are) class indices, or float32
 *     ('<f4') targets of any per-example shape (for a regression loss,
 *     such as tidectl's --loss mse). The header dict is read
 *     by a strict parser of its small fixed grammar (a Python dict literal
 *     of 'descr', 'fortran_order' and 'shape').
 *   - IDX: a big-endian header (two zero bytes, a type byte, the number of
 *     dimensions, then one 32-bit size per dimension), then the values, big
 *     endian. Types: unsigned bytes (0x08) for inputs (scaled as above) and
 *     labels, int32 (0x0C) for labels, float32 (0x0D) for inputs. Gzipped
 *     IDX files (.gz, as MNIST is distributed) are read too.
 *
 * Which format a file has is told by its first bytes (\x93NUMPY, or an IDX
 * header), not its name. Inputs are [N, ...] (the sample shape is the rest,
 * 1 to 7 dimensions), class labels [N] or [N, 1] (or [N, S, ...]: one per
 * position, for an ONNX language model), float targets [N, ...].
 * A dataset of float targets has 0 classes and hands out its batches
 * through tide_dataset_iter_next_targets(), not tide_dataset_iter_next().
 *
 * Results, errors and ownership as in tide/dataset.h: functions that can fail
 * return 0 or a negative TIDE_DATASET_* code, with a message naming the file
 * and the numbers in err.
 *
 * Example usage:
 *
 *     tide_dataset *train, *test;
 *     if (tide_dataset_open_files("x.npy", "y.npy", NULL, &train, err, sizeof(err)) != 0 ||
 *         tide_dataset_open_files("x_test.npy", "y_test.npy", train, &test, err,
 *                                 sizeof(err)) != 0)
 *         die("%s", err);
 *     int64_t c, h, w;
 *     if (tide_dataset_model_input(train, "cnn", &c, &h, &w, err, sizeof(err)) != 0)
 *         die("%s", err);
 *     tide_ref logits = tide_model_cnn(b, 64, c, h, w, tide_dataset_classes(train));
 *     ...
 *     struct tide_tensor weights[2] = {...};
 *     if (tide_npz_write("weights.npz", weights, 2, err, sizeof(err)) != 0)
 *         die("%s", err);
 */
#ifndef TIDE_DATASET_FILES_H
#define TIDE_DATASET_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "tide/client.h"
#include "tide/dataset.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most dimensions of one example (the inputs file has one more). */
#define TIDE_DATASET_MAX_SAMPLE_RANK 7

/* The most files of examples, one per model input (tide_dataset_open_files_n). */
#define TIDE_DATASET_MAX_INPUTS 8

/*
 * Opens the dataset of inputs_path and labels_path (each .npy or IDX).
 * Without like (training data), the classes are the largest label + 1. With
 * like (test data, like being the training split), the examples must have
 * like's sample shape and every label must lie below like's classes, which
 * the dataset takes. Errors name the file: missing, truncated, not NPY or
 * IDX, an unsupported dtype (naming it), fortran_order, a malformed header
 * (where and what), inputs and labels with different first dimensions
 * (naming both), a negative label or one out of range (its index and value),
 * a sample shape unlike like's (naming both shapes), float targets whose
 * shape is unlike like's, or labels of another kind than like's.
 */
int tide_dataset_open_files(const char *inputs_path, const char *labels_path,
                            const tide_dataset *like, tide_dataset **out, char *err,
                            size_t err_size);

/*
 * As tide_dataset_open_files, for a model of several inputs (a BERT's
 * input_ids and attention_mask): inputs_paths[0 .. n_inputs - 1] hold one
 * file of examples per input, in the model's order (1 to
 * TIDE_DATASET_MAX_INPUTS), each [N, ...] of the same N, example i being
 * row i of every file and of the labels. Besides float32 and uint8, an
 * inputs file may be int32 or int64 (for a model's int input), kept as
 * int32: a value outside int32 is refused naming the file and its index.
 * Files whose N differ are refused naming both files and counts. The first
 * file is the dataset's own examples (tide_dataset_sample_shape and the
 * rest describe it); tide_dataset_input_shape and _input_dtype describe
 * each. With like, the files must match like's in number, sample shape and
 * kind (ints or floats). A dataset of several inputs or of int examples
 * hands out its batches through tide_dataset_iter_next_inputs() only.
 */
int tide_dataset_open_files_n(const char *const *inputs_paths, int32_t n_inputs,
                              const char *labels_path, const tide_dataset *like, tide_dataset **out,
                              char *err, size_t err_size);

/* The number of inputs ds's examples feed: its files of examples; 1 for the built-in datasets. */
int32_t tide_dataset_inputs(const tide_dataset *ds);

/*
 * The shape of one example of input k (0 .. tide_dataset_inputs() - 1):
 * writes up to TIDE_DATASET_MAX_SAMPLE_RANK dims and returns their number
 * (0 for a k out of range).
 */
int32_t tide_dataset_input_shape(const tide_dataset *ds, int32_t k, int64_t *dims);

/* TIDE_DT_INT32 for input k of int32 or int64 files, else TIDE_DT_FLOAT32. */
enum tide_data_type tide_dataset_input_dtype(const tide_dataset *ds, int32_t k);

/*
 * The next batch of a files dataset, one permutation for every input:
 * copies input k's examples into inputs[k] (batch times its values an
 * example, float32, or int32 for int files) for each k of
 * tide_dataset_inputs(), and the labels into labels (batch int32 class
 * indices; batch times the label shape's product for labels per position;
 * or the float targets as tide_dataset_iter_next_targets() gives them).
 * Returns as tide_dataset_iter_next(); -1 for NULL arguments or a dataset
 * not read from files.
 */
int64_t tide_dataset_iter_next_inputs(tide_dataset_iter *it, void *const *inputs, void *labels);

/*
 * The shape of one example: writes up to TIDE_DATASET_MAX_SAMPLE_RANK dims
 * and returns their number ([C, H, W], 3, for the built-in datasets; 0 for
 * NULL).
 */
int32_t tide_dataset_sample_shape(const tide_dataset *ds, int64_t *dims);

/*
 * The dtype of ds's labels: TIDE_DT_FLOAT32 for float targets (a .npy of
 * '<f4' or an IDX of float32), else TIDE_DT_INT32 (class indices, whatever
 * the file's integer type).
 */
enum tide_data_type tide_dataset_label_dtype(const tide_dataset *ds);

/*
 * The shape of one example's labels: for float targets and for class labels
 * per position (a labels file [N, S, ...] of ints: a language model's next
 * tokens), writes up to TIDE_DATASET_MAX_SAMPLE_RANK dims (the file's shape
 * without its first) and returns their number; 0 (one scalar) for a class
 * label an example and NULL. A dataset of labels per position hands out its
 * batches through tide_dataset_iter_next_inputs() only.
 */
int32_t tide_dataset_label_shape(const tide_dataset *ds, int64_t *dims);

/*
 * As tide_dataset_iter_next() (tide/dataset.h), for a dataset of float
 * targets: copies the next batch's examples into images and their targets
 * into targets (batch times the product of tide_dataset_label_shape()
 * floats, [B, ...]). Returns the number of real examples, 0 at the end of
 * an epoch, or -1 for NULL arguments or a dataset of class labels.
 */
int64_t tide_dataset_iter_next_targets(tide_dataset_iter *it, float *images, float *targets);

/*
 * The images shape (channels, height, width) that one of tide's models
 * ("mlp", "cnn", "resnet", "lstm") is built for to read ds's examples:
 * mlp takes any sample shape (it flattens it); cnn and resnet [C, H, W] or
 * [H, W] (one channel; resnet square); lstm [S, F] or [1, S, F] (S time
 * steps of F features). Returns 0, or TIDE_DATASET_INVALID with a message
 * naming the model's wanted shape and the sample shape.
 */
int tide_dataset_model_input(const tide_dataset *ds, const char *model, int64_t *channels,
                             int64_t *height, int64_t *width, char *err, size_t err_size);

/*
 * Checks that ds's examples fill a model's input placeholder of dims[0 ..
 * rank - 1] ([B, ...]) example by example: the values per example must be
 * equal. Returns 0, or TIDE_DATASET_INVALID with both shapes in err.
 */
int tide_dataset_check_input(const tide_dataset *ds, const int64_t *dims, int32_t rank, char *err,
                             size_t err_size);

/*
 * Writes arrays[0 .. n - 1] (float32 or int32, any shape) as a NumPy .npz
 * file at path: a zip archive of one .npy (format 1.0, C order) per array,
 * named after the array with ".npy" appended; '/' in names stays a zip
 * path separator, which numpy.load keeps in the key ("fc1/w"). The archive
 * is written to a temporary name beside path and renamed over it, so a
 * failed write leaves no half file. Returns 0, or a negative code with the
 * path and the reason in err.
 */
int tide_npz_write(const char *path, const struct tide_tensor *arrays, size_t n, char *err,
                   size_t err_size);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_DATASET_FILES_H */
