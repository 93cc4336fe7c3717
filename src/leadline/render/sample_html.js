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
  var fnIndex = new Map();

  function functionId(name, file, def) {
    var key = name + '\u0000' + file + '\u0000' + def;
    var id = fnIndex.get(key);
    if (id === undefined) {
      id = fnName.length;
      fnIndex.set(key, id);
      fnName.push(name === '' ? '<unknown>' : name);
      fnFile.push(file);
      fnDef.push(def);
    }
    return id;
  }

  var rawFrames = arr(data.frames);
  var frameFunc = new Int32Array(rawFrames.length);
  var frameLine = new Float64Array(rawFrames.length);
  rawFrames.forEach(function (f, i) {
    f = arr(f);
    frameFunc[i] = functionId(str(f[0]), str(f[1]), num(f[3]));
    frameLine[i] = num(f[2]);
  });
  var UNKNOWN_FUNC = functionId('', '', 0);

  /* ---------- the prefix tree of stacks, and the call tree drawn ---------- */

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
    // a function's total): a depth-first walk that counts the functions on the current path.
    var outer = new Uint8Array(T);
    var childCount = new Int32Array(T + 1);
    for (t = 0; t < T; t++) childCount[tParent[t] + 1]++;
    var start = new Int32Array(T + 2);
    for (t = 0; t <= T; t++) start[t + 1] = start[t] + childCount[t];
    var fill = start.slice(0, T + 1);
    var kids = new Int32Array(T);
    for (t = 0; t < T; t++) kids[fill[tParent[t] + 1]++] = t;
    var onPath = new Int32Array(F);
    var todo = [];
    for (var r = start[0]; r < start[1]; r++) todo.push(kids[r]);
    while (todo.length) {
      var x = todo.pop();
      if (x < 0) { onPath[tFunc[-x - 1]]--; continue; }
      outer[x] = onPath[tFunc[x]] === 0 ? 1 : 0;
      onPath[tFunc[x]]++;
      todo.push(-x - 1);
      for (var k = start[x + 1]; k < start[x + 2]; k++) todo.push(kids[k]);
    }

    var order = new Int32Array(count);
    for (i = 0; i < count; i++) order[i] = i; /* parents are created before children */
    return {
      count: count, names: names, funcOf: funcOf, parentOf: parentOf,
      firstChild: firstChild, nextSibling: nextSibling,
      order: order, firstT: firstT, nextOfNode: nextOfNode,
      T: T, tParent: tParent, tFunc: tFunc, tLine: tLine, tNode: tNode, outer: outer
    };
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

  var state = {
    metric: 'samples',
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
    var view = {
      w: w, kids: kids, total: w[0], tw: tw, selfByFunc: selfByFunc, totalByFunc: totalByFunc
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

  function where(fid) {
    var file = fnFile[fid] || '<unknown file>';
    return fnDef[fid] > 0 ? file + ':' + fnDef[fid] : file;
  }

  function isLibrary(file) {
    return /[\\/](site|dist)-packages[\\/]|[\\/]lib[\\/]python\d|^<frozen /.test(file);
  }

  function frameColor(n) {
    if (n === 0) return '#cfd5dd';
    var fid = tree.funcOf[n];
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
    return { sub: [where(tree.funcOf[n])], extra: extra };
  }

  var nodes = LL.numberedNodes(tree);
  var flame = LL.flameView(tree, {
    weights: currentView,
    metric: function () { return METRICS[state.metric]; },
    real: nodes.real,
    matches: function (n, q) { return funcMatches(tree.funcOf[n], q); },
    color: frameColor,
    key: nodes.key,
    find: nodes.find,
    describe: describe,
    emptyText: 'No samples were recorded for this selection.',
    changed: function (what) {
      writeHash();
      refresh({ table: what === 'search' });
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
    fact('Mode', cpuMode ? 'CPU' : 'wall clock', cpuMode ?
      'Threads were sampled while they ran on a CPU' : 'Every thread was sampled at every tick, idle or not');
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
    if (key === 'file') return where(row);
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
        if (c.key === 'file') return { text: v, cls: 'll-file', title: v };
        if (/_pct$/.test(c.key)) return { text: fmtPct(v, view.total) };
        return { text: m.fmt(v) };
      }
    });
    tableInfo = { rows: shown, functions: rows.length };
  }

  /* ---------- state, the URL hash, and controls ---------- */

  function writeHash() {
    var parts = flame.hashParts();
    if (state.metric !== 'samples') parts.push('metric=' + state.metric);
    if (state.thread !== null) parts.push('thread=' + state.thread);
    if (!state.idle) parts.push('idle=0');
    LL.writeHash(parts.concat(LL.sortToHash(table)));
  }

  function applyHash() {
    var h = LL.readHash();
    state.metric = METRIC_ORDER.indexOf(h.metric) >= 0 ? h.metric : 'samples';
    var serial = h.thread !== undefined && h.thread !== '' ? Number(h.thread) : NaN;
    state.thread = threadBySerial.has(serial) ? serial : null;
    state.idle = h.idle !== '0';
    flame.fromHash(h);
    LL.sortFromHash(table, h.sort, TABLE_COLUMNS);
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
    LL.wireFlamePage({
      table: table, columns: TABLE_COLUMNS, defaultKey: 'total', flame: flame,
      writeHash: writeHash, applyHash: applyHash, syncControls: syncControls, refresh: refresh
    });
  }

  guard('header', renderHeader);
  wire();
  applyHash();
  syncControls();
  refresh({ flame: true, table: true });
})();
