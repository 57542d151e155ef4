/* SPDX-License-Identifier: MIT */
/*
 * store.c: atomic files under the state directory (see store.h), and the
 * job records kept there: info.pb, listing earlier runs' jobs at start,
 * deleting and forgetting ended jobs (declared in jobs-impl.h).
 */
#include "daemon/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <xxhash.h>

#include "common/log.h"
#include "daemon/jobs-impl.h"
#include "graph/import.h"

int tided_store_lock(const char *dir, char *error, size_t size)
{
    char *path = tided_path_join(dir, "tided.lock");
    if (!path) {
        snprintf(error, size, "out of memory");
        return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(error, size, "state-dir: cannot open %s: %s", path, strerror(errno));
        free(path);
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = e == EWOULDBLOCK ? pread(fd, pid, sizeof(pid) - 1, 0) : -1;
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        if (e == EWOULDBLOCK)
            snprintf(error, size,
                     "state-dir %s is in use by another tided (pid %s, holding %s); stop it "
                     "or give this one another --state-dir",
                     dir, pid[0] ? pid : "unknown", path);
        else
            snprintf(error, size, "state-dir: cannot lock %s: %s", path, strerror(e));
        close(fd);
        free(path);
        return -1;
    }
    char pid[32];
    int len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        snprintf(error, size, "state-dir: cannot write the pid to %s: %s", path, strerror(errno));
        close(fd);
        free(path);
        return -1;
    }
    free(path);
    return fd;
}

char *tided_path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *path = malloc(a + b + 2);
    if (!path)
        return NULL;
    memcpy(path, dir, a);
    path[a] = '/';
    memcpy(path + a + 1, name, b + 1);
    return path;
}

enum tide_status tided_store_mkdirs(const char *dir, struct tide_error *err)
{
    char *path = strdup(dir);
    if (!path)
        return tide_error_set(err, TIDE_NOMEM, "out of memory");
    enum tide_status st = TIDE_OK;
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST) {
            st = tide_error_set(err, TIDE_IO, "cannot create the directory %s: %s", path,
                                strerror(errno));
            break;
        }
        *p = saved;
        if (saved == '\0')
            break;
    }
    struct stat sb;
    if (st == TIDE_OK && (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        st = tide_error_set(err, TIDE_IO, "%s is not a directory", dir);
    free(path);
    return st;
}

/* A ProtobufCBuffer that writes to a file descriptor, remembering the first error. */
struct fd_buffer {
    ProtobufCBuffer base;
    int fd;
    int error; /* errno of the first failed write, 0 if none */
    uint64_t bytes;
};

static void fd_buffer_append(ProtobufCBuffer *buffer, size_t len, const uint8_t *data)
{
    struct fd_buffer *b = (struct fd_buffer *)buffer;
    while (len > 0 && b->error == 0) {
        ssize_t n = write(b->fd, data, len);
        if (n < 0) {
            if (errno != EINTR)
                b->error = errno;
            continue;
        }
        data += n;
        len -= (size_t)n;
        b->bytes += (uint64_t)n;
    }
}

/* Writes through fill(), then fsync, rename and directory fsync. */
static enum tide_status write_atomically(const char *dir, const char *name,
                                         void (*fill)(struct fd_buffer *, const void *),
                                         const void *arg, uint64_t *bytes, struct tide_error *err)
{
    char *path = tided_path_join(dir, name);
    size_t n = path ? strlen(path) + 5 : 0;
    char *tmp = path ? malloc(n) : NULL;
    if (!path || !tmp) {
        free(path);
        return tide_error_set(err, TIDE_NOMEM, "out of memory");
    }
    snprintf(tmp, n, "%s.tmp", path);
    enum tide_status st = TIDE_OK;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        st = tide_error_set(err, TIDE_IO, "cannot create %s: %s", tmp, strerror(errno));
        goto out;
    }
    struct fd_buffer buffer = {.base = {.append = fd_buffer_append}, .fd = fd};
    fill(&buffer, arg);
    if (buffer.error == 0 && fsync(fd) != 0)
        buffer.error = errno;
    if (close(fd) != 0 && buffer.error == 0)
        buffer.error = errno;
    if (buffer.error != 0) {
        st = tide_error_set(err, TIDE_IO, "cannot write %s: %s", tmp, strerror(buffer.error));
        unlink(tmp);
        goto out;
    }
    if (rename(tmp, path) != 0) {
        st = tide_error_set(err, TIDE_IO, "cannot rename %s to %s: %s", tmp, path,
                            strerror(errno));
        unlink(tmp);
        goto out;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        if (fsync(dfd) != 0)
            st = tide_error_set(err, TIDE_IO, "cannot fsync the directory %s: %s", dir,
                                strerror(errno));
        close(dfd);
    }
    if (bytes)
        *bytes = buffer.bytes;
out:
    free(tmp);
    free(path);
    return st;
}

struct raw {
    const void *data;
    size_t len;
};

static void fill_raw(struct fd_buffer *b, const void *arg)
{
    const struct raw *raw = arg;
    fd_buffer_append(&b->base, raw->len, raw->data);
}

static void fill_message(struct fd_buffer *b, const void *arg)
{
    protobuf_c_message_pack_to_buffer(arg, &b->base);
}

enum tide_status tided_store_write(const char *dir, const char *name, const void *data, size_t len,
                                   struct tide_error *err)
{
    struct raw raw = {data, len};
    return write_atomically(dir, name, fill_raw, &raw, NULL, err);
}

enum tide_status tided_store_write_message(const char *dir, const char *name,
                                           const ProtobufCMessage *message, uint64_t *bytes,
                                           struct tide_error *err)
{
    return write_atomically(dir, name, fill_message, message, bytes, err);
}

/* ============================================================================
 * Checkpoints: a header, then the packed ReadVariablesResponse
 * ========================================================================== */

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The header's fields, decoded (see store.h for the layout). */
struct checkpoint_header {
    uint32_t version;
    uint64_t step;
    uint64_t payload_bytes;
    uint64_t checksum;
};

/* A ProtobufCBuffer that hashes what it passes on to the file. */
struct hashing_buffer {
    ProtobufCBuffer base;
    struct fd_buffer *file;
    XXH64_state_t *state;
    uint64_t bytes;
};

static void hashing_buffer_append(ProtobufCBuffer *buffer, size_t len, const uint8_t *data)
{
    struct hashing_buffer *h = (struct hashing_buffer *)buffer;
    XXH64_update(h->state, data, len);
    h->bytes += len;
    fd_buffer_append(&h->file->base, len, data);
}

struct checkpoint_fill {
    const Tide__V1__ReadVariablesResponse *message;
    XXH64_state_t *state;
};

/* A zeroed header, the payload hashed on its way out, then the header written in place. */
static void fill_checkpoint(struct fd_buffer *b, const void *arg)
{
    const struct checkpoint_fill *c = arg;
    uint8_t header[TIDED_CHECKPOINT_HEADER_BYTES] = {0};
    fd_buffer_append(&b->base, sizeof(header), header);
    XXH64_reset(c->state, 0);
    struct hashing_buffer h = {.base = {.append = hashing_buffer_append}, .file = b,
                               .state = c->state};
    protobuf_c_message_pack_to_buffer(&c->message->base, &h.base);
    if (b->error)
        return;
    memcpy(header, TIDED_CHECKPOINT_MAGIC, 8);
    put_u32(header + 8, TIDED_CHECKPOINT_VERSION);
    put_u32(header + 12, 0);
    put_u64(header + 16, c->message->step);
    put_u64(header + 24, h.bytes);
    put_u64(header + 32, XXH64_digest(c->state));
    if (pwrite(b->fd, header, sizeof(header), 0) != (ssize_t)sizeof(header))
        b->error = errno ? errno : EIO;
}

enum tide_status tided_store_write_checkpoint(const char *dir, const char *name,
                                              const Tide__V1__ReadVariablesResponse *message,
                                              uint64_t *bytes, struct tide_error *err)
{
    struct checkpoint_fill c = {.message = message, .state = XXH64_createState()};
    if (!c.state)
        return tide_error_set(err, TIDE_NOMEM, "out of memory");
    enum tide_status st = write_atomically(dir, name, fill_checkpoint, &c, bytes, err);
    XXH64_freeState(c.state);
    return st;
}

/* Decodes and checks the header of a file of file_bytes bytes; the message names path. */
static enum tide_status checkpoint_header_parse(const char *path, const uint8_t *data,
                                                uint64_t file_bytes,
                                                struct checkpoint_header *h,
                                                struct tide_error *err)
{
    if (file_bytes == 0)
        return tide_error_set(err, TIDE_INVALID, "checkpoint %s is empty (0 bytes)", path);
    size_t magic_bytes = file_bytes < 8 ? (size_t)file_bytes : 8;
    if (memcmp(data, TIDED_CHECKPOINT_MAGIC, magic_bytes) != 0)
        return tide_error_set(err, TIDE_INVALID,
                              "%s is not a tide checkpoint: it does not start with \"%s\"", path,
                              TIDED_CHECKPOINT_MAGIC);
    if (file_bytes < TIDED_CHECKPOINT_HEADER_BYTES)
        return tide_error_set(err, TIDE_INVALID,
                              "checkpoint %s is truncated: %" PRIu64
                              " bytes, shorter than its %d-byte header",
                              path, file_bytes, TIDED_CHECKPOINT_HEADER_BYTES);
    h->version = get_u32(data + 8);
    h->step = get_u64(data + 16);
    h->payload_bytes = get_u64(data + 24);
    h->checksum = get_u64(data + 32);
    if (h->version != TIDED_CHECKPOINT_VERSION)
        return tide_error_set(err, TIDE_UNSUPPORTED,
                              "checkpoint %s has format version %" PRIu32
                              "; this tided reads version %d",
                              path, h->version, TIDED_CHECKPOINT_VERSION);
    uint64_t have = file_bytes - TIDED_CHECKPOINT_HEADER_BYTES;
    if (have != h->payload_bytes)
        return tide_error_set(err, TIDE_INVALID,
                              "checkpoint %s is %s: its header promises %" PRIu64
                              " bytes of variables, the file holds %" PRIu64,
                              path, have < h->payload_bytes ? "truncated" : "longer than written",
                              h->payload_bytes, have);
    return TIDE_OK;
}

Tide__V1__ReadVariablesResponse *tided_store_read_checkpoint(const char *path,
                                                             struct tide_error *err)
{
    uint8_t *data;
    size_t len;
    if (tided_store_read(path, &data, &len, err) != TIDE_OK)
        return NULL;
    struct checkpoint_header h;
    Tide__V1__ReadVariablesResponse *m = NULL;
    if (checkpoint_header_parse(path, data, len, &h, err) != TIDE_OK)
        goto out;
    const uint8_t *payload = data + TIDED_CHECKPOINT_HEADER_BYTES;
    uint64_t sum = XXH64(payload, (size_t)h.payload_bytes, 0);
    if (sum != h.checksum) {
        tide_error_set(err, TIDE_INVALID,
                       "checkpoint %s is corrupted: its variables hash to %016" PRIx64
                       " (xxHash64), the header recorded %016" PRIx64,
                       path, sum, h.checksum);
        goto out;
    }
    m = tide__v1__read_variables_response__unpack(NULL, (size_t)h.payload_bytes, payload);
    if (!m) {
        tide_error_set(err, TIDE_INVALID,
                       "checkpoint %s: its checksum matches but its variables are not a valid "
                       "tide.v1.ReadVariablesResponse",
                       path);
        goto out;
    }
    enum tide_status st = TIDE_OK;
    if (m->step != h.step)
        st = tide_error_set(err, TIDE_INVALID,
                            "checkpoint %s: the header says step %" PRIu64 ", the variables step %" PRIu64,
                            path, h.step, m->step);
    for (size_t i = 0; st == TIDE_OK && i < m->n_variables; i++) {
        const Tide__V1__NamedTensor *nt = m->variables[i];
        struct tide_const_tensor value;
        char what[160];
        snprintf(what, sizeof(what), "checkpoint %s: variable \"%.64s\"", path,
                 nt->name ? nt->name : "");
        if (!nt->name || !nt->name[0])
            st = tide_error_set(err, TIDE_INVALID, "checkpoint %s: variable %zu has no name", path,
                                i);
        else
            st = tide_tensor_from_proto(nt->tensor, NULL, &value, what, err);
    }
    if (st != TIDE_OK) {
        tide__v1__read_variables_response__free_unpacked(m, NULL);
        m = NULL;
    }
out:
    free(data);
    return m;
}

enum tide_status tided_store_read(const char *path, uint8_t **data, size_t *len,
                                  struct tide_error *err)
{
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tide_error_set(err, errno == ENOENT ? TIDE_NOT_FOUND : TIDE_IO, "cannot open %s: %s",
                              path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return tide_error_set(err, TIDE_IO, "%s is not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) {
        close(fd);
        return tide_error_set(err, TIDE_NOMEM, "out of memory for %s (%zu bytes)", path, size);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            free(buf);
            close(fd);
            return tide_error_set(err, TIDE_IO, "cannot read %s: %s", path, strerror(e));
        }
        got += (size_t)n;
    }
    close(fd);
    *data = buf;
    *len = size;
    return TIDE_OK;
}

ProtobufCMessage *tided_store_read_message(const char *path,
                                           const ProtobufCMessageDescriptor *descriptor,
                                           struct tide_error *err)
{
    uint8_t *data;
    size_t len;
    if (tided_store_read(path, &data, &len, err) != TIDE_OK)
        return NULL;
    ProtobufCMessage *m = protobuf_c_message_unpack(descriptor, NULL, len, data);
    free(data);
    if (!m)
        tide_error_set(err, TIDE_INVALID, "%s is not a valid %s", path, descriptor->name);
    return m;
}

int tided_store_peek_step(const char *path, uint64_t *step)
{
    uint8_t buf[TIDED_CHECKPOINT_HEADER_BYTES];
    *step = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat sb;
    ssize_t n = fstat(fd, &sb) == 0 ? pread(fd, buf, sizeof(buf), 0) : -1;
    close(fd);
    struct checkpoint_header h;
    struct tide_error err = {0};
    if (n != (ssize_t)sizeof(buf) ||
        checkpoint_header_parse(path, buf, (uint64_t)sb.st_size, &h, &err) != TIDE_OK)
        return -1;
    *step = h.step;
    return 0;
}

static enum tide_status fsync_dir(const char *dir, struct tide_error *err)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return TIDE_OK; /* as write_atomically: a directory that cannot be opened is not fatal */
    enum tide_status st = TIDE_OK;
    if (fsync(dfd) != 0)
        st = tide_error_set(err, TIDE_IO, "cannot fsync the directory %s: %s", dir,
                            strerror(errno));
    close(dfd);
    return st;
}

enum tide_status tided_store_link(const char *dir, const char *target, const char *name,
                                  struct tide_error *err)
{
    char *from = tided_path_join(dir, target);
    char *path = tided_path_join(dir, name);
    size_t n = path ? strlen(path) + 5 : 0;
    char *tmp = path ? malloc(n) : NULL;
    enum tide_status st = TIDE_OK;
    if (!from || !path || !tmp) {
        st = tide_error_set(err, TIDE_NOMEM, "out of memory");
        goto out;
    }
    snprintf(tmp, n, "%s.tmp", path);
    unlink(tmp); /* a leftover of a crash would make link fail */
    if (link(from, tmp) != 0) {
        int e = errno;
        st = tide_error_set(err,
                            e == EPERM || e == ENOTSUP || e == EXDEV || e == EMLINK
                                ? TIDE_UNSUPPORTED
                                : TIDE_IO,
                            "cannot link %s to %s: %s", tmp, from, strerror(e));
        goto out;
    }
    if (rename(tmp, path) != 0) {
        st = tide_error_set(err, TIDE_IO, "cannot rename %s to %s: %s", tmp, path,
                            strerror(errno));
        unlink(tmp);
        goto out;
    }
    st = fsync_dir(dir, err);
out:
    free(tmp);
    free(path);
    free(from);
    return st;
}

/* The step of a checkpoint-<step>.pb name; false for any other name (a .tmp included). */
static bool checkpoint_step(const char *name, uint64_t *step)
{
    static const char prefix[] = "checkpoint-";
    size_t len = strlen(name);
    if (strncmp(name, prefix, sizeof(prefix) - 1) != 0 || len < sizeof(prefix) - 1 + 4 ||
        strcmp(name + len - 3, ".pb") != 0)
        return false;
    const char *digits = name + sizeof(prefix) - 1;
    size_t n = len - (sizeof(prefix) - 1) - 3;
    if (n == 0 || n > 19 || strspn(digits, "0123456789") != n)
        return false;
    *step = strtoull(digits, NULL, 10);
    return true;
}

static int by_step_descending(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

enum tide_status tided_store_prune_checkpoints(const char *dir, uint32_t keep,
                                               struct tide_error *err)
{
    if (keep == 0)
        keep = 2; /* the newest and the one before it */
    DIR *d = opendir(dir);
    if (!d)
        return tide_error_set(err, TIDE_IO, "cannot open the directory %s: %s", dir,
                              strerror(errno));
    uint64_t *steps = NULL;
    size_t n = 0, cap = 0;
    enum tide_status st = TIDE_OK;
    for (struct dirent *e = readdir(d); e && st == TIDE_OK; e = readdir(d)) {
        uint64_t step;
        if (!checkpoint_step(e->d_name, &step))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            uint64_t *grown = realloc(steps, cap * sizeof(*steps));
            if (!grown) {
                st = tide_error_set(err, TIDE_NOMEM, "out of memory");
                break;
            }
            steps = grown;
        }
        steps[n++] = step;
    }
    closedir(d);
    if (st == TIDE_OK && n > keep) {
        qsort(steps, n, sizeof(*steps), by_step_descending);
        for (size_t i = keep; i < n && st == TIDE_OK; i++) {
            char name[64];
            snprintf(name, sizeof(name), "checkpoint-%" PRIu64 ".pb", steps[i]);
            char *path = tided_path_join(dir, name);
            if (!path)
                st = tide_error_set(err, TIDE_NOMEM, "out of memory");
            else if (unlink(path) != 0 && errno != ENOENT)
                st = tide_error_set(err, TIDE_IO, "cannot remove %s: %s", path, strerror(errno));
            free(path);
        }
        if (st == TIDE_OK)
            st = fsync_dir(dir, err);
    }
    free(steps);
    return st;
}

/*
 * Unlinks path, adding to *bytes the size of a file whose last link this was
 * (checkpoint.pb is a hard link to a checkpoint-<step>.pb: its bytes count once).
 */
static enum tide_status remove_file(const char *path, uint64_t *bytes, struct tide_error *err)
{
    struct stat sb;
    bool counted = lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_nlink == 1;
    if (unlink(path) != 0) {
        if (errno == ENOENT)
            return TIDE_OK;
        return tide_error_set(err, TIDE_IO, "cannot remove %s: %s", path, strerror(errno));
    }
    if (counted)
        *bytes += (uint64_t)sb.st_size;
    return TIDE_OK;
}

enum tide_status tided_store_remove_dir(const char *dir, uint64_t *bytes, struct tide_error *err)
{
    static const char *const names[] = {"spec.pb", "info.pb", "checkpoint.pb", "spec.pb.tmp",
                                        "info.pb.tmp", "checkpoint.pb.tmp"};
    uint64_t freed = 0;
    enum tide_status st = TIDE_OK;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && st == TIDE_OK; i++) {
        char *path = tided_path_join(dir, names[i]);
        st = path ? remove_file(path, &freed, err)
                  : tide_error_set(err, TIDE_NOMEM, "out of memory");
        free(path);
    }
    /* Every checkpoint-<step>.pb, and the .tmp of one a crash left behind. */
    DIR *d = st == TIDE_OK ? opendir(dir) : NULL;
    for (struct dirent *e = d ? readdir(d) : NULL; e && st == TIDE_OK; e = readdir(d)) {
        if (strncmp(e->d_name, "checkpoint-", 11) != 0)
            continue;
        char *path = tided_path_join(dir, e->d_name);
        st = path ? remove_file(path, &freed, err)
                  : tide_error_set(err, TIDE_NOMEM, "out of memory");
        free(path);
    }
    if (d)
        closedir(d);
    if (st == TIDE_OK && rmdir(dir) != 0 && errno != ENOENT)
        st = tide_error_set(err, TIDE_IO, "cannot remove the directory %s: %s", dir,
                            strerror(errno));
    if (bytes)
        *bytes = freed;
    return st;
}

/* ============================================================================
 * Job records (main thread: the writes themselves go through the worker)
 * ========================================================================== */

/* Writes info.pb through the worker (in order with the job's other tasks). */
void tided__store_persist_job(struct tided_daemon *d, struct job *j)
{
    if (j->no_files)
        return;
    Tide__V1__JobInfo info;
    tided__job_info(j, &info, false);
    struct tided_task *t = tided_task_new(TIDED_TASK_PERSIST, j);
    if (t) {
        t->persist.dir = strdup(j->dir);
        t->persist.name = strdup("info.pb");
        size_t n = tide__v1__job_info__get_packed_size(&info);
        t->persist.data.data = malloc(n ? n : 1);
        if (t->persist.dir && t->persist.name && t->persist.data.data) {
            t->persist.data.len = tide__v1__job_info__pack(&info, t->persist.data.data);
            tided__task_submit(d, t);
            return;
        }
        tided_task_free(t);
    }
    TIDE_LOG_ERROR("job %s: out of memory saving its state", j->id);
}

/* Lists one job of a previous run from its info.pb. */
void tided__store_load_job(struct tided_jobs *jobs, const char *id)
{
    char *dir = tided_path_join(jobs->jobs_dir, id);
    char *info_path = dir ? tided_path_join(dir, "info.pb") : NULL;
    char *ck_path = dir ? tided_path_join(dir, "checkpoint.pb") : NULL;
    struct tide_error err = {0};
    Tide__V1__JobInfo *info = info_path ? (Tide__V1__JobInfo *)tided_store_read_message(
                                              info_path, &tide__v1__job_info__descriptor, &err)
                                        : NULL;
    if (!info) {
        TIDE_LOG_WARN("state: skipping %s: %s", dir ? dir : id, err.message);
        goto out;
    }
    struct job *j = tided__job_add(jobs, id);
    if (!j) {
        TIDE_LOG_ERROR("state: out of memory listing %s", id);
        goto out;
    }
    j->name = strdup(info->name ? info->name : "");
    j->owner = info->owner_uid;
    j->created_us = info->created_us;
    j->updated_us = info->updated_us;
    j->contact_us = tided_now_us(); /* its clients get an idle-timeout from the restart */
    j->budget = info->device_budget_bytes;
    j->device = info->device; /* where it ran; its files' tasks go to that device's thread */
    j->asked_device = -1;
    j->steps = j->dispatched = info->steps;
    j->last_loss = info->last_loss;
    j->high_water = info->device_high_water_bytes;
    j->host_bytes = info->host_bytes;
    j->h2d_total = info->h2d_bytes_total;
    j->d2h_total = info->d2h_bytes_total;
    snprintf(j->message, sizeof(j->message), "%s", info->message ? info->message : "");
    uint64_t step = 0;
    struct stat sb;
    if (ck_path && stat(ck_path, &sb) == 0 && tided_store_peek_step(ck_path, &step) == 0) {
        j->has_checkpoint = true;
        j->last_checkpoint_step = step;
    }
    j->state = info->state;
    if (!tided__job_terminal(j)) {
        /* The daemon died under it (kill -9, power): what is on disk is what is left. */
        j->state = STATE(FAILED);
        if (j->has_checkpoint)
            snprintf(j->message, sizeof(j->message),
                     "tided stopped while the job was %s; its last checkpoint is at step %" PRIu64
                     " (resume it with resume_from)",
                     tided__job_state_name(info->state), step);
        else
            snprintf(j->message, sizeof(j->message),
                     "tided stopped while the job was %s; it has no checkpoint",
                     tided__job_state_name(info->state));
    }
    TIDE_LOG_DEBUG("state: job %s (%s, uid %u, %s%s)", j->id, j->name, j->owner,
                   tided__job_state_name(j->state), j->has_checkpoint ? ", checkpoint" : "");
out:
    if (info)
        tide__v1__job_info__free_unpacked(info, NULL);
    free(ck_path);
    free(info_path);
    free(dir);
}

/* Deletes a job's directory through the worker; the job writes nothing more. */
void tided__store_remove_job(struct tided_daemon *d, struct job *j)
{
    struct tided_task *t = tided_task_new(TIDED_TASK_REMOVE, NULL);
    if (t && (t->remove.dirs = calloc(1, sizeof(char *))) && (t->remove.dirs[0] = strdup(j->dir))) {
        t->remove.n_dirs = 1;
        tided__task_submit(d, t);
        j->no_files = true;
    } else {
        tided_task_free(t);
    }
}

/*
 * Forgets the oldest ended jobs without a checkpoint beyond ENDED_JOBS_KEPT.
 * Called when a job is submitted, when no caller holds a job pointer.
 */
void tided__store_forget_old_jobs(struct tided_daemon *d)
{
    struct tided_jobs *jobs = d->jobs;
    size_t ended = 0;
    for (size_t i = 0; i < jobs->n_jobs; i++)
        ended += tided__job_terminal(jobs->jobs[i]) && !jobs->jobs[i]->has_checkpoint;
    size_t keep = 0;
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        struct job *j = jobs->jobs[i];
        if (ended > ENDED_JOBS_KEPT && tided__job_terminal(j) && !j->has_checkpoint &&
            j->tasks == 0 && !j->removing) {
            TIDE_LOG_DEBUG("job %s: forgotten (%zu ended jobs are kept)", j->id,
                           (size_t)ENDED_JOBS_KEPT);
            if (!j->no_files)
                tided__store_remove_job(d, j);
            tided__job_free(j);
            ended--;
            continue;
        }
        jobs->jobs[keep++] = j;
    }
    jobs->n_jobs = keep;
}
