// SPDX-License-Identifier: MIT
//
// tided's trace viewer: fetches /api/jobs/ID/trace.json (the Chrome Trace
// Event JSON that runtime/trace.c writes) with the token and draws it on a
// canvas, without ui.perfetto.dev:
//
//  - one lane per track (thread_name: compute, h2d, d2h), slices nested by
//    time: the step, the runs of one partition, then the ops ("kernel" and
//    "copy") and waits, coloured by kind (KINDS), named where wide enough;
//  - the counter series (device, host: "bytes in use") as step-line area
//    charts under the lanes, the device one with the job's budget;
//  - flows (s, f: a SwapIn or Fetch to its first consumer) as thin arrows;
//  - a time axis in ms; hover shows a slice's args, the wheel zooms, a drag
//    pans, a double-click shows the whole trace again.
//
// It also writes what the trace holds as text (tracks with their slice
// counts, counter peaks, the duration) under the canvas, which tests read
// with chromium's --dump-dom. Every string from the trace is drawn with
// fillText or set as textContent, never parsed as markup.
'use strict';

(function () {
  const { bytes, seconds, stepRange } = window.tide;
  const $ = (id) => document.getElementById(id);

  // Layout, in CSS pixels.
  const AXIS_H = 24;
  const LABEL_W = 92;
  const RIGHT_PAD = 14;
  const ROW_H = 22;
  const LANE_GAP = 8;
  const COUNTER_H = 96;
  const COUNTER_GAP = 10;
  const FONT = '11px system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif';
  const LABEL_FONT = '600 12px system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif';

  // The kinds of slices, their colours and the legend: one table. kind() picks the row.
  const KINDS = [
    { key: 'step', label: 'step', fill: '#d5dbe5', ink: '#1d2330' },
    { key: 'partition', label: 'partition', fill: '#e6eaf1', ink: '#4b5366' },
    { key: 'kernel', label: 'kernel (compute)', fill: '#4a7fd6', ink: '#ffffff' },
    { key: 'SwapIn', label: 'SwapIn (h2d)', fill: '#2f9e62', ink: '#ffffff' },
    { key: 'Fetch', label: 'Fetch (h2d)', fill: '#86c7a1', ink: '#1d2330' },
    { key: 'SwapOut', label: 'SwapOut (d2h)', fill: '#d9821c', ink: '#ffffff' },
    { key: 'WriteBack', label: 'WriteBack (d2h)', fill: '#edc07a', ink: '#1d2330' },
    { key: 'copy', label: 'other copy', fill: '#8e6fd0', ink: '#ffffff' },
    { key: 'wait', label: 'wait', fill: '#c3c8d1', ink: '#1d2330' },
  ];
  const KIND = new Map(KINDS.map((k) => [k.key, k]));
  const SERIES = {
    device: { label: 'device bytes in use', fill: 'rgba(47, 111, 222, 0.22)', line: '#2f6fde' },
    host: { label: 'host-pool bytes', fill: 'rgba(217, 130, 28, 0.20)', line: '#c7741a' },
  };

  function kind(slice) {
    if (slice.cat === 'step' || slice.cat === 'partition' || slice.cat === 'kernel' ||
        slice.cat === 'wait')
      return KIND.get(slice.cat);
    const op = slice.args && slice.args.op;
    return KIND.get(op) || KIND.get('copy');
  }

  // ---- the trace as the viewer needs it ------------------------------------

  // Tracks (one per tid with slices, in thread_sort_index order), each with
  // rows of slices by nesting depth; counter series; flows; the time span.
  function model(doc) {
    if (!doc || !Array.isArray(doc.traceEvents))
      throw new Error('it has no "traceEvents" list: not a Chrome trace');
    const tracks = new Map();
    const track = (tid) => {
      let t = tracks.get(tid);
      if (!t) {
        t = { tid, name: 'thread ' + tid, sort: tid, slices: [], rows: [] };
        tracks.set(tid, t);
      }
      return t;
    };
    const series = new Map();
    const flowEnds = new Map();
    let start = Infinity;
    let end = -Infinity;
    for (const e of doc.traceEvents) {
      if (!e || typeof e !== 'object') continue;
      if (e.ph === 'M' && e.name === 'thread_name' && e.args) {
        track(e.tid).name = String(e.args.name);
      } else if (e.ph === 'M' && e.name === 'thread_sort_index' && e.args) {
        track(e.tid).sort = Number(e.args.sort_index);
      } else if (e.ph === 'X') {
        const s = {
          name: String(e.name), cat: String(e.cat || ''), ts: Number(e.ts),
          dur: Math.max(0, Number(e.dur) || 0), args: e.args || {}, depth: 0,
        };
        s.end = s.ts + s.dur;
        s.kind = kind(s);
        track(e.tid).slices.push(s);
        start = Math.min(start, s.ts);
        end = Math.max(end, s.end);
      } else if (e.ph === 'C' && e.args) {
        let samples = series.get(e.name);
        if (!samples) series.set(e.name, (samples = []));
        const value = Object.values(e.args).find((v) => typeof v === 'number');
        if (value !== undefined) samples.push({ ts: Number(e.ts), value });
      } else if (e.ph === 's' || e.ph === 'f') {
        let flow = flowEnds.get(e.id);
        if (!flow) flowEnds.set(e.id, (flow = { name: String(e.name) }));
        flow[e.ph === 's' ? 'from' : 'to'] = { tid: e.tid, ts: Number(e.ts) };
      }
    }
    const ordered = [...tracks.values()].filter((t) => t.slices.length > 0);
    ordered.sort((a, b) => a.sort - b.sort || a.tid - b.tid);
    for (const t of ordered) nest(t);
    const counters = [];
    for (const [name, samples] of series) {
      samples.sort((a, b) => a.ts - b.ts);
      const max = samples.reduce((m, s) => Math.max(m, s.value), 0);
      const style = SERIES[name] || { ...SERIES.device, label: name };
      counters.push({ name, samples, max, style });
    }
    counters.sort((a, b) => (a.name === 'device' ? -1 : b.name === 'device' ? 1 : 0));
    const flows = [...flowEnds.values()].filter((f) => f.from && f.to);
    if (start === Infinity) {
      start = 0;
      end = 1;
    }
    return { tracks: ordered, counters, flows, start, end: Math.max(end, start + 1e-3) };
  }

  // Depth of each slice of a track: the number of slices enclosing it (steps
  // and partitions enclose the ops of their time). Rows hold each depth's
  // slices in time order. Times are microseconds written to the nanosecond,
  // so a slice that starts where another ends (in doubles, a hair before)
  // follows it rather than nests in it.
  const EPSILON_US = 5e-4;

  function nest(t) {
    const rank = { step: 0, partition: 1 };
    t.slices.sort((a, b) => a.ts - b.ts || b.dur - a.dur ||
      (rank[a.cat] ?? 2) - (rank[b.cat] ?? 2));
    const open = [];
    for (const s of t.slices) {
      while (open.length && open[open.length - 1].end <= s.ts + EPSILON_US &&
             !(open[open.length - 1].dur === 0 && open[open.length - 1].ts === s.ts))
        open.pop();
      s.depth = open.length;
      open.push(s);
      (t.rows[s.depth] || (t.rows[s.depth] = [])).push(s);
    }
  }

  // ---- the summary (text, for people and tests) ----------------------------

  function ms(us) {
    const v = us / 1000;
    return (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)) + ' ms';
  }

  function cell(row, text) {
    const td = document.createElement('td');
    td.textContent = text;
    row.append(td);
  }

  function figure(list, label, text, data) {
    const item = document.createElement('div');
    const dt = document.createElement('dt');
    const dd = document.createElement('dd');
    dt.textContent = label;
    dd.textContent = text;
    for (const [k, v] of Object.entries(data || {})) item.dataset[k] = String(v);
    item.append(dt, dd);
    list.append(item);
  }

  function summarise(m) {
    const body = $('tracks');
    body.textContent = '';
    for (const t of m.tracks) {
      let ops = 0;
      let partitions = 0;
      let waits = 0;
      let moved = 0;
      let busy = 0;
      for (const s of t.slices) {
        if (s.cat === 'kernel' || s.cat === 'copy') {
          ops++;
          busy += s.dur;
          moved += Number(s.args.bytes) || 0;
        } else if (s.cat === 'partition') {
          partitions++;
        } else if (s.cat === 'wait') {
          waits++;
        }
      }
      const row = document.createElement('tr');
      row.dataset.track = t.name;
      row.dataset.slices = String(ops);
      cell(row, t.name);
      cell(row, String(ops));
      cell(row, moved ? bytes(moved) : '–');
      cell(row, String(partitions));
      cell(row, String(waits));
      cell(row, ms(busy));
      body.append(row);
    }
    const list = $('figures');
    list.textContent = '';
    const steps = (m.tracks[0] ? m.tracks[0].slices : []).filter((s) => s.cat === 'step');
    const numbers = steps.map((s) => Number(s.args.step)).filter((n) => Number.isFinite(n));
    figure(list, 'steps', String(steps.length) + (numbers.length ? ' (' +
      stepRange(Math.min(...numbers), Math.max(...numbers)) + ')' : ''), { steps: steps.length });
    figure(list, 'duration', ms(m.end - m.start), { durationUs: (m.end - m.start).toFixed(3) });
    for (const c of m.counters) {
      figure(list, c.style.label + ' (peak)', bytes(c.max), { counter: c.name, max: c.max });
    }
    figure(list, 'flows', String(m.flows.length), { flows: m.flows.length });
    $('summary').hidden = false;
  }

  function legend() {
    const box = $('legend');
    box.textContent = '';
    const add = (label, fill) => {
      const item = document.createElement('span');
      const swatch = document.createElement('span');
      swatch.className = 'swatch';
      swatch.style.background = fill;
      item.append(swatch, label);
      box.append(item);
    };
    for (const k of KINDS) add(k.label, k.fill);
    for (const s of Object.values(SERIES)) add(s.label, s.line);
  }

  // ---- drawing ---------------------------------------------------------------

  const canvas = $('canvas');
  const tooltip = $('tooltip');
  let trace = null; // the model
  let budget = null; // the job's budget in bytes, when /api/jobs says
  let view = null; // [start, end] in µs
  let layout = null; // where the last draw put lanes and counters
  let pending = false;

  function redraw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      draw();
    });
  }

  // A tick step of 1, 2 or 5 times a power of ten, about every 110 px.
  function tickStep(span, width) {
    const raw = (span * 110) / Math.max(width, 1);
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const f of [1, 2, 5, 10]) if (f * p >= raw) return f * p;
    return 10 * p;
  }

  function tickLabel(us, step) {
    const v = us / 1000;
    const digits = Math.max(0, -Math.floor(Math.log10(step / 1000) + 1e-9));
    return v.toFixed(Math.min(digits, 3)) + ' ms';
  }

  // Text clipped to a width; null when not even a few letters fit.
  function fit(ctx, text, width) {
    if (width < 14) return null;
    if (ctx.measureText(text).width <= width) return text;
    let lo = 0;
    let hi = text.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (ctx.measureText(text.slice(0, mid) + '…').width <= width) lo = mid;
      else hi = mid - 1;
    }
    return lo >= 2 ? text.slice(0, lo) + '…' : null;
  }

  function draw() {
    if (!trace) return;
    const box = $('canvas-box');
    const width = Math.max(400, box.clientWidth);
    const lanes = [];
    let y = AXIS_H;
    for (const t of trace.tracks) {
      const h = Math.max(1, t.rows.length) * ROW_H;
      lanes.push({ track: t, top: y, height: h });
      y += h + LANE_GAP;
    }
    const counters = [];
    for (const c of trace.counters) {
      y += COUNTER_GAP;
      counters.push({ counter: c, top: y, height: COUNTER_H });
      y += COUNTER_H;
    }
    const height = y + 6;
    const dpr = window.devicePixelRatio || 1;
    if (canvas.width !== Math.round(width * dpr) || canvas.height !== Math.round(height * dpr)) {
      canvas.width = Math.round(width * dpr);
      canvas.height = Math.round(height * dpr);
      canvas.style.width = width + 'px';
      canvas.style.height = height + 'px';
    }
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const left = LABEL_W;
    const right = width - RIGHT_PAD;
    const [v0, v1] = view;
    const scale = (right - left) / (v1 - v0);
    const x = (t) => left + (t - v0) * scale;
    layout = { lanes, counters, left, right, x, scale };

    // The time axis and its grid.
    const step = tickStep(v1 - v0, right - left);
    ctx.font = FONT;
    ctx.textBaseline = 'middle';
    ctx.textAlign = 'center';
    for (let t = Math.ceil((v0 - trace.start) / step) * step + trace.start; t <= v1; t += step) {
      const px = Math.round(x(t)) + 0.5;
      ctx.strokeStyle = '#e8ebf0';
      ctx.beginPath();
      ctx.moveTo(px, AXIS_H - 4);
      ctx.lineTo(px, height);
      ctx.stroke();
      ctx.fillStyle = '#6b7385';
      ctx.fillText(tickLabel(t - trace.start, step), px, AXIS_H / 2 - 1);
    }
    ctx.strokeStyle = '#c9ced8';
    ctx.beginPath();
    ctx.moveTo(left, AXIS_H - 0.5);
    ctx.lineTo(right, AXIS_H - 0.5);
    ctx.stroke();

    // Lanes: the track's name, then its slices by depth, clipped to the plot.
    for (const lane of lanes) {
      ctx.fillStyle = '#f7f8fa';
      ctx.fillRect(0, lane.top, left - 6, lane.height);
      ctx.fillStyle = '#1d2330';
      ctx.font = LABEL_FONT;
      ctx.textAlign = 'left';
      ctx.fillText(lane.track.name, 8, lane.top + ROW_H / 2);
      ctx.save();
      ctx.beginPath();
      ctx.rect(left, lane.top, right - left, lane.height);
      ctx.clip();
      ctx.font = FONT;
      lane.track.rows.forEach((row, depth) => drawRow(ctx, row, lane.top + depth * ROW_H, x, v0, v1));
      ctx.restore();
    }

    for (const c of counters) drawCounter(ctx, c, x, left, right);
    if (lanes.length) drawFlows(ctx, lanes, x, left, right);
  }

  // The first index of row (sorted by ts) whose slice may end after t.
  function firstVisible(row, t) {
    let lo = 0;
    let hi = row.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (row[mid].ts < t) lo = mid + 1;
      else hi = mid;
    }
    // Slices of a row do not overlap, so only the one before may still reach into the view.
    return Math.max(0, lo - 1);
  }

  function drawRow(ctx, row, top, x, v0, v1) {
    let lastPixel = -Infinity;
    let lastFill = null;
    for (let i = firstVisible(row, v0); i < row.length && row[i].ts <= v1; i++) {
      const s = row[i];
      if (s.end < v0) continue;
      const x0 = x(s.ts);
      const x1 = x(s.end);
      // Slices narrower than a pixel that land on a pixel already drawn in that colour add nothing.
      if (x1 - x0 < 1 && Math.floor(x0) === lastPixel && lastFill === s.kind.fill) continue;
      const w = Math.max(1, x1 - x0 - (x1 - x0 > 3 ? 1 : 0));
      ctx.fillStyle = s.kind.fill;
      ctx.fillRect(x0, top + 1, w, ROW_H - 2);
      lastPixel = Math.floor(x0);
      lastFill = s.kind.fill;
      if (w > 18) {
        const visible0 = Math.max(x0, x(v0));
        const visible1 = Math.min(x0 + w, x(v1));
        const label = fit(ctx, s.name, visible1 - visible0 - 6);
        if (label) {
          ctx.fillStyle = s.kind.ink;
          ctx.fillText(label, visible0 + 3, top + ROW_H / 2);
        }
      }
    }
  }

  function drawCounter(ctx, c, x, left, right) {
    const { counter, top, height } = c;
    const base = top + height;
    const peak = Math.max(counter.max, counter.name === 'device' && budget ? budget : 0, 1);
    const y = (v) => base - (v / peak) * (height - 14);
    ctx.fillStyle = '#f7f8fa';
    ctx.fillRect(0, top, left - 6, height);
    ctx.fillStyle = '#1d2330';
    ctx.font = LABEL_FONT;
    ctx.textAlign = 'left';
    ctx.textBaseline = 'top';
    const words = counter.style.label.split(' ');
    ctx.fillText(words.slice(0, 2).join(' '), 8, top + 6);
    ctx.fillText(words.slice(2).join(' '), 8, top + 21);
    ctx.font = FONT;
    ctx.fillStyle = '#6b7385';
    ctx.fillText('peak ' + bytes(counter.max), 8, top + 40);
    ctx.textBaseline = 'middle';

    ctx.save();
    ctx.beginPath();
    ctx.rect(left, top, right - left, height + 1);
    ctx.clip();
    ctx.strokeStyle = '#e2e5eb';
    ctx.beginPath();
    ctx.moveTo(left, base + 0.5);
    ctx.lineTo(right, base + 0.5);
    ctx.stroke();
    const samples = counter.samples;
    if (samples.length) {
      // A step line: each value holds until the next sample, the last to the trace's end.
      const path = new Path2D();
      path.moveTo(x(samples[0].ts), base);
      let previous = 0;
      for (const s of samples) {
        const px = x(s.ts);
        path.lineTo(px, y(previous));
        path.lineTo(px, y(s.value));
        previous = s.value;
      }
      path.lineTo(x(trace.end), y(previous));
      const area = new Path2D(path);
      area.lineTo(x(trace.end), base);
      area.closePath();
      ctx.fillStyle = counter.style.fill;
      ctx.fill(area);
      ctx.strokeStyle = counter.style.line;
      ctx.lineWidth = 1.2;
      ctx.stroke(path);
      ctx.lineWidth = 1;
    }
    // The peak, and for the device its budget, as dashed lines with their values.
    const marks = [{ value: counter.max, text: 'peak ' + bytes(counter.max), color: counter.style.line }];
    if (counter.name === 'device' && budget) marks.push({ value: budget, text: 'budget ' + bytes(budget), color: '#d2453c' });
    ctx.setLineDash([4, 3]);
    ctx.textAlign = 'right';
    let above = -Infinity; // the last line labelled above: a line close below it is labelled below
    for (const m of marks.sort((a, b) => b.value - a.value)) {
      const py = Math.round(y(m.value)) + 0.5;
      ctx.strokeStyle = m.color;
      ctx.beginPath();
      ctx.moveTo(left, py);
      ctx.lineTo(right, py);
      ctx.stroke();
      ctx.fillStyle = m.color;
      const below = py - above < 14;
      ctx.fillText(m.text, right - 4, below ? py + 8 : py - 7);
      if (!below) above = py;
    }
    ctx.setLineDash([]);
    ctx.restore();
  }

  // Where a flow leaves or enters its track's lane: the edge of the deepest
  // row (the ops) that faces the other end.
  function flowY(lane, other) {
    const opsTop = lane.top + lane.height - ROW_H;
    return lane.top > other.top ? opsTop + 1 : opsTop + ROW_H - 1;
  }

  // Flows as thin arrows. A step has hundreds of them: they are faint when
  // many are in view, and stand out once zoomed in on a few.
  function drawFlows(ctx, lanes, x, left, right) {
    const laneOf = new Map(lanes.map((l) => [l.track.tid, l]));
    // A flow with neither end in view would only cross the lanes, telling nothing.
    const inView = (px) => px >= left && px <= right;
    const visible = trace.flows.filter((f) => (inView(x(f.from.ts)) || inView(x(f.to.ts))) &&
      laneOf.has(f.from.tid) && laneOf.has(f.to.tid));
    if (!visible.length) return;
    const alpha = Math.min(0.6, Math.max(0.07, 25 / visible.length));
    const last = lanes[lanes.length - 1];
    ctx.save();
    ctx.beginPath();
    ctx.rect(left, AXIS_H, right - left, last.top + last.height - AXIS_H);
    ctx.clip();
    ctx.strokeStyle = 'rgba(29, 35, 48, ' + alpha + ')';
    ctx.fillStyle = 'rgba(29, 35, 48, ' + Math.min(0.8, alpha * 1.5) + ')';
    ctx.lineWidth = 1;
    const heads = visible.length <= 300;
    for (const f of visible) {
      const from = laneOf.get(f.from.tid);
      const to = laneOf.get(f.to.tid);
      const x0 = x(f.from.ts);
      const x1 = x(f.to.ts);
      const y0 = flowY(from, to);
      const y1 = flowY(to, from);
      const bend = (y1 - y0) / 2;
      ctx.beginPath();
      ctx.moveTo(x0, y0);
      ctx.bezierCurveTo(x0, y0 + bend, x1, y1 - bend, x1, y1);
      ctx.stroke();
      if (heads) {
        // The curve ends vertically: the arrowhead points up or down.
        const d = Math.sign(y1 - y0) || 1;
        ctx.beginPath();
        ctx.moveTo(x1, y1);
        ctx.lineTo(x1 - 3, y1 - 6 * d);
        ctx.lineTo(x1 + 3, y1 - 6 * d);
        ctx.closePath();
        ctx.fill();
      }
    }
    ctx.restore();
  }

  // ---- interaction -----------------------------------------------------------

  function clampView(a, b) {
    const span = Math.min(trace.end - trace.start, Math.max(b - a, 1e-3));
    let s = Math.max(trace.start, a);
    if (s + span > trace.end) s = trace.end - span;
    return [s, s + span];
  }

  // Microseconds per pixel of the view now (a redraw may still be pending), and the time at px.
  function usPerPixel() {
    return (view[1] - view[0]) / (layout.right - layout.left);
  }

  function timeAt(px) {
    return view[0] + (px - layout.left) * usPerPixel();
  }

  // The slice or counter value under (px, py), as lines of text; null when none.
  function under(px, py) {
    if (!layout || px < layout.left || px > layout.right) return null;
    const t = timeAt(px);
    const slop = 2 * usPerPixel(); // two pixels either side, for thin slices
    for (const lane of layout.lanes) {
      if (py < lane.top || py >= lane.top + lane.height) continue;
      const row = lane.track.rows[Math.floor((py - lane.top) / ROW_H)];
      if (!row) return null;
      let best = null;
      for (let i = firstVisible(row, t - slop); i < row.length && row[i].ts <= t + slop; i++) {
        const s = row[i];
        if (s.end + slop < t) continue;
        const distance = t < s.ts ? s.ts - t : t > s.end ? t - s.end : 0;
        if (!best || distance < best.distance) best = { slice: s, distance };
      }
      return best ? describe(lane.track, best.slice) : null;
    }
    for (const c of layout.counters) {
      if (py < c.top || py >= c.top + c.height) continue;
      let value = 0;
      for (const s of c.counter.samples) {
        if (s.ts > t) break;
        value = s.value;
      }
      return [c.counter.style.label, bytes(value) + ' (' + value + ' bytes)',
        'at ' + ms(t - trace.start)];
    }
    return null;
  }

  function describe(track, s) {
    const lines = [s.name];
    const a = s.args;
    lines.push(track.name + ' · ' + s.cat);
    if (a.op !== undefined) lines.push('op ' + a.op);
    if (a.before !== undefined) lines.push('before ' + a.before);
    if (a.partition !== undefined) lines.push('partition ' + a.partition);
    if (a.bytes !== undefined) lines.push(bytes(Number(a.bytes)) + ' (' + a.bytes + ' bytes)');
    if (a.node !== undefined) lines.push('node ' + a.node);
    if (a.step !== undefined) lines.push('step ' + a.step + (a.evaluation ? ' (evaluation)' : ''));
    lines.push('duration ' + seconds(s.dur / 1e6) + ' · at ' + ms(s.ts - trace.start));
    return lines;
  }

  function showTooltip(event) {
    const rect = canvas.getBoundingClientRect();
    const px = event.clientX - rect.left;
    const py = event.clientY - rect.top;
    const lines = dragging ? null : under(px, py);
    if (!lines) {
      tooltip.hidden = true;
      return;
    }
    tooltip.textContent = '';
    lines.forEach((line, i) => {
      const div = document.createElement('div');
      div.textContent = line;
      if (i === 0) div.className = 'tooltip-title';
      tooltip.append(div);
    });
    tooltip.hidden = false;
    const boxWidth = $('canvas-box').clientWidth;
    const left = px + 14 + tooltip.offsetWidth > boxWidth ? px - 14 - tooltip.offsetWidth : px + 14;
    tooltip.style.left = Math.max(0, left) + 'px';
    tooltip.style.top = py + 14 + 'px';
  }

  let dragging = null;
  let listening = false;

  function listen() {
    if (listening) return;
    listening = true;
    canvas.addEventListener('wheel', (event) => {
      if (!layout || event.offsetX < layout.left) return;
      event.preventDefault();
      const t = timeAt(event.offsetX);
      const factor = Math.exp(event.deltaY * 0.0015);
      view = clampView(t - (t - view[0]) * factor, t + (view[1] - t) * factor);
      redraw();
    }, { passive: false });
    canvas.addEventListener('mousedown', (event) => {
      dragging = { x: event.clientX, view: view.slice() };
      tooltip.hidden = true;
    });
    window.addEventListener('mouseup', () => {
      dragging = null;
    });
    window.addEventListener('mousemove', (event) => {
      if (!dragging || !layout) return;
      const dt = (event.clientX - dragging.x) * usPerPixel();
      view = clampView(dragging.view[0] - dt, dragging.view[1] - dt);
      redraw();
    });
    canvas.addEventListener('mousemove', showTooltip);
    canvas.addEventListener('mouseleave', () => {
      tooltip.hidden = true;
    });
    canvas.addEventListener('dblclick', () => {
      view = [trace.start, trace.end];
      redraw();
    });
    window.addEventListener('resize', redraw);
  }

  // ---- loading ---------------------------------------------------------------

  function say(state, text) {
    const p = $('message');
    p.dataset.state = state;
    p.textContent = text;
    p.hidden = !text;
  }

  // An initial view from the address (?job=ID&from=MS&to=MS, ms from the trace's start).
  function initialView(params) {
    const from = Number(params.get('from'));
    const to = Number(params.get('to'));
    if (params.has('from') && params.has('to') && to > from)
      return clampView(trace.start + from * 1000, trace.start + to * 1000);
    return [trace.start, trace.end];
  }

  async function load() {
    const params = new URLSearchParams(location.search);
    const job = params.get('job');
    if (!job) {
      say('no-job', 'Which job? Open /trace.html?job=ID; the dashboard links each job\'s trace.');
      return;
    }
    $('title').textContent = 'trace of job ' + job;
    const path = '/api/jobs/' + encodeURIComponent(job) + '/trace.json';
    let text;
    try {
      text = await (await window.tide.get(path)).text();
    } catch (error) {
      if (error.unauthorized) {
        say('unauthorized', 'This tided wants a bearer token: open /trace.html?job=' + job +
          '#token=TOKEN, or this page from the dashboard (a monitor token sees every job). ' +
          (window.tide.token() ? 'tided says: ' + error.message : ''));
        $('token-form').hidden = false;
      } else if (error.status === 404 && /no trace yet/.test(error.message)) {
        say('no-trace', 'Job ' + job + ' has no trace yet: run `tidectl trace ' + job +
          ' --steps N` first, then reload this page.');
      } else {
        say('error', path + ': ' + (error.status || '') + ' ' + error.message);
      }
      return;
    }
    try {
      trace = model(JSON.parse(text));
    } catch (error) {
      say('error', path + ' is not a trace this page can read: ' + error.message);
      return;
    }
    const download = $('download');
    download.href = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
    download.download = 'trace-' + job + '.json';
    download.hidden = false;
    view = initialView(params);
    say('loaded', '');
    summarise(trace);
    legend();
    $('viewer').hidden = false;
    listen();
    draw();
    // The job's name and budget, for the title and the device chart; the trace stands without them.
    try {
      const jobs = await window.tide.api('/api/jobs');
      const j = jobs.jobs.find((x) => x.id === job);
      if (j) {
        $('title').textContent = 'trace of job ' + job + ' · ' + (j.name || '(unnamed)') +
          (j.trace ? ' · ' + stepRange(j.trace.first_step, j.trace.last_step) : '');
        budget = j.budget_bytes || null;
        draw();
      }
    } catch (error) {
      // Only the title and the budget line are missing.
    }
  }

  $('token-form').addEventListener('submit', (event) => {
    event.preventDefault();
    window.tide.setToken($('token-input').value.trim());
    $('token-input').value = '';
    $('token-form').hidden = true;
    say('loading', 'Loading the trace…');
    load();
  });

  load();
})();
