// switchboard admin dashboard: the Now panel, at the top of the page: what is wrong at this
// moment (open and half-open breakers, keys failing behind a closed breaker, paused work, dead
// letters awaiting action, a backlog), each line linking to the panel that deals with it, or
// one line saying nothing is. It reads the answers of api/breakers and api/queue the page
// polls anyway, and asks api/pauses and the newest letters awaiting action itself. Loaded after
// app.js, whose helpers it reaches through window.switchboardAdmin; values reach the DOM
// through textContent only.
(function () {
  "use strict";

  var A = window.switchboardAdmin;
  if (!A) return;
  var $ = A.$, el = A.el;

  // MAX_NAMED is how many keys or targets a line names before it counts the rest: a line
  // stays one line at 1280 px, and the panel it links to lists them all.
  var MAX_NAMED = 4;
  // BACKLOG_MS: an oldest due item that has waited longer than this is a backlog worth a line.
  var BACKLOG_MS = 60 * 1000;

  var last = { breakers: null, queue: null, pauses: null, letters: null, at: 0, down: "" };

  function named(list, text) {
    var shown = list.slice(0, MAX_NAMED).map(text).join(", ");
    return list.length > MAX_NAMED ? shown + " and " + (list.length - MAX_NAMED) + " more" : shown;
  }

  function plural(n, one, many) { return n + " " + (n === 1 ? one : many); }

  function line(list, kind, badge, text, target) {
    var li = el("li", { "data-kind": kind });
    li.appendChild(A.badge(badge));
    li.appendChild(document.createTextNode(" "));
    var a = el("a", { href: "#" + target }, text);
    a.addEventListener("click", function (ev) {
      var h = $(target);
      if (!h) return;
      ev.preventDefault();
      h.closest("section").scrollIntoView({ block: "start" });
    });
    li.appendChild(a);
    list.appendChild(li);
  }

  function render() {
    var list = $("now-list");
    if (!list) return;
    list.textContent = "";
    if (last.down) {
      // Every other line is as of the last answer: the database's outage comes first.
      line(list, "database", "down", "The queue's database does not answer: what follows is as of the last answer (" + last.down + ")", "queue-title");
    }
    var bs = (last.breakers && last.breakers.breakers) || [];
    var open = bs.filter(function (b) { return b.state === "open"; });
    var half = bs.filter(function (b) { return b.state === "half-open"; });
    var failing = bs.filter(function (b) { return b.state === "closed" && b.failures > 0; });
    var many = A.manySources(bs, "registry");
    function key(b) { return many ? (b.registry || "default") + ": " + b.key : b.key; }
    if (open.length) {
      line(list, "open", "open", plural(open.length, "breaker open", "breakers open") + ": " + named(open, function (b) {
        return key(b) + (b.remaining_ms > 0 ? " (probe " + A.countdown(b.remaining_ms) + ")" : "");
      }), "breakers-title");
    }
    if (half.length) {
      line(list, "half-open", "half-open", plural(half.length, "breaker half-open", "breakers half-open") + ", letting trial calls through: " +
        named(half, key), "breakers-title");
    }
    if (failing.length) {
      line(list, "failing", "failing", plural(failing.length, "key failing", "keys failing") + " behind a closed breaker: " +
        named(failing, function (b) { return key(b) + " (" + plural(b.failures, "failure", "failures") + ")"; }), "breakers-title");
    }
    var ps = ((last.pauses && last.pauses.pauses) || []).filter(function (p) { return !p.expired; });
    if (ps.length) {
      line(list, "paused", "paused", plural(ps.length, "pause holds work back", "pauses hold work back") + ": " + named(ps, function (p) {
        return (p.kind === "breaker_key" ? "key " : "") + p.target + (p.until ? " until " + A.fmtTime(p.until) : "");
      }), "pauses-title");
    }
    var q = last.queue;
    var awaiting = q && q.dead_letters ? q.dead_letters.failed : 0;
    if (awaiting > 0) {
      var newest = ((last.letters && last.letters.dead_letters) || [])[0];
      var text = plural(awaiting, "dead letter awaits", "dead letters await") + " action";
      if (newest) {
        text += "; the newest " + A.relative(newest.created_at) + ": " + newest.source + (newest.key ? " · " + newest.key : "") +
          (newest.error ? " · " + String(newest.error).slice(0, 80) : "");
      }
      line(list, "letters", "failed", text, "dl-title");
    }
    if (q && q.oldest_due_ms > BACKLOG_MS) {
      line(list, "backlog", "waiting", "The oldest due item has waited " + A.fmtDuration(q.oldest_due_ms) + ": the workers are behind (" +
        plural(q.items.pending, "item", "items") + " pending)", "queue-title");
    }
    var ok = list.children.length === 0;
    $("now-ok").hidden = !ok || !last.at;
    list.hidden = ok;
    $("now-title").closest("section").dataset.wrong = String(!ok);
  }

  // optional answers 404 (a route of something not configured) with null, so the panel shows
  // what the service has.
  function optional(p) {
    return p.catch(function (err) {
      if (err instanceof A.ApiError && err.status === 404) return null;
      throw err;
    });
  }

  // answered notes whether the panel's own requests found the database answering: a 503 that
  // says it does not is shown as the first line (the refresh's notice says it too, but goes).
  function answered(p) {
    return p.then(function (r) { last.down = ""; return r; }, function (err) {
      if (err instanceof A.ApiError && err.status === 503 && /database/.test(err.message)) {
        last.down = err.message;
        render();
      }
      throw err;
    });
  }

  A.onAnswer("breakers", function (data) { last.breakers = data; render(); });
  A.onAnswer("queue", function (data) { last.queue = data; render(); });
  A.addPanel(function () {
    return answered(Promise.all([
      optional(A.api("GET", "api/pauses")),
      optional(A.api("GET", "api/dead-letters?status=failed&limit=1"))
    ])).then(function (r) {
      last.pauses = r[0];
      last.letters = r[1];
      last.at = Date.now();
      render();
      $("now-title").closest("section").hidden = false;
    });
  });
})();
