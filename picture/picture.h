/* SPDX-License-Identifier: MIT */
/*
 * picture.h: memory pictures — a plan's memory timeline (tide/timeline.h)
 * drawn with cairo, as SVG (to a file or to memory) or PNG.
 *
 * "Where did the memory go" answered with a picture: over the schedule of
 * one step (x: positions, nodes in execution order), the device bytes live
 * at each position as stacked areas by category (variables, activations,
 * swapped in, workspace); the partitions as alternating bands, numbered;
 * the job's budget as a labelled red line; the predicted peak (the arena
 * the plan needs) as a dashed line, and the top of the arena in use while
 * each partition runs as a thin line — the gap between it and the stacked
 * bytes is fragmentation; swap-outs and swap-ins as ticks in two rows
 * under the plot; axes with byte labels (KiB, MiB, GiB). After a run, an
 * optional overlay: the measured high water of each partition
 * (struct tide_step_stats' partition_high_water_bytes), drawn over the
 * prediction it should equal.
 *
 * The module depends on common/ and cairo only (and on fontconfig, cairo's
 * font finder, to free its caches at exit), so that tidectl (which gets
 * its timeline from the daemon and never links the planner) draws with it
 * as tide-bench and the daemon do. Everything is drawn by one function,
 * tide_picture_draw, on any cairo context: SVG and PNG are the same
 * drawing, and a test can rasterise it and read pixels where
 * tide_picture_layout says the budget line is.
 *
 * A timeline that came over the wire is checked before anything is drawn:
 * every point, partition and swap position must lie in the schedule, and
 * an overlay must have one value per partition; TIDE_INVALID names what is
 * wrong and the numbers.
 *
 * Threads: none of its own; functions share no state and may run on any
 * thread (cairo's SVG and image surfaces are thread-safe per surface).
 *
 * Example usage:
 *
 *     struct tide_memory_timeline t;
 *     tide_memory_timeline_build(graph, memplan, budget, 0, &t, &err);
 *     struct tide_picture_options o = {.title = "resnet-200, batch 16"};
 *     if (tide_picture_svg_file(&t, &o, "m.svg", &err) != TIDE_OK)
 *         fprintf(stderr, "%s\n", err.message);
 *     char *svg; size_t len;
 *     tide_picture_svg_buffer(&t, &o, &svg, &len, &err);  // for an HTTP reply
 *     free(svg);
 *     tide_memory_timeline_clear(&t);
 */
#ifndef TIDE_PICTURE_PICTURE_H
#define TIDE_PICTURE_PICTURE_H

#include <stddef.h>
#include <stdint.h>

#include <cairo.h>

#include "common/status.h"
#include "tide/timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The picture's size when the options leave it 0, and the smallest one drawn. */
#define TIDE_PICTURE_DEFAULT_WIDTH  1200
#define TIDE_PICTURE_DEFAULT_HEIGHT 640
#define TIDE_PICTURE_MIN_WIDTH      480
#define TIDE_PICTURE_MIN_HEIGHT     360

/* The budget line's colour, 0xRRGGBB. */
#define TIDE_PICTURE_BUDGET_RGB 0xd62728u

struct tide_picture_options {
    const char *title;      /* NULL: "Device memory over one step" */
    uint32_t width, height; /* in pixels (SVG user units); 0: the defaults above */
    /*
     * The measured overlay: the high water of each partition in one step
     * (n_measured must be the timeline's n_partitions), or NULL for none.
     * measured_step names the step in the legend (0: not named).
     */
    const uint64_t *measured_bytes;
    uint32_t n_measured;
    uint64_t measured_step;
};

/* Where things are, in pixels from the top left corner. */
struct tide_picture_layout {
    double width, height;
    double plot_left, plot_top, plot_right, plot_bottom; /* the stacked areas' rectangle */
    uint64_t top_bytes;  /* the bytes at plot_top (the y axis runs from 0 at plot_bottom) */
    uint64_t tick_bytes; /* between the y axis' ticks */
    /*
     * Without a budget, -1. With one: the pixel row boundary the 2-pixel
     * budget line is centred on, so that rows budget_y - 1 and budget_y are
     * the line's colour from plot_left to plot_right.
     */
    double budget_y;
};

/*
 * Checks the timeline and the options (see the top of this file) and
 * computes the layout of their picture. options may be NULL (defaults).
 */
enum tide_status tide_picture_layout(const struct tide_memory_timeline *timeline,
                                     const struct tide_picture_options *options,
                                     struct tide_picture_layout *layout, struct tide_error *err);

/*
 * Draws the picture on cr, whose target is at least the layout's size (a
 * surface of options' width and height). Checks as tide_picture_layout
 * does; TIDE_NOMEM or TIDE_INTERNAL when cairo fails, with its words.
 */
enum tide_status tide_picture_draw(cairo_t *cr, const struct tide_memory_timeline *timeline,
                                   const struct tide_picture_options *options,
                                   struct tide_error *err);

/* Writes the picture as an SVG file at path (TIDE_IO naming the path when it cannot). */
enum tide_status tide_picture_svg_file(const struct tide_memory_timeline *timeline,
                                       const struct tide_picture_options *options, const char *path,
                                       struct tide_error *err);

/*
 * The picture as SVG in memory: *data (malloc'd, NUL-terminated, the
 * caller's to free) holds *len bytes. Nothing is handed out on failure.
 */
enum tide_status tide_picture_svg_buffer(const struct tide_memory_timeline *timeline,
                                         const struct tide_picture_options *options, char **data,
                                         size_t *len, struct tide_error *err);

/* Writes the picture as a PNG file at path, one pixel per unit of the layout. */
enum tide_status tide_picture_png_file(const struct tide_memory_timeline *timeline,
                                       const struct tide_picture_options *options, const char *path,
                                       struct tide_error *err);

/*
 * Frees the font caches that cairo and fontconfig keep for the whole
 * process (cairo_debug_reset_static_data, FcFini), so that a leak checker
 * sees a clean exit. For programs about to exit: call it once, after the
 * last picture, when nothing else in the process uses cairo or fontconfig;
 * nothing may be drawn after it.
 */
void tide_picture_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_PICTURE_PICTURE_H */
