/* SPDX-License-Identifier: MIT */
/*
 * listen.c: the Unix socket that tided accepts itself.
 *
 * tided, not gRPC, accepts Unix connections, so that it can read each
 * peer's SO_PEERCRED and keep fd -> identity (server.c's DESIGN section
 * says why the accept watcher runs below the completion events). A stale
 * socket left by a crash is replaced; a live one (another tided) stops
 * start-up. The socket is born 0660 and may be given to socket-group.
 *
 * Threads: main thread only.
 */
#include "daemon/server-impl.h"

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <grpc/grpc_posix.h>

#include "common/log.h"

/* ============================================================================
 * The Unix socket
 * ========================================================================== */

void tided__accept_resume_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)revents;
    struct tided_server *s = w->data;
    if (!s->shutting_down && s->listen_fd >= 0)
        ev_io_start(loop, &s->accept_io);
}

static int remember_connection(struct tided_server *s, int fd, const struct ucred *cred)
{
    if ((size_t)fd >= s->n_conns) {
        size_t n = s->n_conns ? s->n_conns : 64;
        while (n <= (size_t)fd)
            n *= 2;
        struct connection *grown = realloc(s->conns, n * sizeof(*grown));
        if (!grown)
            return -1;
        memset(grown + s->n_conns, 0, (n - s->n_conns) * sizeof(*grown));
        s->conns = grown;
        s->n_conns = n;
    }
    struct connection *c = &s->conns[fd];
    c->used = true;
    c->identity = (struct tided_identity){
        .uid = (uint32_t)cred->uid,
        .gid = (uint32_t)cred->gid,
        .pid = (int32_t)cred->pid,
        .admin = tided__admin_member(s, cred->uid, cred->gid),
    };
    snprintf(c->identity.peer, sizeof(c->identity.peer), "uid %u pid %d%s", (unsigned)cred->uid,
             (int)cred->pid, c->identity.admin ? " (admin)" : "");
    return 0;
}

void tided__accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    struct tided_server *s = w->data;
    for (;;) {
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                TIDE_LOG_WARN("accept: %s; pausing new connections for a second", strerror(errno));
                ev_io_stop(loop, &s->accept_io);
                ev_timer_set(&s->accept_pause, 1.0, 0.0);
                ev_timer_start(loop, &s->accept_pause);
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED) {
                TIDE_LOG_WARN("accept: %s", strerror(errno));
            }
            return;
        }
        struct ucred cred;
        socklen_t len = sizeof(cred);
        if (s->shutting_down || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
            remember_connection(s, fd, &cred) != 0) {
            if (!s->shutting_down)
                TIDE_LOG_WARN("dropping a connection: cannot read or keep its credentials");
            close(fd);
            continue;
        }
        TIDE_LOG_DEBUG("connection fd %d: %s", fd, s->conns[fd].identity.peer);
        grpc_server_add_channel_from_fd(s->server, fd, s->insecure);
    }
}

int tided__socket_open(struct tided_server *s, char *error, size_t size)
{
    const struct tided_config *cfg = &s->daemon->config;
    const char *path = cfg->socket;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);

    struct stat sb;
    if (lstat(path, &sb) == 0) {
        if (!S_ISSOCK(sb.st_mode)) {
            snprintf(error, size, "socket %s: exists and is not a socket; not touching it", path);
            return -1;
        }
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe >= 0 && connect(probe, (struct sockaddr *)&addr, sizeof(addr)) == 0) {
            close(probe);
            snprintf(error, size, "socket %s: another tided is listening on it", path);
            return -1;
        }
        if (probe >= 0)
            close(probe);
        if (unlink(path) != 0) {
            snprintf(error, size, "socket %s: cannot remove the stale socket: %s", path,
                     strerror(errno));
            return -1;
        }
        TIDE_LOG_INFO("removed the stale socket %s", path);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(error, size, "socket: %s", strerror(errno));
        return -1;
    }
    mode_t old = umask(0117); /* the socket is born 0660 */
    int rc = bind(fd, (struct sockaddr *)&addr, sizeof(addr));
    int bind_errno = errno;
    umask(old);
    if (rc != 0) {
        snprintf(error, size, "socket %s: cannot bind: %s", path, strerror(bind_errno));
        close(fd);
        return -1;
    }
    s->socket_created = true;
    if (chmod(path, 0660) != 0)
        TIDE_LOG_WARN("socket %s: chmod 0660: %s", path, strerror(errno));
    if (cfg->socket_group[0]) {
        struct group *g = getgrnam(cfg->socket_group);
        if (!g || chown(path, (uid_t)-1, g->gr_gid) != 0) {
            snprintf(error, size, "socket %s: cannot give it to group \"%s\": %s", path,
                     cfg->socket_group, g ? strerror(errno) : "no such group");
            close(fd);
            return -1;
        }
    }
    if (listen(fd, 128) != 0) {
        snprintf(error, size, "socket %s: listen: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    s->listen_fd = fd;
    return 0;
}
