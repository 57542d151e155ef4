/* SPDX-License-Identifier: MIT */
/*
 * config.h: tided's configuration — one table of option descriptors.
 *
 * Every setting of the daemon is one row of a table (config.c): its name,
 * type, bounds, default, the field it fills and a help text. The same rows
 * drive the configuration file parser ("key = value" lines, # comments), the
 * command-line flags ("--key VALUE" or "--key=VALUE"), the defaults, the
 * --help page and SIGHUP reload (rows marked reloadable: the log level and
 * the token file). Precedence: defaults, then the file, then the flags.
 *
 * Errors name where the value came from (the file and line, or the flag),
 * the key and what is allowed ("device-memory: want bytes between 1M and
 * 1T, with an optional K, M, G or T suffix, got \"5Q\"").
 *
 * Ownership: tided_config_load fills a struct whose strings are malloc'd;
 * tided_config_release frees them. Nothing here is thread-safe: the main
 * thread loads and reloads before or between libev callbacks.
 *
 * Example usage:
 *
 *     struct tided_config config;
 *     char error[512];
 *     switch (tided_config_load(argc, argv, &config, error, sizeof(error))) {
 *     case TIDED_CONFIG_OK: break;
 *     case TIDED_CONFIG_EXIT: return 0;            // --help or --version was printed
 *     default: fprintf(stderr, "tided: %s\n", error); return TIDED_EXIT_USAGE;
 *     }
 *     ...
 *     tided_config_release(&config);
 */
#ifndef TIDE_DAEMON_CONFIG_H
#define TIDE_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exit statuses of tided, also listed by --help. */
enum {
    TIDED_EXIT_OK = 0,      /* clean shutdown, or --help / --version */
    TIDED_EXIT_FAILURE = 1, /* a fatal error: socket, device, state directory, TLS or tokens */
    TIDED_EXIT_USAGE = 2,   /* a bad flag or configuration file */
};

/* The daemon's settings; see the table in config.c for meanings and defaults. */
struct tided_config {
    /* Files and sockets. */
    char *config_file;   /* the file read (NULL when the default file does not exist) */
    char *socket;        /* the Unix socket clients connect to */
    char *socket_group;  /* group owning the socket ("" keeps the daemon's group) */
    char *state_dir;     /* jobs/<id>/{spec.pb,info.pb,checkpoint.pb} live here */
    /* Device and memory. */
    char *backend;           /* "cpu", "cuda" or "auto" */
    char *devices;           /* cuda: "0,2" (the GPUs served), "" every one */
    uint64_t cpu_devices;    /* cpu: how many devices to emulate */
    uint64_t device_memory;  /* the CPU backend's emulated device size */
    uint64_t default_budget; /* a job's budget when its spec sets none */
    uint64_t max_budget;     /* the largest budget a job may ask for (0: the largest device) */
    uint64_t host_pool;      /* host bytes jobs' plans may use together (0: no limit) */
    uint64_t host_budget;    /* host bytes one job's plan may use (0: 80 % of RAM) */
    uint64_t threads;        /* CPU kernel threads (0: one per core) */
    /* Job lifecycle. */
    uint64_t idle_timeout; /* seconds a READY job waits before it is parked (0: never) */
    uint64_t retain_ended; /* seconds an ended job's files are kept (0: forever) */
    /* Queue and quotas (queue.c). */
    uint64_t quota_uid_bytes;   /* device budget of one uid's jobs not ended (0: no limit) */
    uint64_t quota_uid_jobs;    /* jobs not ended of one uid (0: no limit) */
    char *quota_groups;         /* "GROUP:BYTES:JOBS, ..." (tided_quota_groups_parse) */
    uint64_t fair_share_window; /* seconds: the time constant of each uid's usage */
    /* Limits on what clients send. */
    uint64_t max_message;     /* largest gRPC message received, in bytes */
    uint64_t max_graph_nodes; /* nodes per graph */
    uint64_t max_tensor_bytes;
    /* Access. */
    char *admin_group; /* members may see and control every job ("" : root only) */
    char *listen;      /* optional HOST:PORT for TCP with TLS */
    char *tls_cert;
    char *tls_key;
    char *tokens;      /* bearer token file for TCP clients and the HTTP listener */
    char *metrics_listen; /* optional HOST:PORT for HTTP: /metrics, the dashboard, /api/ */
    /* Operation. */
    char *log_level;        /* "error", "warn", "info" or "debug" */
    uint64_t stall_timeout; /* seconds one device task may take before watchdog pings stop */
    bool foreground;        /* always true: tided never forks (systemd Type=notify) */
};

enum tided_config_result {
    TIDED_CONFIG_OK = 0,
    TIDED_CONFIG_EXIT = 1,  /* --help or --version printed: exit 0 */
    TIDED_CONFIG_ERROR = -1,
};

/*
 * Fills config from the defaults, the configuration file (--config FILE, or
 * /etc/tide/tided.conf when it exists) and the flags in argv, then checks
 * the settings together (default budget <= max budget, TLS files with
 * --listen). On an error, error holds a message naming the file and line or
 * the flag, the key and the allowed values; config holds nothing to free.
 */
enum tided_config_result tided_config_load(int argc, char **argv, struct tided_config *config,
                                           char *error, size_t error_size);

/* Frees the strings of a config filled by tided_config_load. NULL is a no-op. */
void tided_config_release(struct tided_config *config);

/*
 * For SIGHUP: loads the configuration again from the same file and flags
 * into fresh, then copies the reloadable settings (log level, token file)
 * into config. Settings that changed but need a restart are logged as
 * warnings. On an error config is left as it was.
 */
enum tided_config_result tided_config_reload(int argc, char **argv, struct tided_config *config,
                                             char *error, size_t error_size);

/* Writes the --help page (synopsis, options with defaults, signals, files, exit codes). */
void tided_config_usage(FILE *out);

/* Parses "4G", "512M", "4GiB" or "1024" into bytes (binary multiples); -1 if malformed. */
int tided_parse_bytes(const char *text, uint64_t *bytes);

/* A listening address parsed from "HOST:PORT". */
struct tided_listen_address {
    struct sockaddr_storage address; /* sockaddr_in or sockaddr_in6, port set */
    socklen_t length;
    unsigned port;
    bool loopback; /* 127.0.0.0/8, ::1 or ::ffff:127.x.y.z: reachable from this host only */
};

/*
 * Parses "HOST:PORT" where HOST is an IPv4 address, "[IPv6 address]" or
 * localhost (127.0.0.1) and PORT 0 to 65535; -1 if malformed. Names other
 * than localhost are refused, so that whether a listener is loopback-only
 * is decided here, once, and not by a resolver at start-up.
 */
int tided_parse_listen_address(const char *text, struct tided_listen_address *address);

/* One entry of quota-groups: the members of group name together. */
struct tided_quota_group {
    char name[64];
    uint64_t bytes; /* device budget of their jobs not ended; 0: no limit */
    uint32_t jobs;  /* jobs not ended; 0: no limit */
};

/*
 * Parses quota-groups ("students:24G:4, interns:8G:1"; "" gives none) into
 * a malloc'd array of *n entries (the caller frees it; NULL when none was
 * made). -1 with error naming the entry and what is wrong otherwise.
 */
int tided_quota_groups_parse(const char *text, struct tided_quota_group **groups, size_t *n,
                             char *error, size_t size);

/* Formats bytes as "4 GiB", "992.1 MiB" or "123 bytes" (exact when the unit divides it). */
const char *tided_format_bytes(uint64_t bytes, char *buf, size_t size);

/* The host budget of one job's plan: host-budget, or 80 % of RAM when it is 0. */
uint64_t tided_config_host_budget(const struct tided_config *config);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_DAEMON_CONFIG_H */
