/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/plan.c: `tidectl plan`: builds the model as `train` would
 * and asks the daemon for its memory plan under the job's budget, without
 * submitting anything; prints the report (and the partitions with
 * --partitions), and with --svg draws the plan's memory timeline, which the
 * daemon sends with the report (picture/picture.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picture/picture.h"
#include "tidectl.h"

/* --svg: the report's memory timeline drawn to o->svg; the exit status. */
static int draw(const struct tidectl_verb *verb, const struct tidectl_options *o,
                const struct tide_job_plan_report *p)
{
    if (p->timeline.n_positions == 0) {
        fprintf(stderr,
                "tidectl: %s: --svg %s: the plan does not fit, so there is no memory timeline "
                "to draw\n",
                verb->name, o->svg);
        return TIDECTL_EXIT_RUNTIME;
    }
    char title[160];
    if (strcmp(o->model, "resnet") == 0)
        snprintf(title, sizeof(title),
                 "ResNet-%d (width %" PRId64 "), batch %" PRId64
                 ": device memory over one training step",
                 o->depth, o->width, o->batch);
    else
        snprintf(title, sizeof(title), "%s, batch %" PRId64 ": device memory over one training step",
                 o->onnx ? o->onnx : o->model, o->batch);
    struct tide_picture_options po = {.title = title};
    struct tide_error err = {0};
    enum tide_status st = tide_picture_svg_file(&p->timeline, &po, o->svg, &err);
    tide_picture_shutdown(); /* the one picture tidectl draws */
    if (st != TIDE_OK) {
        fprintf(stderr, "tidectl: %s: %s\n", verb->name, err.message);
        return TIDECTL_EXIT_RUNTIME;
    }
    return TIDECTL_EXIT_OK;
}

static int run_plan(const struct tidectl_verb *verb, struct tidectl_options *o, tide_client *client)
{
    (void)client;
    int64_t ch, h, w;
    int32_t classes;
    int rc;
    struct tidectl_model m;
    if (o->data) {
        /* The files' examples set the input shape and their labels the classes. */
        tide_dataset *train;
        rc = tidectl_open_files(o, &train, NULL, &ch, &h, &w);
        if (rc != TIDECTL_EXIT_OK)
            return rc;
        rc = tidectl_build_model(o, ch, h, w, tide_dataset_classes(train), train, &m);
        if (rc == TIDECTL_EXIT_OK && !o->onnx && (rc = tidectl_check_files_input(train, &m)) != 0)
            tidectl_model_clear(&m);
        tide_dataset_free(train);
    } else if (o->onnx) {
        /* The model's own inputs are planned: no dataset's examples to check them against. */
        rc = tidectl_build_model(o, 0, 0, 0, 0, NULL, &m);
    } else {
        tidectl_dataset_shape(o, &ch, &h, &w, &classes);
        rc = tidectl_build_model(o, ch, h, w, classes, NULL, &m);
    }
    if (rc != TIDECTL_EXIT_OK)
        return rc;
    o->batch = m.batch; /* an ONNX model's own */
    const char *model_name = o->onnx ? o->onnx : o->model;
    tide_client *c = tidectl_connect(o, &rc);
    if (!c) {
        tidectl_model_clear(&m);
        return rc;
    }
    struct tide_job_spec spec;
    char name[TIDE_JOB_NAME_MAX];
    tidectl_make_spec(o, &m, name, sizeof(name), &spec);
    struct tide_job_plan_report p;
    if (tide_client_plan(c, &spec, &p) != 0) {
        rc = tidectl_client_error(c, verb->name, TIDECTL_EXIT_RUNTIME);
    } else if (o->json) {
        struct json_object *line = tidectl_json_object();
        tidectl_json_set_string(line, "model", model_name);
        tidectl_json_set_int(line, "batch", o->batch);
        tidectl_json_set_int(line, "parameters", m.parameters);
        tidectl_json_set_string(line, "swap", tidectl_swap_names[o->swap]);
        tidectl_json_add_plan(line, &p, true);
        rc = tidectl_json_print_line(line);
    } else {
        printf("plan of %s (%" PRId64 " parameters), batch %" PRId64 ", swap %s:\n", model_name,
               m.parameters, o->batch, tidectl_swap_names[o->swap]);
        tidectl_print_plan(&p, o->partitions);
    }
    if (rc == TIDECTL_EXIT_OK && o->svg) {
        rc = draw(verb, o, &p);
        if (rc == TIDECTL_EXIT_OK && !o->json)
            printf("  memory picture  %s\n", o->svg);
    }
    tide_job_plan_report_clear(&p);
    tidectl_model_clear(&m);
    tide_client_free(c);
    return rc;
}

static const int accepts[] = {TIDECTL_MODEL_OPTIONS, TIDECTL_OPT_PARTITIONS, TIDECTL_OPT_SVG,
                              TIDECTL_OPT_DEVICE_PROFILE, 0};

const struct tidectl_verb tidectl_verb_plan = {
    .name = "plan",
    .run = run_plan,
    .accepts = accepts,
    .min_args = 0,
    .max_args = 0,
    .synopsis = "plan [MODEL OPTIONS | --onnx FILE [--output NAME] [--loss xent|mse|none]] "
                "[--partitions] [--svg FILE] [--device-profile NAME]",
    .summary = "show the memory plan of a model for a budget, without running it",
    .help = "DESCRIPTION\n"
            "  Builds the model as `train` would and asks the daemon to compile it for the\n"
            "  budget: the predicted device peak, whether it fits, the smallest budget that\n"
            "  would fit (and the node that sets it), the bytes swapped in and out and\n"
            "  fetched and written back per step, and the partitioning the swapper settled\n"
            "  on. Use it to choose --budget: a budget below the peak of --swap off forces\n"
            "  swapping. Nothing is submitted. An --onnx model is planned at its own input\n"
            "  shapes (every graph input of examples, any element type); --data, when given,\n"
            "  is checked against them as train would.\n"
            "\n"
            "OPTIONS\n"
            "  --partitions             Also list the partitions: nodes, resident bytes, bytes\n"
            "                           moved, and the peak node of each (empty ones are counted,\n"
            "                           not listed; --json lists all).\n"
            "  --svg FILE               Draw where the device memory goes over one step as an SVG\n"
            "                           picture: bytes live at each position of the schedule by\n"
            "                           category (variables, activations, swapped in, workspace),\n"
            "                           the budget, the predicted peak, the partitions and the\n"
            "                           swaps. A plan that does not fit has no picture (exit 1).\n"
            "  --device-profile NAME    Plan for this device: cpu (the daemon machine's CPU\n"
            "                           backend, measured), h100 or h200 (published figures).\n"
            "                           The plan that fits with the lowest predicted step time\n"
            "                           wins; the report gives that time. Default: the\n"
            "                           daemon's own device.\n"
            "\n" TIDECTL_MODEL_HELP,
};
