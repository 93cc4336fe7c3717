/* leadline trace report: everything the page does once its data is in.
 *
 * Untrusted text (function names, files, argv, thread names) only ever reaches the page through
 * textContent or SVG text nodes, never as markup.  Trees are walked with explicit queues and
 * arrays, never by recursion, because call trees can be thousands of levels deep.
 */
(function () {
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

  /* ---------- metrics ---------- */

  var METRICS = {
    time: {
      label: 'Wall time', fnKey: 'incl_ns', fmt: fmtNs,
      value: function (n) { return Math.max(num(n.incl_ns), 0); }
    },
    heap: {
      label: 'Heap allocated', fnKey: 'incl_heap', fmt: function (v) { return fmtBytes(v); },
      value: function (n) { return Math.max(num(n.incl_heap), 0); }
    },
    rss: {
      label: 'RSS growth', fnKey: 'incl_rss', fmt: function (v) { return fmtBytes(v); },
      value: function (n) { return Math.max(num(n.incl_rss), 0); }
    },
    peak: {
      label: 'Peak growth', fnKey: 'peak_growth', fmt: function (v) { return fmtBytes(v); },
      value: function (n) { return Math.max(num(n.peak_growth), 0); }
    }
  };
  var METRIC_ORDER = ['time', 'heap', 'rss', 'peak'];
  var METRIC_ALIASES = {
    time: 'time', wall: 'time', ns: 'time', incl_ns: 'time',
    heap: 'heap', incl_heap: 'heap', alloc: 'heap',
    rss: 'rss', incl_rss: 'rss', growth: 'rss',
    peak: 'peak', peak_growth: 'peak'
  };

  function metricName(s) {
    var key = str(s).toLowerCase();
    return Object.prototype.hasOwnProperty.call(METRIC_ALIASES, key) ? METRIC_ALIASES[key] : null;
  }

  /* ---------- the data ---------- */

  var data = {};
  (function () {
    var holder = byId('ll-data');
    var parsed = holder ? JSON.parse(holder.textContent || '{}') : {};
    if (parsed && typeof parsed === 'object') data = parsed;
  })();

  function obj(x) { return x && typeof x === 'object' && !Array.isArray(x) ? x : {}; }
  function arr(x) { return Array.isArray(x) ? x : []; }

  var meta = obj(data.meta);
  var summary = obj(data.summary);

  var funcById = new Map();
  arr(data.functions).forEach(function (f) {
    f = obj(f);
    funcById.set(num(f.id), f);
  });

  var threadNames = new Map();
  arr(data.threads).forEach(function (t) {
    t = obj(t);
    threadNames.set(num(t.serial), str(t.name));
  });

  function threadLabel(serial) {
    var name = threadNames.get(serial);
    return name ? name : 'thread ' + serial;
  }

  function funcName(f) {
    var name = str(f.name);
    return name === '' ? '<unknown>' : name;
  }

  function funcWhere(f) {
    var file = str(f.file);
    if (!file) return str(f.kind) === 'c' ? '(built-in)' : '';
    var line = num(f.line);
    return line > 0 ? file + ':' + line : file;
  }

  /* ---------- the call tree ----------
   * Model nodes live in parallel arrays indexed 0..count-1.  Index 0 is the synthetic root
   * "all"; with several threads each has a synthetic node under it.
   */
  var tree = (function buildTree() {
    var raw = arr(data.nodes);
    var names = ['all'];
    var rawOf = [null];
    var funcOf = [null];
    var keyOf = ['all'];
    var kindOf = ['root'];
    var parentOf = [-1];
    var threadOf = [-1];

    var threadSet = new Map();
    var i;
    for (i = 0; i < raw.length; i++) {
      var t = num(obj(raw[i]).thread);
      if (!threadSet.has(t)) threadSet.set(t, true);
    }
    var threadList = Array.from(threadSet.keys()).sort(function (a, b) { return a - b; });
    var threadIndex = new Map();
    var perThread = threadList.length > 1;
    if (perThread) {
      threadList.forEach(function (serial) {
        threadIndex.set(serial, names.length);
        names.push(threadLabel(serial));
        rawOf.push(null);
        funcOf.push(null);
        keyOf.push('t' + serial);
        kindOf.push('thread');
        parentOf.push(0);
        threadOf.push(serial);
      });
    }

    var first = names.length;
    var idIndex = new Map();
    for (i = 0; i < raw.length; i++) {
      var n = obj(raw[i]);
      var f = obj(funcById.get(num(n.func)));
      idIndex.set(num(n.id), first + i);
      names.push(funcName(f));
      rawOf.push(n);
      funcOf.push(f);
      keyOf.push(String(num(n.id)));
      kindOf.push(str(f.kind) === 'c' ? 'c' : 'py');
      parentOf.push(-1);
      threadOf.push(num(n.thread));
    }
    var count = names.length;
    var children = new Array(count);
    for (i = 0; i < count; i++) children[i] = [];
    for (i = first; i < count; i++) {
      var p = idIndex.get(num(rawOf[i].parent));
      if (p === undefined || p === i || num(rawOf[i].parent) < 0) {
        p = perThread ? threadIndex.get(threadOf[i]) : 0;
      }
      parentOf[i] = p;
    }
    for (i = 1; i < count; i++) children[parentOf[i]].push(i);

    // Breadth-first order from the root; what a malformed parent cycle cuts off is left out.
    var order = [0];
    var depth = new Int32Array(count).fill(-1);
    depth[0] = 0;
    for (var head = 0; head < order.length; head++) {
      var at = order[head];
      var kids = children[at];
      for (var k = 0; k < kids.length; k++) {
        var c = kids[k];
        if (depth[c] >= 0) continue;
        depth[c] = depth[at] + 1;
        order.push(c);
      }
    }
    var maxDepth = 0;
    for (i = 0; i < order.length; i++) maxDepth = Math.max(maxDepth, depth[order[i]]);
    return {
      count: count, names: names, rawOf: rawOf, funcOf: funcOf, keyOf: keyOf, kindOf: kindOf,
      parentOf: parentOf, threadOf: threadOf, children: children, order: order, depth: depth,
      maxDepth: maxDepth, perThread: perThread, threads: threadList, realCount: raw.length
    };
  })();

  var weightCache = {};

  /* Per-metric weights (negative values count as 0; synthetic nodes sum their children) and
   * children sorted heaviest first. */
  function weightsFor(metric) {
    if (weightCache[metric]) return weightCache[metric];
    var m = METRICS[metric];
    var w = new Float64Array(tree.count);
    var order = tree.order;
    var i;
    for (i = order.length - 1; i >= 0; i--) {
      var n = order[i];
      if (tree.rawOf[n]) {
        w[n] = m.value(tree.rawOf[n]);
      } else {
        var kids = tree.children[n];
        var s = 0;
        for (var k = 0; k < kids.length; k++) s += w[kids[k]];
        w[n] = s;
      }
    }
    var sorted = new Array(tree.count);
    for (i = 0; i < tree.count; i++) {
      var list = tree.children[i];
      if (list.length > 1) {
        list = list.slice().sort(function (a, b) { return w[b] - w[a] || a - b; });
      }
      sorted[i] = list;
    }
    weightCache[metric] = { w: w, children: sorted, total: w[0] };
    return weightCache[metric];
  }

  /* ---------- state, and the URL hash ---------- */

  var state = {
    metric: 'time',
    search: '',
    zoom: 0,
    sortKey: null,
    sortDesc: true,
    showAllRows: false
  };
  var searchResult = { flags: null, matches: 0, share: 0, weight: 0 };

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

  function writeHash() {
    var parts = [];
    if (state.search) parts.push('search=' + encodeURIComponent(state.search));
    if (state.metric !== 'time') parts.push('metric=' + state.metric);
    if (state.zoom !== 0) parts.push('zoom=' + encodeURIComponent(tree.keyOf[state.zoom]));
    if (state.sortKey) parts.push('sort=' + state.sortKey + (state.sortDesc ? '' : '-asc'));
    var h = parts.length ? '#' + parts.join('&') : '';
    try {
      history.replaceState(null, '', h || location.pathname + location.search);
    } catch (e) {
      /* Some file:// setups refuse it; the hash is only a convenience. */
    }
  }

  function findKey(key) {
    for (var i = 0; i < tree.count; i++) if (tree.keyOf[i] === key) return i;
    return -1;
  }

  function applyHash() {
    var h = readHash();
    if (h.metric !== undefined) {
      var m = metricName(h.metric);
      if (m) state.metric = m;
    }
    state.search = h.search !== undefined ? h.search : '';
    state.zoom = 0;
    if (h.zoom !== undefined) {
      var z = findKey(h.zoom);
      if (z >= 0 && tree.depth[z] >= 0) state.zoom = z;
    }
    state.sortKey = null;
    state.sortDesc = true;
    if (h.sort) {
      var s = h.sort.replace(/-asc$/, '');
      if (TABLE_COLUMNS.some(function (c) { return c.key === s; })) {
        state.sortKey = s;
        state.sortDesc = !/-asc$/.test(h.sort);
      }
    }
  }

  /* ---------- tooltip ---------- */

  var tip = byId('ll-tooltip');

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

  function shellQuote(arg) {
    arg = str(arg);
    if (arg !== '' && /^[A-Za-z0-9_\/.,:=@%+-]+$/.test(arg)) return arg;
    return "'" + arg.replace(/'/g, "'\\''") + "'";
  }

  function renderHeader() {
    var argv = arr(meta.argv).map(str);
    var command = argv.length ? argv.map(shellQuote).join(' ') : '(unknown program)';
    byId('ll-argv').textContent = command;
    doc.title = 'leadline: ' + shortText(argv.length ? argv.join(' ') : 'trace', 120);

    var facts = byId('ll-facts');
    clear(facts);
    function fact(label, value, title) {
      var d = el('div');
      d.appendChild(el('dt', '', label));
      var dd = el('dd', '', value);
      if (title) dd.title = title;
      d.appendChild(dd);
      facts.appendChild(d);
    }
    fact('Python', str(meta.python_version) || '?');
    fact('Duration', fmtNs(summary.duration_ns));
    var ev = fmtCount(summary.events);
    if (summary.recorded !== undefined && num(summary.recorded) !== num(summary.events)) {
      ev += ' (' + fmtCount(summary.recorded) + ' recorded)';
    }
    fact('Events', ev);
    fact('Peak RSS', fmtBytes(summary.peak_rss));
    fact('RSS start → end', fmtBytes(summary.start_rss) + ' → ' + fmtBytes(summary.end_rss));
    fact('Threads', fmtCount(summary.threads !== undefined ? summary.threads : tree.threads.length));
    if (meta.pid !== undefined || meta.host !== undefined) {
      fact('Process', 'pid ' + str(meta.pid) + (meta.host ? ' on ' + str(meta.host) : ''));
    }
    var startNs = num(meta.start_unix_ns);
    if (startNs > 0) {
      var when = new Date(startNs / 1e6);
      if (!isNaN(when.getTime())) {
        fact('Started', when.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC'));
      }
    }
    var warn = byId('ll-warning');
    if (summary.complete === false) {
      warn.textContent = 'Warning: the capture was not stopped cleanly (the program may have ' +
        'crashed or been killed); the trace is incomplete and the numbers may be partial.';
      warn.hidden = false;
    } else {
      warn.hidden = true;
    }
  }

  /* ---------- memory timeline ---------- */

  function niceStep(span, count) {
    if (!(span > 0)) return 1;
    var raw = span / Math.max(1, count);
    var p = Math.pow(10, Math.floor(Math.log10(raw)));
    var f = raw / p;
    var nice = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10;
    return nice * p;
  }

  function tickLabel(v, step) {
    var decimals = Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9)));
    if (step * Math.pow(10, decimals) % 1 > 1e-6) decimals += 1;
    return v.toFixed(decimals);
  }

  var timelineInfo = { points: 0, movers: 0, labels: [] };

  function renderTimeline() {
    var host = byId('ll-timeline-chart');
    clear(host);
    var points = [];
    arr(data.timeline).forEach(function (p) {
      if (Array.isArray(p) && p.length >= 2) points.push([num(p[0]), num(p[1])]);
    });
    for (var s = 1; s < points.length; s++) {
      if (points[s][0] < points[s - 1][0]) {
        points.sort(function (a, b) { return a[0] - b[0]; });
        break;
      }
    }
    var movers = arr(data.movers).map(obj);
    timelineInfo = { points: points.length, movers: movers.length, labels: [] };
    if (!points.length) {
      host.appendChild(el('div', 'll-empty', 'No RSS samples were recorded.'));
      return;
    }

    var width = Math.max(360, host.clientWidth || 900);
    var height = 280;
    var labelRows = 3;
    var rowH = 13;
    var margin = { left: 66, right: 18, top: 12 + labelRows * rowH, bottom: 40 };
    var plotW = width - margin.left - margin.right;
    var plotH = height - margin.top - margin.bottom;

    var tMax = Math.max(num(summary.duration_ns), points[points.length - 1][0], 1);
    movers.forEach(function (m) { tMax = Math.max(tMax, num(m.end_ns)); });
    var timeUnit = tMax >= 1e9 ? { div: 1e9, name: 's' } :
      tMax >= 1e6 ? { div: 1e6, name: 'ms' } : { div: 1e3, name: 'µs' };

    var yLo = Infinity;
    var yHi = -Infinity;
    points.forEach(function (p) { yLo = Math.min(yLo, p[1]); yHi = Math.max(yHi, p[1]); });
    var peakRss = num(summary.peak_rss);
    if (peakRss > 0) yHi = Math.max(yHi, peakRss);
    var byteUnit = yHi >= 10 * 1073741824 ? { div: 1073741824, name: 'GiB' } :
      yHi >= 1048576 ? { div: 1048576, name: 'MiB' } : { div: 1024, name: 'KiB' };
    var lo = yLo / byteUnit.div;
    var hi = yHi / byteUnit.div;
    if (hi - lo < Math.max(1e-9, hi * 0.02)) { lo -= Math.max(0.5, hi * 0.05); hi += Math.max(0.5, hi * 0.05); }
    var ySpan = hi - lo;
    lo = Math.max(lo - ySpan * 0.08, yLo >= 0 ? 0 : -Infinity);
    hi += ySpan * 0.08;
    var yStep = niceStep(hi - lo, 5);
    lo = Math.floor(lo / yStep) * yStep;
    hi = Math.ceil(hi / yStep) * yStep;
    var tHi = tMax / timeUnit.div;
    var tStep = niceStep(tHi, Math.max(2, Math.floor(plotW / 90)));

    function xOf(tNs) { return margin.left + (tNs / timeUnit.div) / tHi * plotW; }
    function yOf(bytes) { return margin.top + plotH - (bytes / byteUnit.div - lo) / (hi - lo) * plotH; }

    var svg = svgEl('svg', {
      width: width, height: height, viewBox: '0 0 ' + width + ' ' + height, role: 'img',
      'aria-label': 'RSS over time'
    });
    var axes = svgEl('g', { 'class': 'll-axis' });
    var v;
    for (v = lo; v <= hi + yStep * 1e-6; v += yStep) {
      var y = yOf(v * byteUnit.div);
      axes.appendChild(svgEl('line', { 'class': 'll-grid', x1: margin.left, x2: margin.left + plotW, y1: y, y2: y }));
      axes.appendChild(svgEl('text', { x: margin.left - 6, y: y + 4, 'text-anchor': 'end' }, tickLabel(v, yStep)));
    }
    for (v = 0; v <= tHi + tStep * 1e-6; v += tStep) {
      var x = margin.left + v / tHi * plotW;
      axes.appendChild(svgEl('line', { 'class': 'll-tick', x1: x, x2: x, y1: margin.top + plotH, y2: margin.top + plotH + 5 }));
      axes.appendChild(svgEl('text', { x: x, y: margin.top + plotH + 17, 'text-anchor': 'middle' }, tickLabel(v, tStep)));
    }
    axes.appendChild(svgEl('path', {
      d: 'M' + margin.left + ' ' + margin.top + 'V' + (margin.top + plotH) + 'H' + (margin.left + plotW),
      fill: 'none'
    }));
    svg.appendChild(axes);
    svg.appendChild(svgEl('text', {
      'class': 'll-axis-title', x: margin.left + plotW / 2, y: height - 4, 'text-anchor': 'middle'
    }, 'time (' + timeUnit.name + ')'));
    svg.appendChild(svgEl('text', {
      'class': 'll-axis-title', x: 14, y: margin.top + plotH / 2, 'text-anchor': 'middle',
      transform: 'rotate(-90 14 ' + (margin.top + plotH / 2) + ')'
    }, 'RSS (' + byteUnit.name + ')'));

    // Movers: shaded spans, biggest change first so labels go to the biggest.
    var ranked = movers.map(function (m, i) { return { m: m, i: i }; }).sort(function (a, b) {
      return Math.abs(num(b.m.rss_delta)) - Math.abs(num(a.m.rss_delta)) || a.i - b.i;
    });
    var spanLayer = svgEl('g');
    var labelLayer = svgEl('g');
    var rows = [];
    for (var r = 0; r < labelRows; r++) rows.push([]);
    var spans = [];
    ranked.forEach(function (entry, rank) {
      var m = entry.m;
      var x0 = xOf(Math.max(0, num(m.start_ns)));
      var x1 = xOf(Math.max(num(m.start_ns), num(m.end_ns)));
      if (x1 - x0 < 2) { var mid = (x0 + x1) / 2; x0 = mid - 1; x1 = mid + 1; }
      var dir = num(m.rss_delta) < 0 ? 'll-down' : 'll-up';
      var rect = svgEl('rect', {
        'class': 'll-mover ' + dir, x: x0, y: margin.top, width: x1 - x0, height: plotH
      });
      spanLayer.appendChild(rect);
      spans.push({ m: m, x0: x0, x1: x1, rect: rect });
      if (rank >= 8) return;
      var f = obj(funcById.get(num(m.func)));
      var text = shortText(funcName(f), 28) + ' ' + fmtBytes(m.rss_delta, true);
      var textW = text.length * 6.3;
      var cx = Math.min(Math.max((x0 + x1) / 2, margin.left + textW / 2), margin.left + plotW - textW / 2);
      var a = cx - textW / 2 - 4;
      var b = cx + textW / 2 + 4;
      for (var row = 0; row < labelRows; row++) {
        var free = rows[row].every(function (iv) { return b <= iv[0] || a >= iv[1]; });
        if (!free) continue;
        rows[row].push([a, b]);
        var ty = margin.top - 4 - (labelRows - 1 - row) * rowH;
        labelLayer.appendChild(svgEl('line', {
          x1: (x0 + x1) / 2, x2: (x0 + x1) / 2, y1: ty + 2, y2: margin.top,
          stroke: dir === 'll-up' ? 'rgba(214,69,47,0.5)' : 'rgba(43,154,90,0.5)'
        }));
        var label = svgEl('text', { 'class': 'll-mover-label ' + dir, x: cx, y: ty, 'text-anchor': 'middle' }, text);
        labelLayer.appendChild(label);
        timelineInfo.labels.push(funcName(f));
        break;
      }
    });
    svg.appendChild(spanLayer);

    // The RSS line, and the area under it.
    var d = '';
    var peakAt = 0;
    points.forEach(function (p, i) {
      d += (i ? 'L' : 'M') + xOf(p[0]).toFixed(1) + ' ' + yOf(p[1]).toFixed(1);
      if (p[1] > points[peakAt][1]) peakAt = i;
    });
    var base = margin.top + plotH;
    svg.appendChild(svgEl('path', {
      'class': 'll-rss-area',
      d: d + 'L' + xOf(points[points.length - 1][0]).toFixed(1) + ' ' + base + 'L' + xOf(points[0][0]).toFixed(1) + ' ' + base + 'Z'
    }));
    svg.appendChild(svgEl('path', { 'class': 'll-rss-line', d: d }));
    var px = xOf(points[peakAt][0]);
    var py = yOf(points[peakAt][1]);
    svg.appendChild(svgEl('circle', { 'class': 'll-peak', cx: px, cy: py, r: 3.5 }));
    var peakText = 'peak ' + fmtBytes(points[peakAt][1]);
    var leftSide = px > margin.left + plotW - 110;
    svg.appendChild(svgEl('text', {
      'class': 'll-peak-label', x: leftSide ? px - 7 : px + 7, y: Math.max(margin.top + 10, py - 5),
      'text-anchor': leftSide ? 'end' : 'start'
    }, peakText));
    svg.appendChild(labelLayer);

    // Hover: a crosshair with the RSS at that time, and any mover under the cursor.
    var cross = svgEl('line', {
      'class': 'll-crosshair', y1: margin.top, y2: base, x1: 0, x2: 0, visibility: 'hidden'
    });
    var dot = svgEl('circle', { cx: 0, cy: 0, r: 3, fill: '#2f6fd6', visibility: 'hidden' });
    svg.appendChild(cross);
    svg.appendChild(dot);
    var overlay = svgEl('rect', {
      x: margin.left, y: margin.top, width: plotW, height: plotH, fill: 'transparent'
    });
    svg.appendChild(overlay);
    var hot = [];
    overlay.addEventListener('mousemove', function (ev) {
      var box = svg.getBoundingClientRect();
      var mx = ev.clientX - box.left;
      var t = Math.max(0, (mx - margin.left) / plotW * tHi * timeUnit.div);
      var loI = 0;
      var hiI = points.length - 1;
      while (loI < hiI) {
        var midI = (loI + hiI) >> 1;
        if (points[midI][0] < t) loI = midI + 1; else hiI = midI;
      }
      var best = loI;
      if (loI > 0 && Math.abs(points[loI - 1][0] - t) < Math.abs(points[loI][0] - t)) best = loI - 1;
      var p = points[best];
      cross.setAttribute('x1', xOf(p[0]));
      cross.setAttribute('x2', xOf(p[0]));
      dot.setAttribute('cx', xOf(p[0]));
      dot.setAttribute('cy', yOf(p[1]));
      cross.setAttribute('visibility', 'visible');
      dot.setAttribute('visibility', 'visible');
      hot.forEach(function (s) { s.rect.classList.remove('ll-hot'); });
      hot = spans.filter(function (s) { return mx >= s.x0 - 3 && mx <= s.x1 + 3; });
      var lines = [
        { text: 't = ' + fmtNs(p[0]), cls: 'll-tip-title' },
        'RSS ' + fmtBytes(p[1])
      ];
      hot.slice(0, 4).forEach(function (s) {
        s.rect.classList.add('ll-hot');
        var f = obj(funcById.get(num(s.m.func)));
        lines.push('-');
        lines.push({ text: funcName(f), cls: 'll-tip-title' });
        var where = funcWhere(f);
        if (where) lines.push({ text: where, cls: 'll-tip-sub' });
        lines.push('duration ' + fmtNs(num(s.m.end_ns) - num(s.m.start_ns)) +
          '  (' + fmtNs(s.m.start_ns) + ' → ' + fmtNs(s.m.end_ns) + ')');
        lines.push('ΔRSS ' + fmtBytes(s.m.rss_delta, true));
        if (tree.threads.length > 1 || threadNames.size > 1) lines.push('thread ' + threadLabel(num(s.m.thread)));
      });
      if (hot.length > 4) lines.push({ text: '… and ' + (hot.length - 4) + ' more', cls: 'll-tip-sub' });
      showTip(ev, lines);
    });
    overlay.addEventListener('mouseleave', function () {
      hideTip();
      cross.setAttribute('visibility', 'hidden');
      dot.setAttribute('visibility', 'hidden');
      hot.forEach(function (s) { s.rect.classList.remove('ll-hot'); });
      hot = [];
    });
    host.appendChild(svg);
  }

  /* ---------- flame graph ---------- */

  var ROW_H = 18;
  var MAX_FRAMES = 60000;
  var frames = [];
  var flameInfo = { frames: 0, names: [], highlighted: 0, truncated: false, depth: 0 };

  function hashString(s) {
    var h = 2166136261;
    for (var i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i);
      h = Math.imul(h, 16777619);
    }
    return h >>> 0;
  }

  function frameColor(n) {
    var kind = tree.kindOf[n];
    if (kind === 'root') return '#cfd5dd';
    if (kind === 'thread') return '#c5d3ea';
    var h = hashString(tree.names[n] + '\u0000' + str(tree.funcOf[n].file));
    if (kind === 'c') return 'hsl(' + (195 + h % 35) + ',55%,' + (72 + (h >> 8) % 10) + '%)';
    return 'hsl(' + (8 + h % 42) + ',82%,' + (62 + (h >> 8) % 12) + '%)';
  }

  function layoutFlame(width) {
    var wt = weightsFor(state.metric);
    var w = wt.w;
    var out = [];
    var truncated = false;
    var focus = state.zoom;
    // The focused frame's ancestors, full width, above it.
    var path = [];
    for (var a = focus; a >= 0; a = tree.parentOf[a]) path.push(a);
    path.reverse();
    for (var i = 0; i < path.length - 1; i++) {
      out.push({ n: path[i], x: 0, w: width, d: i, ancestor: true, merged: 0 });
    }
    var queue = [{ n: focus, x: 0, w: width, d: path.length - 1 }];
    for (var head = 0; head < queue.length; head++) {
      var item = queue[head];
      if (out.length >= MAX_FRAMES) { truncated = true; break; }
      out.push({ n: item.n, x: item.x, w: item.w, d: item.d, ancestor: false, merged: 0 });
      var kids = wt.children[item.n];
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
        if (cw >= 1) {
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

  function renderFlame() {
    var host = byId('ll-flame');
    hideTip();
    clear(host);
    var width = Math.max(200, host.clientWidth || 900);
    var laid = layoutFlame(width);
    frames = laid.frames;
    var flags = state.search ? searchResult.flags : null;
    host.classList.toggle('ll-searching', !!state.search);
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
        if (!tree.rawOf[n]) cls += ' ll-synthetic';
        if (f.ancestor) cls += ' ll-ancestor';
        if (flags && flags[n]) { cls += ' ll-match'; highlighted++; }
        if (names.length < 200 && !seen.has(tree.names[n])) {
          seen.add(tree.names[n]);
          names.push(tree.names[n]);
        }
      }
      div.className = cls;
      div.style.left = f.x.toFixed(2) + 'px';
      div.style.width = Math.max(1, f.w).toFixed(2) + 'px';
      div.style.top = (f.d * ROW_H) + 'px';
      div.style.background = f.merged ? '#d9dde3' : frameColor(n);
      div.dataset.i = String(i);
      if (f.w >= 28) {
        div.textContent = f.merged ? f.merged + ' small' : tree.names[n];
      }
      frag.appendChild(div);
      if (f.d > maxD) maxD = f.d;
    }
    host.style.height = ((maxD + 1) * ROW_H + 2) + 'px';
    host.appendChild(frag);
    if (!tree.realCount) {
      host.style.height = 'auto';
      host.appendChild(el('div', 'll-empty', 'No calls were recorded.'));
    }
    flameInfo = {
      frames: frames.length, names: names, highlighted: highlighted,
      truncated: laid.truncated, depth: maxD + 1
    };
    var note = byId('ll-flame-note');
    note.textContent = laid.truncated ?
      'Only the first ' + fmtCount(MAX_FRAMES) + ' frames are drawn; zoom in to see the rest.' : '';
    var zoomInfo = byId('ll-zoom-info');
    byId('ll-reset').disabled = state.zoom === 0;
    zoomInfo.textContent = state.zoom === 0 ? '' : 'zoomed into ' + shortText(tree.names[state.zoom], 60);
    byId('ll-total').textContent = METRICS[state.metric].label + ' total: ' +
      METRICS[state.metric].fmt(weightsFor(state.metric).total);
  }

  function frameTip(ev, f) {
    var n = f.n;
    var m = METRICS[state.metric];
    var wt = weightsFor(state.metric);
    var lines = [];
    if (f.merged) {
      lines.push({ text: f.merged + ' frames too narrow to draw', cls: 'll-tip-title' });
      lines.push({ text: 'called from ' + tree.names[n], cls: 'll-tip-sub' });
      showTip(ev, lines);
      return;
    }
    var value = wt.w[n];
    lines.push({ text: tree.names[n], cls: 'll-tip-title' });
    var raw = tree.rawOf[n];
    if (raw) {
      var where = funcWhere(tree.funcOf[n]);
      if (where) lines.push({ text: where, cls: 'll-tip-sub' });
    } else if (tree.kindOf[n] === 'thread') {
      lines.push({ text: 'thread ' + tree.threadOf[n], cls: 'll-tip-sub' });
    } else {
      lines.push({ text: 'the whole program', cls: 'll-tip-sub' });
    }
    lines.push('-');
    lines.push(m.label + ': ' + m.fmt(value) + ' (' + fmtPct(value, wt.total) + ' of total)');
    if (raw) {
      lines.push('calls: ' + fmtCount(raw.calls));
      lines.push('time ' + fmtNs(raw.incl_ns) + ' (self ' + fmtNs(raw.self_ns) + ')');
      lines.push('heap ' + fmtBytes(raw.incl_heap) + ' (self ' + fmtBytes(raw.self_heap) + ')');
      lines.push('RSS Δ ' + fmtBytes(raw.incl_rss, true) + ' (self ' + fmtBytes(raw.self_rss, true) +
        '), peak growth ' + fmtBytes(raw.peak_growth));
      if (tree.perThread) lines.push({ text: 'thread ' + threadLabel(tree.threadOf[n]), cls: 'll-tip-sub' });
    }
    lines.push({ text: f.ancestor || n === state.zoom ? 'click to zoom out to here' : 'click to zoom in', cls: 'll-tip-sub' });
    showTip(ev, lines);
  }

  function frameAt(target) {
    var node = target && target.closest ? target.closest('.ll-frame') : null;
    if (!node || !node.dataset.i) return null;
    return frames[Number(node.dataset.i)] || null;
  }

  /* ---------- search ---------- */

  function computeSearch() {
    var q = state.search.toLowerCase();
    if (!q) { searchResult = { flags: null, matches: 0, share: 0, weight: 0 }; return; }
    var flags = new Uint8Array(tree.count);
    var matches = 0;
    var order = tree.order;
    var i;
    for (i = 0; i < order.length; i++) {
      var n = order[i];
      if (tree.rawOf[n] && tree.names[n].toLowerCase().indexOf(q) >= 0) {
        flags[n] = 1;
        matches++;
      }
    }
    // The matched share counts each matched subtree once, however often the match recurs in it.
    var wt = weightsFor(state.metric);
    var covered = new Uint8Array(tree.count);
    var weight = 0;
    for (i = 0; i < order.length; i++) {
      var m = order[i];
      var p = tree.parentOf[m];
      var above = p >= 0 ? covered[p] : 0;
      if (flags[m] && !above) weight += wt.w[m];
      covered[m] = above || flags[m];
    }
    searchResult = {
      flags: flags, matches: matches, weight: weight,
      share: wt.total > 0 ? weight / wt.total : 0
    };
  }

  function renderSearchInfo() {
    var info = byId('ll-search-info');
    info.classList.toggle('ll-has-matches', !!state.search && searchResult.matches > 0);
    if (!state.search) { info.textContent = ''; return; }
    if (!searchResult.matches) { info.textContent = 'no matching frames'; return; }
    var m = METRICS[state.metric];
    info.textContent = fmtCount(searchResult.matches) + ' matching frame' +
      (searchResult.matches === 1 ? '' : 's') + ': ' + m.fmt(searchResult.weight) + ', ' +
      fmtPct(searchResult.weight, weightsFor(state.metric).total) + ' of ' + m.label.toLowerCase();
  }

  /* ---------- functions table ---------- */

  var TABLE_COLUMNS = [
    { key: 'name', label: 'Function', left: true, kind: 'text' },
    { key: 'file', label: 'File:line', left: true, kind: 'text' },
    { key: 'calls', label: 'Calls', kind: 'count' },
    { key: 'incl_ns', label: 'Time', kind: 'ns' },
    { key: 'self_ns', label: 'Self time', kind: 'ns' },
    { key: 'incl_heap', label: 'Heap', kind: 'bytes' },
    { key: 'self_heap', label: 'Self heap', kind: 'bytes' },
    { key: 'incl_rss', label: 'RSS Δ', kind: 'signed' },
    { key: 'self_rss', label: 'Self RSS Δ', kind: 'signed' },
    { key: 'peak_growth', label: 'Peak growth', kind: 'bytes' },
    { key: 'share', label: 'Share', kind: 'pct' }
  ];
  var TABLE_LIMIT = 50;
  var tableInfo = { rows: 0, sort: '' };

  function cellValue(f, key) {
    if (key === 'name') return funcName(f);
    if (key === 'file') return funcWhere(f);
    if (key === 'share') return num(f[METRICS[state.metric].fnKey]);
    return num(f[key]);
  }

  function renderTable() {
    var table = byId('ll-table');
    clear(table);
    var sortKey = state.sortKey || METRICS[state.metric].fnKey;
    var desc = state.sortDesc;
    var col = null;
    TABLE_COLUMNS.forEach(function (c) { if (c.key === sortKey) col = c; });
    var funcs = arr(data.functions).map(obj);
    var total = weightsFor(state.metric).total;
    var keyed = funcs.map(function (f, i) { return { f: f, v: cellValue(f, sortKey), i: i }; });
    keyed.sort(function (a, b) {
      var r;
      if (col && col.kind === 'text') r = a.v < b.v ? -1 : a.v > b.v ? 1 : 0;
      else r = a.v - b.v;
      if (desc) r = -r;
      return r || a.i - b.i;
    });
    var thead = el('thead');
    var hr = el('tr');
    TABLE_COLUMNS.forEach(function (c) {
      var th = el('th', (c.left ? 'll-left' : '') + (c.key === sortKey ? ' ll-sorted' : ''), c.label);
      if (c.key === sortKey) th.textContent += desc ? ' ▼' : ' ▲';
      th.dataset.key = c.key;
      th.title = c.key === 'share' ?
        'Share of the total ' + METRICS[state.metric].label.toLowerCase() + '; click to sort' :
        'Sort by ' + c.label.toLowerCase();
      hr.appendChild(th);
    });
    thead.appendChild(hr);
    table.appendChild(thead);
    var tbody = el('tbody');
    var shown = state.showAllRows ? keyed.length : Math.min(keyed.length, TABLE_LIMIT);
    var q = state.search;
    for (var r = 0; r < shown; r++) {
      var f = keyed[r].f;
      var tr = el('tr');
      tr.dataset.name = funcName(f);
      if (q && funcName(f) === q) tr.className = 'll-selected';
      TABLE_COLUMNS.forEach(function (c) {
        var td;
        if (c.key === 'name') {
          td = el('td', 'll-left ll-name', funcName(f));
          td.title = funcName(f);
          if (str(f.kind) === 'c') td.appendChild(el('span', 'll-kind', 'C'));
        } else if (c.key === 'file') {
          td = el('td', 'll-left ll-file', funcWhere(f));
          td.title = funcWhere(f);
        } else {
          var v = cellValue(f, c.key);
          var text = c.kind === 'ns' ? fmtNs(v) : c.kind === 'count' ? fmtCount(v) :
            c.kind === 'pct' ? fmtPct(Math.max(v, 0), total) :
              fmtBytes(v, c.kind === 'signed');
          td = el('td', c.kind === 'signed' ? (v < 0 ? 'll-neg' : v > 0 ? 'll-pos' : '') : '', text);
        }
        tr.appendChild(td);
      });
      tbody.appendChild(tr);
    }
    table.appendChild(tbody);
    var more = byId('ll-table-more');
    more.hidden = keyed.length <= TABLE_LIMIT;
    more.textContent = state.showAllRows ? 'Show top ' + TABLE_LIMIT : 'Show all ' + fmtCount(keyed.length);
    byId('ll-table-note').textContent = keyed.length ?
      'Showing ' + fmtCount(shown) + ' of ' + fmtCount(keyed.length) + ' functions; click a row to find it in the flame graph.' :
      'No functions were recorded.';
    tableInfo = { rows: shown, sort: sortKey + (desc ? '' : '-asc') };
  }

  /* ---------- state for tests and tools ---------- */

  function writeState() {
    var s = byId('ll-state');
    s.setAttribute('data-metric', state.metric);
    s.setAttribute('data-total', String(weightsFor(state.metric).total));
    s.setAttribute('data-frames', String(flameInfo.frames));
    s.setAttribute('data-depth', String(flameInfo.depth));
    s.setAttribute('data-truncated', flameInfo.truncated ? '1' : '0');
    s.setAttribute('data-rendered-names', JSON.stringify(flameInfo.names));
    s.setAttribute('data-search', state.search);
    s.setAttribute('data-search-matches', String(state.search ? searchResult.matches : 0));
    s.setAttribute('data-search-highlighted', String(flameInfo.highlighted));
    s.setAttribute('data-search-share', String(state.search ? searchResult.share : 0));
    s.setAttribute('data-zoom', tree.keyOf[state.zoom]);
    s.setAttribute('data-zoom-name', tree.names[state.zoom]);
    s.setAttribute('data-timeline-points', String(timelineInfo.points));
    s.setAttribute('data-movers', String(timelineInfo.movers));
    s.setAttribute('data-mover-labels', JSON.stringify(timelineInfo.labels));
    s.setAttribute('data-table-rows', String(tableInfo.rows));
    s.setAttribute('data-table-sort', tableInfo.sort);
    s.setAttribute('data-ready', '1');
  }

  /* ---------- wiring ---------- */

  function syncControls() {
    byId('ll-metric').value = state.metric;
    var box = byId('ll-search');
    if (box.value !== state.search) box.value = state.search;
  }

  function refresh(parts) {
    if (parts.search) guard('search', computeSearch);
    if (parts.flame) guard('flame graph', renderFlame);
    if (parts.search || parts.flame) guard('search', renderSearchInfo);
    if (parts.table) guard('table', renderTable);
    if (parts.timeline) guard('timeline', renderTimeline);
    guard('state', writeState);
  }

  function refreshAll() {
    syncControls();
    refresh({ search: true, flame: true, table: true, timeline: true });
  }

  function setMetric(m) {
    if (!METRICS[m] || m === state.metric) return;
    state.metric = m;
    state.sortKey = null;
    state.sortDesc = true;
    syncControls();
    writeHash();
    refresh({ search: true, flame: true, table: true });
  }

  function setSearch(q) {
    state.search = q;
    syncControls();
    writeHash();
    refresh({ search: true, flame: true, table: true });
  }

  function setZoom(n) {
    state.zoom = n;
    writeHash();
    refresh({ flame: true });
  }

  function wire() {
    var select = byId('ll-metric');
    METRIC_ORDER.forEach(function (k) {
      var o = el('option', '', METRICS[k].label);
      o.value = k;
      select.appendChild(o);
    });
    select.addEventListener('change', function () { setMetric(select.value); });
    var search = byId('ll-search');
    search.addEventListener('input', function () { setSearch(search.value); });
    search.addEventListener('keydown', function (ev) {
      if (ev.key === 'Escape') { search.value = ''; setSearch(''); }
    });
    byId('ll-reset').addEventListener('click', function () { setZoom(0); });

    var flame = byId('ll-flame');
    flame.addEventListener('mouseover', function (ev) {
      var f = frameAt(ev.target);
      if (f) frameTip(ev, f); else hideTip();
    });
    flame.addEventListener('mousemove', moveTip);
    flame.addEventListener('mouseleave', hideTip);
    flame.addEventListener('click', function (ev) {
      var f = frameAt(ev.target);
      if (!f || f.merged) return;
      setZoom(f.n === state.zoom && !f.ancestor ? (tree.parentOf[f.n] >= 0 ? tree.parentOf[f.n] : 0) : f.n);
    });

    var table = byId('ll-table');
    table.addEventListener('click', function (ev) {
      var th = ev.target.closest ? ev.target.closest('th') : null;
      if (th && th.dataset.key) {
        var key = th.dataset.key;
        var current = state.sortKey || METRICS[state.metric].fnKey;
        if (key === current) state.sortDesc = !state.sortDesc;
        else state.sortDesc = !(key === 'name' || key === 'file');
        state.sortKey = key;
        writeHash();
        refresh({ table: true });
        return;
      }
      var tr = ev.target.closest ? ev.target.closest('tbody tr') : null;
      if (tr && tr.dataset.name !== undefined) {
        setSearch(state.search === tr.dataset.name ? '' : tr.dataset.name);
      }
    });
    byId('ll-table-more').addEventListener('click', function () {
      state.showAllRows = !state.showAllRows;
      refresh({ table: true });
    });

    window.addEventListener('hashchange', function () {
      applyHash();
      refreshAll();
    });
    var pending = 0;
    var lastWidth = window.innerWidth;
    window.addEventListener('resize', function () {
      if (window.innerWidth === lastWidth) return;
      lastWidth = window.innerWidth;
      clearTimeout(pending);
      pending = setTimeout(function () { refresh({ flame: true, timeline: true }); }, 120);
    });
  }

  guard('header', renderHeader);
  wire();
  applyHash();
  refreshAll();
})();
