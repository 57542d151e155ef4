/* SPDX-License-Identifier: MIT */
/*
 * builder-impl.h: what libtide's own modules (models.c) may do to a builder
 * beyond the public API in tide/graph.h. Not installed.
 */
#ifndef TIDE_CLIENT_BUILDER_IMPL_H
#define TIDE_CLIENT_BUILDER_IMPL_H

#include "tide/graph.h"

/*
 * Records the builder's sticky error (printf format) unless it already holds
 * one; for checks that callers of the builder make themselves, such as a
 * model's sizes. b may be NULL (then nothing happens).
 */
void tide__builder_set_error(tide_builder *b, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* TIDE_CLIENT_BUILDER_IMPL_H */
