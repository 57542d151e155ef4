/* SPDX-License-Identifier: MIT */
/*
 * health.c: grpc.health.v1.Health, so that load balancers and systemd-style
 * probes see tided as SERVING only while it takes new work (not while it
 * drains or stops). Watch streams get a message each time the status of
 * their service changes; server.c calls tided__health_changed then.
 *
 * Threads: main thread only.
 */
#include "daemon/server-impl.h"

#include <stdlib.h>
#include <string.h>

#include "grpc/health/v1/health.pb-c.h"

/* ============================================================================
 * grpc.health.v1.Health
 * ========================================================================== */

static int health_status(struct tided_server *s, const char *service)
{
    static const char *const known[] = {"", "tide.v1.Jobs", "tide.v1.Daemon",
                                        "grpc.health.v1.Health"};
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        if (strcmp(service, known[i]) == 0)
            return s->daemon->phase == TIDED_SERVING && !s->shutting_down
                       ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
                       : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
    }
    return GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN;
}

void tided__health_check(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *req)
{
    Grpc__Health__V1__HealthCheckRequest *r = (Grpc__Health__V1__HealthCheckRequest *)req;
    int status = health_status(d->server, r->service);
    if (status == GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN) {
        tided_call_fail(call, GRPC_STATUS_NOT_FOUND, "unknown service \"%s\"", r->service);
    } else {
        Grpc__Health__V1__HealthCheckResponse resp = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
        resp.status = (Grpc__Health__V1__HealthCheckResponse__ServingStatus)status;
        tided_call_reply(call, &resp.base);
    }
    protobuf_c_message_free_unpacked(req, NULL);
}

/* Sends a health watcher its service's status when it changed. */
static void health_notify(struct tided_server *s, struct tided_call *c)
{
    int status = health_status(s, c->health_service);
    if (status == c->health_sent)
        return;
    Grpc__Health__V1__HealthCheckResponse resp = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    resp.status = (Grpc__Health__V1__HealthCheckResponse__ServingStatus)status;
    if (tided_call_write(c, &resp.base, c))
        c->health_sent = status;
}

void tided__health_watch(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *req)
{
    Grpc__Health__V1__HealthCheckRequest *r = (Grpc__Health__V1__HealthCheckRequest *)req;
    call->health_service = strdup(r->service);
    protobuf_c_message_free_unpacked(req, NULL);
    if (!call->health_service) {
        tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    call->health_watch = true; /* until the call is over; the server's call list holds it */
    health_notify(d->server, call);
}

void tided__health_changed(struct tided_server *s)
{
    for (struct tided_call *c = s->calls; c; c = c->next) {
        if (c->health_watch && !c->closed && !c->finishing)
            health_notify(s, c);
    }
}
