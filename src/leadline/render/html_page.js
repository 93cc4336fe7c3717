/* leadline HTML reports: what every report page shares.  It is sent in the same inline script
 * as the page's own program, before it, and is reached through the global LL.
 *
 * Untrusted text (function names, files, argv, thread names) only ever reaches the page through
 * textContent or SVG text nodes, never as markup.  Trees are walked with explicit queues and
 * arrays, never by recursion, because call trees can be thousands of levels deep.
 */
var LL = (function () {
  'use strict';

  var doc = document;
  var SVG_NS = 'http://www.w3.org/2000/svg'; /* a namespace name, never fetched */

  function byId(id) { return doc.getElementById(id); }

  function el(tag, cls, text) {
    var e = doc.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function svgEl(tag, attrs, text) {
    var e = doc.createElementNS(SVG_NS, tag);
    if (attrs) {
      for (var k in attrs) {
        if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, String(attrs[k]));
      }
    }
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

  /* Fills a <select> with options: `pairs` of [value, label]. */
  function fillSelect(select, pairs) {
    clear(select);
    pairs.forEach(function (pair) {
      var o = el('option', '', pair[1]);
      o.value = String(pair[0]);
      select.appendChild(o);
    });
  }

  function reportError(where, err) {
    var text = where + ': ' + (err && err.stack ? err.stack : String(err));
    if (typeof window.llReportError === 'function') window.llReportError(text);
    if (window.console && console.error) console.error(text);
  }

  function guard(where, fn) {
    try { fn(); } catch (err) { reportError(where, err); }
  }

  /* ---------- values and formatting ---------- */

  function num(x) {
    var v = typeof x === 'number' ? x : Number(x);
    return isFinite(v) ? v : 0;
  }

  function str(x) { return x === null || x === undefined ? '' : String(x); }

  function obj(x) { return x && typeof x === 'object' && !Array.isArray(x) ? x : {}; }

  function arr(x) { return Array.isArray(x) ? x : []; }

  function fmtBytes(b, signed) {
    b = num(b);
    var a = Math.abs(b);
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    var i = 0;
    while (a >= 1024 && i < units.length - 1) { a /= 1024; i++; }
    var s = i === 0 ? String(Math.round(a)) : a.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : 2);
    var sign = b < 0 ? '-' : (signed && b > 0 ? '+' : '');
    return sign + s + ' ' + units[i];
  }

  function fmtNs(ns) {
    ns = num(ns);
    var a = Math.abs(ns);
    var sign = ns < 0 ? '-' : '';
    if (a < 1e3) return sign + Math.round(a) + ' ns';
    if (a < 1e6) return sign + (a / 1e3).toFixed(a < 1e4 ? 2 : a < 1e5 ? 1 : 0) + ' µs';
    if (a < 1e9) return sign + (a / 1e6).toFixed(a < 1e7 ? 2 : a < 1e8 ? 1 : 0) + ' ms';
    if (a < 60e9) return sign + (a / 1e9).toFixed(a < 1e10 ? 3 : 2) + ' s';
    var m = Math.floor(a / 60e9);
    return sign + m + ' min ' + ((a - m * 60e9) / 1e9).toFixed(1) + ' s';
  }

  function fmtCount(n) {
    n = Math.round(num(n));
    var s = String(Math.abs(n));
    var out = '';
    while (s.length > 3) { out = ',' + s.slice(-3) + out; s = s.slice(0, -3); }
    return (n < 0 ? '-' : '') + s + out;
  }

  function fmtPct(part, whole) {
    if (!(whole > 0)) return '-';
    var p = 100 * part / whole;
    if (p > 0 && p < 0.1) return '<0.1%';
    return p.toFixed(p >= 10 ? 1 : 2) + '%';
  }

  function shortText(s, max) {
    s = str(s);
    return s.length > max ? s.slice(0, Math.max(1, max - 1)) + '…' : s;
  }

  function shellQuote(arg) {
    arg = str(arg);
    if (arg !== '' && /^[A-Za-z0-9_\/.,:=@%+-]+$/.test(arg)) return arg;
    return "'" + arg.replace(/'/g, "'\\''") + "'";
  }

  /* ---------- the data, and the URL hash ---------- */

  function loadData() {
    var holder = byId('ll-data');
    var parsed = holder ? JSON.parse(holder.textContent || '{}') : {};
    return obj(parsed);
  }

  function readHash() {
    var h = str(location.hash).replace(/^#/, '');
    var out = {};
    if (!h) return out;
    h.split('&').forEach(function (part) {
      if (!part) return;
      var eq = part.indexOf('=');
      var key = eq < 0 ? part : part.slice(0, eq);
      var val = eq < 0 ? '' : part.slice(eq + 1);
      try {
        key = decodeURIComponent(key.replace(/\+/g, ' '));
        val = decodeURIComponent(val.replace(/\+/g, ' '));
      } catch (e) {
        return;
      }
      out[key] = val;
    });
    return out;
  }

  /* `parts` are `key=value` strings, already encoded. */
  function writeHash(parts) {
    var h = parts.length ? '#' + parts.join('&') : '';
    try {
      history.replaceState(null, '', h || location.pathname + location.search);
    } catch (e) {
      /* Some file:// setups refuse it; the hash is only a convenience. */
    }
  }

  /* ---------- tooltip ---------- */

  var tip = byId('ll-tooltip');

  /* `lines`: strings, {text, cls} objects, or '-' for a separator. */
  function showTip(ev, lines) {
    clear(tip);
    lines.forEach(function (line) {
      if (line === '-') { tip.appendChild(el('div', 'll-tip-sep')); return; }
      var cls = line.cls || '';
      tip.appendChild(el('div', cls, line.text !== undefined ? line.text : line));
    });
    tip.hidden = false;
    moveTip(ev);
  }

  function moveTip(ev) {
    if (tip.hidden) return;
    var pad = 14;
    var w = tip.offsetWidth;
    var h = tip.offsetHeight;
    var x = ev.clientX + pad;
    var y = ev.clientY + pad;
    if (x + w > window.innerWidth - 4) x = Math.max(4, ev.clientX - pad - w);
    if (y + h > window.innerHeight - 4) y = Math.max(4, ev.clientY - pad - h);
    tip.style.left = x + 'px';
    tip.style.top = y + 'px';
  }

  function hideTip() { tip.hidden = true; }

  /* ---------- header ---------- */

  /* Shows argv (a list) the way a shell would need it typed, and names the tab after it. */
  function showArgv(argv, fallback) {
    argv = arr(argv).map(str);
    byId('ll-argv').textContent = argv.length ? argv.map(shellQuote).join(' ') : '(unknown program)';
    doc.title = 'leadline: ' + shortText(argv.length ? argv.join(' ') : fallback, 120);
  }

  /* A fact adder for the header's list: fact(label, value, title). */
  function facts() {
    var host = byId('ll-facts');
    clear(host);
    return function fact(label, value, title) {
      var d = el('div');
      d.appendChild(el('dt', '', label));
      var dd = el('dd', '', value);
      if (title) dd.title = title;
      d.appendChild(dd);
      host.appendChild(d);
    };
  }

  function startedAt(unixNs) {
    var ns = num(unixNs);
    if (!(ns > 0)) return '';
    var when = new Date(ns / 1e6);
    if (isNaN(when.getTime())) return '';
    return when.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
  }

  function showWarning(incomplete, what) {
    var warn = byId('ll-warning');
    warn.hidden = !incomplete;
    warn.textContent = incomplete ?
      'Warning: the capture was not stopped cleanly (the program may have crashed or been ' +
      'killed); the ' + what + ' is incomplete and the numbers may be partial.' : '';
  }

  /* ---------- sortable table ---------- */

  /* Fills `table` with `rows` in the order of spec.table (a tableState) by spec.sortKey.
   * spec: columns [{key, label, left, kind ('text' sorts as text), title}], limit,
   * value(row, key) (what a column sorts by), cell(row, column) -> {text, cls, title, badge},
   * name(row) (a row's function name, for clicks), selected(row), noun (plural).
   * Returns how many rows are shown. */
  function renderTable(table, spec) {
    clear(table);
    var col = null;
    spec.columns.forEach(function (c) { if (c.key === spec.sortKey) col = c; });
    var keyed = spec.rows.map(function (r, i) { return { r: r, v: spec.value(r, spec.sortKey), i: i }; });
    keyed.sort(function (a, b) {
      var d;
      if (col && col.kind === 'text') d = a.v < b.v ? -1 : a.v > b.v ? 1 : 0;
      else d = a.v - b.v;
      if (spec.table.desc) d = -d;
      return d || a.i - b.i;
    });
    var hr = el('tr');
    spec.columns.forEach(function (c) {
      var sorted = c.key === spec.sortKey;
      var th = el('th', (c.left ? 'll-left' : '') + (sorted ? ' ll-sorted' : ''), c.label);
      if (sorted) th.textContent += spec.table.desc ? ' ▼' : ' ▲';
      th.dataset.key = c.key;
      th.title = c.title || 'Sort by ' + c.label.toLowerCase();
      hr.appendChild(th);
    });
    var thead = el('thead');
    thead.appendChild(hr);
    table.appendChild(thead);
    var tbody = el('tbody');
    var shown = spec.table.showAll ? keyed.length : Math.min(keyed.length, spec.limit);
    for (var i = 0; i < shown; i++) {
      var row = keyed[i].r;
      var tr = el('tr', spec.selected(row) ? 'll-selected' : '');
      tr.dataset.name = spec.name(row);
      tr.dataset.row = String(row);
      tr.dataset.index = String(keyed[i].i); /* its place in spec.rows */
      for (var k = 0; k < spec.columns.length; k++) {
        var c = spec.columns[k];
        var cell = spec.cell(row, c);
        var td = el('td', (c.left ? 'll-left ' : '') + (cell.cls || ''), cell.text);
        if (cell.title) td.title = cell.title;
        if (cell.badge) td.appendChild(el('span', 'll-kind', cell.badge));
        tr.appendChild(td);
      }
      tbody.appendChild(tr);
    }
    table.appendChild(tbody);
    var more = byId('ll-table-more');
    more.hidden = keyed.length <= spec.limit;
    more.textContent = spec.table.showAll ? 'Show top ' + spec.limit : 'Show all ' + fmtCount(keyed.length);
    byId('ll-table-note').textContent = keyed.length ?
      'Showing ' + fmtCount(shown) + ' of ' + fmtCount(keyed.length) + ' ' + spec.noun +
      '; click a row to find it in the flame graph.' :
      'No ' + spec.noun + ' were recorded.';
    return shown;
  }

  /* The table's order and length: {key, desc, showAll}.  `key` null means the page's default,
   * which `defaultKey()` gives. */
  function tableState() { return { key: null, desc: true, showAll: false }; }

  /* `sort=KEY` (or `sort=KEY-asc`) from the URL hash, when KEY is one of the columns. */
  function sortFromHash(table, value, columns) {
    table.key = null;
    table.desc = true;
    var key = str(value).replace(/-asc$/, '');
    if (!columns.some(function (c) { return c.key === key; })) return;
    table.key = key;
    table.desc = !/-asc$/.test(str(value));
  }

  function sortToHash(table) {
    return table.key ? ['sort=' + table.key + (table.desc ? '' : '-asc')] : [];
  }

  /* Clicks on the table: a header sorts by its column (a second click the other way; text
   * columns start A to Z), a row searches the flame graph for its function (a second click
   * clears it), the "show all" button toggles.  changed() after a sort or toggle. */
  function wireTable(node, table, columns, defaultKey, flame, changed) {
    node.addEventListener('click', function (ev) {
      var th = ev.target.closest ? ev.target.closest('th') : null;
      if (th && th.dataset.key) {
        var key = th.dataset.key;
        if (key === (table.key || defaultKey())) {
          table.desc = !table.desc;
        } else {
          table.desc = !columns.some(function (c) { return c.key === key && c.kind === 'text'; });
        }
        table.key = key;
        changed();
        return;
      }
      var tr = ev.target.closest ? ev.target.closest('tbody tr') : null;
      if (tr && tr.dataset.name !== undefined) {
        flame.setSearch(flame.search === tr.dataset.name ? '' : tr.dataset.name);
      }
    });
    byId('ll-table-more').addEventListener('click', function () {
      table.showAll = !table.showAll;
      changed();
    });
  }

  /* ---------- flame graph ---------- */

  var ROW_H = 18;
  var MAX_FRAMES = 60000;
  var MIN_FRAME_PX = 0.5; /* narrower frames are not drawn; together they make a "small" block */
  var CRUMBS_HEAD = 2;
  var CRUMBS_TAIL = 5;

  function hashString(s) {
    var h = 2166136261;
    for (var i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i);
      h = Math.imul(h, 16777619);
    }
    return h >>> 0;
  }

  /* A stable colour for a function: warm for the program's code, cool for `cool` frames, green
   * for a C function (`native`: --native's frames). */
  function frameColor(key, cool, native) {
    var h = hashString(key);
    if (native) return 'hsl(' + (85 + h % 40) + ',45%,' + (60 + (h >> 8) % 12) + '%)';
    if (cool) return 'hsl(' + (195 + h % 35) + ',55%,' + (72 + (h >> 8) % 10) + '%)';
    return 'hsl(' + (8 + h % 42) + ',82%,' + (62 + (h >> 8) % 12) + '%)';
  }

  /* The interactive flame graph (an icicle: callers above callees) in #ll-flame, with its search
   * box, reset button, breadcrumbs and notes.
   *
   * tree: {count, parentOf, order (every node after its parent), names}; node 0 is the root.
   * opts: weights() -> {w: per-node weight, kids(n): n's children heaviest first, total};
   *   metric() -> {label, fmt}; real(n) (false for synthetic rows: the root, threads);
   *   matches(n, lowercased query); color(n); key(n) (the zoom's name in the URL and state)
   *   and find(key) (the node of a key, or -1);
   *   describe(n) -> {sub: [lines under the name], extra: [lines after the weight]};
   *   emptyText; changed(what) after the user zoomed or searched ('zoom' or 'search').
   */
  function flameView(tree, opts) {
    var host = byId('ll-flame');
    var view = {
      zoom: 0,
      search: '',
      result: { flags: null, matches: 0, weight: 0, share: 0 },
      info: { frames: 0, names: [], highlighted: 0, truncated: false, depth: 0 }
    };
    var frames = [];
    var drawnZoom = 0;

    function computeSearch() {
      var q = view.search.toLowerCase();
      if (!q) { view.result = { flags: null, matches: 0, weight: 0, share: 0 }; return; }
      var flags = new Uint8Array(tree.count);
      var matches = 0;
      var order = tree.order;
      var i;
      for (i = 0; i < order.length; i++) {
        var n = order[i];
        if (opts.real(n) && opts.matches(n, q)) { flags[n] = 1; matches++; }
      }
      // The matched share counts each matched subtree once, however often the match recurs in it.
      var wt = opts.weights();
      var covered = new Uint8Array(tree.count);
      var weight = 0;
      for (i = 0; i < order.length; i++) {
        var m = order[i];
        var p = tree.parentOf[m];
        var above = p >= 0 ? covered[p] : 0;
        if (flags[m] && !above) weight += wt.w[m];
        covered[m] = above || flags[m];
      }
      view.result = {
        flags: flags, matches: matches, weight: weight,
        share: wt.total > 0 ? weight / wt.total : 0
      };
    }

    function pathTo(n) {
      var path = [];
      for (var a = n; a >= 0; a = tree.parentOf[a]) path.push(a);
      return path.reverse();
    }

    function layout(width) {
      var wt = opts.weights();
      var w = wt.w;
      var out = [];
      var truncated = false;
      // The focused frame's ancestors, full width, above it.
      var path = pathTo(view.zoom);
      for (var i = 0; i < path.length - 1; i++) {
        out.push({ n: path[i], x: 0, w: width, d: i, ancestor: true, merged: 0 });
      }
      var queue = [{ n: view.zoom, x: 0, w: width, d: path.length - 1 }];
      for (var head = 0; head < queue.length; head++) {
        var item = queue[head];
        if (out.length >= MAX_FRAMES) { truncated = true; break; }
        out.push({ n: item.n, x: item.x, w: item.w, d: item.d, ancestor: false, merged: 0 });
        var kids = wt.kids(item.n);
        if (!kids.length) continue;
        var sum = 0;
        var k;
        for (k = 0; k < kids.length; k++) sum += w[kids[k]];
        var denom = Math.max(w[item.n], sum);
        if (!(denom > 0)) continue;
        var x = item.x;
        var mergedW = 0;
        var mergedN = 0;
        var mergedX = 0;
        for (k = 0; k < kids.length; k++) {
          var c = kids[k];
          if (!(w[c] > 0)) continue;
          var cw = item.w * w[c] / denom;
          if (cw >= MIN_FRAME_PX) {
            queue.push({ n: c, x: x, w: cw, d: item.d + 1 });
          } else {
            if (!mergedN) mergedX = x;
            mergedN++;
            mergedW += cw;
          }
          x += cw;
        }
        if (mergedN && mergedW >= 1) {
          out.push({ n: item.n, x: mergedX, w: mergedW, d: item.d + 1, ancestor: false, merged: mergedN });
        }
      }
      return { frames: out, truncated: truncated };
    }

    function draw() {
      hideTip();
      clear(host);
      var width = Math.max(200, host.clientWidth || 900);
      var laid = layout(width);
      frames = laid.frames;
      var flags = view.search ? view.result.flags : null;
      host.classList.toggle('ll-searching', !!view.search);
      var frag = doc.createDocumentFragment();
      var maxD = 0;
      var highlighted = 0;
      var names = [];
      var seen = new Set();
      for (var i = 0; i < frames.length; i++) {
        var f = frames[i];
        var n = f.n;
        var div = doc.createElement('div');
        var cls = 'll-frame';
        if (f.merged) {
          cls += ' ll-merged';
        } else {
          if (!opts.real(n)) cls += ' ll-synthetic';
          if (f.ancestor) cls += ' ll-ancestor';
          if (flags && flags[n]) { cls += ' ll-match'; highlighted++; }
          if (opts.frameClass) cls += opts.frameClass(n);
          if (names.length < 200 && !seen.has(tree.names[n])) {
            seen.add(tree.names[n]);
            names.push(tree.names[n]);
          }
        }
        div.className = cls;
        div.style.left = f.x.toFixed(2) + 'px';
        div.style.width = Math.max(1, f.w).toFixed(2) + 'px';
        div.style.top = (f.d * ROW_H) + 'px';
        div.style.background = f.merged ? '#d9dde3' : opts.color(n);
        div.dataset.i = String(i);
        if (f.w >= 28) {
          div.textContent = f.merged ? f.merged + ' small' : tree.names[n];
        }
        frag.appendChild(div);
        if (f.d > maxD) maxD = f.d;
      }
      host.style.height = ((maxD + 1) * ROW_H + 2) + 'px';
      host.appendChild(frag);
      if (view.zoom !== drawnZoom) {
        // Deep in a recursion the zoomed frame is far down: bring it near the top of the view.
        drawnZoom = view.zoom;
        host.parentNode.scrollTop = Math.max(0, (pathTo(view.zoom).length - 3) * ROW_H);
      }
      if (!(opts.weights().total > 0)) {
        host.style.height = 'auto';
        host.appendChild(el('div', 'll-empty', opts.emptyText));
      }
      view.info = {
        frames: frames.length, names: names, highlighted: highlighted,
        truncated: laid.truncated, depth: maxD + 1
      };
      byId('ll-flame-note').textContent = laid.truncated ?
        'Only the first ' + fmtCount(MAX_FRAMES) + ' frames are drawn; zoom in to see the rest.' : '';
      byId('ll-reset').disabled = view.zoom === 0;
      var m = opts.metric();
      byId('ll-total').textContent = m.label + ' total: ' + m.fmt(opts.weights().total);
      drawCrumbs();
      drawSearchInfo();
    }

    function drawCrumbs() {
      var nav = byId('ll-crumbs');
      clear(nav);
      if (view.zoom === 0) {
        nav.appendChild(el('span', 'll-note', 'Click a frame to zoom into it; Escape zooms out.'));
        return;
      }
      var path = pathTo(view.zoom);
      path.forEach(function (n, i) {
        var hidden = i >= CRUMBS_HEAD && i < path.length - CRUMBS_TAIL;
        if (hidden) {
          if (i === CRUMBS_HEAD) {
            nav.appendChild(el('span', 'll-crumb-sep', '›'));
            nav.appendChild(el('span', 'll-crumb-gap', '… ' + fmtCount(path.length - CRUMBS_HEAD - CRUMBS_TAIL) + ' more …'));
          }
          return;
        }
        if (i) nav.appendChild(el('span', 'll-crumb-sep', '›'));
        var last = i === path.length - 1;
        var crumb = el(last ? 'span' : 'button', last ? 'll-crumb ll-current' : 'll-crumb', shortText(tree.names[n], 48));
        if (!last) {
          crumb.type = 'button';
          crumb.title = tree.names[n];
          crumb.dataset.n = String(n);
        }
        nav.appendChild(crumb);
      });
    }

    function drawSearchInfo() {
      var info = byId('ll-search-info');
      var r = view.result;
      info.classList.toggle('ll-has-matches', !!view.search && r.matches > 0);
      if (!view.search) { info.textContent = ''; return; }
      if (!r.matches) { info.textContent = 'no matching frames'; return; }
      var m = opts.metric();
      info.textContent = fmtCount(r.matches) + ' matching frame' + (r.matches === 1 ? '' : 's') +
        ': matched ' + fmtPct(r.weight, opts.weights().total) + ' of ' + m.label.toLowerCase() +
        ' (' + m.fmt(r.weight) + ')';
    }

    function frameAt(target) {
      var node = target && target.closest ? target.closest('.ll-frame') : null;
      if (!node || !node.dataset.i) return null;
      return frames[Number(node.dataset.i)] || null;
    }

    function frameTip(ev, f) {
      var n = f.n;
      var lines = [];
      if (f.merged) {
        lines.push({ text: f.merged + ' frames too narrow to draw', cls: 'll-tip-title' });
        lines.push({ text: 'called from ' + tree.names[n], cls: 'll-tip-sub' });
        showTip(ev, lines);
        return;
      }
      var wt = opts.weights();
      var m = opts.metric();
      var about = opts.describe(n);
      var value = wt.w[n];
      var parent = tree.parentOf[n];
      lines.push({ text: tree.names[n], cls: 'll-tip-title' });
      arr(about.sub).forEach(function (s) { lines.push({ text: s, cls: 'll-tip-sub' }); });
      lines.push('-');
      lines.push(m.label + ': ' + m.fmt(value) + ' (' + fmtPct(value, wt.total) + ' of total' +
        (parent >= 0 ? ', ' + fmtPct(value, wt.w[parent]) + ' of parent' : '') + ')');
      arr(about.extra).forEach(function (s) { lines.push(s); });
      lines.push({
        text: f.ancestor || n === view.zoom ? 'click to zoom out to here' : 'click to zoom in',
        cls: 'll-tip-sub'
      });
      showTip(ev, lines);
    }

    /* Recomputes the search for the current weights and redraws. */
    view.update = function () {
      guard('search', computeSearch);
      guard('flame graph', draw);
    };

    view.setZoom = function (n) {
      view.zoom = n >= 0 && n < tree.count ? n : 0;
      guard('flame graph', draw);
      opts.changed('zoom');
    };

    view.setSearch = function (q) {
      view.search = q;
      var box = byId('ll-search');
      if (box.value !== q) box.value = q;
      view.update();
      opts.changed('search');
    };

    /* The search and zoom as URL hash parts, and back. */
    view.hashParts = function () {
      var parts = [];
      if (view.search) parts.push('search=' + encodeURIComponent(view.search));
      if (view.zoom !== 0) parts.push('zoom=' + encodeURIComponent(opts.key(view.zoom)));
      return parts;
    };

    view.fromHash = function (h) {
      view.search = h.search !== undefined ? h.search : '';
      view.zoom = h.zoom !== undefined ? Math.max(0, opts.find(h.zoom)) : 0;
    };

    /* For tests and tools: what is drawn, as data-* attributes of `s`. */
    view.writeState = function (s) {
      var info = view.info;
      s.setAttribute('data-total', String(opts.weights().total));
      s.setAttribute('data-frames', String(info.frames));
      s.setAttribute('data-depth', String(info.depth));
      s.setAttribute('data-truncated', info.truncated ? '1' : '0');
      s.setAttribute('data-rendered-names', JSON.stringify(info.names));
      s.setAttribute('data-search', view.search);
      s.setAttribute('data-search-matches', String(view.search ? view.result.matches : 0));
      s.setAttribute('data-search-highlighted', String(info.highlighted));
      s.setAttribute('data-search-share', String(view.search ? view.result.share : 0));
      s.setAttribute('data-zoom', opts.key(view.zoom));
      s.setAttribute('data-zoom-name', tree.names[view.zoom]);
    };

    host.addEventListener('mouseover', function (ev) {
      var f = frameAt(ev.target);
      if (f) frameTip(ev, f); else hideTip();
    });
    host.addEventListener('mousemove', moveTip);
    host.addEventListener('mouseleave', hideTip);
    host.addEventListener('click', function (ev) {
      var f = frameAt(ev.target);
      if (!f || f.merged) return;
      var up = tree.parentOf[f.n] >= 0 ? tree.parentOf[f.n] : 0;
      view.setZoom(f.n === view.zoom && !f.ancestor ? up : f.n);
    });
    byId('ll-reset').addEventListener('click', function () { view.setZoom(0); });
    byId('ll-crumbs').addEventListener('click', function (ev) {
      var b = ev.target.closest ? ev.target.closest('button.ll-crumb') : null;
      if (b && b.dataset.n !== undefined) view.setZoom(Number(b.dataset.n));
    });
    var box = byId('ll-search');
    box.addEventListener('input', function () { view.setSearch(box.value); });
    // Escape clears the search when typing in it, and otherwise zooms back out to the root.
    doc.addEventListener('keydown', function (ev) {
      if (ev.key !== 'Escape') return;
      if (ev.target === box && box.value !== '') view.setSearch('');
      else if (view.zoom !== 0) view.setZoom(0);
    });
    return view;
  }

  /* Redraws after the window's width changed (not on every event of a drag). */
  function onResize(redraw) {
    var pending = 0;
    var lastWidth = window.innerWidth;
    window.addEventListener('resize', function () {
      if (window.innerWidth === lastWidth) return;
      lastWidth = window.innerWidth;
      clearTimeout(pending);
      pending = setTimeout(redraw, 120);
    });
  }

  /* What a page with a flame graph and a table does on its events: a table click sorts or
   * searches, a new URL hash sets the view, a resize redraws.  page: {table, columns,
   * defaultKey, flame, writeHash(), applyHash(), syncControls(), refresh(parts)}. */
  function wireFlamePage(page) {
    wireTable(byId('ll-table'), page.table, page.columns, function () { return page.defaultKey; },
      page.flame, function () {
        page.writeHash();
        page.refresh({ table: true });
      });
    window.addEventListener('hashchange', function () {
      page.applyHash();
      page.syncControls();
      page.refresh({ flame: true, table: true });
    });
    onResize(function () { page.refresh({ flame: true }); });
  }

  /* kids(n) for flameView: n's children (linked by firstChild/nextSibling) that weigh
   * something in `w`, heaviest first; sorted once, and only for the nodes that are drawn. */
  function heaviestChildren(tree, w) {
    var sorted = new Map();
    return function kids(n) {
      var list = sorted.get(n);
      if (list) return list;
      list = [];
      for (var c = tree.firstChild[n]; c >= 0; c = tree.nextSibling[c]) if (w[c] > 0) list.push(c);
      if (list.length > 1) list.sort(function (a, b) { return w[b] - w[a] || a - b; });
      sorted.set(n, list);
      return list;
    };
  }

  /* flameView's real, key and find for a tree whose node 0 is the synthetic root (named 'all'
   * in the URL) and whose other nodes are named by their number. */
  function numberedNodes(tree) {
    return {
      real: function (n) { return n !== 0; },
      key: function (n) { return n === 0 ? 'all' : String(n); },
      find: function (key) {
        var n = key === 'all' ? 0 : Number(key);
        return n >= 0 && n < tree.count && n === Math.floor(n) ? n : -1;
      }
    };
  }

  /* A zoomed frame that weighs nothing in the current view (weights `w`) gives way to its
   * nearest caller that still does. */
  function keepZoomVisible(flame, w, parentOf) {
    while (flame.zoom !== 0 && !(w[flame.zoom] > 0)) flame.zoom = parentOf[flame.zoom];
  }

  /* ---------- the source view (#ll-source-panel, html_page.source_panel) ----------
   * A page's source files, from its data's `sources` rows (render/sources.py): [file, state,
   * lines or null, note], heaviest first. */
  function sourceFiles(rows) {
    var list = [];
    var indexOf = new Map(); /* file -> index into list */
    arr(rows).forEach(function (row) {
      row = arr(row);
      var file = str(row[0]);
      if (indexOf.has(file)) return;
      indexOf.set(file, list.length);
      list.push({ file: file, state: str(row[1]), lines: Array.isArray(row[2]) ? row[2] : null, note: str(row[3]) });
    });
    return { list: list, indexOf: indexOf };
  }

  var SOURCE_NOTES = {
    changed: 'This file changed since it was recorded: its lines now may not be the lines that ran.',
    unknown: 'The capture has no record of this file (attach, or a capture before format 1.4): ' +
      'it is shown as it is now.'
  };

  function heat(v, max) {
    if (!(v > 0) || !(max > 0)) return '';
    var a = 0.12 + 0.68 * Math.min(v / max, 1);
    return 'rgba(230, 81, 0, ' + a.toFixed(3) + ')';
  }

  /* Draws the source view of a page whose files are `list`, as `source` (sourceState) says:
   * hidden without files; with none chosen yet, pick() chooses one (true when it did, else the
   * first file is shown).  lines(file) gives the chosen file's weights: {self, total: Maps
   * from line number to weight, whole: what the shares are of, titles: an optional Map from
   * line number to a tooltip}. */
  function showSource(list, source, pick, lines) {
    byId('ll-source-panel').hidden = list.length === 0;
    if (!list.length) return;
    if (source.file < 0 || source.file >= list.length) {
      if (!pick()) { source.file = 0; source.line = 0; }
      source.chosen = false; /* the page's own choice: not written to the URL */
    }
    byId('ll-source-file').value = String(source.file);
    var v = lines(source.file);
    source.rows = renderSource(list[source.file], v.self, v.total, v.whole, source.line, v.titles);
  }

  /* One file in the source view: each line with its self and total share of `whole`, line
   * `target` marked and scrolled to.  The number of rows shown. */
  function renderSource(entry, self, total, whole, target, titles) {
    var warning = byId('ll-source-warning');
    var note = entry.lines === null ? 'The source is not available: ' + entry.note + '.' : SOURCE_NOTES[entry.state] || '';
    warning.hidden = !note;
    warning.textContent = note;
    warning.dataset.state = entry.lines === null ? 'missing' : entry.state;
    var maxSelf = 0;
    var maxTotal = 0;
    self.forEach(function (v) { if (v > maxSelf) maxSelf = v; });
    total.forEach(function (v) { if (v > maxTotal) maxTotal = v; });
    var table = byId('ll-source');
    clear(table);
    var lines = entry.lines || [];
    var count = lines.length;
    total.forEach(function (v, line) { if (line > count) count = line; });
    self.forEach(function (v, line) { if (line > count) count = line; });
    var body = document.createElement('tbody');
    var marked = null;
    for (var n = 1; n <= count; n++) {
      var tr = document.createElement('tr');
      tr.dataset.line = String(n);
      var sv = self.get(n) || 0;
      var tv = total.get(n) || 0;
      var cells = [
        [String(n), 'll-num', ''],
        [sv > 0 ? fmtPct(sv, whole) : '', 'll-num ll-self', heat(sv, maxSelf)],
        [tv > 0 ? fmtPct(tv, whole) : '', 'll-num ll-total', heat(tv, maxTotal)],
        [n <= lines.length ? str(lines[n - 1]) : '', 'll-code', '']
      ];
      cells.forEach(function (c) {
        var td = document.createElement('td');
        td.className = c[1];
        td.textContent = c[0];
        if (c[2]) td.style.background = c[2];
        tr.appendChild(td);
      });
      if (titles && titles.has(n)) tr.title = titles.get(n);
      if (n === target) { tr.className = 'll-target'; marked = tr; }
      body.appendChild(tr);
    }
    table.appendChild(body);
    byId('ll-source-note').textContent = entry.file;
    if (marked) {
      var wrap = byId('ll-source-wrap');
      wrap.scrollTop = Math.max(marked.offsetTop - wrap.clientHeight / 2, 0);
    }
    return count;
  }

  /* What the source view shows: a file (its index in the page's list, -1: not chosen yet) and
   * a line; chosen: by the user, so kept in the URL (source=FILE:LINE). */
  function sourceState() { return { file: -1, line: 0, rows: 0, chosen: false }; }

  function sourceToHash(source) {
    return source.chosen ? ['source=' + source.file + ':' + source.line] : [];
  }

  /* `source` from the URL's hash `h` (readHash), for a page of `count` files. */
  function sourceFromHash(source, h, count) {
    var at = /^(\d+):(\d+)$/.exec(str(h.source));
    source.file = at && Number(at[1]) < count ? Number(at[1]) : -1;
    source.line = at ? Number(at[2]) : 0;
    source.chosen = !!at;
  }

  /* The source view's controls: the file chooser (of `list`), and a click on a row of the
   * table, which show(row) opens (true when it did); changed() after either. */
  function wireSource(list, source, show, changed) {
    var file = byId('ll-source-file');
    fillSelect(file, list.map(function (one, i) { return [i, one.file]; }));
    file.addEventListener('change', function () {
      source.file = Number(file.value);
      source.line = 0;
      source.chosen = true;
      changed();
    });
    byId('ll-table').addEventListener('click', function (e) {
      var tr = e.target && e.target.closest ? e.target.closest('tbody tr[data-index]') : null;
      if (tr && show(tr)) changed();
    });
  }

  return {
    byId: byId, el: el, svgEl: svgEl, clear: clear, fillSelect: fillSelect, guard: guard,
    num: num, str: str, obj: obj, arr: arr,
    fmtBytes: fmtBytes, fmtNs: fmtNs, fmtCount: fmtCount, fmtPct: fmtPct, shortText: shortText,
    loadData: loadData, readHash: readHash, writeHash: writeHash,
    showTip: showTip, hideTip: hideTip,
    showArgv: showArgv, facts: facts, startedAt: startedAt, showWarning: showWarning,
    renderTable: renderTable, tableState: tableState, sortFromHash: sortFromHash,
    sortToHash: sortToHash, wireTable: wireTable,
    frameColor: frameColor, flameView: flameView, onResize: onResize,
    wireFlamePage: wireFlamePage, keepZoomVisible: keepZoomVisible, numberedNodes: numberedNodes,
    heaviestChildren: heaviestChildren,
    sourceFiles: sourceFiles, showSource: showSource, sourceState: sourceState,
    sourceToHash: sourceToHash, sourceFromHash: sourceFromHash, wireSource: wireSource
  };
})();
