// SPDX-License-Identifier: MIT
//
// tided's dashboard: polls /api/status and /api/jobs once a second and draws
// the device, the queue and each job (state, step, loss curve, step time,
// memory high water against budget). Every string from the daemon goes into
// the page as text (textContent), never as markup. The token, requests and
// number formats are common.js's (window.tide).
'use strict';

(function () {
  const POLL_MS = 1000;
  const ENDED_SHOWN = 50;
  const TERMINAL = new Set(['DONE', 'FAILED', 'CANCELLED']);
  const STATES = ['SUBMITTED', 'COMPILING', 'READY', 'RUNNING', 'PARKED', 'DONE', 'FAILED',
    'CANCELLED'];
  const { api, bytes, seconds } = window.tide;

  const $ = (id) => document.getElementById(id);
  const cards = new Map(); // job id -> its <article>

  // ---- the token --------------------------------------------------------

  function showTokenForm(message) {
    const form = $('token-form');
    form.hidden = false;
    $('token-error').textContent = message || '';
  }

  $('token-form').addEventListener('submit', (event) => {
    event.preventDefault();
    window.tide.setToken($('token-input').value.trim());
    $('token-input').value = '';
    $('token-form').hidden = true;
    poll();
  });

  // ---- formatting -------------------------------------------------------

  function number(x, digits) {
    if (x === null || x === undefined) return '–';
    return Number(x).toPrecision(digits);
  }

  function percent(part, whole) {
    return whole > 0 ? Math.min(100, (100 * part) / whole) : 0;
  }

  function setText(root, selector, text) {
    const el = root.querySelector(selector);
    if (el.textContent !== text) el.textContent = text;
  }

  function setConnection(state, text) {
    const el = $('connection');
    el.dataset.state = state;
    el.textContent = text;
  }

  // ---- the overview -----------------------------------------------------

  function renderStatus(status) {
    const started = new Date(status.started * 1000);
    $('daemon').textContent =
      'tided ' + status.version + ' · ' + status.backend + ' backend · started ' +
      started.toLocaleString() + ' · viewer: ' + status.viewer.role +
      (status.viewer.all_jobs ? ' (every job)' : ' (uid ' + status.viewer.uid + ')') +
      (status.serving ? '' : ' · shutting down');
    const d = status.device;
    $('device-id').textContent = d.id;
    $('device-name').textContent = d.name;
    $('device-used').textContent = bytes(d.used_bytes);
    $('device-reserved').textContent = bytes(d.reserved_bytes);
    $('device-total').textContent = bytes(d.total_bytes);
    $('device-used-bar').style.width = percent(d.used_bytes, d.total_bytes) + '%';
    $('device-reserved-bar').style.width = percent(d.reserved_bytes, d.total_bytes) + '%';
    $('queue-length').textContent = String(status.queue_length);
    const list = $('job-states');
    list.textContent = '';
    for (const state of STATES) {
      const n = status.jobs[state] || 0;
      if (n === 0 && TERMINAL.has(state)) continue;
      const item = document.createElement('div');
      const dt = document.createElement('dt');
      const dd = document.createElement('dd');
      dt.textContent = state.toLowerCase();
      dd.textContent = String(n);
      item.append(dt, dd);
      list.append(item);
    }
  }

  // ---- jobs ---------------------------------------------------------------

  // Links shown under a job: its plan's memory picture, and its latest
  // trace (recorded with `tidectl trace`) both in tided's trace viewer and
  // as the raw JSON for ui.perfetto.dev; each {label, path, download,
  // page}. A page (the viewer) is opened in this tab, where it finds the
  // token in sessionStorage. A plain link to a file cannot send the token,
  // so a click fetches the file with it and opens (the picture) or saves
  // (the JSON) a copy held in memory.
  function jobLinks(job) {
    const links = [];
    if (job.plan_svg) links.push({ label: 'plan picture', path: job.plan_svg, download: null });
    if (job.trace) {
      links.push({
        label: 'trace of ' + window.tide.stepRange(job.trace.first_step, job.trace.last_step),
        path: '/trace.html?job=' + encodeURIComponent(job.id),
        page: true,
      });
      links.push({
        label: 'JSON (' + bytes(job.trace.bytes) + ')',
        path: job.trace.path,
        download: 'trace-' + job.id + '.json',
      });
    }
    return links;
  }

  async function openLink(link) {
    try {
      const response = await window.tide.get(link.path);
      const url = URL.createObjectURL(await response.blob());
      if (link.download) {
        const a = document.createElement('a');
        a.href = url;
        a.download = link.download;
        a.click();
      } else {
        window.open(url, '_blank', 'noopener');
      }
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    } catch (error) {
      setConnection('error', link.path + ': ' + error.message);
    }
  }

  function drawCurve(card, losses) {
    const steps = [];
    const values = [];
    for (let i = 0; i < losses.values.length; i++) {
      if (losses.values[i] !== null) {
        steps.push(losses.steps[i]);
        values.push(losses.values[i]);
      }
    }
    const line = card.querySelector('.loss-line');
    const trend = card.querySelector('.loss-trend');
    const caption = card.querySelector('.curve-steps');
    if (values.length === 0) {
      line.setAttribute('points', '');
      trend.setAttribute('points', '');
      caption.textContent = 'no loss yet';
      setText(card, '.y-max', '');
      setText(card, '.y-min', '');
      return;
    }
    const W = 320;
    const H = 96;
    const pad = 6;
    let lo = Math.min(...values);
    let hi = Math.max(...values);
    if (hi - lo < 1e-12) {
      lo -= 0.5;
      hi += 0.5;
    }
    const first = steps[0];
    const last = steps[steps.length - 1];
    const span = Math.max(1, last - first);
    const point = (step, value) => {
      const x = pad + ((W - 2 * pad) * (step - first)) / span;
      const y = pad + ((H - 2 * pad) * (hi - value)) / (hi - lo);
      return x.toFixed(1) + ',' + y.toFixed(1);
    };
    // The trend: an exponential moving average over about 5% of the points shown.
    const alpha = 2 / (1 + Math.max(2, Math.round(values.length / 20)));
    const points = new Array(values.length);
    const smooth = new Array(values.length);
    let average = values[0];
    for (let i = 0; i < values.length; i++) {
      average += alpha * (values[i] - average);
      points[i] = point(steps[i], values[i]);
      smooth[i] = point(steps[i], average);
    }
    line.setAttribute('points', points.join(' '));
    trend.setAttribute('points', smooth.join(' '));
    caption.textContent = 'steps ' + first + '–' + last;
    setText(card, '.y-max', number(Math.max(...values), 4));
    setText(card, '.y-min', number(Math.min(...values), 4));
  }

  function newCard(job) {
    const card = $('job-template').content.firstElementChild.cloneNode(true);
    card.dataset.job = job.id;
    setText(card, '.id', job.id);
    setText(card, '.device', job.device);
    return card;
  }

  function renderJob(card, job) {
    setText(card, '.name', job.name || '(unnamed)');
    setText(card, '.user', job.user);
    const state = card.querySelector('.state');
    state.dataset.state = job.state;
    state.textContent = job.state;
    const steps = card.querySelector('.steps');
    steps.dataset.steps = String(job.steps);
    steps.textContent = String(job.steps);
    setText(card, '.loss', number(job.loss, 5));
    setText(card, '.step-time', seconds(job.step_seconds));
    setText(card, '.rate', job.state === 'RUNNING' ? number(job.steps_per_second, 3) : '–');
    setText(card, '.high-water', bytes(job.high_water_bytes));
    setText(card, '.budget', bytes(job.budget_bytes));
    setText(card, '.swap-in', bytes(job.swap_in_bytes));
    setText(card, '.swap-out', bytes(job.swap_out_bytes));
    setText(card, '.stall', seconds(job.stall_seconds));
    const fill = percent(job.high_water_bytes, job.budget_bytes);
    const bar = card.querySelector('.job-bar');
    bar.style.width = fill + '%';
    bar.classList.toggle('high', fill > 90);
    setText(card, '.message', job.message);
    drawCurve(card, job.losses);
    const nav = card.querySelector('.job-links');
    nav.textContent = '';
    for (const link of jobLinks(job)) {
      const a = document.createElement('a');
      a.href = link.path;
      a.textContent = link.label;
      if (!link.page) {
        a.addEventListener('click', (event) => {
          event.preventDefault();
          openLink(link);
        });
      }
      nav.append(a);
    }
  }

  function renderEnded(ended) {
    const body = $('ended');
    body.textContent = '';
    ended.sort((a, b) => b.updated - a.updated);
    for (const job of ended.slice(0, ENDED_SHOWN)) {
      const row = document.createElement('tr');
      row.dataset.job = job.id;
      const cells = [job.id, job.name, job.user, job.state, String(job.steps), number(job.loss, 5),
        job.message];
      for (const text of cells) {
        const td = document.createElement('td');
        td.textContent = text;
        row.append(td);
      }
      body.append(row);
    }
    $('ended-table').hidden = ended.length === 0;
    $('no-ended').hidden = ended.length > 0;
  }

  function renderJobs(jobs) {
    const live = jobs.filter((j) => !TERMINAL.has(j.state));
    const ended = jobs.filter((j) => TERMINAL.has(j.state));
    const container = $('jobs');
    const seen = new Set();
    for (const job of live) {
      seen.add(job.id);
      let card = cards.get(job.id);
      if (!card) {
        card = newCard(job);
        cards.set(job.id, card);
      }
      renderJob(card, job);
      container.append(card); // keeps the daemon's order (creation)
    }
    for (const [id, card] of cards) {
      if (!seen.has(id)) {
        card.remove();
        cards.delete(id);
      }
    }
    $('no-jobs').hidden = live.length > 0;
    renderEnded(ended);
  }

  // ---- polling --------------------------------------------------------------

  let timer = null;

  async function poll() {
    clearTimeout(timer);
    try {
      const [status, jobs] = await Promise.all([api('/api/status'), api('/api/jobs')]);
      renderStatus(status);
      renderJobs(jobs.jobs);
      setConnection('live', 'live · ' + new Date(status.time * 1000).toLocaleTimeString());
    } catch (error) {
      if (error.unauthorized) {
        setConnection('error', 'needs a token');
        showTokenForm(window.tide.token() ? error.message : '');
        return; // the form's submit polls again
      }
      setConnection('error', 'no answer: ' + error.message);
    }
    timer = setTimeout(poll, POLL_MS);
  }

  poll();
})();
