/* SPDX-License-Identifier: MIT */
/*
 * make_onnx_corpus.c: writes the seed corpus of the ONNX import fuzzer: a
 * copy of every model.onnx of ONNX's conformance suite (Debian's
 * libonnx-testdata, a deploy/install-deps.sh package), named after its case.
 *
 * Usage: make_onnx_corpus DIR [DATA]   (DATA: /usr/share/libonnx-testdata/data)
 * Exits 1 when DATA holds no model or a copy fails.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb");
    if (!in)
        return -1;
    FILE *out = fopen(to, "wb");
    if (!out) {
        fclose(in);
        return -1;
    }
    char buf[65536];
    size_t n;
    int rc = 0;
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            rc = -1;
    fclose(in);
    if (fclose(out) != 0)
        rc = -1;
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: make_onnx_corpus DIR [DATA]\n");
        return 2;
    }
    const char *data = argc == 3 ? argv[2] : "/usr/share/libonnx-testdata/data";
    if (mkdir(argv[1], 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "make_onnx_corpus: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    int copied = 0;
    DIR *groups = opendir(data);
    for (struct dirent *g; groups && (g = readdir(groups));) {
        if (g->d_name[0] == '.')
            continue;
        char group[4096];
        snprintf(group, sizeof(group), "%.3000s/%.255s", data, g->d_name);
        DIR *cases = opendir(group);
        for (struct dirent *c; cases && (c = readdir(cases));) {
            if (c->d_name[0] == '.')
                continue;
            char from[4096], to[4096];
            snprintf(from, sizeof(from), "%.3500s/%.255s/model.onnx", group, c->d_name);
            snprintf(to, sizeof(to), "%.3000s/%.255s-%.255s.onnx", argv[1], g->d_name, c->d_name);
            struct stat st;
            if (stat(from, &st) != 0)
                continue;
            if (copy_file(from, to) != 0) {
                fprintf(stderr, "make_onnx_corpus: %s -> %s: %s\n", from, to, strerror(errno));
                return 1;
            }
            copied++;
        }
        if (cases)
            closedir(cases);
    }
    if (groups)
        closedir(groups);
    if (copied == 0) {
        fprintf(stderr, "make_onnx_corpus: no model.onnx under %s (install libonnx-testdata)\n",
                data);
        return 1;
    }
    printf("make_onnx_corpus: %d models in %s\n", copied, argv[1]);
    return 0;
}
