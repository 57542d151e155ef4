/* SPDX-License-Identifier: MIT */
/*
 * config.c: the option table and everything it drives — the configuration
 * file parser, the flags, the defaults, --help and SIGHUP reload.
 *
 * One row per setting, as Redis's config.c has it: adding a setting is one
 * row and one field of struct tided_config. A value is always parsed by its
 * row's type, whether it comes from the default text, the file or a flag, so
 * the three cannot disagree.
 */
#include "daemon/config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "common/log.h"
#include "runtime/profile.h"
#include "daemon/devices.h"

#define TIDED_DEFAULT_CONFIG_FILE "/etc/tide/tided.conf"
#define TIDED_VERSION_STRING "0.1.0"

/* ============================================================================
 * The table
 * ========================================================================== */

enum option_type {
    OPTION_STRING, /* any text ("" allowed) */
    OPTION_PATH,   /* a non-empty path */
    OPTION_CHOICE, /* one of choices[] */
    OPTION_BYTES,  /* bytes with an optional K/M/G/T suffix, within [min, max] */
    OPTION_UINT,   /* a decimal integer within [min, max] */
    OPTION_FLAG,   /* a flag without a value (command line only) */
    OPTION_LISTEN, /* "" (off) or HOST:PORT with an IP literal or localhost, port in [min, max] */
};

enum option_flags {
    OPTION_RELOAD = 1u << 0,    /* re-read on SIGHUP */
    OPTION_FLAG_ONLY = 1u << 1, /* command line only (not a file key) */
};

struct option {
    const char *name;  /* the file key and the flag (--name) */
    enum option_type type;
    const char *arg;   /* the value's name in --help */
    const char *def;   /* the default, as text parsed by the type; NULL: none */
    uint64_t min, max; /* bounds of BYTES and UINT */
    const char *const *choices;
    size_t offset;     /* of the field in struct tided_config */
    unsigned flags;
    const char *help;
};

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define TIB (UINT64_C(1) << 40)
#define DAY (UINT64_C(86400))
#define FIELD(f) offsetof(struct tided_config, f)

static const char *const backend_choices[] = {"cpu", "cuda", "auto", NULL};
static const char *const level_choices[] = {"error", "warn", "info", "debug", NULL};

static const struct option options[] = {
    {"config", OPTION_PATH, "FILE", NULL, 0, 0, NULL, FIELD(config_file), OPTION_FLAG_ONLY,
     "Read settings from FILE. Without this flag tided reads " TIDED_DEFAULT_CONFIG_FILE
     " when it exists; a FILE named here must exist. Flags override the file."},
    {"socket", OPTION_PATH, "PATH", "/run/tide/tided.sock", 0, 0, NULL, FIELD(socket), 0,
     "The Unix socket clients connect to. tided creates it with mode 0660 (a stale socket is "
     "removed; a live one, of another tided, is an error) and identifies each client by the uid "
     "the kernel reports for the connection (SO_PEERCRED)."},
    {"socket-group", OPTION_STRING, "GROUP", "", 0, 0, NULL, FIELD(socket_group), 0,
     "Give the socket to GROUP, so that its members (the GPU users) can connect. Empty: the "
     "daemon's own group."},
    {"state-dir", OPTION_PATH, "DIR", "/var/lib/tide", 0, 0, NULL, FIELD(state_dir), 0,
     "Where jobs are kept: DIR/jobs/ID/ holds spec.pb (the submitted JobSpec), info.pb (the "
     "job's last known state) and checkpoint.pb (its variables). Jobs found here at start are "
     "listed as finished, and their checkpoints can be resumed from."},
    {"backend", OPTION_CHOICE, "NAME", "auto", 0, 0, backend_choices, FIELD(backend), 0,
     "The devices: cpu (--cpu-devices emulated devices of --device-memory bytes each), cuda "
     "(every GPU, or those --devices lists), or auto (cuda when this build has it and a GPU is "
     "present, else cpu)."},
    {"devices", OPTION_STRING, "LIST", "", 0, 0, NULL, FIELD(devices), 0,
     "The GPUs tided serves, by CUDA device number (\"0,2\"; at most 64). Empty: every GPU "
     "cudaGetDeviceCount reports. Each job runs on one of them, the one whose free memory fits "
     "its budget most tightly, or the one it asks for (tidectl train --device N). Ignored by "
     "cpu."},
    {"cpu-devices", OPTION_UINT, "N", "1", 1, 64, NULL, FIELD(cpu_devices), 0,
     "How many devices the cpu backend emulates, each of --device-memory bytes with its own "
     "streams and its own step thread, so that jobs on different devices step in parallel."},
    {"device-memory", OPTION_BYTES, "BYTES", "4G", 16 * MIB, 64 * TIB, NULL, FIELD(device_memory),
     0,
     "Size of each of the CPU backend's emulated devices. Ignored by cuda, which offers the "
     "GPU's memory."},
    {"default-budget", OPTION_BYTES, "BYTES", "1G", 1 * MIB, 64 * TIB, NULL, FIELD(default_budget),
     0, "Device memory budget of a job whose MemoryPolicy.device_budget_bytes is 0."},
    {"max-budget", OPTION_BYTES, "BYTES", "0", 0, 64 * TIB, NULL, FIELD(max_budget), 0,
     "The largest budget one job may ask for; 0 means the whole of the largest device. Jobs "
     "asking for more are refused with RESOURCE_EXHAUSTED, as are jobs whose budget does not fit "
     "in what any device has left (the sum of a device's admitted budgets never exceeds it)."},
    {"host-pool", OPTION_BYTES, "BYTES", "0", 0, 64 * TIB, NULL, FIELD(host_pool), 0,
     "Host memory the plans of all live jobs may use together (homes of variables, swap space); "
     "0 means no limit."},
    {"host-budget", OPTION_BYTES, "BYTES", "0", 0, 64 * TIB, NULL, FIELD(host_budget), 0,
     "Host memory one job's plan may use (its host-homed variables, swap slots and staged "
     "batches); a plan that needs more is refused, naming both numbers. 0: 80 % of this "
     "machine's RAM."},
    {"idle-timeout", OPTION_UINT, "SECONDS", "600", 0, 30 * DAY, NULL, FIELD(idle_timeout), 0,
     "Park a job that has been READY (trained by no stream) for this long: it is checkpointed, "
     "its device memory is released and its budget given back, and its state is PARKED. Its "
     "next Train stream re-admits it (or is refused with RESOURCE_EXHAUSTED while its budget "
     "does not fit), recompiles it, restores its checkpoint and continues where it stopped, "
     "bit for bit. 0: never park."},
    {"retain-ended", OPTION_UINT, "SECONDS", "604800", 0, 3650 * DAY, NULL, FIELD(retain_ended), 0,
     "Delete an ended job (DONE, FAILED or CANCELLED) this long after it ended: its files under "
     "--state-dir and its entry in the job list, as `tidectl rm` does (604800 s: 7 days). 0: keep "
     "ended jobs until they are removed by hand."},
    {"quota-uid-bytes", OPTION_BYTES, "BYTES", "0", 0, 64 * TIB, NULL, FIELD(quota_uid_bytes), 0,
     "The most device budget one user's jobs may hold together, counting every job not ended "
     "(queued, compiling, ready, running, parked). A Submit past it is refused with "
     "RESOURCE_EXHAUSTED naming the quota, the uid and the numbers. 0: no limit."},
    {"quota-uid-jobs", OPTION_UINT, "N", "0", 0, UINT32_MAX, NULL, FIELD(quota_uid_jobs), 0,
     "The most jobs not ended one user may have; 0: no limit."},
    {"quota-groups", OPTION_STRING, "LIST", "", 0, 0, NULL, FIELD(quota_groups), 0,
     "Quotas shared by the members (primary or supplementary) of a group: a comma-separated list "
     "of GROUP:BYTES:JOBS (\"students:24G:4, interns:8G:1\"), each limiting the device budget "
     "and the number of jobs not ended of all the group's members together; 0 for BYTES or "
     "JOBS means no limit on it. A Submit past one is refused as with quota-uid-bytes. Empty: "
     "none."},
    {"fair-share-window", OPTION_UINT, "SECONDS", "3600", 1, 30 * DAY, NULL,
     FIELD(fair_share_window), 0,
     "Queued jobs of the same priority are admitted first for the user whose jobs held the "
     "fewest device-byte-seconds recently: each user's usage decays with this time constant."},
    {"threads", OPTION_UINT, "N", "0", 0, 1024, NULL, FIELD(threads), 0,
     "Threads of the CPU backend's kernels; 0 means one per core."},
    {"max-message", OPTION_BYTES, "BYTES", "256M", 1 * MIB, 2 * GIB - 1, NULL, FIELD(max_message),
     0,
     "The largest gRPC message tided accepts (a graph, a batch); larger ones are refused by gRPC "
     "with RESOURCE_EXHAUSTED. Variable values of any size still get in: libtide streams big "
     "ones in chunks of under 1 MiB (Jobs.WriteVariables) instead of sending them in the "
     "Submit."},
    {"max-graph-nodes", OPTION_UINT, "N", "1000000", 1, UINT32_MAX, NULL, FIELD(max_graph_nodes), 0,
     "The most nodes a submitted graph may have."},
    {"max-tensor-bytes", OPTION_BYTES, "BYTES", "16G", 1 * KIB, 64 * TIB, NULL,
     FIELD(max_tensor_bytes), 0, "The largest tensor a submitted graph may declare."},
    {"admin-group", OPTION_STRING, "GROUP", "", 0, 0, NULL, FIELD(admin_group), 0,
     "Members of GROUP (primary or supplementary) may see, watch, read, checkpoint and cancel "
     "every user's jobs, and list them all. root always may. Empty: root only."},
    {"listen", OPTION_STRING, "HOST:PORT", "", 0, 0, NULL, FIELD(listen), 0,
     "Also serve TCP on HOST:PORT, with TLS (--tls-cert, --tls-key) and bearer tokens (--tokens). "
     "Empty: Unix socket only."},
    {"tls-cert", OPTION_STRING, "FILE", "", 0, 0, NULL, FIELD(tls_cert), 0,
     "PEM certificate chain for --listen, and for --metrics-listen when --tls-key is set too."},
    {"tls-key", OPTION_STRING, "FILE", "", 0, 0, NULL, FIELD(tls_key), 0,
     "PEM private key for --listen, and for --metrics-listen when --tls-cert is set too."},
    {"tokens", OPTION_STRING, "FILE", "", 0, 0, NULL, FIELD(tokens), OPTION_RELOAD,
     "Bearer tokens of TCP clients and of the HTTP listener (--metrics-listen), one per line: "
     "\"TOKEN submit|monitor [UID]\" (# starts a comment). submit may do what a local user may, "
     "as UID (default: the daemon's uid); monitor may only get, list and watch every job and read "
     "the daemon's status and metrics. Re-read on SIGHUP."},
    {"metrics-listen", OPTION_LISTEN, "HOST:PORT", "", 1, 65535, NULL, FIELD(metrics_listen), 0,
     "Serve HTTP on HOST:PORT (e.g. 127.0.0.1:9464): Prometheus metrics at /metrics, a live "
     "dashboard at /, and its JSON at /api/status and /api/jobs. HTTPS when --tls-cert and "
     "--tls-key are set. An address other than loopback is refused unless --tls-cert, --tls-key "
     "and --tokens are set. With --tokens, /metrics and /api/ want \"Authorization: Bearer "
     "TOKEN\": a monitor token sees every job, a submit token the jobs of its UID (the page at / "
     "holds no data and takes the token from its address: /#token=TOKEN). Without --tokens "
     "every job is shown to whoever can connect, which only loopback allows. Empty: off."},
    {"log-level", OPTION_CHOICE, "LEVEL", "info", 0, 0, level_choices, FIELD(log_level),
     OPTION_RELOAD, "error, warn, info or debug. Re-read on SIGHUP."},
    {"stall-timeout", OPTION_UINT, "SECONDS", "600", 10, 86400, NULL, FIELD(stall_timeout), 0,
     "Under a systemd watchdog (WatchdogSec=), stop the WATCHDOG=1 pings when one device task (a "
     "step, a compilation) has run longer than this, so that systemd restarts a hung daemon."},
    {"foreground", OPTION_FLAG, NULL, NULL, 0, 0, NULL, FIELD(foreground), OPTION_FLAG_ONLY,
     "Run in the foreground. This is the only mode: tided never forks, logs to stderr and tells "
     "systemd when it is ready (Type=notify)."},
};

#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

/* ============================================================================
 * Values
 * ========================================================================== */

int tided_parse_bytes(const char *text, uint64_t *bytes)
{
    const char *p = text;
    if (!isdigit((unsigned char)*p))
        return -1;
    uint64_t value = 0;
    for (; isdigit((unsigned char)*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (value > (UINT64_MAX - d) / 10)
            return -1;
        value = value * 10 + d;
    }
    uint64_t unit = 1;
    switch (toupper((unsigned char)*p)) {
    case 'K': unit = KIB; p++; break;
    case 'M': unit = MIB; p++; break;
    case 'G': unit = GIB; p++; break;
    case 'T': unit = TIB; p++; break;
    default: break;
    }
    /* Accept "G", "GB" and "GiB" alike: all binary. */
    if (unit != 1 && (p[0] == 'i' || p[0] == 'I') && (p[1] == 'B' || p[1] == 'b'))
        p += 2;
    else if (*p == 'B' || *p == 'b')
        p++;
    if (*p != '\0')
        return -1;
    if (value > UINT64_MAX / unit)
        return -1;
    *bytes = value * unit;
    return 0;
}

int tided_parse_listen_address(const char *text, struct tided_listen_address *out)
{
    memset(out, 0, sizeof(*out));
    const char *colon = strrchr(text, ':');
    if (!colon || colon == text || strlen(colon + 1) > 5)
        return -1;
    char host[64];
    size_t host_len = (size_t)(colon - text);
    bool bracketed = text[0] == '[';
    if (bracketed) {
        if (host_len < 3 || text[host_len - 1] != ']')
            return -1;
        text++;
        host_len -= 2;
    }
    if (host_len >= sizeof(host))
        return -1;
    memcpy(host, text, host_len);
    host[host_len] = '\0';
    const char *p = colon + 1;
    unsigned port = 0;
    if (!isdigit((unsigned char)*p))
        return -1;
    for (; isdigit((unsigned char)*p); p++)
        port = port * 10 + (unsigned)(*p - '0');
    if (*p != '\0' || port > 65535)
        return -1;
    out->port = port;
    if (bracketed) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&out->address;
        if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
            return -1;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        out->length = sizeof(*a);
        out->loopback = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) ||
                        (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && a->sin6_addr.s6_addr[12] == 127);
        return 0;
    }
    struct sockaddr_in *a = (struct sockaddr_in *)&out->address;
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof(host), "127.0.0.1");
    if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
        return -1;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    out->length = sizeof(*a);
    out->loopback = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    return 0;
}

const char *tided_format_bytes(uint64_t bytes, char *buf, size_t size)
{
    static const char *const units[] = {"TiB", "GiB", "MiB", "KiB"};
    static const uint64_t scale[] = {TIB, GIB, MIB, KIB};
    for (int i = 0; i < 4; i++) {
        if (bytes >= scale[i] && bytes % scale[i] == 0) {
            snprintf(buf, size, "%" PRIu64 " %s", bytes / scale[i], units[i]);
            return buf;
        }
        if (bytes >= scale[i]) {
            snprintf(buf, size, "%.1f %s", (double)bytes / (double)scale[i], units[i]);
            return buf;
        }
    }
    snprintf(buf, size, "%" PRIu64 " bytes", bytes);
    return buf;
}

/* The allowed values of a row, for error messages: "bytes between 1M and 1T ...". */
static void describe_allowed(const struct option *o, char *buf, size_t size)
{
    char lo[32], hi[32];
    switch (o->type) {
    case OPTION_STRING:
        snprintf(buf, size, "any text");
        break;
    case OPTION_PATH:
        snprintf(buf, size, "a non-empty path");
        break;
    case OPTION_CHOICE: {
        size_t n = (size_t)snprintf(buf, size, "one of");
        for (const char *const *c = o->choices; *c && n < size; c++)
            n += (size_t)snprintf(buf + n, size - n, "%s %s", c == o->choices ? "" : ",", *c);
        break;
    }
    case OPTION_BYTES:
        snprintf(buf, size,
                 "bytes between %s and %s, with an optional K, M, G or T suffix (binary)",
                 tided_format_bytes(o->min, lo, sizeof(lo)),
                 tided_format_bytes(o->max, hi, sizeof(hi)));
        break;
    case OPTION_UINT:
        snprintf(buf, size, "an integer between %" PRIu64 " and %" PRIu64, o->min, o->max);
        break;
    case OPTION_FLAG:
        snprintf(buf, size, "no value");
        break;
    case OPTION_LISTEN:
        snprintf(buf, size,
                 "HOST:PORT with HOST an IPv4 address, [IPv6 address] or localhost and PORT "
                 "between %" PRIu64 " and %" PRIu64 ", or \"\" (off)",
                 o->min, o->max);
        break;
    }
}

/* Where a value came from, for error messages: "FILE:LINE: " or "--flag: ". */
struct origin {
    const char *file; /* NULL: the command line */
    int line;
};

static enum tided_config_result fail(char *error, size_t size, const struct origin *from,
                                     const char *format, ...) __attribute__((format(printf, 4, 5)));

static enum tided_config_result fail(char *error, size_t size, const struct origin *from,
                                     const char *format, ...)
{
    size_t n = 0;
    if (from && from->file)
        n = (size_t)snprintf(error, size, "%s:%d: ", from->file, from->line);
    if (n >= size)
        n = size - 1;
    va_list args;
    va_start(args, format);
    vsnprintf(error + n, size - n, format, args);
    va_end(args);
    return TIDED_CONFIG_ERROR;
}

/* Parses text by o's type into config; on a bad value names the key and what is allowed. */
static enum tided_config_result set_value(const struct option *o, const char *text,
                                          struct tided_config *config, const struct origin *from,
                                          char *error, size_t size)
{
    char allowed[256];
    char *field = (char *)config + o->offset;
    const char *how = from && from->file ? "" : "--";
    switch (o->type) {
    case OPTION_PATH:
        if (text[0] == '\0')
            break;
        /* fall through */
    case OPTION_STRING: {
        char *copy = strdup(text);
        if (!copy)
            return fail(error, size, from, "out of memory");
        free(*(char **)field);
        *(char **)field = copy;
        return TIDED_CONFIG_OK;
    }
    case OPTION_CHOICE:
        for (const char *const *c = o->choices; *c; c++) {
            if (strcmp(*c, text) == 0) {
                free(*(char **)field);
                *(char **)field = strdup(text);
                return *(char **)field ? TIDED_CONFIG_OK
                                       : fail(error, size, from, "out of memory");
            }
        }
        break;
    case OPTION_BYTES: {
        uint64_t v;
        if (tided_parse_bytes(text, &v) == 0 && v >= o->min && v <= o->max) {
            *(uint64_t *)field = v;
            return TIDED_CONFIG_OK;
        }
        break;
    }
    case OPTION_UINT: {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(text, &end, 10);
        if (isdigit((unsigned char)text[0]) && end && *end == '\0' && errno == 0 && v >= o->min &&
            v <= o->max) {
            *(uint64_t *)field = v;
            return TIDED_CONFIG_OK;
        }
        break;
    }
    case OPTION_FLAG:
        *(bool *)field = true;
        return TIDED_CONFIG_OK;
    case OPTION_LISTEN: {
        struct tided_listen_address address;
        if (text[0] && (tided_parse_listen_address(text, &address) != 0 ||
                        address.port < o->min || address.port > o->max))
            break;
        char *copy = strdup(text);
        if (!copy)
            return fail(error, size, from, "out of memory");
        free(*(char **)field);
        *(char **)field = copy;
        return TIDED_CONFIG_OK;
    }
    }
    describe_allowed(o, allowed, sizeof(allowed));
    return fail(error, size, from, "%s%s: want %s, got \"%s\"", how, o->name, allowed, text);
}

static const struct option *find_option(const char *name, size_t len)
{
    for (size_t i = 0; i < N_OPTIONS; i++) {
        if (strlen(options[i].name) == len && strncmp(options[i].name, name, len) == 0)
            return &options[i];
    }
    return NULL;
}

void tided_config_release(struct tided_config *config)
{
    if (!config)
        return;
    for (size_t i = 0; i < N_OPTIONS; i++) {
        if (options[i].type == OPTION_STRING || options[i].type == OPTION_PATH ||
            options[i].type == OPTION_CHOICE || options[i].type == OPTION_LISTEN) {
            char **field = (char **)((char *)config + options[i].offset);
            free(*field);
            *field = NULL;
        }
    }
}

static enum tided_config_result set_defaults(struct tided_config *config, char *error, size_t size)
{
    memset(config, 0, sizeof(*config));
    config->foreground = true;
    for (size_t i = 0; i < N_OPTIONS; i++) {
        if (!options[i].def)
            continue;
        enum tided_config_result r =
            set_value(&options[i], options[i].def, config, NULL, error, size);
        if (r != TIDED_CONFIG_OK)
            return r; /* a bad default is our bug; it shows in the first run */
    }
    return TIDED_CONFIG_OK;
}

/* ============================================================================
 * The file
 * ========================================================================== */

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

static enum tided_config_result parse_file(const char *path, struct tided_config *config,
                                           char *error, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return fail(error, size, NULL, "%s: cannot open the configuration file: %s", path,
                    strerror(errno));
    char line[4096];
    struct origin from = {path, 0};
    enum tided_config_result r = TIDED_CONFIG_OK;
    while (r == TIDED_CONFIG_OK && fgets(line, sizeof(line), f)) {
        from.line++;
        if (!strchr(line, '\n') && !feof(f)) {
            r = fail(error, size, &from, "line longer than %zu bytes", sizeof(line) - 2);
            break;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *text = trim(line);
        if (*text == '\0')
            continue;
        char *eq = strchr(text, '=');
        if (!eq) {
            r = fail(error, size, &from, "want \"key = value\", got \"%s\"", text);
            break;
        }
        *eq = '\0';
        char *key = trim(text);
        char *value = trim(eq + 1);
        /* Quotes are optional around values ("" gives an empty string). */
        size_t vlen = strlen(value);
        if (vlen >= 2 && value[0] == '"' && value[vlen - 1] == '"') {
            value[vlen - 1] = '\0';
            value++;
        }
        const struct option *o = find_option(key, strlen(key));
        if (!o || (o->flags & OPTION_FLAG_ONLY)) {
            r = fail(error, size, &from, "unknown key \"%s\" (tided --help lists the keys)", key);
            break;
        }
        r = set_value(o, value, config, &from, error, size);
    }
    if (r == TIDED_CONFIG_OK && ferror(f))
        r = fail(error, size, NULL, "%s: read error: %s", path, strerror(errno));
    fclose(f);
    return r;
}

/* ============================================================================
 * Quota groups
 * ========================================================================== */

/* Parses one "GROUP:BYTES:JOBS" entry (trimmed, without commas) into g. */
static int parse_quota_group(char *entry, struct tided_quota_group *g, char *error, size_t size)
{
    char *bytes = strchr(entry, ':');
    char *jobs = bytes ? strchr(bytes + 1, ':') : NULL;
    if (!bytes || !jobs || strchr(jobs + 1, ':')) {
        snprintf(error, size, "quota-groups: entry \"%s\": want GROUP:BYTES:JOBS", entry);
        return -1;
    }
    *bytes++ = '\0';
    *jobs++ = '\0';
    char *name = trim(entry);
    bytes = trim(bytes);
    jobs = trim(jobs);
    if (!name[0] || strlen(name) >= sizeof(g->name)) {
        snprintf(error, size, "quota-groups: group name \"%s\": want 1 to %zu bytes", name,
                 sizeof(g->name) - 1);
        return -1;
    }
    snprintf(g->name, sizeof(g->name), "%s", name);
    if (tided_parse_bytes(bytes, &g->bytes) != 0) {
        snprintf(error, size,
                 "quota-groups: group %s: bytes \"%s\": want bytes with an optional K, M, G or "
                 "T suffix",
                 name, bytes);
        return -1;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long n = isdigit((unsigned char)jobs[0]) ? strtoull(jobs, &end, 10) : 0;
    if (!end || *end || errno || n > UINT32_MAX) {
        snprintf(error, size,
                 "quota-groups: group %s: jobs \"%s\": want a whole number from 0 to %" PRIu32,
                 name, jobs, UINT32_MAX);
        return -1;
    }
    g->jobs = (uint32_t)n;
    return 0;
}

int tided_quota_groups_parse(const char *text, struct tided_quota_group **groups, size_t *n,
                             char *error, size_t size)
{
    *groups = NULL;
    *n = 0;
    char *copy = strdup(text ? text : "");
    size_t cap = 1;
    for (const char *p = copy ? copy : ""; *p; p++)
        cap += *p == ',';
    struct tided_quota_group *out = calloc(cap, sizeof(*out));
    if (!copy || !out) {
        free(copy);
        free(out);
        snprintf(error, size, "quota-groups: out of memory");
        return -1;
    }
    size_t count = 0;
    char *save = NULL;
    for (char *entry = strtok_r(copy, ",", &save); entry; entry = strtok_r(NULL, ",", &save)) {
        entry = trim(entry);
        if (!entry[0])
            continue;
        if (parse_quota_group(entry, &out[count], error, size) != 0)
            goto fail;
        for (size_t i = 0; i < count; i++) {
            if (strcmp(out[i].name, out[count].name) == 0) {
                snprintf(error, size, "quota-groups: group %s is listed twice", out[i].name);
                goto fail;
            }
        }
        count++;
    }
    free(copy);
    *groups = out;
    *n = count;
    return 0;
fail:
    free(copy);
    free(out);
    return -1;
}

/* ============================================================================
 * Flags, checks and loading
 * ========================================================================== */

/*
 * Walks argv. With apply false it only finds --config, --help and --version
 * (the file must be read before the flags override it); with apply true it
 * sets every other flag.
 */
static enum tided_config_result parse_flags(int argc, char **argv, bool apply,
                                            struct tided_config *config, const char **config_file,
                                            char *error, size_t size)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            if (!apply)
                tided_config_usage(stdout);
            return TIDED_CONFIG_EXIT;
        }
        if (strcmp(arg, "--version") == 0) {
            if (!apply)
                printf("tided %s\n", TIDED_VERSION_STRING);
            return TIDED_CONFIG_EXIT;
        }
        if (strncmp(arg, "--", 2) != 0)
            return fail(error, size, NULL, "unexpected argument \"%s\" (tided --help lists the "
                                           "options)", arg);
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const struct option *o = find_option(name, len);
        if (!o)
            return fail(error, size, NULL, "unknown option \"%.*s\" (tided --help lists the "
                                           "options)", (int)(len + 2), arg);
        const char *value = NULL;
        if (o->type == OPTION_FLAG) {
            if (eq)
                return fail(error, size, NULL, "--%s takes no value", o->name);
        } else if (eq) {
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            return fail(error, size, NULL, "--%s needs a value (%s)", o->name,
                        o->arg ? o->arg : "VALUE");
        }
        if (strcmp(o->name, "config") == 0) {
            if (!apply)
                *config_file = value;
            continue;
        }
        if (apply) {
            enum tided_config_result r = set_value(o, value, config, NULL, error, size);
            if (r != TIDED_CONFIG_OK)
                return r;
        }
    }
    return TIDED_CONFIG_OK;
}

static enum tided_config_result check(struct tided_config *config, char *error, size_t size)
{
    char a[32], b[32];
    if (config->max_budget && config->default_budget > config->max_budget)
        return fail(error, size, NULL, "default-budget (%s) is larger than max-budget (%s)",
                    tided_format_bytes(config->default_budget, a, sizeof(a)),
                    tided_format_bytes(config->max_budget, b, sizeof(b)));
    if (config->listen[0]) {
        if (!config->tls_cert[0] || !config->tls_key[0])
            return fail(error, size, NULL, "listen = %s needs tls-cert and tls-key: tided serves "
                                           "TCP only with TLS", config->listen);
        if (!config->tokens[0])
            return fail(error, size, NULL, "listen = %s needs tokens: TCP clients authenticate "
                                           "with bearer tokens", config->listen);
    }
    if (config->metrics_listen[0]) {
        struct tided_listen_address address;
        tided_parse_listen_address(config->metrics_listen, &address); /* set_value checked it */
        bool tls = config->tls_cert[0] && config->tls_key[0];
        if (!address.loopback && (!tls || !config->tokens[0]))
            return fail(error, size, NULL, "metrics-listen = %s is not a loopback address: it "
                                           "needs tls-cert, tls-key and tokens, so that only "
                                           "token holders see the jobs, over TLS",
                        config->metrics_listen);
        if (!tls && (config->tls_cert[0] || config->tls_key[0]))
            return fail(error, size, NULL, "metrics-listen = %s: %s is set without %s; HTTPS "
                                           "needs both",
                        config->metrics_listen, config->tls_cert[0] ? "tls-cert" : "tls-key",
                        config->tls_cert[0] ? "tls-key" : "tls-cert");
    }
    struct tided_quota_group *groups = NULL;
    size_t n_groups = 0;
    if (tided_quota_groups_parse(config->quota_groups, &groups, &n_groups, error, size) != 0)
        return TIDED_CONFIG_ERROR;
    free(groups);
    int ordinals[TIDED_DEVICES_MAX];
    uint32_t n_devices;
    char why[160];
    if (tided_devices_parse_list(config->devices, ordinals, &n_devices, why, sizeof(why)) != 0)
        return fail(error, size, NULL, "devices = %s: %s", config->devices, why);
    if (strlen(config->socket) >= 108)
        return fail(error, size, NULL, "socket: the path \"%s\" is longer than the 107 bytes a "
                                       "Unix socket address holds", config->socket);
    return TIDED_CONFIG_OK;
}

enum tided_config_result tided_config_load(int argc, char **argv, struct tided_config *config,
                                           char *error, size_t error_size)
{
    const char *file = NULL;
    enum tided_config_result r = parse_flags(argc, argv, false, NULL, &file, error, error_size);
    if (r != TIDED_CONFIG_OK)
        return r;
    r = set_defaults(config, error, error_size);
    if (r == TIDED_CONFIG_OK) {
        bool explicit_file = file != NULL;
        if (!file)
            file = TIDED_DEFAULT_CONFIG_FILE;
        FILE *probe = explicit_file ? NULL : fopen(file, "r");
        if (explicit_file || probe) {
            if (probe)
                fclose(probe);
            config->config_file = strdup(file);
            r = config->config_file ? parse_file(file, config, error, error_size)
                                    : fail(error, error_size, NULL, "out of memory");
        }
    }
    if (r == TIDED_CONFIG_OK)
        r = parse_flags(argc, argv, true, config, NULL, error, error_size);
    if (r == TIDED_CONFIG_OK)
        r = check(config, error, error_size);
    if (r != TIDED_CONFIG_OK)
        tided_config_release(config);
    return r;
}

enum tided_config_result tided_config_reload(int argc, char **argv, struct tided_config *config,
                                             char *error, size_t error_size)
{
    struct tided_config fresh;
    enum tided_config_result r = tided_config_load(argc, argv, &fresh, error, error_size);
    if (r != TIDED_CONFIG_OK)
        return r;
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const struct option *o = &options[i];
        void *old = (char *)config + o->offset;
        void *new = (char *)&fresh + o->offset;
        bool changed;
        switch (o->type) {
        case OPTION_BYTES:
        case OPTION_UINT:
            changed = *(uint64_t *)old != *(uint64_t *)new;
            break;
        case OPTION_FLAG:
            changed = *(bool *)old != *(bool *)new;
            break;
        default: {
            const char *s = *(char **)old, *t = *(char **)new;
            changed = (s == NULL) != (t == NULL) || (s && strcmp(s, t) != 0);
            break;
        }
        }
        if (!changed)
            continue;
        if (!(o->flags & OPTION_RELOAD)) {
            TIDE_LOG_WARN("reload: %s changed; restart tided to apply it", o->name);
            continue;
        }
        /* Reloadable rows are all strings: swap them. */
        char *tmp = *(char **)old;
        *(char **)old = *(char **)new;
        *(char **)new = tmp;
        TIDE_LOG_INFO("reload: %s is now \"%s\"", o->name, *(char **)old);
    }
    tided_config_release(&fresh);
    return TIDED_CONFIG_OK;
}

/* ============================================================================
 * --help
 * ========================================================================== */

/* Writes text wrapped at 78 columns, each line indented by indent spaces. */
static void wrap(FILE *out, int indent, const char *text)
{
    const int width = 78;
    int col = 0;
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        const char *word = p;
        while (*p && *p != ' ')
            p++;
        int len = (int)(p - word);
        if (len == 0)
            break;
        if (col > 0 && col + 1 + len > width) {
            fputc('\n', out);
            col = 0;
        }
        if (col == 0) {
            fprintf(out, "%*s", indent, "");
            col = indent;
        } else {
            fputc(' ', out);
            col++;
        }
        fwrite(word, 1, (size_t)len, out);
        col += len;
    }
    if (col > 0)
        fputc('\n', out);
}

void tided_config_usage(FILE *out)
{
    fprintf(out, "NAME\n");
    wrap(out, 7, "tided - the tide training daemon: owns a GPU and trains the graphs users "
                 "submit over gRPC");
    fprintf(out, "\nSYNOPSIS\n");
    wrap(out, 7, "tided [--config FILE] [--socket PATH] [--state-dir DIR] "
                 "[--backend cpu|cuda|auto] [--OPTION VALUE]...");
    wrap(out, 7, "tided --help | --version");
    fprintf(out, "\nDESCRIPTION\n");
    wrap(out, 7,
         "tided serves the tide.v1.Jobs, tide.v1.Daemon and grpc.health.v1.Health services on a "
         "Unix socket. Users submit jobs (a graph, what to minimise, a memory policy); tided "
         "compiles each into a plan that fits the job's device-memory budget and runs one step "
         "per batch the client streams in, interleaving the jobs step by step. A job belongs to "
         "the uid that submitted it; only that user and the admin group may see or control it.");
    fputc('\n', out);
    wrap(out, 7,
         "tided runs in the foreground, logs to stderr and notifies systemd (Type=notify: READY, "
         "STATUS, WATCHDOG). It needs no root privileges of its own.");
    fprintf(out, "\nOPTIONS\n");
    wrap(out, 7,
         "Every option except --config and --foreground can also be set in the configuration "
         "file as \"name = value\" (one per line, # starts a comment, quotes are optional). "
         "Flags override the file; both accept --name VALUE and --name=VALUE. Sizes take K, M, G "
         "or T suffixes (binary).");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const struct option *o = &options[i];
        char allowed[256], line[512];
        fputc('\n', out);
        if (o->arg)
            fprintf(out, "       --%s %s\n", o->name, o->arg);
        else
            fprintf(out, "       --%s\n", o->name);
        wrap(out, 11, o->help);
        if (o->type == OPTION_BYTES || o->type == OPTION_UINT || o->type == OPTION_CHOICE ||
            o->type == OPTION_LISTEN) {
            describe_allowed(o, allowed, sizeof(allowed));
            snprintf(line, sizeof(line), "Allowed: %s.", allowed);
            wrap(out, 11, line);
        }
        if (o->def) {
            snprintf(line, sizeof(line), "Default: %s%s%s.", o->def[0] ? "" : "\"",
                     o->def, o->def[0] ? "" : "\" (none)");
            wrap(out, 11, line);
        }
    }
    fprintf(out, "\n       -h, --help\n");
    wrap(out, 11, "Print this page and exit.");
    fprintf(out, "\n       --version\n");
    wrap(out, 11, "Print the version and exit.");
    fprintf(out, "\nSIGNALS\n");
    fprintf(out, "       SIGTERM, SIGINT\n");
    wrap(out, 11,
         "Graceful stop: new calls get UNAVAILABLE, every running step finishes, every live job "
         "is checkpointed (and listed as DONE after a restart, ready for resume_from), open "
         "streams end with UNAVAILABLE, then tided exits 0. A second signal exits at once "
         "with status 1.");
    fprintf(out, "       SIGHUP\n");
    wrap(out, 11,
         "Re-read the configuration file and apply the reloadable settings: log-level and "
         "tokens (the token file is read again). Other changed settings are logged and need a "
         "restart.");
    fprintf(out, "       SIGPIPE\n");
    wrap(out, 11, "Ignored.");
    fprintf(out, "\nFILES\n");
    fprintf(out, "       %s\n", TIDED_DEFAULT_CONFIG_FILE);
    wrap(out, 11, "The configuration file read when --config is not given (optional).");
    fprintf(out, "       /run/tide/tided.sock\n");
    wrap(out, 11, "The default socket.");
    fprintf(out, "       /var/lib/tide/jobs/ID/spec.pb, info.pb, checkpoint.pb\n");
    wrap(out, 11,
         "Per job: the submitted tide.v1.JobSpec, the last known tide.v1.JobInfo, and the last "
         "checkpoint (a tide.v1.ReadVariablesResponse with every variable, optimizer state "
         "included), each written atomically.");
    fprintf(out, "\nENVIRONMENT\n");
    fprintf(out, "       NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID\n");
    wrap(out, 11, "Set by systemd: where READY=1, STATUS=, RELOADING=1, STOPPING=1 and "
                  "WATCHDOG=1 go, and how often the watchdog wants a ping. Without them tided "
                  "runs the same, silently.");
    fprintf(out, "       TIDE_CPU_ONEDNN\n");
    wrap(out, 11, "0: the CPU backend runs its own convolutions (im2col + sgemm) and pools "
                  "instead of oneDNN's; plain: oneDNN's convolutions on tide's NCHW layout, "
                  "without blocked copies; all: oneDNN also for the pools and batch norms "
                  "where tide's own kernels are the faster. Unset: oneDNN where tided was "
                  "built with it, for convolutions and average pools.");
    fprintf(out, "\nEXIT STATUS\n");
    fprintf(out, "       0      clean shutdown, or --help / --version\n");
    fprintf(out, "       1      a fatal error at start or run time: the socket, the "
                 "device,\n              the state directory, the TLS or token files\n");
    fprintf(out, "       2      a bad flag or configuration file\n");
}

uint64_t tided_config_host_budget(const struct tided_config *config)
{
    return config->host_budget ? config->host_budget : tide_host_budget_default();
}
