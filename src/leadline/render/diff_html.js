/* leadline diff report: the differential flame graph page.  The shared helpers (formatting,
 * tooltip, table, the flame graph itself) are in html_page.js, reached through LL.
 *
 * The data is `leadline diff --json` with its tree: both sides' call paths merged into one
 * prefix tree in columns (parent, func, base, new, sig), parents before children.  Values are
 * normalised: shares of the total (0..1) or costs per unit of work.
 *
 * Untrusted text (function names, files, argv, paths) only ever reaches the page through
 * textContent, never as markup.
 */
(function () {
  'use strict';

  var byId = LL.byId, el = LL.el, guard = LL.guard;
  var num = LL.num, str = LL.str, obj = LL.obj, arr = LL.arr;
  var fmtNs = LL.fmtNs, fmtCount = LL.fmtCount;

  var data = LL.loadData();
  var norm = obj(data.normalization);
  var unit = str(norm.unit) || 'share';
  var funcs = arr(data.functions).map(obj);

  /* ---------- values ---------- */

  function fmtValue(v) {
    v = num(v);
    if (unit === 'share') {
      var p = 100 * v;
      return (Math.abs(p) >= 10 ? p.toFixed(1) : p.toFixed(2)) + '%';
    }
    if (unit === 's') return (v < 0 ? '-' : '') + fmtNs(Math.abs(v) * 1e9);
    return Number(v.toPrecision(3)).toLocaleString('en-US');
  }

  function fmtDelta(d) {
    d = num(d);
    var sign = d > 0 ? '+' : d < 0 ? '-' : '±';
    if (unit === 'share') return sign + Math.abs(100 * d).toFixed(2) + ' pp';
    return sign + fmtValue(Math.abs(d));
  }

  function fmtRatio(base, now) {
    base = num(base);
    now = num(now);
    if (!(base > 0)) return now > 0 ? 'new' : '';
    if (!(now > 0)) return 'gone';
    return '×' + (now / base).toFixed(2);
  }

  function verdict(sig) { return sig > 0 ? 'beyond noise: grew' : sig < 0 ? 'beyond noise: shrank' : 'within noise'; }

  /* ---------- the tree ---------- */

  var tree = (function build() {
    var t = obj(data.tree);
    var parent = arr(t.parent), func = arr(t.func), base = arr(t.base), now = arr(t.new), sig = arr(t.sig);
    var count = Math.max(1, parent.length);
    var parentOf = new Int32Array(count);
    var funcOf = new Int32Array(count);
    var wBase = new Float64Array(count);
    var wNew = new Float64Array(count);
    var sigOf = new Int8Array(count);
    var firstChild = new Int32Array(count).fill(-1);
    var nextSibling = new Int32Array(count).fill(-1);
    var lastChild = new Int32Array(count).fill(-1);
    parentOf[0] = -1;
    funcOf[0] = -1;
    for (var n = 1; n < count; n++) {
      var p = num(parent[n]);
      parentOf[n] = p >= 0 && p < n && p === Math.floor(p) ? p : 0;
      var f = num(func[n]);
      funcOf[n] = f >= 0 && f < funcs.length && f === Math.floor(f) ? f : -1;
      wBase[n] = Math.max(num(base[n]), 0);
      wNew[n] = Math.max(num(now[n]), 0);
      sigOf[n] = num(sig[n]) > 0 ? 1 : num(sig[n]) < 0 ? -1 : 0;
      var up = parentOf[n];
      if (lastChild[up] < 0) firstChild[up] = n; else nextSibling[lastChild[up]] = n;
      lastChild[up] = n;
    }
    // The root weighs what its children do on each side.
    for (var c = firstChild[0]; c >= 0; c = nextSibling[c]) { wBase[0] += wBase[c]; wNew[0] += wNew[c]; }
    var names = new Array(count);
    names[0] = 'all';
    for (n = 1; n < count; n++) names[n] = funcOf[n] >= 0 ? str(funcs[funcOf[n]].name) || '<unknown>' : '<unknown>';
    var order = new Int32Array(count);
    for (n = 0; n < count; n++) order[n] = n;
    return {
      count: count, names: names, parentOf: parentOf, funcOf: funcOf, wBase: wBase, wNew: wNew,
      sig: sigOf, firstChild: firstChild, nextSibling: nextSibling, order: order
    };
  })();

  var state = { side: 'new' };
  var table = LL.tableState();
  table.desc = false;
  var viewCache = { side: '', view: null };

  function currentView() {
    if (viewCache.side === state.side) return viewCache.view;
    var w = state.side === 'base' ? tree.wBase : tree.wNew;
    var kids = LL.heaviestChildren(tree, w);
    var view = { w: w, kids: kids, total: w[0] };
    viewCache = { side: state.side, view: view };
    return view;
  }

  /* Red where the path's cost grew beyond noise, blue where it shrank, deeper for a larger
   * ratio (full at 8x or at a path only one side has); neutral within noise. */
  function frameColor(n) {
    if (n === 0) return '#cfd5dd';
    var s = tree.sig[n];
    if (!s) return 'rgb(221, 215, 203)';
    var b = tree.wBase[n], v = tree.wNew[n];
    var depth = b > 0 && v > 0 ? Math.min(Math.abs(Math.log(v / b)) / Math.log(8), 1) : 1;
    var light = Math.round(78 - 30 * depth);
    return s > 0 ? 'hsl(0, 78%, ' + light + '%)' : 'hsl(215, 75%, ' + light + '%)';
  }

  function where(f) {
    if (f < 0) return '';
    var fn = funcs[f];
    var file = str(fn.module_path || fn.file) || '<unknown file>';
    return num(fn.line) > 0 ? file + ':' + num(fn.line) : file;
  }

  function describe(n) {
    if (n === 0) return { sub: ['the whole program'], extra: ['base ' + fmtValue(tree.wBase[0]) + ', new ' + fmtValue(tree.wNew[0])] };
    var extra = [
      'base ' + fmtValue(tree.wBase[n]) + ' → new ' + fmtValue(tree.wNew[n]),
      'change ' + fmtDelta(tree.wNew[n] - tree.wBase[n]) + ' ' + fmtRatio(tree.wBase[n], tree.wNew[n]),
      verdict(tree.sig[n])
    ];
    if (culpritRank[n]) extra.push('new cost enters here: culprit #' + culpritRank[n]);
    return { sub: [where(tree.funcOf[n])], extra: extra };
  }

  /* ---------- culprits: where the new cost enters ---------- */

  var culprits = arr(data.culprits).map(obj);
  var culpritRank = new Int32Array(tree.count); /* 1-based rank of the culprit a node is an entry of */
  culprits.forEach(function (c, i) {
    arr(c.nodes).forEach(function (n) {
      n = num(n);
      if (n > 0 && n < tree.count && n === Math.floor(n) && !culpritRank[n]) culpritRank[n] = i + 1;
    });
  });

  function funcText(f) {
    f = num(f);
    return f >= 0 && f < funcs.length ? str(funcs[f].name) + ' (' + where(f) + ')' : '<unknown>';
  }

  function culpritText(c) {
    var t = funcText(c.function);
    if (c.into !== null && c.into !== undefined) t += ', now calls ' + funcText(c.into);
    return t + ': ' + fmtValue(c.base) + ' → ' + fmtValue(c.new) + ' (' + fmtDelta(num(c.new) - num(c.base)) + ')';
  }

  function renderCulprits() {
    var host = byId('ll-culprits');
    LL.clear(host);
    var whole = data.whole === null || data.whole === undefined ? null : obj(data.whole);
    if (whole) {
      var ratio = num(whole.base) > 0 ? num(whole.new) / num(whole.base) : 0;
      host.appendChild(el('p', 'll-whole', 'Whole program: ' + fmtNs(num(whole.base) * 1e9) + ' → ' +
        fmtNs(num(whole.new) * 1e9) + ' per run (×' + ratio.toFixed(2) + '), ' + verdict(num(whole.sig)) +
        (data.normalization && obj(data.normalization).by === 'run' ? '; compared per run' : '')));
    }
    if (!culprits.length) {
      host.appendChild(el('p', 'll-note', 'No call path grew beyond noise.'));
      return;
    }
    var list = el('ol', 'll-culprit-list');
    culprits.forEach(function (c, i) {
      var li = el('li', 'll-culprit', (i === 0 ? 'Most likely cause: ' : '') + culpritText(c));
      li.setAttribute('data-rank', String(i + 1));
      list.appendChild(li);
    });
    host.appendChild(list);
  }

  var nodes = LL.numberedNodes(tree);
  var flame = LL.flameView(tree, {
    weights: currentView,
    metric: function () {
      return { label: state.side === 'base' ? 'Base' : 'New', fmt: fmtValue };
    },
    real: nodes.real,
    matches: function (n, q) {
      var f = tree.funcOf[n];
      return f >= 0 && (str(funcs[f].name).toLowerCase().indexOf(q) >= 0 ||
        str(funcs[f].file).toLowerCase().indexOf(q) >= 0);
    },
    color: frameColor,
    frameClass: function (n) { return culpritRank[n] ? ' ll-culprit-frame' : ''; },
    key: nodes.key,
    find: nodes.find,
    describe: describe,
    emptyText: 'Nothing was recorded on this side.',
    changed: function (what) {
      writeHash();
      refresh({ table: what === 'search' });
    }
  });

  /* ---------- header ---------- */

  function sideText(s) {
    s = obj(s);
    var parts = [str(s.path), '(' + str(s.kind) + ', ' + str(s.measure) + ')'];
    if (s.python_version) parts.push('Python ' + str(s.python_version));
    parts.push(s.unit === 'ns' ? fmtNs(num(s.total)) : fmtCount(num(s.total)) + (s.unit === 'calls' ? ' calls' : ' samples'));
    if (s.units_of_work !== null && s.units_of_work !== undefined) parts.push(fmtCount(num(s.units_of_work)) + ' units of work');
    return parts.join(' ');
  }

  function renderHeader() {
    var argv = obj(data.new).argv;
    LL.showArgv(Array.isArray(argv) ? argv : null, 'diff');
    var fact = LL.facts();
    fact('Base', sideText(data.base), arr(obj(data.base).argv).join(' '));
    fact('New', sideText(data.new), arr(obj(data.new).argv).join(' '));
    fact('Normalised', unit === 'calls' ? 'calls per run (exact: no noise)' : norm.by === 'run' ? 'per run (the whole program\'s time changed beyond noise)' : norm.by === 'per' ? 'per unit of work (' + (unit === 's' ? 'time' : unit) + ')' : 'share of each side\'s total');
    var noise = '> ' + num(data.sigma) + ' σ, floor ' + Math.round(num(data.noise_floor) * 100) + '%';
    var raced = Math.max(num(obj(data.base).raced), num(obj(data.new).raced));
    if (raced >= 0.005) noise += ' + ' + Math.round(raced * 100) + '% of stack reads raced';
    var jump = Math.max(num(obj(data.base).disturbance_ns), num(obj(data.new).disturbance_ns));
    if (jump > 0) noise += '; one disturbance of a traced call: ' + fmtNs(jump);
    if (data.noise_from_runs) noise = '> ' + num(data.sigma) + ' σ of the spread of the runs (Welch)';
    fact('Beyond noise', noise);
    fact('Runs', fmtCount(num(obj(data.base).runs) || 1) + ' base, ' + fmtCount(num(obj(data.new).runs) || 1) + ' new');
    if (data.detectable) {
      var det = obj(data.detectable);
      fact('Smallest change beyond noise', Math.round(num(det.self) * 100) + '% of a function\'s own cost (median over ' +
        fmtCount(num(det.functions)) + ' functions above 1% of the total)');
    }
    var summary = obj(data.summary);
    fact('Grew', fmtCount(num(summary.grew)) + ' functions');
    fact('Shrank', fmtCount(num(summary.shrank)) + ' functions');
    var warnings = arr(data.warnings);
    LL.showWarning(warnings.length > 0, 'diff');
  }

  /* ---------- the ranked table ---------- */

  var TABLE_COLUMNS = [
    { key: 'rank', label: '#', title: 'Rank: growth of own (self) cost beyond noise first' },
    { key: 'name', label: 'Function', left: true, kind: 'text' },
    { key: 'file', label: 'File:line', left: true, kind: 'text' },
    { key: 'base_self', label: 'Base self' },
    { key: 'new_self', label: 'New self' },
    { key: 'delta_self', label: 'Δ self' },
    { key: 'ratio_self', label: 'Ratio' },
    { key: 'base_total', label: 'Base total' },
    { key: 'new_total', label: 'New total' },
    { key: 'delta_total', label: 'Δ total' },
    { key: 'verdict', label: 'Change', left: true, kind: 'text' }
  ];
  var tableInfo = { rows: 0 };

  function rowVerdict(fn) {
    var s = num(fn.sig_self), t = num(fn.sig_total);
    if (s > 0 || t > 0) return 'grew';
    if (s < 0 || t < 0) return 'shrank';
    return '';
  }

  function cellValue(row, key) {
    var fn = funcs[row];
    if (key === 'name') return str(fn.name);
    if (key === 'file') return where(row);
    if (key === 'verdict') return rowVerdict(fn);
    if (key === 'ratio_self') return fn.ratio_self === null ? Infinity : num(fn.ratio_self);
    return num(fn[key]);
  }

  function renderTable() {
    var rows = funcs.map(function (_, i) { return i; });
    tableInfo.rows = LL.renderTable(byId('ll-table'), {
      columns: TABLE_COLUMNS,
      rows: rows,
      table: table,
      sortKey: table.key || 'rank',
      limit: 50,
      noun: 'functions',
      value: cellValue,
      name: function (row) { return str(funcs[row].name); },
      selected: function (row) { return !!flame.search && str(funcs[row].name) === flame.search; },
      cell: function (row, c) {
        var fn = funcs[row];
        var v = cellValue(row, c.key);
        if (c.key === 'name') return { text: v, cls: 'll-name', title: v };
        if (c.key === 'file') return { text: v, cls: 'll-file', title: str(fn.file) };
        if (c.key === 'verdict') return { text: v ? (v === 'grew' ? '▲ grew' : '▼ shrank') : '', cls: 'll-verdict' };
        if (c.key === 'rank') return { text: String(num(fn.rank)) };
        if (c.key === 'ratio_self') return { text: fmtRatio(fn.base_self, fn.new_self) };
        if (c.key === 'delta_self' || c.key === 'delta_total') return { text: fmtDelta(v) };
        return { text: fmtValue(v) };
      }
    });
    var trs = byId('ll-table').querySelectorAll('tbody tr');
    for (var i = 0; i < trs.length; i++) {
      var cell = trs[i].querySelector('td.ll-verdict');
      var text = cell ? cell.textContent : '';
      if (text.indexOf('grew') >= 0) trs[i].classList.add('ll-row-grew');
      else if (text.indexOf('shrank') >= 0) trs[i].classList.add('ll-row-shrank');
    }
  }

  /* ---------- callers of the top regressions ---------- */

  function renderCallers() {
    var host = byId('ll-callers');
    LL.clear(host);
    var entries = arr(data.callers);
    if (!entries.length) {
      host.appendChild(el('p', 'll-note', 'No function grew beyond noise.'));
      return;
    }
    entries.forEach(function (entry) {
      entry = obj(entry);
      var f = num(entry.function);
      if (!(f >= 0 && f < funcs.length)) return;
      var fn = funcs[f];
      host.appendChild(el('div', 'll-callers-of', '#' + num(fn.rank) + ' ' + str(fn.name) + ' (' + where(f) + ')'));
      var tableEl = el('table', 'll-callers-table');
      var hr = el('tr');
      ['Base', 'New', 'Δ', 'Ratio', 'Caller'].forEach(function (h, i) { hr.appendChild(el('th', i === 4 ? 'll-left' : '', h)); });
      tableEl.appendChild(hr);
      arr(entry.callers).forEach(function (c) {
        c = obj(c);
        var tr = el('tr');
        var g = c.function === null || c.function === undefined ? -1 : num(c.function);
        var name = g >= 0 && g < funcs.length ? str(funcs[g].name) + ' (' + where(g) + ')' : '(root of the stack)';
        [fmtValue(c.base), fmtValue(c.new), fmtDelta(c.delta), fmtRatio(c.base, c.new)].forEach(function (t) {
          tr.appendChild(el('td', '', t));
        });
        tr.appendChild(el('td', 'll-left ll-name', name));
        tableEl.appendChild(tr);
      });
      host.appendChild(tableEl);
    });
  }

  /* ---------- state, the URL hash, and controls ---------- */

  function writeHash() {
    var parts = flame.hashParts();
    if (state.side !== 'new') parts.push('tree=' + state.side);
    LL.writeHash(parts.concat(LL.sortToHash(table)));
  }

  function applyHash() {
    var h = LL.readHash();
    state.side = h.tree === 'base' ? 'base' : 'new';
    flame.fromHash(h);
    LL.sortFromHash(table, h.sort, TABLE_COLUMNS);
    if (table.key === null) table.desc = false; /* rank 1 first */
  }


  /* How many drawn frames are red, blue and neutral (read back from the page itself). */
  function colourCounts() {
    var counts = { red: 0, blue: 0, neutral: 0 };
    var frames = byId('ll-flame').querySelectorAll('.ll-frame:not(.ll-merged):not(.ll-synthetic)');
    for (var i = 0; i < frames.length; i++) {
      var m = /rgb\((\d+), (\d+), (\d+)\)/.exec(frames[i].style.backgroundColor);
      if (!m) continue;
      var r = Number(m[1]), b = Number(m[3]);
      if (r > b + 40) counts.red++;
      else if (b > r + 40) counts.blue++;
      else counts.neutral++;
    }
    return counts;
  }

  function writeState() {
    var s = byId('ll-state');
    s.setAttribute('data-tree', state.side);
    flame.writeState(s);
    var c = colourCounts();
    s.setAttribute('data-red', String(c.red));
    s.setAttribute('data-blue', String(c.blue));
    s.setAttribute('data-neutral', String(c.neutral));
    s.setAttribute('data-table-rows', String(tableInfo.rows));
    s.setAttribute('data-culprit-frames', String(byId('ll-flame').querySelectorAll('.ll-culprit-frame').length));
    s.setAttribute('data-table-sort', (table.key || 'rank') + (table.desc ? '' : '-asc'));
    s.setAttribute('data-ready', '1');
  }

  function refresh(parts) {
    if (parts.flame) { LL.keepZoomVisible(flame, currentView().w, tree.parentOf); flame.update(); }
    if (parts.table) guard('table', renderTable);
    guard('state', writeState);
  }

  function syncControls() {
    byId('ll-tree').value = state.side;
    byId('ll-search').value = flame.search;
  }

  function wire() {
    var metric = byId('ll-metric');
    LL.fillSelect(metric, [['cost', unit === 'share' ? 'Share of total' : unit === 'calls' ? 'Calls' : 'Cost per unit']]);
    var side = byId('ll-tree');
    side.addEventListener('change', function () {
      state.side = side.value === 'base' ? 'base' : 'new';
      syncControls();
      writeHash();
      refresh({ flame: true, table: false });
    });
    LL.wireFlamePage({
      table: table, columns: TABLE_COLUMNS, defaultKey: 'rank', flame: flame,
      writeHash: writeHash, applyHash: applyHash, syncControls: syncControls, refresh: refresh
    });
  }

  guard('header', renderHeader);
  guard('culprits', renderCulprits);
  guard('callers', renderCallers);
  wire();
  applyHash();
  syncControls();
  refresh({ flame: true, table: true });
})();
