/* SPDX-License-Identifier: MIT */
/*
 * auth.c: who is calling.
 *
 * Over the Unix socket a caller is the uid/gid/pid that listen.c read with
 * SO_PEERCRED, an admin when root or in admin-group. Over TCP (TLS only) a
 * caller shows a bearer token from the token file ("TOKEN submit|monitor
 * [UID|USER]" lines); the auth metadata processor checks it and records the
 * role and uid in the call's auth context, which tided__call_identify reads.
 *
 * Threads: gRPC's own threads run auth_process and the HTTP listener's
 * threads (http.c) call tided_server_authorize; both read the token table
 * under token_mutex. SIGHUP (main thread) replaces the table under the same
 * lock. Everything else here runs on the main thread.
 */
#include "daemon/server-impl.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpc/support/alloc.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <grpc/grpc_security.h>
#pragma GCC diagnostic pop

#include "common/log.h"

/* ============================================================================
 * Identity
 * ========================================================================== */

bool tided_uid_in_group(uint32_t uid, uint32_t gid)
{
    struct passwd pw, *found = NULL;
    char buf[4096];
    if (getpwuid_r((uid_t)uid, &pw, buf, sizeof(buf), &found) != 0 || !found)
        return false;
    if (found->pw_gid == (gid_t)gid)
        return true;
    int n = 64;
    gid_t *groups = malloc((size_t)n * sizeof(gid_t));
    if (groups && getgrouplist(found->pw_name, found->pw_gid, groups, &n) < 0) {
        gid_t *more = realloc(groups, (size_t)n * sizeof(gid_t));
        if (!more) {
            free(groups);
            return false;
        }
        groups = more;
        if (getgrouplist(found->pw_name, found->pw_gid, groups, &n) < 0)
            n = 0;
    }
    bool member = false;
    for (int i = 0; groups && i < n && !member; i++)
        member = groups[i] == (gid_t)gid;
    free(groups);
    return member;
}

bool tided__admin_member(struct tided_server *s, uid_t uid, gid_t gid)
{
    if (uid == 0)
        return true;
    if (!s->have_admin_gid)
        return false;
    if (gid == s->admin_gid)
        return true;
    return tided_uid_in_group(uid, s->admin_gid);
}

static bool auth_property(grpc_auth_context *ctx, const char *name, char *out, size_t size)
{
    grpc_auth_property_iterator it = grpc_auth_context_find_properties_by_name(ctx, name);
    const grpc_auth_property *p = grpc_auth_property_iterator_next(&it);
    if (!p || p->value_length >= size)
        return false;
    memcpy(out, p->value, p->value_length);
    out[p->value_length] = '\0';
    return true;
}

/* The identity a token gives: a monitor sees every job and controls none. */
static void token_identity(bool monitor, uint32_t uid, struct tided_identity *who)
{
    *who = (struct tided_identity){
        .uid = uid,
        .gid = UINT32_MAX,
        .pid = -1,
        .admin = monitor,
        .read_only = monitor,
        .remote = true,
    };
}

bool tided_identity_may_see(const struct tided_identity *who, uint32_t owner)
{
    return who->admin || who->uid == owner;
}

void tided__call_identify(struct tided_server *s, struct tided_call *c)
{
    char *peer = grpc_call_get_peer(c->call);
    c->identified = false;
    if (peer && strncmp(peer, "fd:", 3) == 0) {
        char *end = NULL;
        long fd = strtol(peer + 3, &end, 10);
        if (end && *end == '\0' && fd >= 0 && (size_t)fd < s->n_conns && s->conns[fd].used) {
            c->identity = s->conns[fd].identity;
            c->identified = true;
        }
    } else if (peer) {
        grpc_auth_context *ctx = grpc_call_auth_context(c->call);
        char role[16], uid[16];
        if (ctx && auth_property(ctx, "tide.role", role, sizeof(role)) &&
            auth_property(ctx, "tide.uid", uid, sizeof(uid))) {
            bool monitor = strcmp(role, "monitor") == 0;
            token_identity(monitor, (uint32_t)strtoul(uid, NULL, 10), &c->identity);
            snprintf(c->identity.peer, sizeof(c->identity.peer), "%.40s (%s)", peer, role);
            c->identified = true;
        }
        if (ctx)
            grpc_auth_context_release(ctx);
    }
    if (!c->identified)
        snprintf(c->identity.peer, sizeof(c->identity.peer), "%.48s", peer ? peer : "unknown");
    gpr_free(peer);
}

/* ============================================================================
 * Tokens (TCP)
 * ========================================================================== */

void tided__tokens_free(struct token *tokens, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (tokens[i].token) {
            memset(tokens[i].token, 0, strlen(tokens[i].token));
            free(tokens[i].token);
        }
    }
    free(tokens);
}

/* Parses "TOKEN submit|monitor [UID|USER]" lines; # comments, blank lines. */
static int tokens_load(const char *path, struct token **out, size_t *n_out, char *error,
                       size_t size)
{
    *out = NULL;
    *n_out = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(error, size, "%s: cannot open the token file: %s", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && (sb.st_mode & 0004))
        TIDE_LOG_WARN("%s: the token file is readable by everyone; chmod o-r it", path);
    struct token *tokens = NULL;
    size_t n = 0, cap = 0;
    char line[1024];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *save = NULL;
        char *token = strtok_r(line, " \t\r\n", &save);
        if (!token)
            continue;
        char *role = strtok_r(NULL, " \t\r\n", &save);
        char *who = strtok_r(NULL, " \t\r\n", &save);
        char *extra = strtok_r(NULL, " \t\r\n", &save);
        if (!role || extra || (strcmp(role, "submit") != 0 && strcmp(role, "monitor") != 0)) {
            snprintf(error, size, "%s:%d: want \"TOKEN submit|monitor [UID]\"", path, lineno);
            rc = -1;
            break;
        }
        if (strlen(token) < 16) {
            snprintf(error, size, "%s:%d: a token must have at least 16 characters", path, lineno);
            rc = -1;
            break;
        }
        uint32_t uid = (uint32_t)getuid();
        if (who) {
            char *end = NULL;
            unsigned long v = strtoul(who, &end, 10);
            if (isdigit((unsigned char)who[0]) && end && *end == '\0' && v < UINT32_MAX) {
                uid = (uint32_t)v;
            } else {
                struct passwd *pw = getpwnam(who);
                if (!pw) {
                    snprintf(error, size, "%s:%d: no user \"%s\"", path, lineno, who);
                    rc = -1;
                    break;
                }
                uid = (uint32_t)pw->pw_uid;
            }
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            struct token *grown = realloc(tokens, cap * sizeof(*grown));
            if (!grown) {
                snprintf(error, size, "out of memory");
                rc = -1;
                break;
            }
            tokens = grown;
        }
        tokens[n].token = strdup(token);
        tokens[n].monitor = strcmp(role, "monitor") == 0;
        tokens[n].uid = uid;
        if (!tokens[n].token) {
            snprintf(error, size, "out of memory");
            rc = -1;
            break;
        }
        n++;
    }
    memset(line, 0, sizeof(line));
    fclose(f);
    if (rc != 0) {
        tided__tokens_free(tokens, n);
        return rc;
    }
    *out = tokens;
    *n_out = n;
    return 0;
}

/* Compares in time independent of where the strings differ. */
static bool token_equal(const char *a, size_t alen, const char *b)
{
    size_t blen = strlen(b);
    unsigned char diff = (unsigned char)(alen != blen);
    for (size_t i = 0; i < alen; i++)
        diff |= (unsigned char)(a[i] ^ b[i % (blen ? blen : 1)]);
    return diff == 0;
}

enum tided_authorization tided_server_authorize(struct tided_server *s, const char *header,
                                                size_t len, struct tided_identity *who,
                                                const char **why)
{
    static const char bearer[] = "Bearer ";
    pthread_mutex_lock(&s->token_mutex);
    bool have_file = s->token_file_loaded;
    pthread_mutex_unlock(&s->token_mutex);
    if (!have_file) {
        *why = "tided has no token file";
        return TIDED_AUTH_NO_TOKENS;
    }
    if (!header) {
        *why = "tided wants an \"authorization: Bearer TOKEN\" header";
        return TIDED_AUTH_MISSING;
    }
    if (len < sizeof(bearer) - 1 || strncmp(header, bearer, sizeof(bearer) - 1) != 0) {
        *why = "the authorization header is not \"Bearer TOKEN\"";
        return TIDED_AUTH_MALFORMED;
    }
    const char *value = header + sizeof(bearer) - 1;
    len -= sizeof(bearer) - 1;
    bool found = false, monitor = false;
    uint32_t uid = 0;
    pthread_mutex_lock(&s->token_mutex);
    for (size_t i = 0; i < s->n_tokens; i++) {
        if (token_equal(value, len, s->tokens[i].token) && !found) {
            found = true;
            monitor = s->tokens[i].monitor;
            uid = s->tokens[i].uid;
        }
    }
    pthread_mutex_unlock(&s->token_mutex);
    if (!found) {
        *why = "unknown bearer token";
        return TIDED_AUTH_UNKNOWN;
    }
    token_identity(monitor, uid, who);
    *why = NULL;
    return TIDED_AUTH_OK;
}

/* The auth metadata processor: runs on a gRPC thread, must not block. */
static void auth_process(void *state, grpc_auth_context *context, const grpc_metadata *md,
                         size_t n_md, grpc_process_auth_metadata_done_cb cb, void *user_data)
{
    struct tided_server *s = state;
    const grpc_metadata *auth = NULL;
    for (size_t i = 0; i < n_md && !auth; i++) {
        if (grpc_slice_str_cmp(md[i].key, "authorization") == 0)
            auth = &md[i];
    }
    struct tided_identity who;
    const char *why = NULL;
    enum tided_authorization a = tided_server_authorize(
        s, auth ? (const char *)GRPC_SLICE_START_PTR(auth->value) : NULL,
        auth ? GRPC_SLICE_LENGTH(auth->value) : 0, &who, &why);
    if (a != TIDED_AUTH_OK) {
        /* TCP needs tokens (config.c checks it); no token file lets nobody in. */
        cb(user_data, NULL, 0, NULL, 0, GRPC_STATUS_UNAUTHENTICATED, why);
        return;
    }
    char uid_text[16];
    snprintf(uid_text, sizeof(uid_text), "%" PRIu32, who.uid);
    grpc_auth_context_add_cstring_property(context, "tide.role",
                                           who.read_only ? "monitor" : "submit");
    grpc_auth_context_add_cstring_property(context, "tide.uid", uid_text);
    cb(user_data, auth, 1, NULL, 0, GRPC_STATUS_OK, NULL);
}

int tided_server_reload_tokens(struct tided_server *s, char *error, size_t size)
{
    const char *path = s->daemon->config.tokens;
    if (!path || !path[0])
        return 0;
    struct token *tokens;
    size_t n;
    if (tokens_load(path, &tokens, &n, error, size) != 0)
        return -1;
    pthread_mutex_lock(&s->token_mutex);
    struct token *old = s->tokens;
    size_t n_old = s->n_tokens;
    s->tokens = tokens;
    s->n_tokens = n;
    s->token_file_loaded = true;
    pthread_mutex_unlock(&s->token_mutex);
    tided__tokens_free(old, n_old);
    TIDE_LOG_INFO("%s: %zu token(s) loaded", path, n);
    return 0;
}

static char *read_text_file(const char *path, char *error, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(error, size, "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *text = malloc(cap);
    while (text) {
        if (n + 1 >= cap) {
            char *grown = cap < (16u << 20) ? realloc(text, cap * 2) : NULL;
            if (!grown) {
                free(text);
                text = NULL;
                snprintf(error, size, "%s: too large or out of memory", path);
                break;
            }
            text = grown;
            cap *= 2;
        }
        size_t got = fread(text + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    if (text)
        text[n] = '\0';
    fclose(f);
    return text;
}

int tided_tls_pair_load(const struct tided_config *config, char **cert, char **key, char *error,
                        size_t size)
{
    *cert = read_text_file(config->tls_cert, error, size);
    *key = *cert ? read_text_file(config->tls_key, error, size) : NULL;
    if (!*cert || !*key) {
        free(*cert);
        *cert = NULL;
        return -1;
    }
    return 0;
}

void tided_tls_pair_free(char *cert, char *key)
{
    if (key) {
        memset(key, 0, strlen(key));
        free(key);
    }
    free(cert);
}

int tided__tcp_port_add(struct tided_server *s, char *error, size_t size)
{
    const struct tided_config *cfg = &s->daemon->config;
    char *cert, *key;
    if (tided_tls_pair_load(cfg, &cert, &key, error, size) != 0)
        return -1;
    grpc_ssl_pem_key_cert_pair pair = {.private_key = key, .cert_chain = cert};
    grpc_server_credentials *creds = grpc_ssl_server_credentials_create_ex(
        NULL, &pair, 1, GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE, NULL);
    tided_tls_pair_free(cert, key);
    if (!creds) {
        snprintf(error, size, "tls-cert %s / tls-key %s: gRPC refused them", cfg->tls_cert,
                 cfg->tls_key);
        return -1;
    }
    grpc_auth_metadata_processor processor = {.process = auth_process, .state = s};
    grpc_server_credentials_set_auth_metadata_processor(creds, processor);
    int port = grpc_server_add_http2_port(s->server, cfg->listen, creds);
    grpc_server_credentials_release(creds);
    if (port == 0) {
        snprintf(error, size,
                 "listen = %s: cannot bind it (gRPC gives no reason; is the port in "
                 "use, or the address wrong?)",
                 cfg->listen);
        return -1;
    }
    TIDE_LOG_INFO("serving TCP with TLS and bearer tokens on %s (port %d)", cfg->listen, port);
    return 0;
}
