/* SPDX-License-Identifier: MIT */
/*
 * corpus.c: byte-level text corpora and their window iterators, for the
 * language models (the tide_corpus block of tide/dataset.h).
 *
 * A corpus is small (fortunes is 2.6 MB), so open reads the whole of it
 * into memory: the directory is listed, the names without a '.' kept and
 * sorted with strcmp (so the order does not depend on the locale or on the
 * file system), and each regular file appended. Only the split's bytes are
 * kept; the totals are remembered so that a caller can report them.
 *
 * Random windows come from splitmix64 with unbiased bounded draws, as the
 * image datasets shuffle (dataset.c), so a seed gives the same batches on
 * every platform. The generator is repeated here rather than shared: the
 * two files draw for different things and neither should change the
 * other's sequence by accident.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tide/dataset.h"

/* The golden-ratio increment of splitmix64. */
#define GOLDEN UINT64_C(0x9E3779B97F4A7C15)
/* The held-out share: the last (10 - TRAIN_TENTHS) tenths of the bytes. */
#define TRAIN_TENTHS 9
/* The most files and bytes a corpus may have: far above fortunes, far below trouble. */
#define MAX_FILES 100000
#define MAX_BYTES (INT64_C(1) << 31)

struct tide_corpus {
    uint8_t *bytes; /* the split's bytes */
    int64_t size;
    int64_t total_size; /* both splits */
    int32_t files;
};

struct tide_corpus_iter {
    const tide_corpus *corpus;
    int64_t batch, seq_len;
    bool random;
    uint64_t state;  /* splitmix64, random windows */
    int64_t next;    /* the next window, consecutive windows */
    int64_t windows; /* consecutive windows in the split */
};

/* Writes a message into err (when there is one) and returns code. */
static int fail(char *err, size_t err_size, int code, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t err_size, int code, const char *format, ...)
{
    if (err && err_size > 0) {
        va_list args;
        va_start(args, format);
        vsnprintf(err, err_size, format, args);
        va_end(args);
    }
    return code;
}

/* splitmix64 (Steele, Lea and Flood): advances *state and returns the next output. */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += GOLDEN);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* A uniform draw from 0 .. bound - 1 (bound >= 1), without modulo bias. */
static uint64_t bounded(uint64_t *state, uint64_t bound)
{
    uint64_t threshold = (0 - bound) % bound;
    for (;;) {
        uint64_t r = splitmix64(state);
        if (r >= threshold)
            return r % bound;
    }
}

/* ============================================================================
 * Reading the files
 * ========================================================================== */

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The sorted names in dir without a '.'; *n gets their count. */
static int list_names(const char *dir, char ***out, size_t *n, char *err, size_t err_size)
{
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR)
            return fail(err, err_size, TIDE_DATASET_NOT_FOUND,
                        "fortunes: directory %s %s (install the corpus with `apt install "
                        "fortunes`, or pass the directory that holds it)",
                        dir, e == ENOENT ? "does not exist" : "is not a directory");
        return fail(err, err_size, TIDE_DATASET_IO, "fortunes: cannot open directory %s: %s", dir,
                    strerror(e));
    }
    char **names = NULL;
    size_t count = 0, room = 0;
    int rc = 0;
    struct dirent *entry;
    while (rc == 0 && (entry = readdir(d)) != NULL) {
        if (strchr(entry->d_name, '.'))
            continue; /* ".", "..", hidden files, "cookie.dat", "cookie.u8" */
        if (count == MAX_FILES) {
            rc = fail(err, err_size, TIDE_DATASET_INVALID,
                      "fortunes: %s holds more than %d files without an extension", dir, MAX_FILES);
            break;
        }
        if (count == room) {
            size_t bigger = room ? 2 * room : 64;
            char **grown = realloc(names, bigger * sizeof(*names));
            if (!grown) {
                rc = fail(err, err_size, TIDE_DATASET_NOMEM, "fortunes: out of memory");
                break;
            }
            names = grown;
            room = bigger;
        }
        names[count] = strdup(entry->d_name);
        if (!names[count]) {
            rc = fail(err, err_size, TIDE_DATASET_NOMEM, "fortunes: out of memory");
            break;
        }
        count++;
    }
    closedir(d);
    if (rc != 0) {
        free_names(names, count);
        return rc;
    }
    if (count)
        qsort(names, count, sizeof(*names), compare_names);
    *out = names;
    *n = count;
    return 0;
}

/* Appends the regular file path to *buf (size *len, room *room); directories are skipped. */
static int append_file(const char *path, uint8_t **buf, int64_t *len, int64_t *room, bool *used,
                       char *err, size_t err_size)
{
    struct stat st;
    *used = false;
    if (stat(path, &st) != 0)
        return fail(err, err_size, TIDE_DATASET_IO, "fortunes: cannot stat %s: %s", path,
                    strerror(errno));
    if (!S_ISREG(st.st_mode))
        return 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(err, err_size, TIDE_DATASET_IO, "fortunes: cannot open %s: %s", path,
                    strerror(errno));
    int rc = 0;
    for (;;) {
        if (*len == *room) {
            int64_t bigger = *room ? 2 * *room : INT64_C(1) << 20;
            uint8_t *grown = bigger <= MAX_BYTES ? realloc(*buf, (size_t)bigger) : NULL;
            if (!grown) {
                rc = bigger > MAX_BYTES
                         ? fail(err, err_size, TIDE_DATASET_INVALID,
                                "fortunes: the corpus is larger than %" PRId64 " bytes at %s",
                                MAX_BYTES, path)
                         : fail(err, err_size, TIDE_DATASET_NOMEM,
                                "fortunes: out of memory for %" PRId64 " bytes", bigger);
                break;
            }
            *buf = grown;
            *room = bigger;
        }
        size_t got = fread(*buf + *len, 1, (size_t)(*room - *len), f);
        *len += (int64_t)got;
        if (got == 0) {
            if (ferror(f))
                rc = fail(err, err_size, TIDE_DATASET_IO, "fortunes: reading %s failed: %s", path,
                          strerror(errno));
            break;
        }
    }
    fclose(f);
    *used = rc == 0;
    return rc;
}

/* ============================================================================
 * Opening
 * ========================================================================== */

int tide_corpus_open(const char *name, const char *dir, const char *split, tide_corpus **out,
                     char *err, size_t err_size)
{
    if (err && err_size > 0)
        err[0] = '\0';
    if (!out)
        return fail(err, err_size, TIDE_DATASET_INVALID, "tide_corpus_open: out is NULL");
    *out = NULL;
    if (!name)
        return fail(err, err_size, TIDE_DATASET_INVALID, "tide_corpus_open: name is NULL");
    if (strcmp(name, "fortunes") != 0)
        return fail(err, err_size, TIDE_DATASET_NOT_FOUND,
                    "unknown corpus \"%.64s\", wants \"fortunes\"", name);
    bool train;
    if (split && strcmp(split, "train") == 0)
        train = true;
    else if (split && strcmp(split, "test") == 0)
        train = false;
    else
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "fortunes: unknown split \"%.32s\", wants \"train\" or \"test\"",
                    split ? split : "(NULL)");
    if (!dir)
        dir = TIDE_CORPUS_FORTUNES_DIR;

    char **names = NULL;
    size_t n_names = 0;
    int rc = list_names(dir, &names, &n_names, err, err_size);
    if (rc != 0)
        return rc;
    uint8_t *bytes = NULL;
    int64_t len = 0, room = 0;
    int32_t files = 0;
    char path[4096];
    for (size_t i = 0; rc == 0 && i < n_names; i++) {
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, names[i]) >= sizeof(path)) {
            rc = fail(err, err_size, TIDE_DATASET_INVALID,
                      "fortunes: the path of %s in %s is longer than %zu bytes", names[i], dir,
                      sizeof(path) - 1);
            break;
        }
        bool used;
        rc = append_file(path, &bytes, &len, &room, &used, err, err_size);
        files += used;
    }
    free_names(names, n_names);
    /* Each split must hold at least two bytes: one token and its label. */
    int64_t cut = len * TRAIN_TENTHS / 10;
    if (rc == 0 && (cut < 2 || len - cut < 2))
        rc = fail(err, err_size, files ? TIDE_DATASET_INVALID : TIDE_DATASET_NOT_FOUND,
                  "fortunes: %s holds %" PRId32 " files without an extension, %" PRId64
                  " bytes in all; a corpus wants at least 11, so that each split holds 2 (a "
                  "token and its label)"
                  " (install the corpus with `apt install fortunes`)",
                  dir, files, len);
    tide_corpus *c = rc == 0 ? calloc(1, sizeof(*c)) : NULL;
    if (rc == 0 && !c)
        rc = fail(err, err_size, TIDE_DATASET_NOMEM, "fortunes: out of memory");
    if (rc != 0) {
        free(bytes);
        return rc;
    }
    c->total_size = len;
    c->files = files;
    c->size = train ? cut : len - cut;
    if (!train)
        memmove(bytes, bytes + cut, (size_t)c->size);
    uint8_t *fitted = realloc(bytes, (size_t)c->size);
    c->bytes = fitted ? fitted : bytes;
    *out = c;
    return 0;
}

void tide_corpus_free(tide_corpus *corpus)
{
    if (!corpus)
        return;
    free(corpus->bytes);
    free(corpus);
}

int64_t tide_corpus_size(const tide_corpus *corpus)
{
    return corpus ? corpus->size : 0;
}

const uint8_t *tide_corpus_bytes(const tide_corpus *corpus)
{
    return corpus ? corpus->bytes : NULL;
}

int64_t tide_corpus_total_size(const tide_corpus *corpus)
{
    return corpus ? corpus->total_size : 0;
}

int32_t tide_corpus_files(const tide_corpus *corpus)
{
    return corpus ? corpus->files : 0;
}

int64_t tide_corpus_windows(const tide_corpus *corpus, int64_t seq_len)
{
    if (!corpus || seq_len < 1)
        return 0;
    return (corpus->size - 1) / seq_len;
}

/* ============================================================================
 * Batches
 * ========================================================================== */

int tide_corpus_iter_new(const tide_corpus *corpus, int64_t batch, int64_t seq_len, uint64_t seed,
                         unsigned flags, tide_corpus_iter **out, char *err, size_t err_size)
{
    if (err && err_size > 0)
        err[0] = '\0';
    if (!out)
        return fail(err, err_size, TIDE_DATASET_INVALID, "tide_corpus_iter_new: out is NULL");
    *out = NULL;
    if (!corpus)
        return fail(err, err_size, TIDE_DATASET_INVALID, "tide_corpus_iter_new: corpus is NULL");
    if (flags & ~TIDE_CORPUS_RANDOM)
        return fail(err, err_size, TIDE_DATASET_INVALID, "tide_corpus_iter_new: unknown flags 0x%x",
                    flags & ~TIDE_CORPUS_RANDOM);
    if (batch < 1 || batch > (INT64_C(1) << 31))
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "tide_corpus_iter_new: batch is %" PRId64 ", wants 1 to 2^31", batch);
    if (seq_len < 1 || seq_len > corpus->size - 1)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "tide_corpus_iter_new: seq_len is %" PRId64 ", wants 1 to %" PRId64
                    " (a window of the split's %" PRId64 " bytes, less the last byte's label)",
                    seq_len, corpus->size - 1, corpus->size);
    if (batch > (INT64_C(1) << 31) / seq_len)
        return fail(err, err_size, TIDE_DATASET_INVALID,
                    "tide_corpus_iter_new: batch %" PRId64 " x seq_len %" PRId64
                    " is more than 2^31 tokens",
                    batch, seq_len);
    tide_corpus_iter *it = calloc(1, sizeof(*it));
    if (!it)
        return fail(err, err_size, TIDE_DATASET_NOMEM, "tide_corpus_iter_new: out of memory");
    it->corpus = corpus;
    it->batch = batch;
    it->seq_len = seq_len;
    it->random = flags & TIDE_CORPUS_RANDOM;
    it->state = seed;
    it->windows = tide_corpus_windows(corpus, seq_len);
    *out = it;
    return 0;
}

void tide_corpus_iter_free(tide_corpus_iter *it)
{
    free(it);
}

/* Copies the window at byte start into row r of tokens and labels. */
static void copy_window(const tide_corpus_iter *it, int64_t start, int64_t r, int32_t *tokens,
                        int32_t *labels)
{
    const uint8_t *src = it->corpus->bytes + start;
    int32_t *t = tokens + r * it->seq_len, *l = labels + r * it->seq_len;
    for (int64_t i = 0; i < it->seq_len; i++) {
        t[i] = src[i];
        l[i] = src[i + 1];
    }
}

int64_t tide_corpus_iter_next(tide_corpus_iter *it, int32_t *tokens, int32_t *labels)
{
    if (!it || !tokens || !labels)
        return -1;
    if (it->random) {
        uint64_t starts = (uint64_t)(it->corpus->size - it->seq_len);
        for (int64_t r = 0; r < it->batch; r++)
            copy_window(it, (int64_t)bounded(&it->state, starts), r, tokens, labels);
        return it->batch;
    }
    int64_t left = it->windows - it->next;
    if (left <= 0) {
        it->next = 0;
        return 0;
    }
    int64_t real = left < it->batch ? left : it->batch;
    for (int64_t r = 0; r < it->batch; r++) {
        /* Padding rows (r >= real) repeat the first windows. */
        int64_t window = r < real ? it->next + r : (r - real) % it->windows;
        copy_window(it, window * it->seq_len, r, tokens, labels);
    }
    it->next += real;
    return real;
}
