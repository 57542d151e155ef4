/* SPDX-License-Identifier: MIT */
/*
 * make_checkpoint_corpus.c: writes the seed corpus of fuzz_checkpoint:
 * checkpoints written by tided_store_write_checkpoint itself (into a
 * temporary directory, then read back), each twice: after a mode byte 0
 * (the file as it is) and after a mode byte 1 (the harness fixes the
 * header's length and checksum up; fuzz_checkpoint.c says why).
 *
 * The variables are those a job has: float32 weights of a few shapes, an
 * int32 counter, a scalar (rank 0), and no variables at all.
 *
 * Usage: make_checkpoint_corpus DIR   (DIR is created if it does not exist)
 *
 * Every seed must read back with tided_store_read_checkpoint; one that does
 * not, and write errors, exit 1.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/store.h"

static const char *out_dir;
static char tmp_dir[] = "/tmp/make_checkpoint_corpus.XXXXXX";
static int n_written;

static _Noreturn void die(const char *what, const char *why)
{
    fprintf(stderr, "make_checkpoint_corpus: %s: %s\n", what, why ? why : strerror(errno));
    exit(1);
}

static void write_seed(const char *name, unsigned char mode, const uint8_t *data, size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s-%u.ckpt", out_dir, name, mode);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(&mode, 1, 1, f) != 1 || fwrite(data, 1, len, f) != len || fclose(f) != 0)
        die(path, NULL);
    n_written++;
}

/* Writes the checkpoint with tided's writer, checks it reads back, writes both seeds. */
static void emit(const Tide__V1__ReadVariablesResponse *m, const char *name)
{
    struct tide_error err = {0};
    uint64_t bytes;
    if (tided_store_write_checkpoint(tmp_dir, "checkpoint.pb", m, &bytes, &err) != TIDE_OK)
        die(name, err.message);
    char *path = tided_path_join(tmp_dir, "checkpoint.pb");
    if (!path)
        die(name, NULL);
    Tide__V1__ReadVariablesResponse *back = tided_store_read_checkpoint(path, &err);
    if (!back)
        die(name, err.message);
    tide__v1__read_variables_response__free_unpacked(back, NULL);
    uint8_t *data;
    size_t len;
    if (tided_store_read(path, &data, &len, &err) != TIDE_OK)
        die(name, err.message);
    write_seed(name, 0, data, len);
    write_seed(name, 1, data, len);
    free(data);
    unlink(path);
    free(path);
}

struct variable {
    Tide__V1__NamedTensor named;
    Tide__V1__Tensor tensor;
    Tide__V1__TensorShape shape;
    int64_t dims[4];
};

static void variable_set(struct variable *v, const char *name, Tide__V1__DataType dtype,
                         size_t rank, const int64_t *dims, void *data, size_t bytes)
{
    tide__v1__named_tensor__init(&v->named);
    tide__v1__tensor__init(&v->tensor);
    tide__v1__tensor_shape__init(&v->shape);
    if (rank)
        memcpy(v->dims, dims, rank * sizeof(*dims));
    v->shape.dims = v->dims;
    v->shape.n_dims = rank;
    v->tensor.dtype = dtype;
    v->tensor.shape = &v->shape;
    v->tensor.data = (ProtobufCBinaryData){bytes, data};
    v->named.name = (char *)name;
    v->named.tensor = &v->tensor;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    out_dir = argv[1];
    if (mkdir(out_dir, 0777) != 0 && errno != EEXIST)
        die(out_dir, NULL);
    if (!mkdtemp(tmp_dir))
        die(tmp_dir, NULL);

    float w[8 * 4], b[4], scale = 0.5f;
    int32_t counter[1] = {42};
    for (int i = 0; i < 32; i++)
        w[i] = 0.125f * (float)i - 2.0f;
    for (int i = 0; i < 4; i++)
        b[i] = (float)i;
    struct variable vars[4];
    variable_set(&vars[0], "fc1/w", TIDE__V1__DATA_TYPE__DT_FLOAT32, 2, (int64_t[]){8, 4}, w,
                 sizeof(w));
    variable_set(&vars[1], "fc1/b", TIDE__V1__DATA_TYPE__DT_FLOAT32, 1, (int64_t[]){4}, b,
                 sizeof(b));
    variable_set(&vars[2], "step_counter", TIDE__V1__DATA_TYPE__DT_INT32, 1, (int64_t[]){1},
                 counter, sizeof(counter));
    variable_set(&vars[3], "scale", TIDE__V1__DATA_TYPE__DT_FLOAT32, 0, NULL, &scale,
                 sizeof(scale));
    Tide__V1__NamedTensor *ptrs[4] = {&vars[0].named, &vars[1].named, &vars[2].named,
                                      &vars[3].named};

    Tide__V1__ReadVariablesResponse m = TIDE__V1__READ_VARIABLES_RESPONSE__INIT;
    emit(&m, "empty"); /* a job without Variables, step 0 */
    m.step = 1000;
    m.variables = ptrs;
    m.n_variables = 4;
    emit(&m, "four");
    m.step = 1;
    m.n_variables = 1;
    emit(&m, "one");
    m.step = UINT64_MAX;
    m.variables = &ptrs[3];
    emit(&m, "scalar");

    rmdir(tmp_dir);
    printf("make_checkpoint_corpus: wrote %d seeds to %s\n", n_written, out_dir);
    return 0;
}
