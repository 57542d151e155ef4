/* SPDX-License-Identifier: MIT */
/*
 * fuzz_onnx.c: libFuzzer target for ONNX import (onnx/import.c), the
 * client-side parser of files that come from anywhere.
 *
 * Each input is taken as the bytes of an onnx.ModelProto and imported into a
 * fresh builder. The property: whatever the bytes, tide_onnx_import returns
 * 0 or -1 without crashing, leaking or tripping a sanitizer; -1 always comes
 * with a message and a zeroed result; 0 leaves a builder without an error
 * that serializes. The seeds (make_onnx_corpus) are the models of ONNX's own
 * conformance suite, so byte mutations start deep inside real graphs.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tide/graph.h"
#include "tide/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tide_builder *b = tide_builder_new();
    if (!b)
        return 0;
    struct tide_onnx_options o = {.batch_size = 2};
    struct tide_onnx_result r;
    char err[512];
    int rc = tide_onnx_import(b, data, size, &o, &r, err, sizeof(err));
    if (rc != 0) {
        if (rc != -1 || err[0] == '\0' || r.inputs || r.outputs || r.n_outputs)
            abort();
    } else {
        if (tide_builder_error(b))
            abort();
        uint8_t *bytes;
        size_t len;
        if (tide_builder_serialize(b, &bytes, &len) != 0)
            abort();
        free(bytes);
        tide_onnx_result_free(&r);
    }
    tide_builder_free(b);
    return 0;
}
