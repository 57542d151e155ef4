/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/export.c: `tidectl export JOB --npz OUT.npz`: reads every
 * Variable of a job (tide_client_read_variables, in pages, so weights of
 * any size) and writes them as NumPy arrays in an .npz (tide_npz_write), so
 * that numpy.load — and through it PyTorch or any framework — gets the
 * trained weights back, by name and with the shapes of the job's graph.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "tide/dataset-files.h"
#include "tidectl.h"

static int run_export(const struct tidectl_verb *verb, struct tidectl_options *o,
                      tide_client *unused)
{
    (void)unused;
    /* Checked before connecting, so that a usage error is one with or without a daemon. */
    if (!o->npz)
        return tidectl_usage_error(verb->name, "say where the weights go: --npz OUT.npz");
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
    if (tide_npz_write(o->npz, arrays, n, err, sizeof(err)) != 0) {
        fprintf(stderr, "tidectl: export: %s\n", err);
        if (o->json)
            tidectl_json_print_error("EXPORT", -1, err, TIDECTL_EXIT_RUNTIME);
        rc = TIDECTL_EXIT_RUNTIME;
    } else if (o->json) {
        struct json_object *line = tidectl_json_object();
        tidectl_json_set_string(line, "job", job);
        tidectl_json_set_uint(line, "step", tide_variables_step(v));
        tidectl_json_set_string(line, "npz", o->npz);
        tidectl_json_set_uint(line, "variables", n);
        tidectl_json_set_uint(line, "bytes", bytes);
        rc = tidectl_json_print_line(line);
    } else {
        char b[32];
        printf("job %s: %zu variables (%s) of step %" PRIu64 " written to %s\n", job, n,
               tidectl_fmt_bytes(bytes, b, sizeof(b)), tide_variables_step(v), o->npz);
    }
    free(arrays);
    tide_variables_free(v);
    return rc;
}

static const int accepts[] = {TIDECTL_OPT_NPZ, 0};

const struct tidectl_verb tidectl_verb_export = {
    .name = "export",
    .run = run_export,
    .connects = false, /* it connects itself, after checking its options */
    .accepts = accepts,
    .min_args = 1,
    .max_args = 1,
    .synopsis = "export JOB --npz OUT.npz",
    .summary = "write a job's trained weights to a file (NumPy .npz)",
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
            "                           Written beside OUT.npz and renamed over it at the end.\n",
};
