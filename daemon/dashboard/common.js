// SPDX-License-Identifier: MIT
//
// What tided's pages (the dashboard, index.html, and the trace viewer,
// trace.html) share, as window.tide: the bearer token, requests that carry
// it, and how bytes, seconds and a trace's steps are written. Each page
// loads this file before its own script (both deferred, so they run in
// order).
//
// The token: when tided has a token file, its data endpoints want
// "Authorization: Bearer TOKEN". A page takes the token once from its
// address (#token=TOKEN: browsers never send the fragment, so it lands in
// no log), keeps it in sessionStorage for this tab, so that the pages of
// one tab share it, removes it from the address bar and sends it as a
// header. It never goes into a query string.
'use strict';

window.tide = (function () {
  const TOKEN_KEY = 'tide-token';

  function storage() {
    try {
      return window.sessionStorage;
    } catch (e) {
      return null; // storage refused: the token lives in this page's memory only
    }
  }

  let token = null;
  const match = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (match) {
    token = decodeURIComponent(match[1]);
    const s = storage();
    if (s) s.setItem(TOKEN_KEY, token);
    history.replaceState(null, '', location.pathname + location.search);
  } else {
    const s = storage();
    token = s ? s.getItem(TOKEN_KEY) : null;
  }

  // Keeps a token typed into a page's form for this tab; null forgets it.
  function setToken(value) {
    token = value || null;
    const s = storage();
    if (s && token) s.setItem(TOKEN_KEY, token);
  }

  // GETs path with the token. A 401 throws an Error with .unauthorized set,
  // any other failure one with .status; the message is tided's answer.
  async function get(path) {
    const headers = {};
    if (token) headers.Authorization = 'Bearer ' + token;
    const response = await fetch(path, { headers, cache: 'no-store', credentials: 'omit' });
    if (!response.ok) {
      const error = new Error((await response.text()).trim().replace(/^tided: /, ''));
      error.status = response.status;
      error.unauthorized = response.status === 401;
      throw error;
    }
    return response;
  }

  async function api(path) {
    return (await get(path)).json();
  }

  function bytes(n) {
    if (n === null || n === undefined) return '–';
    const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
    let v = n;
    let u = 0;
    while (v >= 1024 && u < units.length - 1) {
      v /= 1024;
      u++;
    }
    return (u === 0 ? String(v) : v.toFixed(v >= 100 ? 0 : 1)) + ' ' + units[u];
  }

  function seconds(s) {
    if (s === null || s === undefined) return '–';
    if (s < 1e-3) return (s * 1e6).toFixed(0) + ' µs';
    if (s < 1) return (s * 1e3).toFixed(s < 0.01 ? 2 : 1) + ' ms';
    return s.toFixed(2) + ' s';
  }

  // "step 9" or "steps 9–12": the steps of a trace.
  function stepRange(first, last) {
    return first === last ? 'step ' + first : 'steps ' + first + '–' + last;
  }

  return Object.freeze({
    token: () => token,
    setToken,
    get,
    api,
    bytes,
    seconds,
    stepRange,
  });
})();
