// switchboard admin dashboard. Plain JavaScript, no build step, no external resources.
//
// Every request is relative to the page's own location (the handler is mounted under any
// prefix), every value from the API reaches the DOM through textContent or attributes (never
// innerHTML), and there is no inline script or handler, so a strict CSP can apply.
(function () {
  "use strict";

  // A page opened as /admin (no trailing slash) would resolve "api/..." against "/": go to /admin/.
  if (!/\/$/.test(location.pathname) && !/\.html?$/.test(location.pathname)) {
    location.replace(location.pathname + "/" + location.search + location.hash);
    return;
  }

  var POLL_MS = 2000;
  var csrf = "";           // kept in memory only; the session cookie itself is HttpOnly
  var polling = false;
  var paused = false;
  var pollTimer = 0;
  var deadlines = {};      // breaker (sourceKey) -> client time (ms) its cooldown ends
  var manyRegistries = false; // the breakers listed are of more than one registry
  var selected = new Set();// selected dead letter ids (numbers)
  var page = { offset: 0, total: 0, ids: [] };
  var inspecting = 0;      // id shown in the inspect dialog

  function $(id) { return document.getElementById(id); }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        if (k === "className") e.className = attrs[k];
        else e.setAttribute(k, attrs[k]);
      });
    }
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  // ---- API ----------------------------------------------------------------------------

  function ApiError(status, message) {
    this.status = status;
    this.message = message;
  }

  function api(method, path, body, extraHeaders) {
    var headers = { "Accept": "application/json" };
    if (method !== "GET" && csrf) headers["X-CSRF-Token"] = csrf;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (extraHeaders) Object.keys(extraHeaders).forEach(function (k) { headers[k] = extraHeaders[k]; });
    return fetch(path, {
      method: method,
      headers: headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
      cache: "no-store"
    }).then(function (res) {
      return res.text().then(function (text) {
        var data = null;
        if (text) {
          try { data = JSON.parse(text); } catch (e) { data = null; }
        }
        if (res.status === 401) {
          signedOut("Your session ended. Sign in again.");
        }
        // Single replay/discard answer 404/409 with a resolution: hand it to the caller.
        if (!res.ok && !(data && data.resolution)) {
          var msg = data && typeof data.error === "string" ? data.error : (res.status + " " + res.statusText);
          throw new ApiError(res.status, msg);
        }
        return data;
      });
    });
  }

  function seg(s) { return encodeURIComponent(String(s)); }

  // ---- notices ------------------------------------------------------------------------

  // A notice reports the last action (or a failed refresh) with the time it happened. It is
  // cleared when the next action starts, replaced by the next notice, and goes away on its
  // own after data-ttl-ms (twice that for an error): a stale notice would read as news.
  var noticeTimer = 0;

  function notify(text, isError, kind) {
    var n = $("notice");
    clearTimeout(noticeTimer);
    n.textContent = "";
    n.classList.toggle("is-error", !!isError);
    delete n.dataset.kind;
    if (!text) return;
    if (kind) n.dataset.kind = kind;
    n.appendChild(document.createTextNode(text + " "));
    var now = new Date();
    n.appendChild(el("time", { className: "when", datetime: now.toISOString() }, isoUTC(now)));
    var ttl = Number(n.dataset.ttlMs) || 8000;
    noticeTimer = setTimeout(function () { notify(""); }, isError ? 2 * ttl : ttl);
  }

  // startAction clears what the previous action reported (its notice, a bulk action's
  // results) as the next one starts.
  function startAction() {
    notify("");
    $("bulk-results").hidden = true;
  }

  function failed(err) {
    notify(err && err.message ? err.message : String(err), true);
  }

  // ---- formatting ---------------------------------------------------------------------

  // Times are shown in ISO 8601, in UTC with its Z, as the API gives them and as server logs
  // usually have them: one reading for every operator whatever their zone. The title gives
  // the operator's local time, with its offset.
  function pad(n) { return String(n).padStart(2, "0"); }

  function isoUTC(d) { return d.toISOString().replace(/\.\d{3}Z$/, "Z"); }

  function isoLocal(d) {
    var off = -d.getTimezoneOffset(), a = Math.abs(off);
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) +
      (off >= 0 ? "+" : "-") + pad(Math.floor(a / 60)) + ":" + pad(a % 60);
  }

  function fmtTime(s) {
    if (!s) return "–";
    var d = new Date(s);
    if (isNaN(d.getTime())) return String(s);
    return isoUTC(d);
  }

  // timeEl is a <time> of the RFC 3339 string s ("–" when absent).
  function timeEl(s) {
    var t = el("time", null, fmtTime(s));
    if (s) {
      t.setAttribute("datetime", String(s));
      var d = new Date(s);
      if (!isNaN(d.getTime())) t.title = "Local time " + isoLocal(d);
    }
    return t;
  }

  // relative says how long ago (or in how long) s is, by the operator's clock: "3 min ago".
  function relative(s) {
    var t = Date.parse(s);
    if (!s || isNaN(t)) return "";
    var ms = t - Date.now(), sec = Math.round(Math.abs(ms) / 1000);
    if (sec < 10) return ms < 0 ? "just now" : "in a few seconds";
    var n, unit;
    if (sec < 60) { n = sec; unit = "s"; }
    else if (sec < 90 * 60) { n = Math.round(sec / 60); unit = "min"; }
    else if (sec < 48 * 3600) { n = Math.round(sec / 3600); unit = "h"; }
    else { n = Math.round(sec / 86400); unit = "d"; }
    return ms < 0 ? n + " " + unit + " ago" : "in " + n + " " + unit;
  }

  // whenEl is the time s with, beside it, how long ago it is.
  function whenEl(s) {
    var span = el("span", { className: "stamp" });
    span.appendChild(timeEl(s));
    var rel = relative(s);
    if (rel) span.appendChild(el("span", { className: "rel" }, rel));
    return span;
  }

  // fmtDuration is a duration in milliseconds: "0 ms", "120 ms", "1.5 s", "2 min 5 s".
  function fmtDuration(ms) {
    if (ms < 1000) return Math.max(0, Math.round(ms)) + " ms";
    if (ms < 60000) return String(Math.round(ms / 100) / 10) + " s";
    var s = Math.round(ms / 1000);
    return Math.floor(s / 60) + " min " + (s % 60) + " s";
  }

  // span of an attempt or run: its start, and how long it took (one time, never the same one
  // twice), or that no end was recorded.
  function spanEls(parent, start, end) {
    parent.appendChild(timeEl(start));
    var a = Date.parse(start), b = Date.parse(end);
    if (end && !isNaN(a) && !isNaN(b)) parent.appendChild(document.createTextNode(", took " + fmtDuration(b - a)));
    else if (start) parent.appendChild(document.createTextNode(", no end recorded"));
  }

  // breakable is s as text with a line-break opportunity (<wbr>) after each separator of
  // names, keys and URLs (/ . ? & - _ : @ ,), so that they wrap between their parts and
  // never in the middle of a word.
  function breakable(s) {
    var f = document.createDocumentFragment();
    String(s).split(/(?<=[\/.?&\-_:@,])/).forEach(function (part, i) {
      if (i > 0) f.appendChild(document.createElement("wbr"));
      f.appendChild(document.createTextNode(part));
    });
    return f;
  }

  function setBreakable(e, s) {
    e.textContent = "";
    e.appendChild(breakable(s));
  }

  // A service may have more than one breaker registry, rate limiter, retry budget or hedging
  // behavior; the API names each row's ("default" for the single one). sourceKey is a row's
  // identity (the name and the key; the key alone for the default), many says whether rows
  // of more than one source are listed, and setSourced writes a key cell, its source's name
  // before it when there are several.
  function sourceKey(name, key) { return !name || name === "default" ? key : name + "\u001f" + key; }

  function manySources(list, field) {
    for (var i = 1; i < list.length; i++) if (list[i][field] !== list[0][field]) return true;
    return false;
  }

  function setSourced(cell, name, key, many) {
    setBreakable(cell, key);
    if (!many) return;
    cell.insertBefore(el("span", { className: "source", title: "Its registry, limiter, budget or behavior" }, name || "default"), cell.firstChild);
    cell.insertBefore(document.createTextNode(" "), cell.childNodes[1]);
  }

  // countdown is the one format of the time left before something, on every panel: "in 14 s",
  // "in 4 min 05 s", "in 2 h 03 min" (whole seconds, rounded up, so it never reads 0 early).
  function countdown(ms) {
    var s = Math.max(0, Math.ceil(ms / 1000));
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    if (h) return "in " + h + " h " + pad(m) + " min";
    if (m) return "in " + m + " min " + pad(sec) + " s";
    return "in " + sec + " s";
  }

  function badge(text) {
    var cls = String(text || "").replace(/[^a-z_-]/gi, "").toLowerCase();
    return el("span", { className: "badge s-" + cls }, text || "–");
  }

  // Keyed update of a list: reuses the element of every key still present (so focus and
  // selection survive a refresh), creates new ones, drops the rest, keeps the server's order.
  function syncList(container, items, keyOf, create, update) {
    var existing = new Map();
    Array.prototype.forEach.call(container.children, function (c) { existing.set(c.dataset.key, c); });
    var prev = null;
    items.forEach(function (item) {
      var k = String(keyOf(item));
      var node = existing.get(k);
      if (node) existing.delete(k);
      else { node = create(item); node.dataset.key = k; }
      update(node, item);
      var want = prev ? prev.nextSibling : container.firstChild;
      if (want !== node) container.insertBefore(node, want);
      prev = node;
    });
    existing.forEach(function (node) { node.remove(); });
  }

  // ---- dialogs ------------------------------------------------------------------------

  function anyDialogOpen() { return !!document.querySelector("dialog[open]"); }

  // confirmAction opens the confirmation dialog and resolves to true when confirmed.
  function confirmAction(title, text, okLabel) {
    startAction();
    var d = $("confirm-dialog");
    $("confirm-title").textContent = title;
    $("confirm-text").textContent = text;
    $("confirm-ok").textContent = okLabel;
    d.returnValue = "";
    return new Promise(function (resolve) {
      d.addEventListener("close", function onClose() {
        d.removeEventListener("close", onClose);
        resolve(d.returnValue === "ok");
      });
      d.showModal();
      $("confirm-cancel").focus();
    });
  }

  // askReason opens the discard dialog and resolves to the reason, or null when cancelled.
  function askReason(title) {
    startAction();
    var d = $("discard-dialog");
    $("discard-title").textContent = title;
    $("discard-reason").value = "";
    $("discard-error").textContent = "";
    d.returnValue = "";
    return new Promise(function (resolve) {
      d.addEventListener("close", function onClose() {
        d.removeEventListener("close", onClose);
        resolve(d.returnValue === "ok" ? $("discard-reason").value.trim() : null);
      });
      d.showModal();
      $("discard-reason").focus();
    });
  }

  $("discard-form").addEventListener("submit", function (ev) {
    if (ev.submitter && ev.submitter.value === "ok" && !$("discard-reason").value.trim()) {
      ev.preventDefault();
      $("discard-error").textContent = "A reason is required.";
      $("discard-reason").focus();
    }
  });

  // Whatever opened a dialog gets the focus back when it closes.
  Array.prototype.forEach.call(document.querySelectorAll("dialog"), function (d) {
    var opener = null;
    var show = d.showModal.bind(d);
    d.showModal = function () { opener = document.activeElement; show(); };
    d.addEventListener("close", function () {
      if (opener && document.contains(opener)) opener.focus();
      opener = null;
    });
  });

  $("inspect-close").addEventListener("click", function () { $("inspect-dialog").close(); });
  $("runs-close").addEventListener("click", function () { $("runs-dialog").close(); });

  // ---- session ------------------------------------------------------------------------

  $("login-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var input = $("token");
    var token = input.value.trim();
    $("login-error").textContent = "";
    if (!token) {
      $("login-error").textContent = "Enter the admin token.";
      input.focus();
      return;
    }
    $("login-submit").disabled = true;
    api("POST", "api/session", undefined, { "Authorization": "Bearer " + token })
      .then(function (data) {
        input.value = "";
        if (!data || typeof data.csrf_token !== "string") throw new ApiError(0, "unexpected answer from api/session");
        csrf = data.csrf_token;
        signedIn(data.principal || "", data.role || "viewer");
      })
      .catch(function (err) {
        $("login-error").textContent = err.status === 401 || err.status === 403 ? "That token was refused." : ("Sign-in failed: " + err.message);
        input.focus();
        input.select();
      })
      .then(function () { $("login-submit").disabled = false; });
  });

  $("logout").addEventListener("click", function () {
    api("DELETE", "api/session").catch(function () {}).then(function () { signedOut(""); });
  });

  $("pause").addEventListener("click", function () {
    paused = !paused;
    this.setAttribute("aria-pressed", String(paused));
    this.textContent = paused ? "Resume updates" : "Pause updates";
    if (!paused) refresh();
  });

  // signedIn shows the principal and their role; body's data-role makes roles.js disable the
  // actions the role may not use (a session without a role is taken as a viewer's).
  function signedIn(principal, role) {
    $("principal").textContent = (principal ? "Signed in as " + principal : "Signed in") + " (" + role + ")";
    $("principal").title = {
      viewer: "A viewer reads everything and changes nothing",
      operator: "An operator acts on the work: replays, discards, pauses, cancels, trips and resets; not the configuration",
      admin: "An admin may do everything, the configuration (schedules, concurrency limits) included"
    }[role] || "";
    document.body.dataset.role = role;
    $("login").hidden = true;
    $("app").hidden = false;
    $("session-bar").hidden = false;
    polling = true;
    // The focus goes to the content for a keyboard user, without scrolling the top bar (the
    // session, Find, Log out) out of view.
    refresh().then(function () { $("main").focus({ preventScroll: true }); window.scrollTo(0, 0); });
  }

  function signedOut(message) {
    var wasIn = polling;
    csrf = "";
    delete document.body.dataset.role;
    polling = false;
    clearTimeout(pollTimer);
    Array.prototype.forEach.call(document.querySelectorAll("dialog[open]"), function (d) { d.close(); });
    $("app").hidden = true;
    $("session-bar").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = message || "";
    if (wasIn) $("token").focus();
  }

  // ---- polling ------------------------------------------------------------------------

  var inFlight = null;

  // refresh loads every section anew, after the load in flight if there is one: an action's
  // refresh must show what the action did, never an answer fetched before it (the focus moves
  // by what it shows). The poll reuses a load in flight (load).
  function refresh() {
    return inFlight ? inFlight.then(load) : load();
  }

  function load() {
    if (!polling) return Promise.resolve();
    if (inFlight) return inFlight;
    inFlight = Promise.all([
      section("breakers-title", api("GET", "api/breakers").then(renderBreakers)),
      section("queue-title", api("GET", "api/queue").then(renderQueue)),
      section("dl-title", api("GET", "api/dead-letters?" + dlQuery()).then(renderDeadLetters))
    ].concat(panels.map(function (p) { return p(); }))).then(function () {
      var now = new Date(), u = $("updated");
      u.textContent = "Updated ";
      u.appendChild(el("time", { datetime: now.toISOString(), title: "Local time " + isoLocal(now) }, isoUTC(now).slice(11)));
      // A refresh that worked makes the notice of one that failed stale.
      if ($("notice").dataset.kind === "refresh") notify("");
    }, function (err) {
      if (polling) notify("Refresh failed: " + (err && err.message ? err.message : String(err)), true, "refresh");
    }).then(function () {
      inFlight = null;
      schedule();
    });
    return inFlight;
  }

  // section shows the panel whose heading is headingId once its data came, and hides it when
  // the handler answers 404 (no breaker registry or no queue is configured).
  function section(headingId, p) {
    var panel = $(headingId).closest("section");
    return p.then(function () { panel.hidden = false; }, function (err) {
      if (err instanceof ApiError && err.status === 404) { panel.hidden = true; return; }
      throw err;
    });
  }

  function schedule() {
    clearTimeout(pollTimer);
    if (!polling) return;
    pollTimer = setTimeout(function tick() {
      // No refresh under an open dialog, while paused or in a hidden tab: try again later.
      if (paused || anyDialogOpen() || document.hidden) { schedule(); return; }
      load();
    }, POLL_MS);
  }

  // ---- queue --------------------------------------------------------------------------

  function renderQueue(q) {
    var ages = { items: (q && q.count_age_ms) || {}, dead_letters: (q && q.letter_count_age_ms) || {} };
    Array.prototype.forEach.call(document.querySelectorAll("[data-stat]"), function (dd) {
      var path = dd.dataset.stat.split(".");
      var v = q && q[path[0]] ? q[path[0]][path[1]] : undefined;
      dd.textContent = typeof v === "number" ? String(v) : "–";
      // A state with many items is counted in full every few seconds, not at every refresh:
      // its count says how old it is.
      var age = ages[path[0]] && typeof v === "number" ? ages[path[0]][path[1]] : undefined;
      if (typeof age === "number") {
        dd.title = "counted " + Math.round(age / 1000) + " s ago (a count above 10000 is made in full every few seconds)";
        dd.dataset.countAge = String(age);
      } else {
        dd.removeAttribute("title");
        delete dd.dataset.countAge;
      }
    });
    answered("queue", q);
  }

  // The hooks of other files that are handed every answer of GET api/queue and api/breakers
  // (onAnswer), with the time it came, once the page has shown it.
  var answerHooks = { queue: [], breakers: [] };

  function answered(kind, data) {
    var at = Date.now();
    answerHooks[kind].forEach(function (h) { h(data, at); });
  }

  // ---- breakers -----------------------------------------------------------------------

  var MAX_BREAKER_CARDS = 100;

  function renderBreakers(data) {
    var list = (data && data.breakers) || [];
    var now = Date.now();
    var next = {};
    manyRegistries = manySources(list, "registry");
    list.forEach(function (b) {
      if (b.state === "open") {
        // remaining_ms is relative to the server's now, so a skewed client clock does not matter.
        var k = sourceKey(b.registry, b.key);
        if (typeof b.remaining_ms === "number") next[k] = now + b.remaining_ms;
        else if (b.probe_at) next[k] = Date.parse(b.probe_at);
      }
    });
    deadlines = next;
    $("breakers-empty").hidden = list.length > 0;
    // A fleet with many endpoints has many breakers: the open and half-open ones first (in key
    // order within each), at most MAX_BREAKER_CARDS cards, and a line that counts the rest.
    var rank = { open: 0, "half-open": 1 };
    var count = { open: 0, "half-open": 0, closed: 0 };
    var shown = list.map(function (b, i) { count[b.state in count ? b.state : "closed"]++; return { b: b, i: i }; });
    shown.sort(function (x, y) {
      var rx = x.b.state in rank ? rank[x.b.state] : 2, ry = y.b.state in rank ? rank[y.b.state] : 2;
      return rx - ry || x.i - y.i;
    });
    shown = shown.slice(0, MAX_BREAKER_CARDS).map(function (x) { return x.b; });
    var more = $("breakers-more");
    more.hidden = list.length <= shown.length;
    more.textContent = "showing " + shown.length + " of " + list.length + " breakers, the open and half-open first (" +
      count.open + " open, " + count["half-open"] + " half-open, " + count.closed + " closed)";
    syncList($("breakers"), shown, function (b) { return sourceKey(b.registry, b.key); }, createBreaker, updateBreaker);
    tickCountdowns();
    answered("breakers", data);
  }

  function createBreaker(b) {
    var li = $("breaker-tpl").content.firstElementChild.cloneNode(true);
    li.querySelector("[data-act=reset]").addEventListener("click", function () { breakerAction(li, "reset"); });
    li.querySelector("[data-act=trip]").addEventListener("click", function () { breakerAction(li, "trip"); });
    return li;
  }

  function updateBreaker(li, b) {
    li.dataset.state = b.state;
    if (b.probe_owner) li.dataset.probeOwner = b.probe_owner;
    else delete li.dataset.probeOwner;
    var st = li.querySelector("[data-f=state]");
    st.textContent = b.state;
    st.className = "badge s-" + String(b.state).replace(/[^a-z_-]/gi, "");
    li.dataset.breakerKey = b.key;
    li.dataset.registry = b.registry || "default";
    setSourced(li.querySelector("[data-f=key]"), b.registry, b.key, manyRegistries);
    li.querySelector("[data-f=failures]").textContent = b.failures + (b.failures === 1 ? " failure" : " failures") +
      (b.shared === false ? " · this instance only" : "");
    li.dataset.shared = String(b.shared !== false);
    li.querySelector("[data-act=reset]").setAttribute("aria-label", "Reset breaker " + b.key);
    li.querySelector("[data-act=trip]").setAttribute("aria-label", "Trip breaker " + b.key);
    li.querySelector("[data-act=trip]").disabled = b.state === "open";
    if (b.opened_at) li.title = "Opened " + fmtTime(b.opened_at) + " (" + relative(b.opened_at) + ")";
    else li.removeAttribute("title");
  }

  function tickCountdowns() {
    var now = Date.now();
    Array.prototype.forEach.call($("breakers").children, function (li) {
      var c = li.querySelector("[data-f=countdown]");
      var end = deadlines[li.dataset.key];
      var half = li.dataset.state === "half-open";
      c.classList.toggle("is-half-open", half);
      if (li.dataset.state !== "open" || end === undefined) {
        // Half-open is a normal step, not an alarm: the cooldown is over and the next call is
        // let through as a trial. It can last a long time when no call comes.
        var owner = li.dataset.probeOwner;
        c.textContent = !half ? "" : owner ? "probe held by " + owner : "next call is a trial";
        if (half) c.title = owner ? "Half-open: the instance " + owner + " holds the trial calls for the whole fleet; the others refuse until it reports." :
          "Half-open: the cooldown is over. The next call goes through as a trial: a success closes the breaker, a failure opens it again.";
        else c.removeAttribute("title");
        delete c.dataset.remainingS;
        return;
      }
      c.removeAttribute("title");
      var ms = end - now;
      c.dataset.remainingS = String(Math.max(0, Math.ceil(ms / 1000)));
      c.textContent = ms > 0 ? "probe " + countdown(ms) : "probe due";
    });
  }
  setInterval(tickCountdowns, 1000);

  // keepFocus puts the focus back on a control when an action's refresh took it away (the
  // button it was on became disabled, moved or went away): the first of selectors found
  // enabled, else fallback. A keyboard user then carries on from where they were.
  function keepFocus(selectors, fallback) {
    var a = document.activeElement;
    if (a && a !== document.body && document.contains(a) && !a.disabled) return;
    for (var i = 0; i < selectors.length; i++) {
      var el = document.querySelector(selectors[i]);
      if (el && !el.disabled && el.offsetParent !== null) { el.focus(); return; }
    }
    if (fallback) fallback.focus();
  }

  function breakerAction(li, act) {
    var key = li.dataset.breakerKey, registry = li.dataset.registry, id = li.dataset.key;
    // A registry that does not share its state changes on this instance alone: say so.
    var alone = li.dataset.shared === "false" ? " Only this instance's breaker changes: its registry is not shared with the fleet." : "";
    var title = act === "reset" ? "Reset breaker?" : "Trip breaker?";
    var text = act === "reset"
      ? "Close " + key + " and set its failure count to 0. Calls go through again at once." + alone
      : "Open " + key + " now, whatever its failure count. Calls are refused until its cooldown ends." + alone;
    confirmAction(title, text, act === "reset" ? "Reset" : "Trip").then(function (ok) {
      if (!ok) return;
      api("POST", "api/breakers/" + seg(key) + "/" + act + "?registry=" + encodeURIComponent(registry)).then(function (b) {
        notify("Breaker " + key + (manyRegistries ? " of " + registry : "") + " is " + (b && b.state ? b.state : "updated") + ".");
        return refresh();
      }).then(function () {
        var li = '#breakers [data-key="' + CSS.escape(id) + '"] ';
        keepFocus([li + "[data-act=" + act + "]", li + "[data-act=" + (act === "reset" ? "trip" : "reset") + "]"], $("main"));
      }).catch(failed);
    });
  }

  // ---- dead letters -------------------------------------------------------------------

  // filterTime reads a From or To field: an ISO 8601 date, or date and time, in UTC unless it
  // gives a zone. It returns the RFC 3339 time, "" for an empty field, or null when invalid.
  function filterTime(v) {
    v = v.trim();
    if (!v) return "";
    var m = /^(\d{4}-\d\d-\d\d)(?:[T ](\d\d:\d\d)(:\d\d(?:\.\d+)?)?)?\s*(Z|[+-]\d\d:?\d\d)?$/i.exec(v);
    if (!m) return null;
    var zone = (m[4] || "Z").toUpperCase();
    if (zone !== "Z" && zone.indexOf(":") < 0) zone = zone.slice(0, 3) + ":" + zone.slice(3);
    var d = new Date(m[1] + "T" + (m[2] || "00:00") + (m[3] || ":00") + zone);
    return isNaN(d.getTime()) ? null : d.toISOString();
  }

  function dlQuery() {
    var p = new URLSearchParams();
    p.set("status", $("f-status").value || "failed");
    var src = $("f-source").value.trim();
    if (src) p.set("source", src);
    var errText = $("f-error").value.trim();
    if (errText) p.set("error", errText);
    var from = filterTime($("f-from").value), to = filterTime($("f-to").value);
    if (from) p.set("from", from);
    if (to) p.set("to", to);
    p.set("limit", $("f-limit").value);
    p.set("offset", String(page.offset));
    return p.toString();
  }

  $("dl-filters").addEventListener("submit", function (ev) {
    ev.preventDefault();
    startAction();
    var bad = ["f-from", "f-to"].filter(function (id) { return filterTime($(id).value) === null; });
    ["f-from", "f-to"].forEach(function (id) { $(id).setAttribute("aria-invalid", String(bad.indexOf(id) >= 0)); });
    if (bad.length) {
      notify((bad[0] === "f-from" ? "From" : "To") + " " + JSON.stringify($(bad[0]).value.trim()) + " is not a time: give an ISO 8601 date or date and time, such as 2026-01-31T08:00Z.", true);
      $(bad[0]).focus();
      return;
    }
    page.offset = 0;
    selected.clear();
    refresh();
  });
  $("f-clear").addEventListener("click", function () {
    startAction();
    $("dl-filters").reset();
    page.offset = 0;
    selected.clear();
    refresh();
  });
  $("dl-prev").addEventListener("click", function () {
    startAction();
    page.offset = Math.max(0, page.offset - Number($("f-limit").value));
    refresh();
  });
  $("dl-next").addEventListener("click", function () {
    startAction();
    page.offset += Number($("f-limit").value);
    refresh();
  });

  function renderDeadLetters(data) {
    var list = (data && data.dead_letters) || [];
    var limit = Number($("f-limit").value);
    page.total = (data && data.total) || 0;
    // The server counts up to a bound (or the page's end) and says when more match: the range
    // says "more than", and Next stays on until a page comes back short.
    var over = Boolean(data && data.total_over);
    if (list.length === 0 && page.offset > 0 && page.offset >= page.total && !over) {
      // The page emptied (letters replayed or discarded): step back to the last page and fetch
      // it now, rather than say no letter matches until the next refresh.
      page.offset = Math.max(0, Math.floor(Math.max(0, page.total - 1) / limit) * limit);
      return api("GET", "api/dead-letters?" + dlQuery()).then(renderDeadLetters);
    }
    page.ids = list.map(function (d) { return d.id; });
    syncList($("dl-rows"), list, function (d) { return d.id; }, createRow, updateRow);
    $("dl-empty").hidden = list.length > 0;
    $("dl-table").hidden = list.length === 0;
    var of = (over ? " of more than " : " of ") + page.total.toLocaleString("en-US");
    $("dl-range").textContent = list.length
      ? (page.offset + 1) + "–" + (page.offset + list.length) + of
      : "0" + of;
    $("dl-prev").disabled = page.offset === 0;
    $("dl-next").disabled = over ? list.length < limit : page.offset + list.length >= page.total;
    updateSelection();
    measureErrors();
  }

  // measureErrors offers "Show all" on the errors their cell cuts (two lines), and only there.
  function measureErrors() {
    Array.prototype.forEach.call($("dl-rows").children, function (tr) {
      var cellEl = tr.querySelector("[data-f=error]");
      var text = cellEl.querySelector(".err-text"), more = cellEl.querySelector("button.more");
      var open = cellEl.classList.contains("is-open");
      more.hidden = !open && text.scrollHeight <= text.clientHeight + 1;
      more.textContent = open ? "Show less" : "Show all";
      more.setAttribute("aria-expanded", String(open));
    });
  }
  window.addEventListener("resize", measureErrors);

  function cell(label, cls) {
    var td = el("td", cls ? { className: cls } : null);
    if (label) td.setAttribute("data-label", label);
    return td;
  }

  function createRow(d) {
    var tr = el("tr");
    var tdSel = cell("", "c-select");
    var box = el("input", { type: "checkbox", "data-f": "select" });
    box.addEventListener("change", function () {
      var id = Number(tr.dataset.key);
      if (box.checked) selected.add(id); else selected.delete(id);
      updateSelection();
    });
    tdSel.appendChild(box);
    tr.appendChild(tdSel);
    tr.appendChild(cell("Id", "num")).setAttribute("data-f", "id");
    tr.appendChild(cell("Source")).setAttribute("data-f", "source");
    tr.appendChild(cell("Endpoint or key", "mono")).setAttribute("data-f", "key");
    var err = cell("Error", "err");
    err.setAttribute("data-f", "error");
    err.appendChild(el("span", { className: "err-text", id: "dl-err-" + d.id }));
    var more = el("button", { type: "button", className: "more", "aria-expanded": "false", "aria-controls": "dl-err-" + d.id, hidden: "" }, "Show all");
    more.addEventListener("click", function () {
      err.classList.toggle("is-open");
      measureErrors();
    });
    err.appendChild(more);
    tr.appendChild(err);
    tr.appendChild(cell("Status")).setAttribute("data-f", "status");
    tr.appendChild(cell("Replays", "num")).setAttribute("data-f", "retries");
    tr.appendChild(cell("Created")).setAttribute("data-f", "created");
    var acts = cell("", "row-actions");
    var bi = el("button", { type: "button", "data-act": "inspect" }, "Inspect");
    var br = el("button", { type: "button", "data-act": "replay" }, "Replay");
    var bd = el("button", { type: "button", "data-act": "discard", className: "danger" }, "Discard");
    bi.addEventListener("click", function () { inspect(Number(tr.dataset.key)); });
    br.addEventListener("click", function () { replayOne(Number(tr.dataset.key)); });
    bd.addEventListener("click", function () { discardOne(Number(tr.dataset.key)); });
    acts.appendChild(bi); acts.appendChild(br); acts.appendChild(bd);
    tr.appendChild(acts);
    return tr;
  }

  function updateRow(tr, d) {
    var label = "dead letter " + d.id + (d.key ? " (" + d.key + ")" : "");
    var box = tr.querySelector("[data-f=select]");
    box.checked = selected.has(d.id);
    box.setAttribute("aria-label", "Select " + label);
    tr.classList.toggle("is-selected", box.checked);
    tr.querySelector("[data-f=id]").textContent = String(d.id);
    var src = tr.querySelector("[data-f=source]");
    setBreakable(src, d.source);
    if (d.name && d.name !== d.source) {
      var nm = el("div", { className: "mono" });
      nm.appendChild(breakable(d.name));
      src.appendChild(nm);
    }
    // What the letter was for: the endpoint its item was guarded by, else its key.
    var what = tr.querySelector("[data-f=key]");
    setBreakable(what, d.guard_key || d.key || "–");
    what.title = d.guard_key ? "The endpoint (breaker key) the item was for" + (d.key ? "; its key is " + d.key : "") : d.key ? "The letter's key" : "";
    var err = tr.querySelector("[data-f=error] .err-text");
    err.textContent = d.error || "";
    err.title = d.error || "";
    tr.querySelector("[data-f=error] button.more").setAttribute("aria-label", "Show the whole error of " + label);
    var st = tr.querySelector("[data-f=status]");
    st.textContent = "";
    st.appendChild(badge(d.status));
    tr.querySelector("[data-f=retries]").textContent = String(d.retry_count);
    var cr = tr.querySelector("[data-f=created]");
    cr.textContent = "";
    cr.appendChild(whenEl(d.created_at));
    var failedLetter = d.status === "failed";
    tr.querySelector("[data-act=replay]").disabled = !failedLetter;
    tr.querySelector("[data-act=discard]").disabled = !failedLetter;
    tr.querySelector("[data-act=inspect]").setAttribute("aria-label", "Inspect " + label);
    tr.querySelector("[data-act=replay]").setAttribute("aria-label", "Replay " + label);
    tr.querySelector("[data-act=discard]").setAttribute("aria-label", "Discard " + label);
  }

  $("dl-select-all").addEventListener("change", function () {
    var on = this.checked;
    page.ids.forEach(function (id) { if (on) selected.add(id); else selected.delete(id); });
    updateSelection();
  });

  function updateSelection() {
    Array.prototype.forEach.call($("dl-rows").children, function (tr) {
      var on = selected.has(Number(tr.dataset.key));
      tr.querySelector("[data-f=select]").checked = on;
      tr.classList.toggle("is-selected", on);
    });
    var n = selected.size;
    $("bulk-count").textContent = n + " selected";
    $("bulk-replay").disabled = n === 0;
    $("bulk-discard").disabled = n === 0;
    $("bulk-clear").disabled = n === 0;
    var onPage = page.ids.filter(function (id) { return selected.has(id); }).length;
    var all = $("dl-select-all");
    all.checked = page.ids.length > 0 && onPage === page.ids.length;
    all.indeterminate = onPage > 0 && onPage < page.ids.length;
  }

  $("bulk-clear").addEventListener("click", function () { selected.clear(); updateSelection(); });

  function resolutionText(r) {
    return "Dead letter " + r.id + ": " + String(r.resolution).replace(/_/g, " ") + (r.error ? " — " + r.error : "");
  }

  function replayOne(id) {
    confirmAction("Replay dead letter " + id + "?", "Its request runs again now, once, through the mediator.", "Replay")
      .then(function (ok) {
        if (!ok) return;
        return api("POST", "api/dead-letters/" + id + "/replay").then(function (r) {
          notify(resolutionText(r), r.resolution !== "replayed");
          if (inspecting === id) return loadInspect(id);
        }).then(refresh).then(function () { keepFocus(['[data-key="' + id + '"] [data-act=replay]'], $("main")); });
      }).catch(failed);
  }

  function discardOne(id) {
    askReason("Discard dead letter " + id).then(function (reason) {
      if (reason === null) return;
      return api("POST", "api/dead-letters/" + id + "/discard", { reason: reason }).then(function (r) {
        notify(resolutionText(r), r.resolution !== "discarded");
        selected.delete(id);
        if (inspecting === id) return loadInspect(id);
      }).then(refresh).then(function () { keepFocus([], $("main")); });
    }).catch(failed);
  }

  function showBulkResults(title, results) {
    var box = $("bulk-results");
    $("bulk-results-title").textContent = title;
    var ul = $("bulk-results-list");
    ul.textContent = "";
    results.forEach(function (r) {
      var li = el("li", { "data-id": String(r.id), "data-resolution": String(r.resolution) });
      li.appendChild(el("span", null, "#" + r.id + " "));
      li.appendChild(badge(String(r.resolution)));
      if (r.error) li.appendChild(el("span", { className: "err" }, " " + r.error));
      ul.appendChild(li);
    });
    box.hidden = false;
    box.focus();
  }
  $("bulk-results-close").addEventListener("click", function () { $("bulk-results").hidden = true; });

  function bulk(kind) {
    var ids = Array.from(selected);
    if (ids.length === 0) return;
    if (ids.length > 100) { notify("At most 100 dead letters at once; " + ids.length + " are selected.", true); return; }
    var ask = kind === "replay"
      ? confirmAction("Replay " + ids.length + " dead letters?", "Each runs again now, one after another. Ids: " + ids.join(", "), "Replay all").then(function (ok) { return ok ? {} : null; })
      : askReason("Discard " + ids.length + " dead letters").then(function (reason) { return reason === null ? null : { reason: reason }; });
    ask.then(function (extra) {
      if (!extra) return;
      var body = { ids: ids };
      if (extra.reason) body.reason = extra.reason;
      return api("POST", "api/dead-letters/" + kind, body).then(function (data) {
        var results = (data && data.results) || [];
        var good = kind === "replay" ? "replayed" : "discarded";
        var okCount = results.filter(function (r) { return r.resolution === good; }).length;
        showBulkResults((kind === "replay" ? "Bulk replay: " : "Bulk discard: ") + okCount + " of " + results.length + " " + good, results);
        selected.clear();
        notify("");
        return refresh();
      });
    }).catch(failed);
  }
  $("bulk-replay").addEventListener("click", function () { bulk("replay"); });
  $("bulk-discard").addEventListener("click", function () { bulk("discard"); });

  // ---- inspect ------------------------------------------------------------------------

  function inspect(id) {
    startAction();
    inspecting = id;
    loadInspect(id).then(function () {
      var d = $("inspect-dialog");
      if (!d.open) d.showModal();
      $("inspect-close").focus();
    }).catch(function (err) { inspecting = 0; failed(err); });
  }
  $("inspect-dialog").addEventListener("close", function () { inspecting = 0; });

  function prettyPayload(p) {
    if (p === undefined || p === null) return "(none)";
    if (typeof p === "string") return p;
    return JSON.stringify(p, null, 2);
  }

  function loadInspect(id) {
    return api("GET", "api/dead-letters/" + id).then(function (data) {
      var d = data.dead_letter, tl = data.timeline || [];
      $("inspect-title").textContent = "Dead letter " + d.id;
      var facts = $("inspect-facts");
      facts.textContent = "";
      [["Status", badge(d.status)], ["Source", d.source], ["Request", d.name], ["Endpoint", d.guard_key || "–"], ["Key", d.key || "–"],
       ["Item", d.item_id ? String(d.item_id) : "none: a failed item of a batch run"], ["Replays", String(d.retry_count)],
       ["Cause", d.cause ? String(d.cause).replace(/_/g, " ") : "not recorded"],
       ["Created", whenEl(d.created_at)], ["Updated", whenEl(d.updated_at)]].forEach(function (f) {
        facts.appendChild(el("dt", null, f[0]));
        var dd = el("dd");
        if (typeof f[1] !== "string") dd.appendChild(f[1]);
        else if (f[0] === "Source" || f[0] === "Request" || f[0] === "Key" || f[0] === "Endpoint") dd.appendChild(breakable(f[1]));
        else dd.textContent = f[1];
        facts.appendChild(dd);
      });
      $("inspect-error").textContent = d.error || "(none)";
      $("inspect-payload").textContent = prettyPayload(d.payload);
      var ol = $("inspect-timeline");
      ol.textContent = "";
      if (!d.item_id) {
        // A failed item of a batch run has no queue item, so no attempt of its own was
        // recorded: its one entry is the failure the batch run captured.
        var bli = el("li", { "data-kind": "batch" });
        bli.appendChild(el("strong", null, "Failed in batch run " + d.source + " "));
        bli.appendChild(badge("failed"));
        var bw = el("span", { className: "when" }, " ");
        bw.appendChild(timeEl(d.created_at));
        bw.appendChild(document.createTextNode(" · a batch run records no attempts of its items; this is the failure it captured"));
        bli.appendChild(bw);
        if (d.error) bli.appendChild(el("span", { className: "err" }, d.error));
        ol.appendChild(bli);
      }
      var lastAttempt = null;
      tl.forEach(function (ev) {
        var li = el("li", { "data-kind": String(ev.kind) });
        var head = ev.kind === "attempt" ? "Queue attempt " + ev.number : ev.kind === "replay" ? "Replay" : ev.kind === "discard" ? "Discarded" :
          ev.kind === "expired" ? "Deadline passed" : String(ev.kind);
        if (ev.kind === "attempt") lastAttempt = ev;
        li.appendChild(el("strong", null, head + (ev.actor ? " by " + ev.actor : "") + " "));
        if (ev.outcome) li.appendChild(badge(ev.outcome));
        var when = el("span", { className: "when" }, " ");
        if (ev.kind === "discard" || ev.kind === "expired") when.appendChild(timeEl(ev.started_at));
        else spanEls(when, ev.started_at, ev.ended_at);
        if (ev.instance) when.appendChild(document.createTextNode(" · on " + ev.instance));
        li.appendChild(when);
        if (ev.reason) li.appendChild(el("span", { className: "reason" }, "Reason: " + ev.reason));
        if (ev.kind === "expired") deadlineEntry(li, d.item_id, lastAttempt);
        if (ev.error) li.appendChild(el("span", { className: "err" }, ev.error));
        ol.appendChild(li);
      });
      ol.hidden = ol.children.length === 0;
      $("inspect-timeline-empty").hidden = ol.children.length > 0;
      $("inspect-timeline-empty").textContent = "No attempt was recorded.";
      var canAct = d.status === "failed";
      $("inspect-replay").disabled = !canAct;
      $("inspect-discard").disabled = !canAct;
    });
  }

  // deadlineEntry writes into the timeline's "Deadline passed" entry what the deadline was
  // (from the item, when the queue still has it) and what was last tried before it: the last
  // queue attempt of the timeline, or that none was made.
  function deadlineEntry(li, itemID, attempt) {
    var p = el("span", { className: "reason", "data-f": "deadline" });
    var last = attempt ? "Last tried: queue attempt " + attempt.number + (attempt.outcome ? ", " + attempt.outcome : "") +
      ", at " + fmtTime(attempt.started_at) + "." : "It was never tried before its deadline.";
    p.textContent = last;
    li.appendChild(p);
    if (!itemID) return;
    api("GET", "api/items/" + seg(itemID)).then(function (data) {
      var at = data && data.item && data.item.deadline;
      if (at) p.textContent = "The deadline was " + fmtTime(at) + ". " + last;
    }, function () { /* the item is gone, or the route is not there: the entry keeps what it knows */ });
  }

  $("inspect-replay").addEventListener("click", function () { if (inspecting) replayOne(inspecting); });
  $("inspect-discard").addEventListener("click", function () { if (inspecting) discardOne(inspecting); });

  // ---- panels of other files ----------------------------------------------------------

  // The panels of the other files in assets/ (loaded after this one) register their loader
  // with addPanel: every refresh calls it, and it returns the promise of its section (see
  // section). They reach the helpers above through window.switchboardAdmin alone.
  var panels = [];
  window.switchboardAdmin = {
    $: $, el: el, api: api, ApiError: ApiError, seg: seg, notify: notify, startAction: startAction, failed: failed,
    timeEl: timeEl, whenEl: whenEl, fmtTime: fmtTime, fmtDuration: fmtDuration, countdown: countdown, relative: relative, badge: badge, syncList: syncList,
    setBreakable: setBreakable, sourceKey: sourceKey, manySources: manySources, setSourced: setSourced, filterTime: filterTime, confirmAction: confirmAction, askReason: askReason, refresh: refresh, section: section,
    addPanel: function (load) { panels.push(load); },
    // onAnswer(kind, hook): hook(data, atMs) after every answer of api/queue or api/breakers.
    onAnswer: function (kind, hook) { answerHooks[kind].push(hook); },
    pollMs: POLL_MS,
    spanEls: spanEls,
    // inspectLetter(id) opens the dead letter's dialog; items.js adds inspectItem(id).
    inspectLetter: inspect
  };

  // ---- start --------------------------------------------------------------------------

  $("token").focus();
})();
