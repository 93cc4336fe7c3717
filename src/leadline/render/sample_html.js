/* leadline sampling profile report: the flame graph page.  The shared helpers (formatting,
 * tooltip, table, the flame graph itself) are in html_page.js, reached through LL.
 *
 * The data has the stacks as a prefix tree of frames ("tnodes": parent, frame; parents first).
 * The graph drawn is a call tree of functions ("nodes"): tnodes whose frames are of the same
 * function (name, file, first line) under the same node are one node, whatever line was
 * running.  Both are kept in typed arrays and walked with loops, never by recursion.
 *
 * Untrusted text (function names, files, argv, thread names) only ever reaches the page through
 * textContent, never as markup.
 */
(function () {
  'use strict';

  var byId = LL.byId, guard = LL.guard;
  var num = LL.num, str = LL.str, obj = LL.obj, arr = LL.arr;
  var fmtBytes = LL.fmtBytes, fmtNs = LL.fmtNs, fmtCount = LL.fmtCount, fmtPct = LL.fmtPct;

  var data = LL.loadData();
  var meta = obj(data.meta);
  var prof = obj(data.profile);
  var rate = num(prof.rate_hz);
  var cpuMode = str(prof.mode) === 'cpu';

  /* ---------- functions: frames merged by name, file and first line ---------- */

  var fnName = [];
  var fnFile = [];
  var fnDef = [];
  var fnNative = []; /* a C function (--native): its file is the module it is in */
  var fnIndex = new Map();

  function functionId(name, file, def, native) {
    var key = name + '\u0000' + file + '\u0000' + def;
    var id = fnIndex.get(key);
    if (id === undefined) {
      id = fnName.length;
      fnIndex.set(key, id);
      fnName.push(name === '' ? '<unknown>' : name);
      fnFile.push(file);
      fnDef.push(def);
      fnNative.push(!!native);
    }
    return id;
  }

  var rawFrames = arr(data.frames);
  var frameFunc = new Int32Array(rawFrames.length);
  var frameLine = new Float64Array(rawFrames.length);
  rawFrames.forEach(function (f, i) {
    f = arr(f);
    frameFunc[i] = functionId(str(f[0]), str(f[1]), num(f[3]), num(f[4]) === 1);
    frameLine[i] = num(f[2]);
  });
  var UNKNOWN_FUNC = functionId('', '', 0);

  /* ---------- the prefix tree of stacks, and the call tree drawn ---------- */

  /* Which tnodes (parents before children: parent[t] < t, or -1) are the outermost of their key
   * (0 to nKeys - 1; a negative key is none) on their stack: a depth-first walk that counts the
   * keys on the current path.  A function's, or a line's, total counts it once however deep a
   * recursion repeats it. */
  function outermost(parent, key, nKeys) {
    var T = parent.length;
    var outer = new Uint8Array(T);
    var t;
    var childCount = new Int32Array(T + 1);
    for (t = 0; t < T; t++) childCount[parent[t] + 1]++;
    var start = new Int32Array(T + 2);
    for (t = 0; t <= T; t++) start[t + 1] = start[t] + childCount[t];
    var fill = start.slice(0, T + 1);
    var kids = new Int32Array(T);
    for (t = 0; t < T; t++) kids[fill[parent[t] + 1]++] = t;
    var onPath = new Int32Array(nKeys);
    var todo = [];
    for (var r = start[0]; r < start[1]; r++) todo.push(kids[r]);
    while (todo.length) {
      var x = todo.pop();
      if (x < 0) {
        if (key[-x - 1] >= 0) onPath[key[-x - 1]]--;
        continue;
      }
      if (key[x] >= 0) {
        outer[x] = onPath[key[x]] === 0 ? 1 : 0;
        onPath[key[x]]++;
      }
      todo.push(-x - 1);
      for (var k = start[x + 1]; k < start[x + 2]; k++) todo.push(kids[k]);
    }
    return outer;
  }

  var tree = (function build() {
    var nodes = obj(data.nodes);
    var rawParent = arr(nodes.parent);
    var rawFrame = arr(nodes.frame);
    var T = Math.min(rawParent.length, rawFrame.length);
    var tParent = new Int32Array(T);
    var tFunc = new Int32Array(T);
    var tLine = new Float64Array(T);
    var tNode = new Int32Array(T);
    var nextOfNode = new Int32Array(T); /* the next tnode of the same node, or -1 */
    var t;
    for (t = 0; t < T; t++) {
      var p = num(rawParent[t]);
      tParent[t] = p >= 0 && p < t && p === Math.floor(p) ? p : -1;
      var fr = num(rawFrame[t]);
      var known = fr >= 0 && fr < rawFrames.length && fr === Math.floor(fr);
      tFunc[t] = known ? frameFunc[fr] : UNKNOWN_FUNC;
      tLine[t] = known ? frameLine[fr] : 0;
    }
    // Nodes in typed arrays (at most one per tnode, plus the root), found by (parent node,
    // function) in an open-addressing table: a million tnodes take well under a second.
    var cap = T + 1;
    var funcOf = new Int32Array(cap);
    var parentOf = new Int32Array(cap);
    var firstChild = new Int32Array(cap).fill(-1);
    var nextSibling = new Int32Array(cap).fill(-1);
    var firstT = new Int32Array(cap).fill(-1);
    var lastT = new Int32Array(cap).fill(-1);
    funcOf[0] = -1;
    parentOf[0] = -1;
    var count = 1;
    var size = 2;
    while (size < 2 * cap) size *= 2;
    var mask = size - 1;
    var slots = new Int32Array(size).fill(-1);
    for (t = 0; t < T; t++) {
      var up = tParent[t] >= 0 ? tNode[tParent[t]] : 0;
      var fid = tFunc[t];
      var h = (Math.imul(up, 0x9e3779b1) ^ Math.imul(fid + 1, 0x85ebca77)) & mask;
      var n;
      while ((n = slots[h]) >= 0 && (parentOf[n] !== up || funcOf[n] !== fid)) h = (h + 1) & mask;
      if (n < 0) {
        n = count++;
        slots[h] = n;
        funcOf[n] = fid;
        parentOf[n] = up;
        nextSibling[n] = firstChild[up];
        firstChild[up] = n;
        firstT[n] = t;
      } else {
        nextOfNode[lastT[n]] = t;
      }
      nextOfNode[t] = -1;
      lastT[n] = t;
      tNode[t] = n;
    }
    var names = new Array(count);
    names[0] = 'all';
    for (var i = 1; i < count; i++) names[i] = fnName[funcOf[i]];
    var F = fnName.length;

    // Which tnodes are a function's outermost frame on their stack (recursion counted once in
    // a function's total).
    var outer = outermost(tParent, tFunc, F);

    var order = new Int32Array(count);
    for (i = 0; i < count; i++) order[i] = i; /* parents are created before children */
    return {
      count: count, names: names, funcOf: funcOf, parentOf: parentOf,
      firstChild: firstChild, nextSibling: nextSibling,
      order: order, firstT: firstT, nextOfNode: nextOfNode,
      T: T, tParent: tParent, tFunc: tFunc, tLine: tLine, tNode: tNode, outer: outer
    };
  })();

  /* ---------- source files: each (file, line) of a file whose source the page has ---------- */

  var sourceSet = LL.sourceFiles(data.sources);
  var sources = sourceSet.list;
  var sourceOf = sourceSet.indexOf; /* file -> index into sources */
  var lineKeys = (function () {
    /* key[t]: an index per distinct (source, line) of tnode t, -1 when its file has no source;
     * outer[t]: the outermost tnode of its key on its stack (a line's total counts once). */
    var T = tree.T;
    var key = new Int32Array(T).fill(-1);
    var ids = new Map();
    var fileOf = [];
    var line = [];
    var t;
    for (t = 0; t < T; t++) {
      var s = sourceOf.get(fnFile[tree.tFunc[t]]);
      if (s === undefined || !(tree.tLine[t] > 0)) continue;
      var k = s + ':' + tree.tLine[t];
      var id = ids.get(k);
      if (id === undefined) {
        id = fileOf.length;
        ids.set(k, id);
        fileOf.push(s);
        line.push(tree.tLine[t]);
      }
      key[t] = id;
    }
    var outer = outermost(tree.tParent, key, fileOf.length);
    return { key: key, outer: outer, file: fileOf, line: line, count: fileOf.length };
  })();

  /* ---------- stacks and threads ---------- */

  var stacks = (function () {
    var s = obj(data.stacks);
    var node = arr(s.node);
    var n = node.length;
    function column(name) {
      var c = arr(s[name]);
      var out = new Float64Array(n);
      for (var i = 0; i < n; i++) out[i] = num(c[i]);
      return out;
    }
    return {
      count: n, node: column('node'), thread: column('thread'), samples: column('samples'),
      idle: column('idle'), cpu: column('cpu_ns'), rss: column('rss_bytes')
    };
  })();

  var threads = [];
  var threadBySerial = new Map();
  arr(data.threads).forEach(function (t) {
    t = arr(t);
    var th = { serial: num(t[0]), pid: num(t[1]), tid: num(t[2]), name: str(t[3]), samples: 0 };
    if (threadBySerial.has(th.serial)) return;
    threadBySerial.set(th.serial, th);
    threads.push(th);
  });
  var idleSamples = 0;
  for (var si = 0; si < stacks.count; si++) {
    var th = threadBySerial.get(stacks.thread[si]);
    if (!th) {
      th = { serial: stacks.thread[si], pid: 0, tid: 0, name: '', samples: 0 };
      threadBySerial.set(th.serial, th);
      threads.push(th);
    }
    th.samples += stacks.samples[si];
    idleSamples += stacks.idle[si];
  }

  function threadLabel(th) {
    return (th.name || 'thread ' + th.serial) + (th.tid ? ' (tid ' + th.tid + ')' : '');
  }

  /* ---------- metrics and the current view ---------- */

  var METRICS = {
    samples: { label: 'Samples', fmt: function (v) { return fmtCount(v); } },
    cpu: { label: 'CPU time', fmt: fmtNs },
    memory: { label: 'RSS growth', fmt: function (v) { return fmtBytes(v); } }
  };
  var METRIC_ORDER = prof.memory === true ? ['samples', 'cpu', 'memory'] : ['samples', 'cpu'];
  /* The weight the page opens with: the CPU time in a CPU-mode capture, as the text report
   * weighs it (a sample there stands for the CPU its thread used since its previous one, and
   * the two can differ: a 75/25 program's samples were 69/31, its CPU time 75/25), else
   * samples. */
  var DEFAULT_METRIC = cpuMode ? 'cpu' : 'samples';

  var state = {
    metric: DEFAULT_METRIC,
    thread: null, /* a thread's serial, or null for all threads */
    idle: true /* include idle samples (wall mode) */
  };
  var table = LL.tableState();

  function idleApplies() { return state.metric === 'samples'; }

  function stackWeight(i) {
    if (state.metric === 'cpu') return stacks.cpu[i];
    if (state.metric === 'memory') return Math.max(stacks.rss[i], 0);
    return stacks.samples[i] - (state.idle ? 0 : stacks.idle[i]);
  }

  var viewCache = { key: '', view: null };

  /* The weights of the current metric, thread and idle choice: per node (w, and kids(n): its
   * children heaviest first) for the graph, per tnode (tw) for lines, per function for the table. */
  function currentView() {
    var key = state.metric + '|' + state.thread + '|' + state.idle;
    if (viewCache.key === key) return viewCache.view;
    var T = tree.T;
    var tw = new Float64Array(T);
    var selfByFunc = new Float64Array(fnName.length);
    var totalByFunc = new Float64Array(fnName.length);
    var w = new Float64Array(tree.count);
    var i;
    for (i = 0; i < stacks.count; i++) {
      if (state.thread !== null && stacks.thread[i] !== state.thread) continue;
      var v = stackWeight(i);
      if (!(v > 0)) continue;
      var leaf = stacks.node[i];
      if (leaf >= 0 && leaf < T) {
        tw[leaf] += v;
        selfByFunc[tree.tFunc[leaf]] += v;
      } else {
        w[0] += v; /* a sample with no Python frame counts for the whole program only */
      }
    }
    var t;
    for (t = T - 1; t >= 0; t--) if (tree.tParent[t] >= 0) tw[tree.tParent[t]] += tw[t];
    for (t = 0; t < T; t++) {
      w[tree.tNode[t]] += tw[t];
      if (tree.tParent[t] < 0) w[0] += tw[t];
      if (tree.outer[t]) totalByFunc[tree.tFunc[t]] += tw[t];
    }
    var kids = LL.heaviestChildren(tree, w);
    var lineSelf = new Float64Array(lineKeys.count);
    var lineTotal = new Float64Array(lineKeys.count);
    for (i = 0; i < stacks.count; i++) {
      if (state.thread !== null && stacks.thread[i] !== state.thread) continue;
      var leafT = stacks.node[i];
      var lv = stackWeight(i);
      if (lv > 0 && leafT >= 0 && leafT < T && lineKeys.key[leafT] >= 0) lineSelf[lineKeys.key[leafT]] += lv;
    }
    for (t = 0; t < T; t++) if (lineKeys.outer[t]) lineTotal[lineKeys.key[t]] += tw[t];
    var view = {
      w: w, kids: kids, total: w[0], tw: tw, selfByFunc: selfByFunc, totalByFunc: totalByFunc,
      lineSelf: lineSelf, lineTotal: lineTotal
    };
    viewCache = { key: key, view: view };
    return view;
  }

  /* ---------- the flame graph ---------- */

  var matchCache = { q: null, flags: null };

  function funcMatches(fid, q) {
    if (matchCache.q !== q) {
      var flags = new Uint8Array(fnName.length);
      for (var f = 0; f < fnName.length; f++) {
        flags[f] = fnName[f].toLowerCase().indexOf(q) >= 0 ||
          fnFile[f].toLowerCase().indexOf(q) >= 0 ? 1 : 0;
      }
      matchCache = { q: q, flags: flags };
    }
    return matchCache.flags[fid] === 1;
  }

  /* Each file's short name, where the report gives one (analyse/paths.py): the table shows it,
   * its cell's hover and the flame graph's tooltip the whole name. */
  var shownFiles = obj(data.shown_files);
  function where(fid, short) {
    var file = fnFile[fid] || '<unknown file>';
    if (short && Object.prototype.hasOwnProperty.call(shownFiles, file)) file = str(shownFiles[file]);
    return fnDef[fid] > 0 ? file + ':' + fnDef[fid] : file;
  }

  function isLibrary(file) {
    return /[\\/](site|dist)-packages[\\/]|[\\/]lib[\\/]python\d|^<frozen /.test(file);
  }

  /* The garbage collector's frame (the sampler's <GC>, a C function of module gc). */
  function isGc(fid) { return fnName[fid] === '<GC>' && fnFile[fid] === 'gc'; }

  /* An asyncio task at the root of its stack (the sampler's task function: file asyncio, no
   * first line). */
  function isTask(fid) { return fnFile[fid] === 'asyncio' && fnDef[fid] === 0; }

  function frameColor(n) {
    if (n === 0) return '#cfd5dd';
    var fid = tree.funcOf[n];
    if (isGc(fid)) return GC_COLOR;
    if (isTask(fid)) return TASK_COLOR;
    if (fnNative[fid]) return LL.frameColor(fnName[fid] + '\u0000' + fnFile[fid], false, true);
    return LL.frameColor(fnName[fid] + '\u0000' + fnFile[fid], isLibrary(fnFile[fid]));
  }

  /* The lines that were running in node n, heaviest first, as shares of its weight. */
  function hotLines(n, view) {
    var byLine = new Map();
    for (var t = tree.firstT[n]; t >= 0; t = tree.nextOfNode[t]) {
      if (view.tw[t] > 0) byLine.set(tree.tLine[t], (byLine.get(tree.tLine[t]) || 0) + view.tw[t]);
    }
    var lines = Array.from(byLine.entries()).sort(function (a, b) { return b[1] - a[1] || a[0] - b[0]; });
    var parts = lines.slice(0, 4).map(function (e) {
      return (e[0] > 0 ? 'line ' + e[0] : 'line ?') + ' ' + fmtPct(e[1], view.w[n]);
    });
    if (lines.length > 4) parts.push('+' + (lines.length - 4) + ' more');
    return parts.join(', ');
  }

  function describe(n) {
    var view = currentView();
    var m = METRICS[state.metric];
    if (n === 0) {
      var scope = state.thread === null ? 'all threads' : threadLabel(threadBySerial.get(state.thread));
      return { sub: ['the whole program, ' + scope] };
    }
    var kids = view.kids(n);
    var self = view.w[n];
    for (var k = 0; k < kids.length; k++) self -= view.w[kids[k]];
    var extra = ['self: ' + m.fmt(Math.max(self, 0)) + ' (' + fmtPct(Math.max(self, 0), view.total) + ' of total)'];
    if (state.metric === 'samples' && rate > 0) {
      extra.push('≈ ' + fmtNs(view.w[n] / rate * 1e9) + (cpuMode ? ' of CPU time' : ' of thread time') +
        ' at ' + fmtRate(rate));
    }
    var lines = hotLines(n, view);
    if (lines) extra.push({ text: lines, cls: 'll-tip-sub' });
    var fid = tree.funcOf[n];
    var sub = isGc(fid) ? 'garbage collection, started by the frames below'
      : fnNative[fid] ? 'C function in ' + where(fid) : where(fid);
    return { sub: [sub], extra: extra };
  }

  /* ---------- threads over time ---------- */

  var GC_COLOR = '#8e7cc3';
  var TASK_COLOR = '#6fa8dc';
  var LANE_COLORS = { held: '#2e7d32', wait: '#c62828', running: '#90a4ae', idle: '#e3e7eb', unknown: '#ffffff' };
  var LANE_LABELS = { held: 'holding the GIL', wait: 'waiting for it', running: 'running without it', idle: 'idle', unknown: 'not known' };
  var laneCount = 0;

  function renderLanes() {
    var lanes = obj(data.lanes);
    var rows = arr(lanes.threads);
    var panel = byId('ll-lanes-panel');
    panel.hidden = rows.length === 0;
    if (!rows.length) return;
    var states = arr(lanes.states).map(str);
    var bins = Math.max(1, Math.floor(num(lanes.bins)));
    var k = states.length;
    var gil = obj(data.gil);
    var host = byId('ll-lanes');
    LL.clear(host);
    rows.forEach(function (row) {
      row = arr(row);
      var serial = num(row[0]);
      var counts = arr(row[1]);
      var th = threadBySerial.get(serial) || { serial: serial, name: '', tid: 0 };
      var g = obj(gil[String(serial)]);
      var text = threadLabel(th);
      if (g.held_pct !== undefined) {
        text += ': ' + Math.round(num(g.held_pct)) + '% holding the GIL, ' +
          Math.round(num(g.wait_pct)) + '% waiting for it';
      }
      var lane = LL.el('div', 'll-lane');
      lane.setAttribute('data-serial', String(serial));
      lane.appendChild(LL.el('div', 'll-lane-label', text));
      var svg = LL.svgEl('svg', { viewBox: '0 0 ' + bins + ' 1', preserveAspectRatio: 'none', 'class': 'll-lane-bar' });
      for (var b = 0; b < bins; b++) {
        var total = 0;
        for (var s = 0; s < k; s++) total += num(counts[b * k + s]);
        if (!total) continue;
        var y = 0;
        for (s = 0; s < k; s++) {
          var c = num(counts[b * k + s]);
          if (!c) continue;
          svg.appendChild(LL.svgEl('rect', {
            x: b, y: y, width: 1, height: c / total, fill: LANE_COLORS[states[s]] || '#ffffff', 'data-state': states[s]
          }));
          y += c / total;
        }
      }
      lane.appendChild(svg);
      host.appendChild(lane);
      laneCount++;
    });
    var legend = byId('ll-lanes-legend');
    LL.clear(legend);
    states.forEach(function (name) {
      if (name === 'unknown') return;
      var key = LL.el('span', 'll-lane-key', LANE_LABELS[name] || name);
      key.setAttribute('data-state', name);
      legend.appendChild(key);
    });
  }

  var nodes = LL.numberedNodes(tree);
  var flame = LL.flameView(tree, {
    weights: currentView,
    metric: function () { return METRICS[state.metric]; },
    real: nodes.real,
    matches: function (n, q) { return funcMatches(tree.funcOf[n], q); },
    color: frameColor,
    frameClass: function (n) {
      if (n === 0) return '';
      var fid = tree.funcOf[n];
      return isGc(fid) ? ' ll-gc-frame' : isTask(fid) ? ' ll-task-frame' : fnNative[fid] ? ' ll-native-frame' : '';
    },
    key: nodes.key,
    find: nodes.find,
    describe: describe,
    emptyText: 'No samples were recorded for this selection.',
    changed: function (what) {
      var moved = what === 'zoom' && flame.zoom > 0 && showFunction(tree.funcOf[flame.zoom]);
      if (moved) source.chosen = false; /* the zoom is in the URL; the source follows it */
      writeHash();
      refresh({ table: what === 'search', source: moved });
    }
  });

  /* ---------- header ---------- */

  function fmtRate(hz) {
    return (hz >= 100 ? fmtCount(hz) : String(Math.round(hz * 100) / 100)) + ' Hz';
  }

  function renderHeader() {
    var argv = meta.argv;
    if (typeof argv === 'string') argv = [argv];
    LL.showArgv(argv, 'profile');
    var fact = LL.facts();
    var MODES = {
      cpu: ['CPU', 'Threads were sampled while they ran on a CPU'],
      gil: ['GIL held', 'Only the samples taken while the thread held the GIL'],
      exception: ['exception', 'Only the samples taken while the thread raised or handled an exception']
    };
    var mode = MODES[str(prof.mode)] || ['wall clock', 'Every thread was sampled at every tick, idle or not'];
    fact('Mode', mode[0], mode[1]);
    fact('Rate', rate > 0 ? fmtRate(rate) : '?');
    fact('Duration', fmtNs(prof.duration_ns));
    fact('Samples', fmtCount(prof.samples), fmtCount(prof.ticks) + ' ticks');
    var ticks = num(prof.ticks);
    fact('Missed', fmtCount(prof.missed) + (ticks > 0 ? ' (' + fmtPct(num(prof.missed), ticks + num(prof.missed)) + ')' : ''),
      'Ticks skipped because the sampler was late');
    fact('Torn', fmtCount(prof.torn), 'Thread samples dropped because the stack changed while it was read');
    if (!cpuMode || idleSamples > 0) fact('Idle', fmtCount(idleSamples) + ' samples');
    fact('Threads', fmtCount(threads.length));
    fact('Python', str(meta.python_version || meta.python) || '?');
    if (prof.memory === true) fact('Memory', 'RSS per sample');
    if (meta.pid !== undefined) fact('Process', 'pid ' + str(meta.pid) + (meta.host ? ' on ' + str(meta.host) : ''));
    var started = LL.startedAt(prof.start_unix_ns || meta.start_unix_ns);
    if (started) fact('Started', started);
    var early = obj(prof.stopped_early);
    if (early.reason !== undefined) {
      fact('Recording stopped', 'at ' + fmtNs(early.at_ns) + ': ' + str(early.message));
    }
    LL.showWarning(prof.complete === false, 'profile');
  }

  /* ---------- top functions ---------- */

  var TABLE_COLUMNS = [
    { key: 'total', label: 'Total', title: 'Weight of the stacks with the function anywhere on them (recursion counted once)' },
    { key: 'total_pct', label: '%' },
    { key: 'self', label: 'Self', title: 'Weight of the stacks with the function at their top' },
    { key: 'self_pct', label: '%' },
    { key: 'name', label: 'Function', left: true, kind: 'text' },
    { key: 'file', label: 'File:line', left: true, kind: 'text' }
  ];
  var TABLE_LIMIT = 50;
  var tableInfo = { rows: 0, functions: 0 };

  function cellValue(row, key) {
    if (key === 'name') return fnName[row];
    if (key === 'file') return where(row, true);
    var view = currentView();
    return key === 'self' || key === 'self_pct' ? view.selfByFunc[row] : view.totalByFunc[row];
  }

  function renderTable() {
    var view = currentView();
    var m = METRICS[state.metric];
    var rows = [];
    for (var f = 0; f < fnName.length; f++) if (view.totalByFunc[f] > 0) rows.push(f);
    var shown = LL.renderTable(byId('ll-table'), {
      columns: TABLE_COLUMNS,
      rows: rows,
      table: table,
      sortKey: table.key || 'total',
      limit: TABLE_LIMIT,
      noun: 'functions',
      value: cellValue,
      name: function (row) { return fnName[row]; },
      selected: function (row) { return !!flame.search && fnName[row] === flame.search; },
      cell: function (row, c) {
        var v = cellValue(row, c.key);
        if (c.key === 'name') return { text: v, cls: 'll-name', title: v };
        if (c.key === 'file') return { text: v, cls: 'll-file', title: where(row) };
        if (/_pct$/.test(c.key)) return { text: fmtPct(v, view.total) };
        return { text: m.fmt(v) };
      }
    });
    tableInfo = { rows: shown, functions: rows.length };
  }

  /* ---------- the source view ---------- */

  var source = LL.sourceState();

  /* The file of function f, at its hottest line in the current view (or its first line): the
   * line under which it spent the most (its total there, callees included), then its own time
   * there.  By its own time first, a function that works through its callees (a <module>) opened
   * at a line it ran once, by one sample's chance, not at the call that took its time. */
  function showFunction(f) {
    var s = sourceOf.get(fnFile[f]);
    if (s === undefined) return false;
    var view = currentView();
    var best = fnDef[f] || 1;
    var bestSelf = -1;
    var bestTotal = -1;
    for (var t = 0; t < tree.T; t++) {
      if (tree.tFunc[t] !== f || lineKeys.key[t] < 0) continue;
      var k = lineKeys.key[t];
      var ls = view.lineSelf[k];
      var lt = view.lineTotal[k];
      if (lt > bestTotal || (lt === bestTotal && ls > bestSelf)) {
        bestSelf = ls;
        bestTotal = lt;
        best = lineKeys.line[k];
      }
    }
    source.file = s;
    source.line = best;
    source.chosen = true;
    return true;
  }

  function renderSource() {
    LL.showSource(sources, source, function () {
      /* At first, the function with the most self weight whose file the page has. */
      var first = currentView();
      var hottest = -1;
      for (var f = 0; f < fnName.length; f++) {
        if (first.selfByFunc[f] > 0 && sourceOf.has(fnFile[f]) &&
            (hottest < 0 || first.selfByFunc[f] > first.selfByFunc[hottest])) hottest = f;
      }
      return hottest >= 0 && showFunction(hottest);
    }, function (file) {
      var view = currentView();
      var self = new Map();
      var total = new Map();
      for (var k = 0; k < lineKeys.count; k++) {
        if (lineKeys.file[k] !== file) continue;
        self.set(lineKeys.line[k], view.lineSelf[k]);
        total.set(lineKeys.line[k], view.lineTotal[k]);
      }
      return { self: self, total: total, whole: view.total };
    });
  }

  /* ---------- state, the URL hash, and controls ---------- */

  function writeHash() {
    var parts = flame.hashParts();
    if (state.metric !== DEFAULT_METRIC) parts.push('metric=' + state.metric);
    if (state.thread !== null) parts.push('thread=' + state.thread);
    if (!state.idle) parts.push('idle=0');
    LL.writeHash(parts.concat(LL.sourceToHash(source), LL.sortToHash(table)));
  }

  function applyHash() {
    var h = LL.readHash();
    state.metric = METRIC_ORDER.indexOf(h.metric) >= 0 ? h.metric : DEFAULT_METRIC;
    var serial = h.thread !== undefined && h.thread !== '' ? Number(h.thread) : NaN;
    state.thread = threadBySerial.has(serial) ? serial : null;
    state.idle = h.idle !== '0';
    flame.fromHash(h);
    LL.sortFromHash(table, h.sort, TABLE_COLUMNS);
    LL.sourceFromHash(source, h, sources.length);
  }

  function writeState() {
    var s = byId('ll-state');
    s.setAttribute('data-metric', state.metric);
    s.setAttribute('data-thread', state.thread === null ? 'all' : String(state.thread));
    s.setAttribute('data-idle', state.idle ? '1' : '0');
    flame.writeState(s);
    s.setAttribute('data-table-rows', String(tableInfo.rows));
    s.setAttribute('data-table-functions', String(tableInfo.functions));
    s.setAttribute('data-table-sort', (table.key || 'total') + (table.desc ? '' : '-asc'));
    s.setAttribute('data-lanes', String(laneCount));
    s.setAttribute('data-source-file', sources.length ? sources[source.file].file : '');
    s.setAttribute('data-source-line', String(source.line));
    s.setAttribute('data-source-rows', String(source.rows));
    s.setAttribute('data-ready', '1');
  }

  function syncControls() {
    byId('ll-metric').value = state.metric;
    byId('ll-thread').value = state.thread === null ? 'all' : String(state.thread);
    var idle = byId('ll-idle');
    idle.checked = state.idle;
    idle.disabled = !idleApplies();
    byId('ll-idle-control').title = idleApplies() ?
      'Count the samples of threads that were waiting (off CPU)' :
      'Applies to sample counts only: an idle thread uses no CPU';
    byId('ll-search').value = flame.search;
  }

  function refresh(parts) {
    if (parts.flame) { LL.keepZoomVisible(flame, currentView().w, tree.parentOf); flame.update(); }
    if (parts.table) guard('table', renderTable);
    if (parts.table || parts.source) guard('source', renderSource);
    guard('state', writeState);
  }

  function viewChanged() {
    syncControls();
    writeHash();
    refresh({ flame: true, table: true });
  }

  function wire() {
    var metric = byId('ll-metric');
    LL.fillSelect(metric, METRIC_ORDER.map(function (k) { return [k, METRICS[k].label]; }));
    metric.addEventListener('change', function () {
      if (METRICS[metric.value]) state.metric = metric.value;
      viewChanged();
    });
    var thread = byId('ll-thread');
    LL.fillSelect(thread, [['all', 'All threads']].concat(threads.map(function (th) {
      return [th.serial, threadLabel(th) + ' — ' + fmtCount(th.samples) + ' samples'];
    })));
    thread.addEventListener('change', function () {
      state.thread = thread.value === 'all' ? null : Number(thread.value);
      viewChanged();
    });
    byId('ll-idle-control').hidden = cpuMode && idleSamples === 0;
    var idle = byId('ll-idle');
    idle.addEventListener('change', function () {
      state.idle = idle.checked;
      viewChanged();
    });
    LL.wireSource(sources, source, function (tr) {
      return showFunction(Number(tr.dataset.row));
    }, function () {
      writeHash();
      refresh({ source: true });
    });
    LL.wireFlamePage({
      table: table, columns: TABLE_COLUMNS, defaultKey: 'total', flame: flame,
      writeHash: writeHash, applyHash: applyHash, syncControls: syncControls, refresh: refresh
    });
  }

  guard('header', renderHeader);
  guard('lanes', renderLanes);
  wire();
  applyHash();
  syncControls();
  refresh({ flame: true, table: true });
})();
