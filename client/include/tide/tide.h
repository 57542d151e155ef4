/* SPDX-License-Identifier: MIT */
/*
 * tide/tide.h: libtide's umbrella header, for programs that want all of it:
 * the graph builder (tide/graph.h), the ready-made models (tide/models.h)
 * and the datasets with their batch iterator (tide/dataset.h). Each header
 * says what it offers, who owns what, and has an example.
 *
 * Example usage:
 *
 *     #include <tide/tide.h>
 *
 *     tide_builder *b = tide_builder_new();
 *     tide_model_cnn(b, 64, 1, 28, 28, 10);
 *     tide_dataset *train;
 *     char err[256];
 *     tide_dataset_open("fashion-mnist", NULL, "train", &train, err, sizeof(err));
 */
#ifndef TIDE_TIDE_H
#define TIDE_TIDE_H

#include "tide/client.h"
#include "tide/dataset.h"
#include "tide/dataset-files.h"
#include "tide/graph.h"
#include "tide/models.h"

#endif /* TIDE_TIDE_H */
