/* SPDX-License-Identifier: MIT */
/*
 * rpc_methods.h: how fuzz_rpc's first input byte names a method, shared with
 * the seed writer (make_rpc_corpus.c) so that both count the same way.
 *
 * The methods are those of the services tided serves, the descriptors that
 * server.c checks its method table against at start, in their order: byte
 * b is method b modulo their number.
 */
#ifndef TIDE_TESTS_FUZZ_RPC_METHODS_H
#define TIDE_TESTS_FUZZ_RPC_METHODS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/health/v1/health.pb-c.h"
#include "tide/v1/tide.pb-c.h"

static const ProtobufCServiceDescriptor *const fuzz_rpc_services[] = {
    &tide__v1__jobs__descriptor,
    &tide__v1__daemon__descriptor,
    &grpc__health__v1__health__descriptor,
};
#define FUZZ_RPC_N_SERVICES (sizeof(fuzz_rpc_services) / sizeof(fuzz_rpc_services[0]))

static inline unsigned fuzz_rpc_n_methods(void)
{
    unsigned n = 0;
    for (size_t s = 0; s < FUZZ_RPC_N_SERVICES; s++)
        n += fuzz_rpc_services[s]->n_methods;
    return n;
}

/* The method an input's first byte names. */
static inline const ProtobufCMethodDescriptor *fuzz_rpc_method(uint8_t byte)
{
    unsigned k = byte % fuzz_rpc_n_methods();
    for (size_t s = 0; s < FUZZ_RPC_N_SERVICES; s++) {
        if (k < fuzz_rpc_services[s]->n_methods)
            return &fuzz_rpc_services[s]->methods[k];
        k -= fuzz_rpc_services[s]->n_methods;
    }
    abort();
}

/* The first byte that names service/method; -1 if tided serves no such method. */
static inline int fuzz_rpc_byte(const ProtobufCServiceDescriptor *service, const char *method)
{
    unsigned k = 0;
    for (size_t s = 0; s < FUZZ_RPC_N_SERVICES; s++) {
        for (unsigned i = 0; i < fuzz_rpc_services[s]->n_methods; i++, k++) {
            if (fuzz_rpc_services[s] == service &&
                strcmp(fuzz_rpc_services[s]->methods[i].name, method) == 0)
                return (int)k;
        }
    }
    return -1;
}

#endif /* TIDE_TESTS_FUZZ_RPC_METHODS_H */
