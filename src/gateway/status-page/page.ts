/**
 * `GET /` on the admin port: the live status page. One self-contained HTML document (inline CSS and
 * script, nothing fetched from elsewhere, no build step) that reads `/debug/state` on the same port about
 * once a second and draws pools, endpoints (state, signals and their age, in-flight work, ejections,
 * saturation) and the last routing decisions. Text is set with textContent only: endpoint names, models
 * and request ids are never parsed as HTML.
 */
export const STATUS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>infergate status</title>
<style>
  :root { color-scheme: light dark; --ok: #1a7f37; --warn: #9a6700; --bad: #cf222e; --mute: #6e7781; }
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.2rem; }
  h1 { font-size: 1.3rem; margin: 0 0 .3rem; }
  h2 { font-size: 1.05rem; margin: 1.4rem 0 .4rem; }
  table { border-collapse: collapse; width: 100%; margin-bottom: .6rem; }
  th, td { text-align: left; padding: .25rem .6rem; border-bottom: 1px solid #8884; white-space: nowrap; }
  th { font-weight: 600; font-size: .85rem; color: var(--mute); }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  .badge { display: inline-block; padding: 0 .45rem; border-radius: .6rem; font-size: .8rem; font-weight: 600; color: #fff; }
  .live, .ready { background: var(--ok); } .stale, .unknown, .saturated { background: var(--warn); }
  .ejected, .not-ready, .draining, .down { background: var(--bad); }
  #summary span { margin-right: 1.2rem; }
  .mute { color: var(--mute); }
  .scores { font-family: ui-monospace, monospace; font-size: .8rem; white-space: normal; }
</style>
</head>
<body>
<h1>infergate</h1>
<div id="summary"><span id="readiness" class="badge unknown">…</span><span id="inflight"></span><span id="uptime"></span><span id="updated" class="mute">waiting for /debug/state</span></div>
<div id="models" class="mute"></div>
<div id="pools"></div>
<h2>Last routing decisions</h2>
<table id="decisions"><thead><tr><th>time</th><th>pool</th><th>model</th><th>outcome</th><th>endpoint</th><th>candidates (total · prefix · cost)</th></tr></thead><tbody></tbody></table>
<script>
(function () {
  'use strict';
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function cell(tr, text, num) { var td = el('td', num ? { class: 'num' } : null, text); tr.appendChild(td); return td; }
  function fmt(v, digits) { return v === null || v === undefined ? '–' : (typeof v === 'number' ? v.toFixed(digits || 0) : String(v)); }
  function age(ms) { return ms === null || ms === undefined ? 'never' : (ms < 1000 ? ms + ' ms' : (ms / 1000).toFixed(1) + ' s'); }
  function badge(cls, text) { return el('span', { class: 'badge ' + cls }, text); }

  function drawPools(pools) {
    var root = document.getElementById('pools');
    var out = document.createDocumentFragment();
    pools.forEach(function (p) {
      var h = el('h2', { 'data-pool': p.pool }, 'pool ' + p.pool + ' ');
      h.appendChild(el('span', { class: 'mute' }, p.policy + ' · ' + p.in_flight + ' in flight · stale after ' + p.stale_after_ms + ' ms '));
      if (p.saturated) h.appendChild(badge('saturated', 'saturated'));
      out.appendChild(h);
      var t = el('table', { class: 'endpoints', 'data-pool': p.pool });
      var head = el('tr');
      ['endpoint', 'state', 'signals age', 'waiting', 'running', 'KV use', 'in flight', 'pending', 'eligible', 'prefix blocks'].forEach(function (c) { head.appendChild(el('th', null, c)); });
      var thead = el('thead'); thead.appendChild(head); t.appendChild(thead);
      var tb = el('tbody');
      p.endpoints.forEach(function (e) {
        var tr = el('tr', { 'data-endpoint': e.endpoint, 'data-state': e.state });
        cell(tr, e.endpoint);
        var st = el('td', { class: 'state' }); st.appendChild(badge(e.state, e.state));
        if (e.ejected_for_ms) st.appendChild(el('span', { class: 'mute' }, ' ' + age(e.ejected_for_ms) + ' left'));
        tr.appendChild(st);
        cell(tr, age(e.age_ms), true).className = 'num age';
        cell(tr, fmt(e.waiting), true);
        cell(tr, fmt(e.running), true);
        cell(tr, e.kv_cache === null ? '–' : (e.kv_cache * 100).toFixed(0) + ' %', true);
        cell(tr, e.in_flight, true).className = 'num in-flight';
        cell(tr, e.pending, true);
        cell(tr, e.eligible ? 'yes' : 'no: ' + (e.why_not || ''));
        cell(tr, e.index_blocks, true);
        tb.appendChild(tr);
      });
      t.appendChild(tb);
      out.appendChild(t);
    });
    root.replaceChildren(out);
  }

  function drawDecisions(list) {
    var tb = document.querySelector('#decisions tbody');
    var out = document.createDocumentFragment();
    list.forEach(function (d) {
      var tr = el('tr', { class: 'decision' });
      cell(tr, d.time.slice(11, 23));
      cell(tr, d.pool);
      cell(tr, d.model);
      cell(tr, d.outcome + (d.attempt > 1 ? ' (retry ' + (d.attempt - 1) + ')' : ''));
      cell(tr, d.endpoint || '–');
      var parts = d.candidates.map(function (c) {
        var prefix = d.prompt_blocks > 0 ? (c.matched_blocks / d.prompt_blocks * 100).toFixed(0) + '%' : '–';
        return (c.endpoint === d.endpoint ? '★ ' : '') + c.endpoint + ' ' + c.total.toFixed(3) + ' · ' + prefix + ' · ' + Math.round(c.cost_tokens);
      });
      d.filtered.forEach(function (f) { parts.push(f.endpoint + ' left out: ' + f.why); });
      var td = cell(tr, parts.join('  |  ')); td.className = 'scores';
      out.appendChild(tr);
    });
    tb.replaceChildren(out);
  }

  function draw(s) {
    var r = document.getElementById('readiness');
    var status = s.draining ? 'draining' : (s.ready ? 'ready' : 'not-ready');
    r.className = 'badge ' + status;
    r.textContent = status.replace('-', ' ');
    document.getElementById('inflight').textContent = s.in_flight + ' requests in flight';
    document.getElementById('uptime').textContent = 'up ' + s.uptime_s + ' s';
    document.getElementById('updated').textContent = 'updated ' + s.time.slice(11, 19) + ' UTC';
    var missing = s.models.filter(function (m) { return !m.ready; }).map(function (m) { return m.model; });
    document.getElementById('models').textContent = s.models.length + ' models (ready when ' + s.ready_when + ')' + (missing.length ? '; not ready: ' + missing.join(', ') : '');
    drawPools(s.pools);
    drawDecisions(s.decisions);
  }

  function tick() {
    fetch('/debug/state', { cache: 'no-store' })
      .then(function (r) { if (!r.ok) throw new Error('HTTP ' + r.status); return r.json(); })
      .then(draw)
      .catch(function (err) {
        var u = document.getElementById('updated');
        u.textContent = 'admin port unreachable (' + err.message + ')';
        document.getElementById('readiness').className = 'badge down';
      })
      .then(function () { setTimeout(tick, 1000); });
  }
  tick();
})();
</script>
</body>
</html>
`;
