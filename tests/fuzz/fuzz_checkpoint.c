/* SPDX-License-Identifier: MIT */
/*
 * fuzz_checkpoint.c: libFuzzer target for checkpoint files as tided reads
 * them (tided_store_read_checkpoint, daemon/store.c): resume_from and
 * ReadVariables of an ended job read whatever the state directory holds, and
 * a disk, a crash or a hand can leave anything there.
 *
 * Input: a mode byte, then the file's bytes, which go to a memfd that the
 * reader opens by its /proc/self/fd path (a real open, fstat and read, no
 * disk). The xxHash64 in the header stands between nearly every mutation
 * and the payload's decoder: a fuzzer that must guess a 64-bit hash never
 * gets past it. So when the mode byte's low bit is set, the harness first
 * fixes the header up, as a writer with a bug (or a hand with a hex editor)
 * would: the payload length becomes the bytes after the header and the
 * checksum their xxHash64, leaving the magic, the version, the flags and the
 * step as the input has them. Bit clear, the bytes go as they are, which is
 * what tests the header checks themselves. The seeds (make_checkpoint_corpus)
 * come in both modes.
 *
 * Properties: a refusal names the file (the path is in the message); an
 * accepted checkpoint has the header's step, and every variable a name and
 * a tensor whose bytes are exactly its shape's, which the harness reads to
 * the last byte, so that a length check that lies is an ASan report here
 * rather than an over-read when the variables are restored.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <xxhash.h>

#include "daemon/store.h"
#include "graph/import.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Where the harness reads accepted tensors' bytes to (so that the reads stay). */
volatile uint8_t bytes_read_sum;

static int memfd = -1;
static char path[64];
/* FUZZ_CHECKPOINT_VERBOSE=1 in the environment: each outcome on stderr (seeds, crashes). */
static bool verbose;

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t mode = data[0];
    size_t len = size - 1;
    uint8_t *file = malloc(len + 1);
    if (!file)
        abort();
    memcpy(file, data + 1, len);
    if ((mode & 1) && len >= TIDED_CHECKPOINT_HEADER_BYTES) {
        const uint8_t *payload = file + TIDED_CHECKPOINT_HEADER_BYTES;
        size_t payload_len = len - TIDED_CHECKPOINT_HEADER_BYTES;
        put_u64(file + 24, payload_len);
        put_u64(file + 32, XXH64(payload, payload_len, 0));
    }
    if (ftruncate(memfd, 0) != 0 || pwrite(memfd, file, len, 0) != (ssize_t)len)
        abort();

    struct tide_error err = {0};
    Tide__V1__ReadVariablesResponse *m = tided_store_read_checkpoint(path, &err);
    if (!m) {
        if (!strstr(err.message, path))
            abort();
        if (verbose)
            fprintf(stderr, "fuzz_checkpoint: refused: %s\n", err.message);
    } else {
        if (verbose)
            fprintf(stderr, "fuzz_checkpoint: read %zu variable(s)\n", m->n_variables);
        if (len < TIDED_CHECKPOINT_HEADER_BYTES || m->step != get_u64(file + 16))
            abort();
        for (size_t i = 0; i < m->n_variables; i++) {
            const Tide__V1__NamedTensor *nt = m->variables[i];
            struct tide_const_tensor value;
            struct tide_error e = {0};
            if (!nt->name[0] ||
                tide_tensor_from_proto(nt->tensor, NULL, &value, "variable", &e) != TIDE_OK ||
                value.nbytes !=
                    (uint64_t)tide_shape_numel(&value.shape) * tide_dtype_size(value.dtype))
                abort();
            for (uint64_t b = 0; b < value.nbytes; b++)
                bytes_read_sum ^= ((const uint8_t *)value.data)[b];
        }
        tide__v1__read_variables_response__free_unpacked(m, NULL);
    }
    free(file);
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    verbose = getenv("FUZZ_CHECKPOINT_VERBOSE") != NULL;
    memfd = memfd_create("fuzz_checkpoint", MFD_CLOEXEC);
    if (memfd < 0) {
        perror("fuzz_checkpoint: memfd_create");
        exit(1);
    }
    snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
    return 0;
}
