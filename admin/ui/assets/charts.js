// switchboard admin dashboard: the Activity panel, three charts drawn as SVG by hand:
// outcomes per second, the queue's depth by state, and the state of every breaker over time.
// They start from the queue's history on the server (api/history: one point a minute for the
// last 24 h, kept by the schedulers whether or not a page was open), and the answers the page
// polls anyway (api/queue and api/breakers) append to it at every refresh. Loaded after
// app.js, whose functions it reaches through window.switchboardAdmin. Every attribute is set
// through the DOM and every style comes from app.css classes, so the strict CSP holds; values
// from the API reach the page as text only.
(function () {
  "use strict";

  var A = window.switchboardAdmin;
  if (!A) return;
  var $ = A.$, el = A.el;
  var NS = "http://www.w3.org/2000/svg";

  // RANGES are how far back the charts can go. The default, an hour, shows an outage the
  // operator was paged for and its recovery at a glance, one point a minute; five minutes is
  // the live view at refresh resolution, 24 h the whole history the server keeps.
  var RANGES = [
    { id: "5m", label: "5 min", ms: 5 * 60 * 1000 },
    { id: "1h", label: "1 h", ms: 60 * 60 * 1000 },
    { id: "24h", label: "24 h", ms: 24 * 60 * 60 * 1000 }
  ];
  var range = RANGES[1];
  // LIVE_MS is how long the page keeps its own samples: five minutes (150 refreshes), the
  // shortest range; further back the history's minutes take over.
  var LIVE_MS = 5 * 60 * 1000;
  var MINUTE_MS = 60 * 1000;
  var DAY_MS = 24 * 60 * 60 * 1000;
  // HISTORY_EVERY_MS is how often the page asks the server for the minutes it lacks: the
  // schedulers write a minute once it is over.
  var HISTORY_EVERY_MS = 30 * 1000;
  // HISTORY_GAP_MS: two points of the history (or its last and the first live sample) further
  // apart than this are not joined: a minute no instance wrote is a gap.
  var HISTORY_GAP_MS = 150 * 1000;
  // MIN_SPAN_MS is the shortest time axis: until the history is that long the axis starts at
  // its first sample, and the lines grow from the left instead of stretching a few seconds
  // over the whole width.
  var MIN_SPAN_MS = 30 * 1000;
  // GAP_MS: two samples further apart than this are not joined; the lines break there.
  // Refreshes stop while updates are paused, a dialog is open or the tab is hidden, and a
  // straight line across such a gap would show values nobody saw.
  var GAP_MS = Math.max(5 * A.pollMs, 15000);
  // MIN_RATE_MS is the shortest interval a rate is taken over, so that the extra refresh
  // after an action does not turn one item into a spike of several a second.
  var MIN_RATE_MS = 1000;
  // MAX_COUNT_AGE_MS: two full counts of a state with many items (made every ten seconds or
  // more, see count_age_ms) this far apart still give a rate; further apart, the line breaks.
  var MAX_COUNT_AGE_MS = 5 * 60 * 1000;
  // MIN_FULL_COUNT_MS: the server makes two full counts of a state at least this far apart.
  var MIN_FULL_COUNT_MS = 10 * 1000;
  // MAX_BREAKER_ROWS bounds the breaker chart's height; the breakers that were not closed
  // come first, and the chart says how many it left out.
  var MAX_BREAKER_ROWS = 12;

  var RATES = [
    { id: "succeeded", label: "Succeeded", title: "Items that ran to success" },
    { id: "lettered", label: "Dead-lettered", title: "New dead letters: items that used up their attempts, and failed items of batch runs" },
    { id: "cancelled", label: "Cancelled", title: "Items an operator cancelled before they ran" }
  ];
  var DEPTH = [
    { id: "pending", label: "Pending", title: "Items waiting for their turn or for their next retry" },
    { id: "running", label: "Running", title: "Items a worker is running now" },
    { id: "awaiting", label: "Dead letters awaiting action", title: "Dead letters neither replayed nor discarded" }
  ];
  var STATES = [
    { id: "closed", label: "Closed", title: "Calls go through" },
    { id: "half-open", label: "Half-open", title: "The cooldown is over; the next call is a trial" },
    { id: "open", label: "Open", title: "Calls are refused until the cooldown ends" }
  ];

  var queue = [];    // {t, v: {pending, running, awaiting, succeeded, lettered, cancelled}}
  var breakers = []; // {t, s: {key: state}, order: [key]}
  var firstAt = 0;   // the time of the first sample: the live samples start there
  // history is the server's minutes, oldest first: {t: the minute's start, instances,
  // outcomes, items, dead_letters, breakers: {key: state}}. historyAt is when it was last
  // asked for; historyGone: the server keeps none (404), so it is not asked again.
  var history = [], historyAt = 0, historyGone = false;

  // ---- samples ------------------------------------------------------------------------

  function num(x) { return typeof x === "number" && isFinite(x) ? x : null; }

  A.onAnswer("queue", function (q, at) {
    if (!q || !q.items || !q.dead_letters) return;
    var it = q.items, dl = q.dead_letters;
    var letters = [num(dl.failed), num(dl.replayed), num(dl.discarded)];
    // A count made before the answer (a state with many items is counted every few seconds)
    // is a sample of when it was made: its rate is taken between two counts.
    var ages = q.count_age_ms || {}, made = {};
    Object.keys(ages).forEach(function (id) { if (num(ages[id]) !== null) made[id] = at - ages[id]; });
    // The letters' sum is a sample of one moment only when its three counts are: all made by
    // this answer, or all kept from one full count (each status over the limit). Mixed, a
    // replay or a discard since the kept count was made stands in two of them (or in none),
    // and the sum is no count of the letters: no live rate then (the server's history has it).
    var letterAges = q.letter_count_age_ms || {}, keptLetters = Object.keys(letterAges).filter(function (id) { return num(letterAges[id]) !== null; });
    var lettered = letters.indexOf(null) >= 0 ? null : letters[0] + letters[1] + letters[2];
    if (keptLetters.length === 3) made.lettered = at - letterAges.failed;
    else if (keptLetters.length > 0) lettered = null;
    add(queue, { t: at, made: made, v: {
      pending: num(it.pending), running: num(it.running), awaiting: letters[0],
      succeeded: num(it.succeeded), cancelled: num(it.cancelled),
      // Letters are never deleted, and a replay or a discard moves one between statuses:
      // their sum only rises, by one for every new dead letter.
      lettered: lettered
    } });
  });

  A.onAnswer("breakers", function (data, at) {
    // Maps without a prototype: a breaker key is any string, "constructor" and "__proto__" too.
    var s = Object.create(null), order = [];
    var list = (data && data.breakers) || [], many = A.manySources(list, "registry");
    // Breakers of several registries are told apart by their registry's name.
    list.forEach(function (b) {
      var k = many ? (b.registry || "default") + ": " + b.key : b.key;
      s[k] = String(b.state);
      order.push(k);
    });
    add(breakers, { t: at, s: s, order: order });
  });

  function add(list, sample) {
    if (!firstAt) firstAt = sample.t;
    list.push(sample);
    // One sample before the window is kept: the interval that crosses its start.
    while (list.length > 1 && list[1].t <= sample.t - LIVE_MS) list.shift();
    render();
  }

  // ---- the history --------------------------------------------------------------------

  // A refresh asks for the minutes the page lacks (the last one again: it may have been
  // written in part), at most every HISTORY_EVERY_MS; the first asks for the last 24 h.
  A.addPanel(function () {
    var now = Date.now();
    if (historyGone || (historyAt && now - historyAt < HISTORY_EVERY_MS)) return Promise.resolve();
    historyAt = now;
    var since = Math.max(history.length ? history[history.length - 1].t : 0, now - DAY_MS);
    return A.api("GET", "api/history?since=" + encodeURIComponent(new Date(since).toISOString())).then(function (data) {
      mergeHistory((data && data.minutes) || [], since);
      render();
    }, function (err) {
      if (err instanceof A.ApiError && err.status === 404) { historyGone = true; return; }
      historyAt = 0; // asked again at the next refresh
      throw err;
    });
  });

  // mergeHistory puts the minutes of an answer from since on in place of those held.
  function mergeHistory(minutes, since) {
    var kept = history.filter(function (m) { return m.t < since && m.t >= Date.now() - DAY_MS - MINUTE_MS; });
    minutes.forEach(function (m) {
      var t = Date.parse(m.minute);
      if (!isFinite(t)) return;
      var b = Object.create(null);
      Object.keys(m.breakers || {}).forEach(function (k) { b[k] = String(m.breakers[k]); });
      kept.push({ t: t, instances: num(m.instances) || 0, outcomes: m.outcomes || {}, items: m.items || null,
        letters: m.dead_letters || null, breakers: b });
    });
    kept.sort(function (a, b) { return a.t - b.t; });
    history = kept;
  }

  // liveStart is where the page's own samples take over from the history's minutes.
  function liveStart() { return queue.length ? queue[0].t : Infinity; }

  // historyDepth is the history's points of the depth chart, each at its minute's end (when
  // it was sampled), before the live samples.
  function historyDepth() {
    var out = [], until = liveStart();
    history.forEach(function (m) {
      var t = m.t + MINUTE_MS;
      if (t >= until || (!m.items && !m.letters)) return;
      var it = m.items || {}, dl = m.letters || {};
      out.push({ t: t, h: true, v: { pending: num(it.pending), running: num(it.running), awaiting: num(dl.failed) } });
    });
    return out;
  }

  // historyRates is the history's rates per second, one per minute some instance wrote,
  // before the live samples: its outcomes over 60 s; the cancelled from the rise of the
  // cancelled count between two minutes' gauges (cancelling is no claim's outcome).
  function historyRates(id) {
    var out = [], until = liveStart(), prev = null;
    history.forEach(function (m) {
      var t1 = m.t + MINUTE_MS, r = null;
      if (id === "succeeded") r = m.instances ? (num(m.outcomes.succeeded) || 0) / 60 : null;
      else if (id === "lettered") r = m.instances ? (num(m.outcomes.dead) || 0) / 60 : null;
      else if (id === "cancelled" && m.items && prev && prev.items && prev.t === m.t - MINUTE_MS) {
        var d = num(m.items.cancelled) - num(prev.items.cancelled);
        r = d >= 0 ? d / 60 : null;
      }
      prev = m;
      if (t1 > until || r === null) return;
      out.push({ t0: m.t, t1: t1, r: r });
    });
    return out;
  }

  // rateIntervals turns the samples of a cumulative count (v[id]) into rates per second, one
  // per interval [t0, t1] between two samples at least MIN_RATE_MS apart: the count's rise
  // over the interval divided by its length. An interval longer than GAP_MS, or over which
  // the count fell (retention deleted succeeded items faster than new ones came), has no
  // rate: r is null, never negative, and the line breaks there.
  // A sample whose count of id was made before its answer (s.made[id]) stands at the time
  // the count was made (madeAt); samples of one count after the first are skipped.
  function rateIntervals(samples, id) {
    var out = [], from = null, fromT = 0;
    samples.forEach(function (s) {
      var v = s.v[id];
      if (typeof v !== "number") { from = null; return; }
      var t = madeAt(s, id);
      if (!from) { from = s; fromT = t; return; }
      var dt = t - fromT;
      // Two answers that carry one kept count date it apart by the difference of their
      // latencies: counts are made at least MIN_FULL_COUNT_MS apart, so samples closer than
      // half that are the same count.
      if (dt < (kept(s, id) && kept(from, id) ? MIN_FULL_COUNT_MS / 2 : MIN_RATE_MS)) return;
      var d = v - from.v[id];
      var gap = kept(s, id) && kept(from, id) ? MAX_COUNT_AGE_MS : GAP_MS;
      out.push({ t0: fromT, t1: t, r: dt > gap || d < 0 ? null : d * 1000 / dt });
      from = s; fromT = t;
    });
    return out;
  }

  // madeAt is when sample s's count of id was made: its answer's time unless the count is
  // older (count_age_ms).
  function madeAt(s, id) {
    return kept(s, id) ? s.made[id] : s.t;
  }

  // kept reports whether sample s's count of id is a full count kept by the server.
  function kept(s, id) {
    return !!s.made && typeof s.made[id] === "number";
  }

  // The rule by which rates are derived, for the browser console (and the dashboard's tests).
  window.switchboardCharts = { rateIntervals: rateIntervals, gapMs: GAP_MS };

  // rateRuns is the step line of the history's rates and then rateIntervals: runs of [t, r]
  // points, each interval a level from its start to its end, a new run after every interval
  // without a rate and at every gap (the history's last minute joins the first live
  // interval when they are HISTORY_GAP_MS apart or less).
  function rateRuns(samples, id) {
    var runs = [], run = null, last = null;
    historyRates(id).concat(rateIntervals(samples, id)).forEach(function (iv) {
      if (iv.r === null) { run = null; return; }
      if (!run || (last.t1 !== iv.t0 && !(iv.t0 > last.t1 && iv.t0 - last.t1 <= HISTORY_GAP_MS && (last.t1 - last.t0 === MINUTE_MS)))) {
        run = []; runs.push(run);
      }
      run.push([iv.t0, iv.r], [iv.t1, iv.r]);
      last = iv;
    });
    return runs;
  }

  // depthRuns is the line of a count over the history's minutes and the live samples: runs
  // of [t, v] points, a new run after a gap (HISTORY_GAP_MS from a minute of the history).
  function depthRuns(samples, id) {
    var runs = [], run = null, prev = null;
    historyDepth().concat(samples).forEach(function (s) {
      var v = s.v[id];
      if (typeof v !== "number") { run = null; prev = null; return; }
      if (!run || s.t - prev.t > (prev.h ? HISTORY_GAP_MS : GAP_MS)) { run = []; runs.push(run); }
      run.push([s.t, v]);
      prev = s;
    });
    return runs;
  }

  // ---- drawing -----------------------------------------------------------------------

  function svg(tag, attrs, text) {
    var e = document.createElementNS(NS, tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, String(attrs[k])); });
    if (text !== undefined) e.textContent = String(text);
    return e;
  }

  function hhmmss(t) { return new Date(t).toISOString().slice(11, 19); }

  function stamp(t) { return hhmmss(t) + "Z"; }

  // The time axis's steps: the first that leaves a label every 80 px or more.
  var TIME_STEPS = [5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600].map(function (s) { return s * 1000; });

  function timeTicks(t0, t1, width) {
    var most = Math.max(2, Math.floor(width / 80));
    var step = TIME_STEPS.filter(function (s) { return (t1 - t0) / s <= most; })[0] || TIME_STEPS[TIME_STEPS.length - 1];
    var out = [];
    for (var t = Math.ceil(t0 / step) * step; t <= t1; t += step) out.push(t);
    return { ticks: out, step: step };
  }

  // valueTicks divides 0..max into about four steps of 1, 2 or 5 times a power of ten
  // (whole numbers for counts).
  function valueTicks(max, whole) {
    if (!(max > 0)) max = whole ? 4 : 1;
    var raw = max / 4, mag = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / mag;
    var step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
    if (whole) step = Math.max(1, Math.round(step));
    var top = Math.ceil(max / step - 1e-9) * step, out = [];
    for (var i = 0; i * step <= top + step / 1e6; i++) out.push(i * step);
    var decimals = step >= 1 ? 0 : Math.min(3, Math.ceil(-Math.log10(step) - 1e-9));
    return { ticks: out, top: top, fmt: function (v) { return fmtValue(v, decimals); } };
  }

  function fmtValue(v, decimals) {
    if (v >= 10000) return Math.round(v / 100) / 10 + "k";
    return v.toFixed(decimals);
  }

  function fmtRate(r) { return r >= 10 ? String(Math.round(r)) : r >= 1 ? r.toFixed(1) : r.toFixed(2); }

  // domain is the time axis: the range chosen, up to the last sample (or the history's last
  // minute), starting no earlier than the first point the page has.
  function domain() {
    var end = 0, first = firstAt || Infinity;
    [queue, breakers].forEach(function (l) { if (l.length) end = Math.max(end, l[l.length - 1].t); });
    if (history.length) {
      end = Math.max(end, history[history.length - 1].t + MINUTE_MS);
      first = Math.min(first, history[0].t);
    }
    var start = Math.max(first, end - range.ms);
    return { t0: start, t1: Math.max(end, start + MIN_SPAN_MS) };
  }

  // historyIn says whether the history has a minute in the domain.
  function historyIn(dom) {
    return history.some(function (m) { return m.t + MINUTE_MS > dom.t0 && m.t < dom.t1; });
  }

  // frame starts a chart: the SVG of width × height in the figure's canvas with its
  // accessible title and description, the clip of its plot area and the time axis under it.
  function frame(fig, width, height, plot, dom, title, desc) {
    var canvas = fig.querySelector(".chart-canvas");
    canvas.textContent = "";
    var id = fig.id;
    var root = svg("svg", { class: "chart-svg", width: width, height: height, viewBox: "0 0 " + width + " " + height,
      role: "img", "aria-labelledby": id + "-svg-title " + id + "-svg-desc" });
    root.appendChild(svg("title", { id: id + "-svg-title" }, title));
    root.appendChild(svg("desc", { id: id + "-svg-desc" }, desc));
    var clip = svg("clipPath", { id: id + "-clip" });
    clip.appendChild(svg("rect", { x: plot.x, y: plot.y - 2, width: plot.w, height: plot.h + 4 }));
    var defs = svg("defs");
    defs.appendChild(clip);
    root.appendChild(defs);
    canvas.appendChild(root);

    var x = function (t) { return plot.x + (t - dom.t0) / (dom.t1 - dom.t0) * plot.w; };
    var axis = svg("g", { class: "axis axis-time" });
    var base = plot.y + plot.h;
    axis.appendChild(svg("line", { x1: plot.x, x2: plot.x + plot.w, y1: base, y2: base }));
    var tt = timeTicks(dom.t0, dom.t1, plot.w);
    tt.ticks.forEach(function (t) {
      var px = x(t);
      axis.appendChild(svg("line", { x1: px, x2: px, y1: base, y2: base + 4 }));
      var label = tt.step >= 60000 ? hhmmss(t).slice(0, 5) : hhmmss(t);
      // A label that would stick out of the chart is left out; its tick stays.
      if (px - 26 < 0 || px + 26 > width) return;
      axis.appendChild(svg("text", { x: px, y: base + 16, "text-anchor": "middle", "data-t": new Date(t).toISOString() }, label));
    });
    root.appendChild(axis);
    return { root: root, x: x, clip: "url(#" + id + "-clip)" };
  }

  // note writes what the chart waits for in the middle of its plot area, one text per line.
  function note(root, plot, lines) {
    var g = svg("g", { class: "chart-note" });
    lines.forEach(function (line, i) {
      g.appendChild(svg("text", { x: plot.x + plot.w / 2, y: plot.y + plot.h / 2 + (i - (lines.length - 1) / 2) * 16, "text-anchor": "middle" }, line));
    });
    root.appendChild(g);
  }

  function waitingLines() {
    return ["The server has no history in this range; the live line starts when this page opened (" + stamp(firstAt || Date.now()) + ").",
      "A line needs two samples; one comes every " + A.pollMs / 1000 + " s."];
  }

  function pathOf(runs, x, y) {
    return runs.map(function (run) {
      var pts = run.map(function (p) { return x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1); });
      // A run of one point is drawn as a dot (the line's round cap).
      return "M" + pts.join("L") + (run.length === 1 ? "h0.01" : "");
    }).join("");
  }

  // ---- the line charts ----------------------------------------------------------------

  function lineChart(fig, series, runsOf, whole, title, summary) {
    var width = fig.querySelector(".chart-canvas").clientWidth;
    if (!width) return;
    var height = 190, plot = { x: 46, y: 10, w: Math.max(10, width - 46 - 14), h: height - 10 - 28 };
    var dom = domain();
    var all = series.map(function (s) { return { s: s, runs: runsOf(queue, s.id) }; });
    var max = 0, points = 0;
    all.forEach(function (a) {
      a.runs.forEach(function (run) {
        var shown = 0;
        run.forEach(function (p) { if (p[0] >= dom.t0 - GAP_MS) { max = Math.max(max, p[1]); shown++; } });
        points = Math.max(points, shown);
      });
    });
    var vt = valueTicks(max, whole);
    var y = function (v) { return plot.y + plot.h - v / vt.top * plot.h; };
    var f = frame(fig, width, height, plot, dom, title, summary(all));

    var grid = svg("g", { class: "axis axis-value" });
    vt.ticks.forEach(function (v) {
      var py = y(v);
      grid.appendChild(svg("line", { class: v === 0 ? "zero" : "grid", x1: plot.x, x2: plot.x + plot.w, y1: py, y2: py }));
      grid.appendChild(svg("text", { x: plot.x - 6, y: py + 4, "text-anchor": "end" }, vt.fmt(v)));
    });
    f.root.insertBefore(grid, f.root.querySelector(".axis-time"));

    all.forEach(function (a) {
      var vals = [];
      a.runs.forEach(function (run) { run.forEach(function (p) { vals.push(p[1]); }); });
      f.root.appendChild(svg("path", { class: "series ser-" + a.s.id, d: pathOf(a.runs, f.x, y), "clip-path": f.clip,
        "data-series": a.s.id, "data-points": vals.length, "data-values": vals.map(function (v) { return +v.toFixed(3); }).join(",") }));
    });
    fig.dataset.samples = String(queue.length);
    fig.dataset.historyMinutes = String(history.length);
    fig.dataset.ready = String(points >= 2);
    if (points < 2) note(f.root, plot, waitingLines());
  }

  // latest says, for the chart's description, each series' value at the last sample (or
  // the last interval, which may end up to MIN_RATE_MS before it): "unknown" when the line
  // stops earlier.
  function latest(all, fmt) {
    var end = queue.length ? queue[queue.length - 1].t : history.length ? history[history.length - 1].t + MINUTE_MS : 0;
    var at = end - (queue.length ? MIN_RATE_MS : MINUTE_MS);
    var last = queue.length ? queue[queue.length - 1] : null;
    return all.map(function (a) {
      var run = a.runs[a.runs.length - 1], p = run ? run[run.length - 1] : null;
      // A count the server keeps (count_age_ms) ends its line when it was made.
      var from = last && kept(last, a.s.id) ? madeAt(last, a.s.id) - MIN_RATE_MS : at;
      return a.s.label.toLowerCase() + " " + (p && p[0] >= from ? fmt(p[1]) : "unknown");
    }).join(", ");
  }

  function summaryRates(all) { return "Per second over the last interval: " + latest(all, fmtRate) + ". " + outageSummary() + "."; }

  function summaryDepth(all) { return "At the last sample: " + latest(all, String) + ". " + outageSummary() + "."; }

  // outageSummary says, for the charts' descriptions, what the history of the range holds:
  // the dead items and the peak of the letters awaiting action.
  function outageSummary() {
    var dom = domain(), dead = 0, peak = 0, minutes = 0;
    history.forEach(function (m) {
      if (m.t + MINUTE_MS <= dom.t0) return;
      minutes++;
      dead += num(m.outcomes.dead) || 0;
      if (m.letters) peak = Math.max(peak, num(m.letters.failed) || 0);
    });
    return "The server's history has " + minutes + " minutes of the range: " + dead + " items died in them, at most " + peak + " dead letters awaited action";
  }

  // ---- the breaker chart --------------------------------------------------------------

  // historyBands is the states of key over the history's minutes, one band per run of the
  // same state: the worst state it was in during each minute, however briefly (a half-open
  // shorter than a refresh shows), closed in a minute some instance wrote without it. Before
  // the live samples every minute is drawn; over them only a minute it was not closed in, on
  // top of the live bands, so that a state between two refreshes is not lost. A key the
  // history never names gets no band from it: the schedulers record the breakers that guard
  // the queue's items, and a breaker of the pipelines alone is not among them.
  function historyBands(key) {
    var out = [], last = null, until = breakers.length ? breakers[0].t : Infinity;
    if (!history.some(function (m) { return m.breakers[key] !== undefined; })) return out;
    history.forEach(function (m) {
      if (!m.instances) { last = null; return; }
      var st = m.breakers[key] || "closed", t1 = m.t + MINUTE_MS;
      if (t1 > until && st === "closed") { last = null; return; }
      if (last && last.state === st && last.t1 === m.t) { last.t1 = t1; return; }
      last = { t0: m.t, t1: t1, state: st, history: true };
      out.push(last);
    });
    return out;
  }

  // bands is the states of key over the samples: one band per run of the same state, each
  // interval between two samples drawn with the state the later one saw.
  function bands(key) {
    var out = [], last = null;
    for (var i = 1; i < breakers.length; i++) {
      var a = breakers[i - 1], b = breakers[i], st = b.s[key];
      if (st === undefined || b.t - a.t > GAP_MS) { last = null; continue; }
      if (last && last.state === st && last.t1 === a.t) { last.t1 = b.t; continue; }
      last = { t0: a.t, t1: b.t, state: st };
      out.push(last);
    }
    return out;
  }

  // rowKeys is the keys to draw: those that were not closed in the window first, each group
  // in the order the API lists them.
  function rowKeys(dom) {
    var seen = Object.create(null), keys = [];
    for (var i = breakers.length - 1; i >= 0; i--) {
      breakers[i].order.forEach(function (k) { if (!seen[k]) { seen[k] = { troubled: false }; keys.push(k); } });
    }
    // A key the history names in the range was not closed then; one it names only before the
    // range is not drawn.
    history.forEach(function (m) {
      if (m.t + MINUTE_MS <= dom.t0) return;
      Object.keys(m.breakers).forEach(function (k) {
        if (!seen[k]) { seen[k] = { troubled: false }; keys.push(k); }
        seen[k].troubled = true;
      });
    });
    var latest = breakers.length ? breakers[breakers.length - 1].order : [];
    var pos = Object.create(null);
    latest.forEach(function (k, i) { pos[k] = i; });
    keys.forEach(function (k, i) { if (pos[k] === undefined) pos[k] = latest.length + i; });
    breakers.forEach(function (s) {
      if (s.t < dom.t0 - GAP_MS) return;
      Object.keys(s.s).forEach(function (k) { if (s.s[k] !== "closed") seen[k].troubled = true; });
    });
    keys.sort(function (a, b) { return (seen[b].troubled - seen[a].troubled) || (pos[a] - pos[b]); });
    return keys;
  }

  function breakerChart(fig) {
    var width = fig.querySelector(".chart-canvas").clientWidth;
    if (!width) return;
    var dom = domain();
    var keys = rowKeys(dom), shown = keys.slice(0, MAX_BREAKER_ROWS);
    var rowH = 22, top = 8, labelW = Math.round(Math.min(260, Math.max(110, width * 0.28)));
    var rows = Math.max(shown.length, 2);
    var plot = { x: labelW + 10, y: top, w: Math.max(10, width - labelW - 10 - 14), h: rows * rowH };
    var height = top + plot.h + 28;
    var now = breakers.length ? breakers[breakers.length - 1].s : {};
    var f = frame(fig, width, height, plot, dom, "Breaker state over time, the last " + range.label, breakerSummary(now, keys, dom));
    var ready = breakers.length >= 2 || historyIn(dom);
    fig.dataset.samples = String(breakers.length);
    fig.dataset.historyMinutes = String(history.length);
    fig.dataset.ready = String(ready);

    shown.forEach(function (key, i) {
      var y0 = plot.y + i * rowH;
      var st = now[key];
      var g = svg("g", { class: "band-row", "data-key": key });
      g.appendChild(svg("title", null, key + (st ? ": " + st + " now" : ": no longer listed")));
      if (i % 2 === 1) g.appendChild(svg("rect", { class: "row-stripe", x: 0, y: y0, width: width, height: rowH }));
      var label = svg("text", { class: "band-key", x: labelW, y: y0 + rowH / 2 + 4, "text-anchor": "end" }, key);
      g.appendChild(label);
      f.root.appendChild(g);
      fit(label, key, labelW - 4);
      var hist = historyBands(key);
      hist.filter(function (b) { return b.t1 <= (breakers.length ? breakers[0].t : Infinity); }).concat(bands(key),
        hist.filter(function (b) { return b.t1 > (breakers.length ? breakers[0].t : Infinity); })).forEach(function (b) {
        if (b.t1 <= dom.t0) return;
        var x0 = f.x(b.t0), x1 = f.x(b.t1);
        g.appendChild(svg("rect", { class: "band band-" + b.state.replace(/[^a-z-]/gi, ""), "data-state": b.state, "clip-path": f.clip,
          "data-source": b.history ? "history" : "live",
          x: x0.toFixed(1), y: y0 + 3, width: Math.max(1, x1 - x0).toFixed(1), height: rowH - 6,
          "data-from": new Date(b.t0).toISOString(), "data-to": new Date(b.t1).toISOString() }));
      });
    });
    if (!ready) note(f.root, plot, waitingLines());
    else if (keys.length === 0) note(f.root, plot, ["No breakers yet."]);

    var foot = fig.querySelector(".chart-more");
    foot.hidden = keys.length <= shown.length;
    foot.textContent = keys.length > shown.length ? (keys.length - shown.length) + " more breakers are not drawn: the " + shown.length +
      " drawn are those that were not closed first." : "";
  }

  // fit cuts the SVG text e to width pixels, ending in an ellipsis; its row's title gives the
  // whole key.
  function fit(e, text, width) {
    if (e.getComputedTextLength() <= width) return;
    var lo = 0, hi = text.length;
    while (lo < hi) {
      var mid = Math.ceil((lo + hi) / 2);
      e.textContent = text.slice(0, mid) + "…";
      if (e.getComputedTextLength() <= width) lo = mid; else hi = mid - 1;
    }
    e.textContent = text.slice(0, lo) + "…";
  }

  function breakerSummary(now, keys, dom) {
    if (!keys.length) return "No breakers.";
    var past = Object.create(null);
    history.forEach(function (m) {
      if (m.t + MINUTE_MS <= dom.t0) return;
      Object.keys(m.breakers).forEach(function (k) { if (past[k] !== "open") past[k] = m.breakers[k]; });
    });
    var troubled = Object.keys(past).map(function (k) { return k + " " + past[k]; });
    var by = { open: [], "half-open": [] }, closed = 0;
    Object.keys(now).forEach(function (k) {
      if (by[now[k]]) by[now[k]].push(k);
      else closed++;
    });
    var parts = [];
    if (by.open.length) parts.push("open: " + by.open.join(", "));
    if (by["half-open"].length) parts.push("half-open: " + by["half-open"].join(", "));
    parts.push(closed + " closed");
    return "Now " + parts.join("; ") + "." + (troubled.length ? " In the history of the range, at worst: " + troubled.join(", ") + "." : "");
  }

  // ---- the panel ----------------------------------------------------------------------

  function legend(fig, items, swatchClass) {
    var ul = fig.querySelector(".legend");
    ul.textContent = "";
    items.forEach(function (s) {
      var li = el("li", { title: s.title, "data-series": s.id });
      li.appendChild(el("span", { className: "swatch " + swatchClass + s.id, "aria-hidden": "true" }));
      li.appendChild(document.createTextNode(s.label));
      ul.appendChild(li);
    });
  }

  // The charts' figures: a heading with the legend, the canvas the SVG is drawn in, and a
  // sentence on how to read it.
  [
    { id: "chart-rates", title: "Queue outcomes per second", items: RATES, swatch: "ser-",
      foot: "From the server's history, each minute's outcomes over 60 s (succeeded and died, summed over the instances); since this page opened, the rise of each count between two refreshes, per second. An interval over which a count fell (retention deleted succeeded items) is left out, never drawn below zero. A count above 10000 is made every ten seconds or more, and its rise is taken between two such counts; the dead letters' while some of their statuses are above and some below, from the server's history only. A retried item goes back to pending: retries show in the depth, not here." },
    { id: "chart-depth", title: "Queue depth by state", items: DEPTH, swatch: "ser-",
      foot: "Queue items pending and running, and dead letters waiting for an operator: at the end of each minute of the server's history, then at each refresh." },
    { id: "chart-breakers", title: "Breaker state over time", items: STATES, swatch: "band-", wide: true, foot: "" }
  ].forEach(function (c) {
    var fig = el("figure", { className: "chart" + (c.wide ? " chart-wide" : ""), id: c.id, hidden: "" });
    var cap = el("figcaption");
    cap.appendChild(el("h3", { id: c.id + "-title" }, c.title));
    cap.appendChild(el("ul", { className: "legend", "aria-label": c.wide ? "States" : "Series" }));
    fig.appendChild(cap);
    fig.appendChild(el("div", { className: "chart-canvas" }));
    // The breaker chart's sentence says how many breakers it left out, when it leaves any.
    var foot = el("p", { className: "chart-foot" + (c.wide ? " chart-more" : "") }, c.foot);
    foot.hidden = !c.foot;
    fig.appendChild(foot);
    $("charts").appendChild(fig);
    legend(fig, c.items, c.swatch);
  });
  $("charts-poll").textContent = A.pollMs / 1000 + " s";

  // The range buttons: one pressed at a time.
  var rangeGroup = el("div", { className: "chart-range", role: "group", "aria-label": "Range of the charts" });
  RANGES.forEach(function (r) {
    var b = el("button", { type: "button", id: "range-" + r.id, "aria-pressed": String(r === range) }, r.label);
    b.addEventListener("click", function () {
      range = r;
      RANGES.forEach(function (o) { $("range-" + o.id).setAttribute("aria-pressed", String(o === range)); });
      render();
    });
    rangeGroup.appendChild(b);
  });
  $("charts").parentNode.insertBefore(rangeGroup, $("charts"));

  function render() {
    var panel = $("charts-title").closest("section");
    panel.hidden = false;
    var since = $("charts-since");
    if (firstAt && !since.firstChild) since.appendChild(A.timeEl(new Date(firstAt).toISOString().replace(/\.\d{3}Z$/, "Z")));
    var lines = queue.length > 0 || history.length > 0;
    $("chart-rates").hidden = !lines;
    $("chart-depth").hidden = !lines;
    $("chart-breakers").hidden = breakers.length === 0 && history.length === 0;
    if (lines) {
      lineChart($("chart-rates"), RATES, rateRuns, false, "Outcomes of the durable queue's items per second, the last " + range.label + " (calls that succeed in process are not queue items)", summaryRates);
      lineChart($("chart-depth"), DEPTH, depthRuns, true, "Queue depth by state, the last " + range.label, summaryDepth);
    }
    if (!$("chart-breakers").hidden) breakerChart($("chart-breakers"));
  }

  var resizing = 0;
  window.addEventListener("resize", function () {
    clearTimeout(resizing);
    resizing = setTimeout(function () { if (queue.length || breakers.length || history.length) render(); }, 100);
  });
})();
