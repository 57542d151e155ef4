/* SPDX-License-Identifier: MIT */
/*
 * rpc-status.c: tide.v1.Daemon/Status: the device, the reservations, the host pool and the
 * jobs the caller may see.
 *
 * Threads: main thread only (jobs.c's DESIGN section).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "daemon/devices.h"
#include "daemon/jobs-impl.h"
#include "daemon/store.h"

void tided_rpc_status(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request)
{
    const struct tided_identity *who = tided_call_identity(call);
    struct tided_jobs *jobs = d->jobs;
    Tide__V1__DaemonStatus st = TIDE__V1__DAEMON_STATUS__INIT;
    st.version = (char *)TIDED_VERSION;
    st.backend = (char *)tide_backend_name(d->backend);
    st.device_name = d->device_name;
    st.device_total_bytes = d->device_bytes;
    st.device_used_bytes = tided__device_used_bytes(d);
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        const struct job *j = jobs->jobs[i];
        if (j->session)
            st.host_pool_used_bytes += j->host_bytes;
    }
    st.device_reserved_bytes = jobs->reserved;
    st.host_pool_bytes = d->config.host_pool;
    st.started_us = d->started_us;
    st.max_job_budget_bytes = d->config.max_budget ? d->config.max_budget : d->device_largest_bytes;
    st.default_job_budget_bytes = d->config.default_budget;
    /* Each device; the fields above are their sums. */
    Tide__V1__DeviceStatus devices[TIDED_DEVICES_MAX], *device_ptrs[TIDED_DEVICES_MAX];
    for (uint32_t i = 0; i < d->devices->n; i++) {
        const struct tided_device *dev = &d->devices->devices[i];
        tide__v1__device_status__init(&devices[i]);
        devices[i].index = i;
        devices[i].name = (char *)dev->name;
        devices[i].total_bytes = dev->total_bytes;
        devices[i].reserved_bytes = dev->reserved_bytes;
        devices[i].used_bytes = tided__device_used_bytes_on(d, i);
        devices[i].jobs = dev->jobs;
        device_ptrs[i] = &devices[i];
    }
    st.n_devices = d->devices->n;
    st.devices = device_ptrs;
    Tide__V1__JobInfo *storage;
    size_t n;
    Tide__V1__JobInfo **ptrs = tided__jobs_visible(d, who, true, &n, &storage);
    if (!ptrs) {
        tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    } else {
        st.n_jobs = n;
        st.jobs = ptrs;
        tided_call_reply(call, &st.base);
    }
    free(ptrs);
    free(storage);
    protobuf_c_message_free_unpacked(request, NULL);
}
