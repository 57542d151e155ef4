/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/export.c: `tidectl export JOB --npz OUT.npz` and `tidectl
 * export JOB --onnx OUT.onnx --from MODEL.onnx`: reads every Variable of a
 * job (tide_client_read_variables, in pages, so weights of any size) and
 * writes them as NumPy arrays in an .npz (tide_npz_write), so that
 * numpy.load — and through it PyTorch or any framework — gets the trained
 * weights back, by name and with the shapes of the job's graph; or into the
 * ONNX model the job was trained from, as its initializers
 * (tide_onnx_with_values), so that onnx.load and the exporting framework
 * read the trained model. The daemon never sees the ONNX file, so the user
 * names it again with --from.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>

#include "tide/dataset-files.h"
#include "tide/onnx.h"
#include "tidectl.h"

/*
 * --onnx OUT --from MODEL: MODEL's bytes with the job's values as its
 * trained initializers, written to OUT (beside it, then renamed over it).
 */
static int write_onnx(const struct tidectl_options *o, const struct tide_tensor *values, size_t n,
                      size_t *replaced, char *err, size_t size)
{
    FILE *f = fopen(o->from, "rb");
    long len = -1;
    if (f && fseek(f, 0, SEEK_END) == 0)
        len = ftell(f);
    uint8_t *model = len >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc(len ? (size_t)len : 1) : NULL;
    bool read_ok = model && fread(model, 1, (size_t)len, f) == (size_t)len;
    if (f)
        fclose(f);
    if (!read_ok) {
        snprintf(err, size, "--from %s: %s", o->from, f ? "cannot read it" : strerror(errno));
        free(model);
        return -1;
    }
    char *frozen_copy;
    const char **frozen;
    size_t n_frozen;
    uint8_t *out = NULL;
    size_t out_len = 0;
    int rc = -1;
    if (tide_onnx_split_names(o->frozen, &frozen_copy, &frozen, &n_frozen) != 0) {
        snprintf(err, size, "out of memory");
        free(model);
        return -1;
    }
    char why[900];
    if (tide_onnx_with_values(model, (size_t)len, frozen, n_frozen, values, n, &out, &out_len,
                              replaced, why, sizeof(why)) != 0) {
        snprintf(err, size, "--from %s: %s", o->from, why);
    } else {
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", o->onnx);
        FILE *w = fopen(tmp, "wb");
        bool ok = w && fwrite(out, 1, out_len, w) == out_len;
        if (w && fclose(w) != 0)
            ok = false;
        if (ok && rename(tmp, o->onnx) == 0) {
            rc = 0;
        } else {
            snprintf(err, size, "--onnx %s: %s", o->onnx, strerror(errno));
            remove(tmp);
        }
    }
    free(out);
    free(frozen_copy);
    free(frozen);
    free(model);
    return rc;
}

static int run_export(const struct tidectl_verb *verb, struct tidectl_options *o,
                      tide_client *unused)
{
    (void)unused;
    /* Checked before connecting, so that a usage error is one with or without a daemon. */
    if (!o->npz && !o->onnx)
        return tidectl_usage_error(verb->name, "say where the weights go: --npz OUT.npz or "
                                               "--onnx OUT.onnx --from MODEL.onnx");
    const char *job = o->args[0];
    int rc;
    tide_client *c = tidectl_connect(o, &rc);
    if (!c)
        return rc;
    tide_variables *v = NULL;
    if (tide_client_read_variables(c, job, NULL, 0, &v) != 0) {
        rc = tidectl_client_error(c, "export: reading the variables", TIDECTL_EXIT_RUNTIME);
        tide_client_free(c);
        return rc;
    }
    tide_client_free(c);
    size_t n = tide_variables_count(v);
    struct tide_tensor *arrays = calloc(n ? n : 1, sizeof(*arrays));
    if (!arrays) {
        tide_variables_free(v);
        fprintf(stderr, "tidectl: out of memory\n");
        return TIDECTL_EXIT_RUNTIME;
    }
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        arrays[i] = *tide_variables_at(v, i);
        bytes += arrays[i].bytes;
    }
    char err[1024];
    rc = TIDECTL_EXIT_OK;
    size_t replaced = 0;
    if (o->onnx && write_onnx(o, arrays, n, &replaced, err, sizeof(err)) != 0) {
        fprintf(stderr, "tidectl: export: %s\n", err);
        if (o->json)
            tidectl_json_print_error("EXPORT", -1, err, TIDECTL_EXIT_RUNTIME);
        rc = TIDECTL_EXIT_RUNTIME;
    } else if (o->npz && tide_npz_write(o->npz, arrays, n, err, sizeof(err)) != 0) {
        fprintf(stderr, "tidectl: export: %s\n", err);
        if (o->json)
            tidectl_json_print_error("EXPORT", -1, err, TIDECTL_EXIT_RUNTIME);
        rc = TIDECTL_EXIT_RUNTIME;
    } else if (o->json) {
        struct json_object *line = tidectl_json_object();
        tidectl_json_set_string(line, "job", job);
        tidectl_json_set_uint(line, "step", tide_variables_step(v));
        if (o->npz)
            tidectl_json_set_string(line, "npz", o->npz);
        if (o->onnx) {
            tidectl_json_set_string(line, "onnx", o->onnx);
            tidectl_json_set_uint(line, "initializers", replaced);
        }
        tidectl_json_set_uint(line, "variables", n);
        tidectl_json_set_uint(line, "bytes", bytes);
        rc = tidectl_json_print_line(line);
    } else {
        char b[32];
        if (o->npz)
            printf("job %s: %zu variables (%s) of step %" PRIu64 " written to %s\n", job, n,
                   tidectl_fmt_bytes(bytes, b, sizeof(b)), tide_variables_step(v), o->npz);
        if (o->onnx)
            printf("job %s: %zu initializers of %s replaced with step %" PRIu64
                   "'s values, written to %s\n",
                   job, replaced, o->from, tide_variables_step(v), o->onnx);
    }
    free(arrays);
    tide_variables_free(v);
    return rc;
}

static const int accepts[] = {TIDECTL_OPT_NPZ, TIDECTL_OPT_ONNX, TIDECTL_OPT_FROM,
                              TIDECTL_OPT_FROZEN, 0};

const struct tidectl_verb tidectl_verb_export = {
    .name = "export",
    .run = run_export,
    .connects = false, /* it connects itself, after checking its options */
    .accepts = accepts,
    .min_args = 1,
    .max_args = 1,
    .synopsis = "export JOB [--npz OUT.npz] [--onnx OUT.onnx --from MODEL.onnx [--frozen A,B]]",
    .summary = "write a job's trained weights to a file (NumPy .npz, or into its ONNX model)",
    .help = "DESCRIPTION\n"
            "  Reads every Variable of JOB (optimizer state excluded) at its latest step —\n"
            "  read a training job between its steps, or a finished one — and writes them to\n"
            "  a file. Its owner and admins may export a job.\n"
            "\n"
            "OPTIONS\n"
            "  --npz OUT.npz            A NumPy .npz archive: one float32 array per Variable,\n"
            "                           in C order, with the shape of the job's graph, named\n"
            "                           as the Variable (\"fc1/w\"; '/' is kept as a path in the\n"
            "                           zip, which numpy.load keeps in the key):\n"
            "                             w = numpy.load(\"OUT.npz\"); w[\"fc1/w\"].shape\n"
            "                           Written beside OUT.npz and renamed over it at the end.\n"
            "  --onnx OUT.onnx --from MODEL.onnx\n"
            "                           The ONNX model the job was trained from (train --onnx\n"
            "                           MODEL.onnx) with its trained initializers: every node,\n"
            "                           name and attribute as the file had them, so onnx.load and\n"
            "                           the exporting framework read it. Written beside OUT.onnx\n"
            "                           and renamed over it at the end.\n"
            "  --frozen A,B             The --frozen list the job was trained with.\n",
};
