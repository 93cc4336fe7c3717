/* leadline trace report: everything the page does once its data is in.  The shared helpers
 * (formatting, tooltip, table, the flame graph) are in html_page.js, reached through LL.
 *
 * Untrusted text (function names, files, argv, thread names) only ever reaches the page through
 * textContent or SVG text nodes, never as markup.  Trees are walked with explicit queues and
 * arrays, never by recursion, because call trees can be thousands of levels deep.
 */
(function () {
  'use strict';

  var byId = LL.byId, el = LL.el, svgEl = LL.svgEl, clear = LL.clear, guard = LL.guard;
  var num = LL.num, str = LL.str, obj = LL.obj, arr = LL.arr;
  var fmtBytes = LL.fmtBytes, fmtNs = LL.fmtNs, fmtCount = LL.fmtCount, fmtPct = LL.fmtPct;
  var shortText = LL.shortText, showTip = LL.showTip, hideTip = LL.hideTip;

  /* ---------- metrics ---------- */

  var METRICS = {
    time: {
      label: 'Wall time', fnKey: 'incl_ns', selfKey: 'self_ns', fmt: fmtNs,
      value: function (n) { return Math.max(num(n.incl_ns), 0); }
    },
    heap: {
      label: 'Heap allocated', fnKey: 'incl_heap', selfKey: 'self_heap', fmt: function (v) { return fmtBytes(v); },
      value: function (n) { return Math.max(num(n.incl_heap), 0); }
    },
    rss: {
      label: 'RSS growth', fnKey: 'incl_rss', selfKey: 'self_rss', fmt: function (v) { return fmtBytes(v); },
      value: function (n) { return Math.max(num(n.incl_rss), 0); }
    },
    peak: {
      label: 'Peak growth', fnKey: 'peak_growth', selfKey: null, fmt: function (v) { return fmtBytes(v); },
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

  var data = LL.loadData();

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
    weightCache[metric] = { w: w, kids: function (n) { return sorted[n]; }, total: w[0] };
    return weightCache[metric];
  }

  /* ---------- state, and the URL hash ---------- */

  var state = { metric: 'time' };
  var table = LL.tableState();

  function writeHash() {
    var parts = flame.hashParts();
    if (state.metric !== 'time') parts.push('metric=' + state.metric);
    LL.writeHash(parts.concat(LL.sourceToHash(source), LL.sortToHash(table)));
  }

  function applyHash() {
    var h = LL.readHash();
    if (h.metric !== undefined) {
      var m = metricName(h.metric);
      if (m) state.metric = m;
    }
    flame.fromHash(h);
    LL.sortFromHash(table, h.sort, TABLE_COLUMNS);
    LL.sourceFromHash(source, h, sources.length);
  }

  /* ---------- header ---------- */

  function renderHeader() {
    LL.showArgv(meta.argv, 'trace');
    var fact = LL.facts();
    fact('Python', str(meta.python_version) || '?');
    fact('Duration', fmtNs(summary.duration_ns));
    var clock = summary.coarse_clock;
    if (clock && typeof clock === 'object') {
      var period = fmtNs(num(clock.period_ns));
      var from = num(clock.from_ns);
      fact('Clock', (from > 0 ? "the CPU's counter for the first " + fmtNs(from) + ', then ' : '') +
        'one that moves every ' + period + ' on average (the RSS sampler\'s)',
        "A function's total time is an unbiased estimate; one call's time is to within about " +
        period + ' (trace --exact-time times each call)');
    }
    var ev = fmtCount(summary.events);
    if (summary.recorded !== undefined && num(summary.recorded) !== num(summary.events)) {
      ev += ' (' + fmtCount(summary.recorded) + ' recorded' +
        (num(summary.lost) > 0 ? ', ' + fmtCount(summary.lost) + ' lost' : '') + ')';
    }
    fact('Events', ev);
    var early = obj(summary.stopped_early);
    if (early.reason !== undefined) {
      fact('Recording stopped', 'at ' + fmtNs(early.at_ns) + ': ' + str(early.message),
        'Recording stopped before the program ended; the program ran on unrecorded');
    }
    fact('Peak RSS', fmtBytes(summary.peak_rss));
    fact('RSS start → end', fmtBytes(summary.start_rss) + ' → ' + fmtBytes(summary.end_rss));
    fact('Threads', fmtCount(summary.threads !== undefined ? summary.threads : tree.threads.length));
    if (meta.pid !== undefined || meta.host !== undefined) {
      fact('Process', 'pid ' + str(meta.pid) + (meta.host ? ' on ' + str(meta.host) : ''));
    }
    var started = LL.startedAt(meta.start_unix_ns);
    if (started) fact('Started', started);
    LL.showWarning(summary.complete === false, 'trace');
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

  var timelineInfo = { points: 0, movers: 0, labels: [], marks: 0 };
  var markEvents = arr(obj(data.marks).events).map(obj);

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
    /* Only the calls that matter (analyse/trace.py notable_movers), when the document says
     * which: the 20 biggest nest around each other and shaded the whole chart. */
    if (movers.some(function (m) { return typeof m.notable === 'boolean'; })) {
      movers = movers.filter(function (m) { return m.notable === true; });
    }
    timelineInfo = { points: points.length, movers: movers.length, labels: [], marks: 0 };
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

    // Marks (leadline.mark, spans, log records): a tick each along the time axis.
    var markTicks = [];
    var markLayer = svgEl('g', { 'class': 'll-marks' });
    markEvents.forEach(function (m) {
      var t = num(m.t_ns);
      if (t < 0 || t > tHi * timeUnit.div) return;
      var x = xOf(t);
      markLayer.appendChild(svgEl('line', {
        'class': 'll-mark ll-mark-' + String(m.kind), x1: x, x2: x, y1: margin.top, y2: base
      }));
      markLayer.appendChild(svgEl('path', {
        'class': 'll-mark-head', d: 'M' + (x - 4) + ' ' + (base + 1) + 'L' + (x + 4) + ' ' + (base + 1) + 'L' + x + ' ' + (base - 6) + 'Z'
      }));
      markTicks.push({ x: x, m: m });
    });
    timelineInfo.marks = markTicks.length;
    svg.appendChild(markLayer);

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
      var near = markTicks.filter(function (k) { return Math.abs(k.x - mx) <= 3; });
      near.slice(0, 4).forEach(function (k) {
        lines.push('-');
        lines.push({ text: (k.m.kind === 'mark' ? 'mark ' : 'span ' + k.m.kind + ' ') + str(k.m.name), cls: 'll-tip-title' });
        lines.push({ text: str(k.m.file) + ':' + num(k.m.line) + '  ' + str(k.m.thread), cls: 'll-tip-sub' });
        var fields = JSON.stringify(obj(k.m.fields));
        if (fields !== '{}') lines.push(shortText(fields, 120));
        lines.push('t = ' + fmtNs(num(k.m.t_ns)));
      });
      if (near.length > 4) lines.push({ text: '… and ' + (near.length - 4) + ' more marks', cls: 'll-tip-sub' });
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

  function frameColor(n) {
    var kind = tree.kindOf[n];
    if (kind === 'root') return '#cfd5dd';
    if (kind === 'thread') return '#c5d3ea';
    return LL.frameColor(tree.names[n] + '\u0000' + str(tree.funcOf[n].file), kind === 'c');
  }

  function describe(n) {
    var raw = tree.rawOf[n];
    if (!raw) {
      return { sub: [tree.kindOf[n] === 'thread' ? 'thread ' + tree.threadOf[n] : 'the whole program'] };
    }
    var where = funcWhere(tree.funcOf[n]);
    var extra = [
      'calls: ' + fmtCount(raw.calls),
      'time ' + fmtNs(raw.incl_ns) + ' (self ' + fmtNs(raw.self_ns) + ')',
      'heap ' + fmtBytes(raw.incl_heap) + ' (self ' + fmtBytes(raw.self_heap) + ')',
      'RSS Δ ' + fmtBytes(raw.incl_rss, true) + ' (self ' + fmtBytes(raw.self_rss, true) +
        '), peak growth ' + fmtBytes(raw.peak_growth)
    ];
    if (tree.perThread) extra.push({ text: 'thread ' + threadLabel(tree.threadOf[n]), cls: 'll-tip-sub' });
    return { sub: where ? [where] : [], extra: extra };
  }

  var flame = LL.flameView(tree, {
    weights: function () { return weightsFor(state.metric); },
    metric: function () { return METRICS[state.metric]; },
    real: function (n) { return !!tree.rawOf[n]; },
    matches: function (n, q) {
      return tree.names[n].toLowerCase().indexOf(q) >= 0 ||
        str(tree.funcOf[n].file).toLowerCase().indexOf(q) >= 0;
    },
    color: frameColor,
    key: function (n) { return tree.keyOf[n]; },
    find: function (key) {
      for (var i = 0; i < tree.count; i++) if (tree.keyOf[i] === key && tree.depth[i] >= 0) return i;
      return -1;
    },
    describe: describe,
    emptyText: 'No calls were recorded.',
    changed: function (what) {
      var zoomed = flame.zoom > 0 && tree.rawOf[flame.zoom] ? tree.funcOf[flame.zoom] : null;
      var moved = what === 'zoom' && zoomed !== null && showFunction(zoomed);
      if (moved) source.chosen = false; /* the zoom is in the URL; the source follows it */
      writeHash();
      refresh({ table: what === 'search', source: moved });
    }
  });

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
    var sortKey = table.key || METRICS[state.metric].fnKey;
    var total = weightsFor(state.metric).total;
    var columns = TABLE_COLUMNS.map(function (c) {
      if (c.key !== 'share') return c;
      return Object.assign({}, c, {
        title: 'Share of the total ' + METRICS[state.metric].label.toLowerCase() + '; click to sort'
      });
    });
    var shown = LL.renderTable(byId('ll-table'), {
      columns: columns,
      rows: arr(data.functions).map(obj),
      table: table,
      sortKey: sortKey,
      limit: TABLE_LIMIT,
      noun: 'functions',
      value: cellValue,
      name: funcName,
      selected: function (f) { return !!flame.search && funcName(f) === flame.search; },
      cell: function (f, c) {
        if (c.key === 'name') {
          return { text: funcName(f), cls: 'll-name', title: funcName(f), badge: str(f.kind) === 'c' ? 'C' : '' };
        }
        if (c.key === 'file') return { text: funcWhere(f), cls: 'll-file', title: funcWhere(f) };
        var v = cellValue(f, c.key);
        if (c.kind === 'signed') return { text: fmtBytes(v, true), cls: v < 0 ? 'll-neg' : v > 0 ? 'll-pos' : '' };
        return {
          text: c.kind === 'ns' ? fmtNs(v) : c.kind === 'count' ? fmtCount(v) :
            c.kind === 'pct' ? fmtPct(Math.max(v, 0), total) : fmtBytes(v)
        };
      }
    });
    tableInfo = { rows: shown, sort: sortKey + (table.desc ? '' : '-asc') };
  }

  /* ---------- the source view ----------
   * A trace records calls, not lines: a function's weights are shown at its first line. */

  var sourceSet = LL.sourceFiles(data.sources);
  var sources = sourceSet.list;
  var source = LL.sourceState();

  function selfValue(f) {
    var key = METRICS[state.metric].selfKey;
    return Math.max(num(f[key || METRICS[state.metric].fnKey]), 0);
  }

  /* Shows function f's file at its first line: false when the page does not have the file. */
  function showFunction(f) {
    var s = sourceSet.indexOf.get(str(f.file));
    if (s === undefined) return false;
    source.file = s;
    source.line = Math.max(num(f.line), 1);
    source.chosen = true;
    return true;
  }

  function renderSource() {
    var functions = arr(data.functions).map(obj);
    LL.showSource(sources, source, function () {
      /* At first, the function with the most self weight whose file the page has. */
      var hottest = null;
      functions.forEach(function (f) {
        if (selfValue(f) > 0 && sourceSet.indexOf.has(str(f.file)) &&
            (hottest === null || selfValue(f) > selfValue(hottest))) hottest = f;
      });
      return hottest !== null && showFunction(hottest);
    }, function (file) {
      var m = METRICS[state.metric];
      var self = new Map();
      var total = new Map();
      var titles = new Map();
      functions.forEach(function (f) {
        var line = num(f.line);
        if (str(f.file) !== sources[file].file || !(line > 0)) return;
        self.set(line, (self.get(line) || 0) + (m.selfKey ? selfValue(f) : 0));
        total.set(line, (total.get(line) || 0) + Math.max(num(f[m.fnKey]), 0));
        var about = funcName(f) + ': ' + fmtCount(f.calls) + (num(f.calls) === 1 ? ' call' : ' calls') +
          ', time ' + fmtNs(f.incl_ns) + ' (self ' + fmtNs(f.self_ns) + '), heap ' +
          fmtBytes(f.incl_heap) + ', RSS Δ ' + fmtBytes(f.incl_rss, true) + ', peak growth ' +
          fmtBytes(f.peak_growth);
        titles.set(line, titles.has(line) ? titles.get(line) + '\n' + about : about);
      });
      return { self: self, total: total, whole: weightsFor(state.metric).total, titles: titles };
    });
  }

  /* ---------- state for tests and tools ---------- */

  function writeState() {
    var s = byId('ll-state');
    s.setAttribute('data-metric', state.metric);
    flame.writeState(s);
    s.setAttribute('data-timeline-points', String(timelineInfo.points));
    s.setAttribute('data-movers', String(timelineInfo.movers));
    s.setAttribute('data-marks', String(timelineInfo.marks));
    s.setAttribute('data-mover-labels', JSON.stringify(timelineInfo.labels));
    s.setAttribute('data-table-rows', String(tableInfo.rows));
    s.setAttribute('data-table-sort', tableInfo.sort);
    s.setAttribute('data-source-file', sources.length && source.file >= 0 ? sources[source.file].file : '');
    s.setAttribute('data-source-line', String(source.line));
    s.setAttribute('data-source-rows', String(source.rows));
    s.setAttribute('data-ready', '1');
  }

  /* ---------- wiring ---------- */

  function refresh(parts) {
    if (parts.flame) flame.update();
    if (parts.table) guard('table', renderTable);
    if (parts.table || parts.source) guard('source', renderSource);
    if (parts.timeline) guard('timeline', renderTimeline);
    guard('state', writeState);
  }

  function refreshAll() {
    byId('ll-metric').value = state.metric;
    byId('ll-search').value = flame.search;
    refresh({ flame: true, table: true, timeline: true });
  }

  function setMetric(m) {
    if (!METRICS[m] || m === state.metric) return;
    state.metric = m;
    table.key = null;
    table.desc = true;
    writeHash();
    refresh({ flame: true, table: true });
  }

  function wire() {
    var select = byId('ll-metric');
    LL.fillSelect(select, METRIC_ORDER.map(function (k) { return [k, METRICS[k].label]; }));
    select.addEventListener('change', function () { setMetric(select.value); });
    LL.wireTable(byId('ll-table'), table, TABLE_COLUMNS, function () {
      return METRICS[state.metric].fnKey;
    }, flame, function () {
      writeHash();
      refresh({ table: true });
    });
    LL.wireSource(sources, source, function (tr) {
      var f = arr(data.functions)[Number(tr.dataset.index)];
      return f !== undefined && showFunction(obj(f));
    }, function () {
      writeHash();
      refresh({ source: true });
    });
    window.addEventListener('hashchange', function () {
      applyHash();
      refreshAll();
    });
    LL.onResize(function () { refresh({ flame: true, timeline: true }); });
  }

  guard('header', renderHeader);
  wire();
  applyHash();
  refreshAll();
})();
