/* SPDX-License-Identifier: MIT */
/*
 * picture.c: a memory timeline drawn with cairo (see picture.h).
 *
 * One drawing function on a cairo context, three ways out: an SVG surface
 * writing to a file or to a growing buffer (cairo_svg_surface_create_for_stream),
 * and an image surface written as PNG. Files are opened here rather than by
 * cairo, so that a failure to write names the path and errno's words.
 *
 * The layout is fixed proportions of the picture's size, computed without
 * a cairo context (tide_picture_layout), so that tests and callers know
 * where the budget line is without reading the drawing back. The y axis
 * runs from 0 to a round number of bytes above everything drawn (budget,
 * peaks, measured values), with ticks at steps of 1, 2, 4, 5, 8, 10, 16,
 * ... KiB, MiB or GiB; the x axis is positions in the schedule, with ticks
 * at steps of 1, 2 or 5 times a power of ten.
 */
#include "picture/picture.h"

#include <cairo-svg.h>
#include <errno.h>
#include <fontconfig/fontconfig.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Colours, 0xRRGGBB, by category (stacked bottom up in this order), then the rest. */
static const uint32_t category_rgb[TIDE_MEMORY_CATEGORY_COUNT] = {
    [TIDE_MEMORY_VARIABLES] = 0x4e79a7,   /* blue */
    [TIDE_MEMORY_ACTIVATIONS] = 0xf28e2b, /* orange */
    [TIDE_MEMORY_SWAPPED_IN] = 0x59a14f,  /* green */
    [TIDE_MEMORY_WORKSPACE] = 0xb07aa1,   /* purple */
};
#define PEAK_RGB     0x222222u
#define ARENA_RGB    0x6b6b6bu
#define MEASURED_RGB 0x000000u
#define SWAP_OUT_RGB 0x9c755fu
#define SWAP_IN_RGB  0x59a14fu
#define TEXT_RGB     0x222222u
#define MUTED_RGB    0x6b6b6bu
#define GRID_RGB     0xdededeu
#define BAND_RGB     0xf3f3f3u
#define FONT         "DejaVu Sans"
#define TICK_ROW     14.0 /* height of a row of swap ticks */

/* ============================================================================
 * Numbers
 * ========================================================================== */

/* "0", "512 B", "1.5 KiB", "64 MiB", "63.9 MiB", "1.25 GiB": three digits at most. */
static const char *format_bytes(uint64_t bytes, char *buf, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes == 0) {
        snprintf(buf, size, "0");
        return buf;
    }
    int u = 0;
    double v = (double)bytes;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    if (u == 0) {
        snprintf(buf, size, "%" PRIu64 " B", bytes);
        return buf;
    }
    int decimals = v >= 100 ? 0 : v >= 10 ? 1 : 2;
    int n = snprintf(buf, size, "%.*f", decimals, v);
    /* "16.0" -> "16", "1.50" -> "1.5". */
    if (decimals > 0 && n > 0 && (size_t)n < size) {
        while (n > 0 && buf[n - 1] == '0')
            buf[--n] = '\0';
        if (n > 0 && buf[n - 1] == '.')
            buf[--n] = '\0';
    }
    snprintf(buf + n, size - (size_t)n, " %s", units[u]);
    return buf;
}

/* The smallest step of 1, 2, 4, 5, 8, 10, 16, ... 512 times a binary unit that is >= raw. */
static uint64_t byte_step(uint64_t raw)
{
    static const uint64_t multiples[] = {1,  2,  4,  5,   8,   10,  16,  20,  25,  32,
                                         40, 50, 64, 100, 128, 200, 250, 256, 500, 512};
    uint64_t unit = 1;
    while (unit <= (UINT64_C(1) << 50) && raw >= unit * 1024)
        unit *= 1024;
    for (size_t i = 0; i < sizeof(multiples) / sizeof(*multiples); i++) {
        if (multiples[i] * unit >= raw)
            return multiples[i] * unit;
    }
    return unit * 1024;
}

/* The smallest step of 1, 2 or 5 times a power of ten that is >= raw. */
static uint64_t decimal_step(double raw)
{
    for (uint64_t power = 1;; power *= 10) {
        if ((double)power >= raw)
            return power;
        if ((double)(2 * power) >= raw)
            return 2 * power;
        if ((double)(5 * power) >= raw)
            return 5 * power;
        if (power > UINT64_MAX / 100)
            return power * 10;
    }
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

static uint64_t point_sum(const struct tide_memory_timeline_point *pt)
{
    uint64_t sum = 0;
    for (int c = 0; c < TIDE_MEMORY_CATEGORY_COUNT; c++)
        sum += pt->bytes[c];
    return sum;
}

/* ============================================================================
 * Checks and layout
 * ========================================================================== */

static enum tide_status check_positions(const uint32_t *positions, uint32_t n, const char *what,
                                        uint32_t n_positions, struct tide_error *err)
{
    if (n && !positions)
        return tide_error_set(err, TIDE_INVALID, "memory picture: %u %s but no positions", n, what);
    for (uint32_t i = 0; i < n; i++) {
        if (positions[i] >= n_positions)
            return tide_error_set(err, TIDE_INVALID,
                                  "memory picture: %s %u is at position %u of a schedule of %u",
                                  what, i, positions[i], n_positions);
    }
    return TIDE_OK;
}

static enum tide_status check_timeline(const struct tide_memory_timeline *t,
                                       const struct tide_picture_options *o, struct tide_error *err)
{
    if (!t)
        return tide_error_set(err, TIDE_INVALID, "memory picture: the timeline is NULL");
    if (t->n_positions == 0 || t->n_points == 0 || !t->points)
        return tide_error_set(err, TIDE_INVALID,
                              "memory picture: the timeline is empty (%u positions, %u points): "
                              "a plan that does not fit has none",
                              t->n_positions, t->n_points);
    uint32_t next = 0;
    for (uint32_t i = 0; i < t->n_points; i++) {
        const struct tide_memory_timeline_point *pt = &t->points[i];
        if (pt->first != next || pt->first > pt->position || pt->position > pt->last ||
            pt->last >= t->n_positions)
            return tide_error_set(err, TIDE_INVALID,
                                  "memory picture: point %u covers positions %u..%u (at %u); "
                                  "it should start at %u and end before %u",
                                  i, pt->first, pt->last, pt->position, next, t->n_positions);
        next = pt->last + 1;
    }
    if (next != t->n_positions)
        return tide_error_set(err, TIDE_INVALID,
                              "memory picture: the points end at position %u of a schedule of %u",
                              next, t->n_positions);
    if (t->n_partitions && !t->partitions)
        return tide_error_set(err, TIDE_INVALID, "memory picture: %u partitions but no array",
                              t->n_partitions);
    for (uint32_t i = 0; i < t->n_partitions; i++) {
        const struct tide_memory_timeline_partition *part = &t->partitions[i];
        if (part->first > part->last || part->last >= t->n_positions)
            return tide_error_set(err, TIDE_INVALID,
                                  "memory picture: partition %u covers positions %u..%u of a "
                                  "schedule of %u",
                                  i, part->first, part->last, t->n_positions);
    }
    enum tide_status st =
        check_positions(t->swap_outs, t->n_swap_outs, "swap-outs", t->n_positions, err);
    if (st == TIDE_OK)
        st = check_positions(t->swap_ins, t->n_swap_ins, "swap-ins", t->n_positions, err);
    if (st != TIDE_OK)
        return st;
    if (o && o->measured_bytes && o->n_measured != t->n_partitions)
        return tide_error_set(err, TIDE_INVALID,
                              "memory picture: the measured high water has %u partitions, the "
                              "timeline %u",
                              o->n_measured, t->n_partitions);
    if (o && (o->width || o->height) &&
        (o->width < TIDE_PICTURE_MIN_WIDTH || o->height < TIDE_PICTURE_MIN_HEIGHT))
        return tide_error_set(err, TIDE_INVALID,
                              "memory picture: %ux%u pixels is too small; at least %ux%u", o->width,
                              o->height, TIDE_PICTURE_MIN_WIDTH, TIDE_PICTURE_MIN_HEIGHT);
    return TIDE_OK;
}

enum tide_status tide_picture_layout(const struct tide_memory_timeline *t,
                                     const struct tide_picture_options *o,
                                     struct tide_picture_layout *l, struct tide_error *err)
{
    if (!l)
        return tide_error_set(err, TIDE_INVALID, "memory picture: the layout is NULL");
    memset(l, 0, sizeof(*l));
    enum tide_status st = check_timeline(t, o, err);
    if (st != TIDE_OK)
        return st;
    l->width = o && o->width ? o->width : TIDE_PICTURE_DEFAULT_WIDTH;
    l->height = o && o->height ? o->height : TIDE_PICTURE_DEFAULT_HEIGHT;
    /* Title and partition numbers above; swap rows, x labels and the legend below. */
    l->plot_left = 92;
    l->plot_right = l->width - 28;
    l->plot_top = 84;
    l->plot_bottom = l->height - 150;

    uint64_t most = max_u64(max_u64(t->budget_bytes, t->predicted_peak_bytes), t->live_peak_bytes);
    for (uint32_t i = 0; i < t->n_points; i++)
        most = max_u64(most, point_sum(&t->points[i]));
    for (uint32_t i = 0; i < t->n_partitions; i++)
        most = max_u64(most, t->partitions[i].arena_top_bytes);
    for (uint32_t i = 0; o && o->measured_bytes && i < o->n_measured; i++)
        most = max_u64(most, o->measured_bytes[i]);
    /* Some room above the highest line for its label. */
    uint64_t headroom = most / 16 > UINT64_MAX - most ? UINT64_MAX - most : most / 16;
    uint64_t wanted = most + headroom;
    l->tick_bytes = byte_step(wanted / 5 ? wanted / 5 : 1);
    uint64_t ticks = wanted / l->tick_bytes + (wanted % l->tick_bytes != 0);
    l->top_bytes = (ticks ? ticks : 1) * l->tick_bytes;
    l->budget_y = -1;
    if (t->budget_bytes) {
        double y = l->plot_bottom -
                   (double)t->budget_bytes / (double)l->top_bytes * (l->plot_bottom - l->plot_top);
        l->budget_y = floor(y + 0.5);
    }
    return TIDE_OK;
}

/* ============================================================================
 * Drawing
 * ========================================================================== */

struct scene {
    cairo_t *cr;
    const struct tide_memory_timeline *t;
    const struct tide_picture_options *o;
    struct tide_picture_layout l;
};

static double x_of(const struct scene *s, double position)
{
    return s->l.plot_left +
           position / (double)s->t->n_positions * (s->l.plot_right - s->l.plot_left);
}

static double y_of(const struct scene *s, uint64_t bytes)
{
    return s->l.plot_bottom -
           (double)bytes / (double)s->l.top_bytes * (s->l.plot_bottom - s->l.plot_top);
}

static void set_rgba(cairo_t *cr, uint32_t rgb, double alpha)
{
    cairo_set_source_rgba(cr, ((rgb >> 16) & 0xff) / 255.0, ((rgb >> 8) & 0xff) / 255.0,
                          (rgb & 0xff) / 255.0, alpha);
}

static void set_rgb(cairo_t *cr, uint32_t rgb)
{
    set_rgba(cr, rgb, 1.0);
}

static void font(cairo_t *cr, double size, bool bold)
{
    cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
}

static double text_width(cairo_t *cr, const char *text)
{
    cairo_text_extents_t e;
    cairo_text_extents(cr, text, &e);
    return e.x_advance;
}

/* Text with its baseline at y; align 0 puts x at its left, 0.5 at its middle, 1 at its right. */
static void text_at(cairo_t *cr, double x, double y, double align, const char *text)
{
    cairo_move_to(cr, x - align * text_width(cr, text), y);
    cairo_show_text(cr, text);
}

/* Text on a white box, readable over the areas. */
static void label_at(cairo_t *cr, double x, double y, double align, uint32_t rgb, const char *text)
{
    double w = text_width(cr, text);
    double left = x - align * w;
    cairo_rectangle(cr, left - 3, y - 11, w + 6, 15);
    set_rgba(cr, 0xffffff, 0.85);
    cairo_fill(cr);
    set_rgb(cr, rgb);
    cairo_move_to(cr, left, y);
    cairo_show_text(cr, text);
}

static void draw_title(const struct scene *s)
{
    cairo_t *cr = s->cr;
    const struct tide_memory_timeline *t = s->t;
    set_rgb(cr, TEXT_RGB);
    font(cr, 18, true);
    text_at(cr, s->l.plot_left, 30, 0,
            s->o && s->o->title ? s->o->title : "Device memory over one step");
    char live[32], peak[32], gap[32], budget[32], line[320];
    format_bytes(t->live_peak_bytes, live, sizeof(live));
    format_bytes(t->predicted_peak_bytes, peak, sizeof(peak));
    format_bytes(t->predicted_peak_bytes - (t->predicted_peak_bytes > t->live_peak_bytes
                                                ? t->live_peak_bytes
                                                : t->predicted_peak_bytes),
                 gap, sizeof(gap));
    if (t->budget_bytes)
        format_bytes(t->budget_bytes, budget, sizeof(budget));
    snprintf(line, sizeof(line),
             "%u positions in %u partitions  \xc2\xb7  live peak %s, predicted peak %s "
             "(%s of fragmentation)  \xc2\xb7  %s%s  \xc2\xb7  %u swap-outs, %u swap-ins",
             t->n_positions, t->n_partitions, live, peak, gap, t->budget_bytes ? "budget " : "",
             t->budget_bytes ? budget : "no budget", t->n_swap_outs, t->n_swap_ins);
    set_rgb(cr, MUTED_RGB);
    font(cr, 12, false);
    text_at(cr, s->l.plot_left, 52, 0, line);
}

/* Every other partition shaded, and every k-th numbered above the plot. */
static void draw_partitions(const struct scene *s)
{
    cairo_t *cr = s->cr;
    const struct tide_memory_timeline *t = s->t;
    for (uint32_t i = 1; i < t->n_partitions; i += 2) {
        double x0 = x_of(s, t->partitions[i].first), x1 = x_of(s, t->partitions[i].last + 1.0);
        cairo_rectangle(cr, x0, s->l.plot_top, x1 - x0, s->l.plot_bottom - s->l.plot_top);
    }
    set_rgb(cr, BAND_RGB);
    cairo_fill(cr);
    if (t->n_partitions == 0)
        return;
    double average = (s->l.plot_right - s->l.plot_left) / t->n_partitions;
    uint64_t every = decimal_step(34.0 / average);
    font(cr, 10, false);
    set_rgb(cr, MUTED_RGB);
    text_at(cr, s->l.plot_left - 8, s->l.plot_top - 6, 1, "partition");
    char label[16];
    for (uint64_t i = 0; i < t->n_partitions; i += every) {
        const struct tide_memory_timeline_partition *part = &t->partitions[i];
        snprintf(label, sizeof(label), "%" PRIu64, i);
        text_at(cr, (x_of(s, part->first) + x_of(s, part->last + 1.0)) / 2, s->l.plot_top - 6, 0.5,
                label);
    }
}

static void draw_grid(const struct scene *s)
{
    cairo_t *cr = s->cr;
    set_rgb(cr, GRID_RGB);
    cairo_set_line_width(cr, 1);
    for (uint64_t b = s->l.tick_bytes; b <= s->l.top_bytes; b += s->l.tick_bytes) {
        double y = floor(y_of(s, b)) + 0.5;
        cairo_move_to(cr, s->l.plot_left, y);
        cairo_line_to(cr, s->l.plot_right, y);
    }
    cairo_stroke(cr);
}

/* The categories stacked, each point a step across the positions it stands for. */
static void draw_areas(const struct scene *s)
{
    cairo_t *cr = s->cr;
    const struct tide_memory_timeline *t = s->t;
    for (int c = 0; c < TIDE_MEMORY_CATEGORY_COUNT; c++) {
        for (uint32_t i = 0; i < t->n_points; i++) {
            const struct tide_memory_timeline_point *pt = &t->points[i];
            uint64_t upper = 0;
            for (int k = 0; k <= c; k++)
                upper += pt->bytes[k];
            double y = y_of(s, upper);
            if (i == 0)
                cairo_move_to(cr, x_of(s, pt->first), y);
            else
                cairo_line_to(cr, x_of(s, pt->first), y);
            cairo_line_to(cr, x_of(s, pt->last + 1.0), y);
        }
        for (uint32_t i = t->n_points; i-- > 0;) {
            const struct tide_memory_timeline_point *pt = &t->points[i];
            uint64_t lower = 0;
            for (int k = 0; k < c; k++)
                lower += pt->bytes[k];
            double y = y_of(s, lower);
            cairo_line_to(cr, x_of(s, pt->last + 1.0), y);
            cairo_line_to(cr, x_of(s, pt->first), y);
        }
        cairo_close_path(cr);
        set_rgba(cr, category_rgb[c], 0.9);
        cairo_fill(cr);
    }
}

/* The arena's top per partition, as planned or as measured, as a step line. */
static void step_line(const struct scene *s, bool measured)
{
    cairo_t *cr = s->cr;
    const struct tide_memory_timeline *t = s->t;
    for (uint32_t i = 0; i < t->n_partitions; i++) {
        double y = y_of(s, measured ? s->o->measured_bytes[i] : t->partitions[i].arena_top_bytes);
        double x0 = x_of(s, t->partitions[i].first), x1 = x_of(s, t->partitions[i].last + 1.0);
        if (i == 0)
            cairo_move_to(cr, x0, y);
        else
            cairo_line_to(cr, x0, y);
        cairo_line_to(cr, x1, y);
    }
    cairo_stroke(cr);
}

static void draw_lines(const struct scene *s)
{
    cairo_t *cr = s->cr;
    const struct tide_memory_timeline *t = s->t;
    cairo_save(cr);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_MITER);
    /* The top of the arena in use, as planned, then as measured. */
    if (t->n_partitions) {
        set_rgb(cr, ARENA_RGB);
        cairo_set_line_width(cr, 1);
        step_line(s, false);
    }
    if (s->o && s->o->measured_bytes && t->n_partitions) {
        set_rgba(cr, MEASURED_RGB, 0.8);
        cairo_set_line_width(cr, 2.5);
        step_line(s, true);
    }
    /* The predicted peak, dashed; the budget last, on top of everything. */
    double dash[] = {6, 4};
    cairo_set_dash(cr, dash, 2, 0);
    set_rgb(cr, PEAK_RGB);
    cairo_set_line_width(cr, 1.5);
    double peak_y = y_of(s, t->predicted_peak_bytes);
    cairo_move_to(cr, s->l.plot_left, peak_y);
    cairo_line_to(cr, s->l.plot_right, peak_y);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    if (s->l.budget_y >= 0) {
        set_rgb(cr, TIDE_PICTURE_BUDGET_RGB);
        cairo_set_line_width(cr, 2);
        cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
        cairo_move_to(cr, s->l.plot_left, s->l.budget_y);
        cairo_line_to(cr, s->l.plot_right, s->l.budget_y);
        cairo_stroke(cr);
    }
    cairo_restore(cr);
}

/* The budget's and the peak's labels, at opposite ends so that close lines keep both. */
static void draw_line_labels(const struct scene *s)
{
    cairo_t *cr = s->cr;
    const struct tide_memory_timeline *t = s->t;
    char bytes[32], text[96];
    font(cr, 11, true);
    double peak_y = y_of(s, t->predicted_peak_bytes);
    if (s->l.budget_y >= 0) {
        snprintf(text, sizeof(text), "budget %s",
                 format_bytes(t->budget_bytes, bytes, sizeof(bytes)));
        label_at(cr, s->l.plot_right - 6, s->l.budget_y - 6, 1, TIDE_PICTURE_BUDGET_RGB, text);
    }
    snprintf(text, sizeof(text), "predicted peak %s",
             format_bytes(t->predicted_peak_bytes, bytes, sizeof(bytes)));
    /* Below its line when the budget's label would sit on it. */
    bool below = s->l.budget_y >= 0 && s->l.budget_y < peak_y + 1 && s->l.budget_y > peak_y - 18;
    label_at(cr, s->l.plot_left + 6, below ? peak_y + 15 : peak_y - 6, 0, PEAK_RGB, text);
}

static void draw_axes(const struct scene *s)
{
    cairo_t *cr = s->cr;
    const struct tide_memory_timeline *t = s->t;
    set_rgb(cr, TEXT_RGB);
    cairo_set_line_width(cr, 1);
    cairo_move_to(cr, s->l.plot_left - 0.5, s->l.plot_top);
    cairo_line_to(cr, s->l.plot_left - 0.5, s->l.plot_bottom + 0.5);
    cairo_line_to(cr, s->l.plot_right, s->l.plot_bottom + 0.5);
    cairo_stroke(cr);

    /* y: bytes. */
    font(cr, 11, false);
    char label[32];
    for (uint64_t b = 0; b <= s->l.top_bytes; b += s->l.tick_bytes) {
        double y = floor(y_of(s, b)) + 0.5;
        cairo_move_to(cr, s->l.plot_left - 5, y);
        cairo_line_to(cr, s->l.plot_left - 1, y);
        cairo_stroke(cr);
        text_at(cr, s->l.plot_left - 8, y + 4, 1, format_bytes(b, label, sizeof(label)));
        if (b > UINT64_MAX - s->l.tick_bytes)
            break;
    }
    cairo_save(cr);
    cairo_translate(cr, 18, (s->l.plot_top + s->l.plot_bottom) / 2);
    cairo_rotate(cr, -M_PI / 2);
    font(cr, 12, false);
    text_at(cr, 0, 0, 0.5, "device bytes live");
    cairo_restore(cr);

    /* x: positions, under the swap rows. */
    double label_y = s->l.plot_bottom + 2 * TICK_ROW + 24;
    uint64_t step = decimal_step((double)t->n_positions / 10.0);
    font(cr, 11, false);
    for (uint64_t p = 0; p <= t->n_positions; p += step) {
        double x = floor(x_of(s, (double)p)) + 0.5;
        cairo_move_to(cr, x, s->l.plot_bottom + 1);
        cairo_line_to(cr, x, s->l.plot_bottom + 5);
        cairo_stroke(cr);
        snprintf(label, sizeof(label), "%" PRIu64, p);
        text_at(cr, x, label_y, 0.5, label);
    }
    font(cr, 12, false);
    text_at(cr, (s->l.plot_left + s->l.plot_right) / 2, label_y + 20, 0.5,
            "schedule position (nodes in execution order, one training step)");
}

/* A row of ticks, one per position, under the plot; row 0 is the first under it. */
static void tick_row(const struct scene *s, int row, const uint32_t *positions, uint32_t n,
                     uint32_t rgb, const char *name)
{
    cairo_t *cr = s->cr;
    double top = s->l.plot_bottom + 6 + row * TICK_ROW;
    set_rgb(cr, MUTED_RGB);
    font(cr, 10, false);
    text_at(cr, s->l.plot_left - 8, top + 9, 1, name);
    set_rgb(cr, rgb);
    cairo_set_line_width(cr, 1);
    for (uint32_t i = 0; i < n; i++) {
        double x = floor(x_of(s, positions[i] + 0.5)) + 0.5;
        cairo_move_to(cr, x, top);
        cairo_line_to(cr, x, top + TICK_ROW - 4);
    }
    cairo_stroke(cr);
}

/* One legend entry: a swatch, then its text; returns the entry's width. */
enum swatch { SWATCH_AREA, SWATCH_LINE, SWATCH_DASH, SWATCH_TICK };

static double legend_entry(cairo_t *cr, double x, double y, enum swatch kind, uint32_t rgb,
                           double line_width, const char *text, bool draw)
{
    double width = ceil(24 + text_width(cr, text) + 18); /* whole pixels: crisp swatches */
    if (!draw)
        return width;
    switch (kind) {
    case SWATCH_AREA:
        cairo_rectangle(cr, x, y - 10, 16, 12);
        set_rgba(cr, rgb, 0.9);
        cairo_fill(cr);
        break;
    case SWATCH_TICK:
        set_rgb(cr, rgb);
        cairo_set_line_width(cr, 1);
        for (int i = 0; i < 4; i++) {
            cairo_move_to(cr, x + 2.5 + 4 * i, y - 10);
            cairo_line_to(cr, x + 2.5 + 4 * i, y + 1);
        }
        cairo_stroke(cr);
        break;
    case SWATCH_LINE:
    case SWATCH_DASH: {
        double dash[] = {5, 3};
        cairo_set_dash(cr, dash, kind == SWATCH_DASH ? 2 : 0, 0);
        set_rgb(cr, rgb);
        cairo_set_line_width(cr, line_width);
        cairo_move_to(cr, x, y - 4);
        cairo_line_to(cr, x + 18, y - 4);
        cairo_stroke(cr);
        cairo_set_dash(cr, NULL, 0, 0);
        break;
    }
    }
    set_rgb(cr, TEXT_RGB);
    text_at(cr, x + 24, y, 0, text);
    return width;
}

/* The legend: entries left to right, wrapped onto a second row when they do not fit. */
static void draw_legend(const struct scene *s)
{
    cairo_t *cr = s->cr;
    const struct tide_memory_timeline *t = s->t;
    char measured[64];
    if (s->o && s->o->measured_step)
        snprintf(measured, sizeof(measured), "arena top, measured (step %" PRIu64 ")",
                 s->o->measured_step);
    else
        snprintf(measured, sizeof(measured), "arena top, measured");
    struct {
        enum swatch kind;
        uint32_t rgb;
        double line_width;
        const char *text;
        bool shown;
    } entries[] = {
        {SWATCH_AREA, category_rgb[0], 0, tide_memory_category_name(0), true},
        {SWATCH_AREA, category_rgb[1], 0, tide_memory_category_name(1), true},
        {SWATCH_AREA, category_rgb[2], 0, tide_memory_category_name(2), true},
        {SWATCH_AREA, category_rgb[3], 0, tide_memory_category_name(3), true},
        {SWATCH_LINE, TIDE_PICTURE_BUDGET_RGB, 2, "budget", t->budget_bytes > 0},
        {SWATCH_DASH, PEAK_RGB, 1.5, "predicted peak", true},
        {SWATCH_LINE, ARENA_RGB, 1, "arena top, plan", t->n_partitions > 0},
        {SWATCH_LINE, MEASURED_RGB, 2.5, measured, s->o && s->o->measured_bytes},
        {SWATCH_TICK, SWAP_OUT_RGB, 1, "swap-out", true},
        {SWATCH_TICK, SWAP_IN_RGB, 1, "swap-in", true},
    };
    size_t n = sizeof(entries) / sizeof(*entries);
    font(cr, 12, false);
    double x = s->l.plot_left, y = s->l.plot_bottom + 2 * TICK_ROW + 80;
    for (size_t i = 0; i < n; i++) {
        if (!entries[i].shown)
            continue;
        double w = legend_entry(cr, x, y, entries[i].kind, entries[i].rgb, entries[i].line_width,
                                entries[i].text, false);
        if (x > s->l.plot_left && x + w > s->l.plot_right) {
            x = s->l.plot_left;
            y += 20;
        }
        x += legend_entry(cr, x, y, entries[i].kind, entries[i].rgb, entries[i].line_width,
                          entries[i].text, true);
    }
}

static enum tide_status cairo_error(cairo_status_t status, const char *what, struct tide_error *err)
{
    return tide_error_set(err, status == CAIRO_STATUS_NO_MEMORY ? TIDE_NOMEM : TIDE_INTERNAL,
                          "memory picture: %s: cairo: %s", what, cairo_status_to_string(status));
}

enum tide_status tide_picture_draw(cairo_t *cr, const struct tide_memory_timeline *timeline,
                                   const struct tide_picture_options *options,
                                   struct tide_error *err)
{
    if (!cr)
        return tide_error_set(err, TIDE_INVALID, "memory picture: the cairo context is NULL");
    struct scene s = {.cr = cr, .t = timeline, .o = options};
    enum tide_status st = tide_picture_layout(timeline, options, &s.l, err);
    if (st != TIDE_OK)
        return st;
    cairo_save(cr);
    /*
     * Unhinted text, so that glyphs come out the same on every surface and
     * whatever was drawn before in the process (cached fonts keep the hints
     * of the surface that made them).
     */
    cairo_font_options_t *fonts = cairo_font_options_create();
    cairo_font_options_set_hint_style(fonts, CAIRO_HINT_STYLE_NONE);
    cairo_font_options_set_hint_metrics(fonts, CAIRO_HINT_METRICS_OFF);
    cairo_font_options_set_antialias(fonts, CAIRO_ANTIALIAS_GRAY);
    cairo_set_font_options(cr, fonts);
    cairo_font_options_destroy(fonts);
    cairo_rectangle(cr, 0, 0, s.l.width, s.l.height);
    set_rgb(cr, 0xffffff);
    cairo_fill(cr);
    draw_title(&s);
    draw_partitions(&s);
    draw_grid(&s);
    draw_areas(&s);
    draw_lines(&s);
    draw_axes(&s);
    tick_row(&s, 0, timeline->swap_outs, timeline->n_swap_outs, SWAP_OUT_RGB, "swap-out");
    tick_row(&s, 1, timeline->swap_ins, timeline->n_swap_ins, SWAP_IN_RGB, "swap-in");
    draw_line_labels(&s);
    draw_legend(&s);
    cairo_restore(cr);
    cairo_status_t status = cairo_status(cr);
    return status == CAIRO_STATUS_SUCCESS ? TIDE_OK : cairo_error(status, "drawing", err);
}

/* ============================================================================
 * Surfaces: SVG to a file or memory, PNG to a file
 * ========================================================================== */

/* Where a surface's bytes go: a file, or a growing buffer when file is NULL. */
struct sink {
    FILE *file;
    int error; /* errno of the first failed write */
    char *data;
    size_t len, cap;
};

static cairo_status_t sink_write(void *closure, const unsigned char *data, unsigned int length)
{
    struct sink *k = closure;
    if (k->file) {
        if (fwrite(data, 1, length, k->file) != length) {
            k->error = errno ? errno : EIO;
            return CAIRO_STATUS_WRITE_ERROR;
        }
        return CAIRO_STATUS_SUCCESS;
    }
    if (k->len + length + 1 > k->cap) {
        size_t cap = k->cap ? k->cap : 65536;
        while (cap < k->len + length + 1)
            cap *= 2;
        char *grown = realloc(k->data, cap);
        if (!grown)
            return CAIRO_STATUS_NO_MEMORY;
        k->data = grown;
        k->cap = cap;
    }
    memcpy(k->data + k->len, data, length);
    k->len += length;
    k->data[k->len] = '\0';
    return CAIRO_STATUS_SUCCESS;
}

static enum tide_status sink_open(struct sink *k, const char *path, struct tide_error *err)
{
    memset(k, 0, sizeof(*k));
    if (!path)
        return tide_error_set(err, TIDE_INVALID, "memory picture: the path is NULL");
    k->file = fopen(path, "wb");
    if (!k->file)
        return tide_error_set(err, TIDE_IO, "memory picture: cannot create \"%s\": %s", path,
                              strerror(errno));
    return TIDE_OK;
}

/* Closes a file sink; st is what happened before, a failed close is reported if it was OK. */
static enum tide_status sink_close(struct sink *k, const char *path, enum tide_status st,
                                   struct tide_error *err)
{
    int closed = fclose(k->file);
    int error = k->error ? k->error : closed != 0 ? errno : 0;
    if (st == TIDE_OK && error)
        st = tide_error_set(err, TIDE_IO, "memory picture: cannot write \"%s\": %s", path,
                            strerror(error));
    if (st != TIDE_OK)
        remove(path);
    return st;
}

/* Draws the picture as SVG into k. */
static enum tide_status render_svg(const struct tide_memory_timeline *t,
                                   const struct tide_picture_options *o, struct sink *k,
                                   struct tide_error *err)
{
    struct tide_picture_layout l;
    enum tide_status st = tide_picture_layout(t, o, &l, err);
    if (st != TIDE_OK)
        return st;
    cairo_surface_t *surface =
        cairo_svg_surface_create_for_stream(sink_write, k, l.width, l.height);
    cairo_svg_surface_set_document_unit(surface, CAIRO_SVG_UNIT_PX);
    cairo_t *cr = cairo_create(surface);
    st = tide_picture_draw(cr, t, o, err);
    cairo_destroy(cr);
    cairo_surface_finish(surface);
    cairo_status_t status = cairo_surface_status(surface);
    cairo_surface_destroy(surface);
    if (st == TIDE_OK && status != CAIRO_STATUS_SUCCESS && !k->error)
        st = cairo_error(status, "the SVG surface", err);
    return st;
}

enum tide_status tide_picture_svg_file(const struct tide_memory_timeline *timeline,
                                       const struct tide_picture_options *options, const char *path,
                                       struct tide_error *err)
{
    struct sink k;
    enum tide_status st = sink_open(&k, path, err);
    if (st != TIDE_OK)
        return st;
    st = render_svg(timeline, options, &k, err);
    return sink_close(&k, path, st, err);
}

enum tide_status tide_picture_svg_buffer(const struct tide_memory_timeline *timeline,
                                         const struct tide_picture_options *options, char **data,
                                         size_t *len, struct tide_error *err)
{
    if (!data || !len)
        return tide_error_set(err, TIDE_INVALID, "memory picture: data and len are needed");
    *data = NULL;
    *len = 0;
    struct sink k = {0};
    enum tide_status st = render_svg(timeline, options, &k, err);
    if (st != TIDE_OK) {
        free(k.data);
        return st;
    }
    *data = k.data;
    *len = k.len;
    return TIDE_OK;
}

enum tide_status tide_picture_png_file(const struct tide_memory_timeline *timeline,
                                       const struct tide_picture_options *options, const char *path,
                                       struct tide_error *err)
{
    struct tide_picture_layout l;
    enum tide_status st = tide_picture_layout(timeline, options, &l, err);
    if (st != TIDE_OK)
        return st;
    cairo_surface_t *surface =
        cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)l.width, (int)l.height);
    cairo_t *cr = cairo_create(surface);
    st = tide_picture_draw(cr, timeline, options, err);
    cairo_destroy(cr);
    struct sink k;
    if (st == TIDE_OK)
        st = sink_open(&k, path, err);
    if (st == TIDE_OK) {
        cairo_status_t status = cairo_surface_write_to_png_stream(surface, sink_write, &k);
        if (status != CAIRO_STATUS_SUCCESS && !k.error)
            st = cairo_error(status, "writing the PNG", err);
        st = sink_close(&k, path, st, err);
    }
    cairo_surface_destroy(surface);
    return st;
}

void tide_picture_shutdown(void)
{
    cairo_debug_reset_static_data();
    FcFini();
}
