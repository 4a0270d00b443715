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
  var deadlines = {};      // breaker key -> client time (ms) its cooldown ends
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

  function notify(text, isError) {
    var n = $("notice");
    n.textContent = text;
    n.classList.toggle("is-error", !!isError);
  }

  function failed(err) {
    notify(err && err.message ? err.message : String(err), true);
  }

  // ---- formatting ---------------------------------------------------------------------

  function fmtTime(s) {
    if (!s) return "–";
    var d = new Date(s);
    if (isNaN(d.getTime())) return String(s);
    return d.toLocaleString(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
  }

  function timeEl(s) {
    var t = el("time", null, fmtTime(s));
    if (s) t.setAttribute("datetime", String(s));
    return t;
  }

  function fmtRemaining(ms) {
    var s = Math.max(0, Math.ceil(ms / 1000));
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    var mm = (h ? String(m).padStart(2, "0") : String(m)) + ":" + String(sec).padStart(2, "0");
    return h ? h + ":" + mm : mm;
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
        signedIn(data.principal || "");
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

  function signedIn(principal) {
    $("principal").textContent = principal ? "Signed in as " + principal : "Signed in";
    $("login").hidden = true;
    $("app").hidden = false;
    $("session-bar").hidden = false;
    polling = true;
    refresh().then(function () { $("main").focus(); });
  }

  function signedOut(message) {
    var wasIn = polling;
    csrf = "";
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

  function refresh() {
    if (!polling) return Promise.resolve();
    if (inFlight) return inFlight;
    inFlight = Promise.all([
      section("breakers-title", api("GET", "api/breakers").then(renderBreakers)),
      section("queue-title", api("GET", "api/queue").then(renderQueue)),
      section("dl-title", api("GET", "api/dead-letters?" + dlQuery()).then(renderDeadLetters)),
      section("sched-title", api("GET", "api/schedules").then(renderSchedules))
    ]).then(function () {
      $("updated").textContent = "Updated " + new Date().toLocaleTimeString();
    }, function (err) {
      if (polling) failed(err);
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
      refresh();
    }, POLL_MS);
  }

  // ---- queue --------------------------------------------------------------------------

  function renderQueue(q) {
    Array.prototype.forEach.call(document.querySelectorAll("[data-stat]"), function (dd) {
      var path = dd.dataset.stat.split(".");
      var v = q && q[path[0]] ? q[path[0]][path[1]] : undefined;
      dd.textContent = typeof v === "number" ? String(v) : "–";
    });
  }

  // ---- breakers -----------------------------------------------------------------------

  function renderBreakers(data) {
    var list = (data && data.breakers) || [];
    var now = Date.now();
    var next = {};
    list.forEach(function (b) {
      if (b.state === "open") {
        // remaining_ms is relative to the server's now, so a skewed client clock does not matter.
        if (typeof b.remaining_ms === "number") next[b.key] = now + b.remaining_ms;
        else if (b.probe_at) next[b.key] = Date.parse(b.probe_at);
      }
    });
    deadlines = next;
    $("breakers-empty").hidden = list.length > 0;
    syncList($("breakers"), list, function (b) { return b.key; }, createBreaker, updateBreaker);
    tickCountdowns();
  }

  function createBreaker(b) {
    var li = $("breaker-tpl").content.firstElementChild.cloneNode(true);
    li.querySelector("[data-act=reset]").addEventListener("click", function () { breakerAction(li.dataset.key, "reset"); });
    li.querySelector("[data-act=trip]").addEventListener("click", function () { breakerAction(li.dataset.key, "trip"); });
    return li;
  }

  function updateBreaker(li, b) {
    li.dataset.state = b.state;
    var st = li.querySelector("[data-f=state]");
    st.textContent = b.state;
    st.className = "badge s-" + String(b.state).replace(/[^a-z_-]/gi, "");
    li.querySelector("[data-f=key]").textContent = b.key;
    li.querySelector("[data-f=failures]").textContent = b.failures + (b.failures === 1 ? " failure" : " failures");
    li.querySelector("[data-act=reset]").setAttribute("aria-label", "Reset breaker " + b.key);
    li.querySelector("[data-act=trip]").setAttribute("aria-label", "Trip breaker " + b.key);
    li.querySelector("[data-act=trip]").disabled = b.state === "open";
    if (b.opened_at) li.title = "Opened " + fmtTime(b.opened_at);
    else li.removeAttribute("title");
  }

  function tickCountdowns() {
    var now = Date.now();
    Array.prototype.forEach.call($("breakers").children, function (li) {
      var c = li.querySelector("[data-f=countdown]");
      var end = deadlines[li.dataset.key];
      if (li.dataset.state !== "open" || end === undefined) {
        c.textContent = li.dataset.state === "half-open" ? "probe allowed" : "";
        delete c.dataset.remainingS;
        return;
      }
      var ms = end - now;
      c.dataset.remainingS = String(Math.max(0, Math.ceil(ms / 1000)));
      c.textContent = ms > 0 ? "probe in " + fmtRemaining(ms) : "probe due";
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

  function breakerAction(key, act) {
    var title = act === "reset" ? "Reset breaker?" : "Trip breaker?";
    var text = act === "reset"
      ? "Close " + key + " and set its failure count to 0. Calls go through again at once."
      : "Open " + key + " now, whatever its failure count. Calls are refused until its cooldown ends.";
    confirmAction(title, text, act === "reset" ? "Reset" : "Trip").then(function (ok) {
      if (!ok) return;
      api("POST", "api/breakers/" + seg(key) + "/" + act).then(function (b) {
        notify("Breaker " + key + " is " + (b && b.state ? b.state : "updated") + ".");
        return refresh();
      }).then(function () {
        var li = '#breakers [data-key="' + CSS.escape(key) + '"] ';
        keepFocus([li + "[data-act=" + act + "]", li + "[data-act=" + (act === "reset" ? "trip" : "reset") + "]"], $("main"));
      }).catch(failed);
    });
  }

  // ---- dead letters -------------------------------------------------------------------

  function localToRFC3339(v) {
    if (!v) return "";
    var d = new Date(v);
    return isNaN(d.getTime()) ? "" : d.toISOString();
  }

  function dlQuery() {
    var p = new URLSearchParams();
    p.set("status", $("f-status").value || "failed");
    var src = $("f-source").value.trim();
    if (src) p.set("source", src);
    var from = localToRFC3339($("f-from").value), to = localToRFC3339($("f-to").value);
    if (from) p.set("from", from);
    if (to) p.set("to", to);
    p.set("limit", $("f-limit").value);
    p.set("offset", String(page.offset));
    return p.toString();
  }

  $("dl-filters").addEventListener("submit", function (ev) {
    ev.preventDefault();
    page.offset = 0;
    selected.clear();
    refresh();
  });
  $("f-clear").addEventListener("click", function () {
    $("dl-filters").reset();
    page.offset = 0;
    selected.clear();
    refresh();
  });
  $("dl-prev").addEventListener("click", function () {
    page.offset = Math.max(0, page.offset - Number($("f-limit").value));
    refresh();
  });
  $("dl-next").addEventListener("click", function () {
    page.offset += Number($("f-limit").value);
    refresh();
  });

  function renderDeadLetters(data) {
    var list = (data && data.dead_letters) || [];
    var limit = Number($("f-limit").value);
    page.total = (data && data.total) || 0;
    if (list.length === 0 && page.offset > 0 && page.offset >= page.total) {
      // The page emptied (letters replayed or discarded): step back to the last page.
      page.offset = Math.max(0, Math.floor(Math.max(0, page.total - 1) / limit) * limit);
    }
    page.ids = list.map(function (d) { return d.id; });
    syncList($("dl-rows"), list, function (d) { return d.id; }, createRow, updateRow);
    $("dl-empty").hidden = list.length > 0;
    $("dl-table").hidden = list.length === 0;
    $("dl-range").textContent = list.length
      ? (page.offset + 1) + "–" + (page.offset + list.length) + " of " + page.total
      : "0 of " + page.total;
    $("dl-prev").disabled = page.offset === 0;
    $("dl-next").disabled = page.offset + list.length >= page.total;
    updateSelection();
  }

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
    tr.appendChild(cell("Key", "mono")).setAttribute("data-f", "key");
    var err = cell("Error", "err");
    err.setAttribute("data-f", "error");
    err.appendChild(el("span"));
    tr.appendChild(err);
    tr.appendChild(cell("Status")).setAttribute("data-f", "status");
    tr.appendChild(cell("Retries", "num")).setAttribute("data-f", "retries");
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
    src.textContent = d.source;
    if (d.name && d.name !== d.source) src.appendChild(el("div", { className: "mono" }, d.name));
    tr.querySelector("[data-f=key]").textContent = d.key || "–";
    var err = tr.querySelector("[data-f=error] span");
    err.textContent = d.error || "";
    err.title = d.error || "";
    var st = tr.querySelector("[data-f=status]");
    st.textContent = "";
    st.appendChild(badge(d.status));
    tr.querySelector("[data-f=retries]").textContent = String(d.retry_count);
    var cr = tr.querySelector("[data-f=created]");
    cr.textContent = "";
    cr.appendChild(timeEl(d.created_at));
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
      [["Status", badge(d.status)], ["Source", d.source], ["Request", d.name], ["Key", d.key || "–"],
       ["Item", d.item_id ? String(d.item_id) : "– (batch capture)"], ["Retries", String(d.retry_count)],
       ["Created", timeEl(d.created_at)], ["Updated", timeEl(d.updated_at)]].forEach(function (f) {
        facts.appendChild(el("dt", null, f[0]));
        var dd = el("dd");
        if (typeof f[1] === "string") dd.textContent = f[1]; else dd.appendChild(f[1]);
        facts.appendChild(dd);
      });
      $("inspect-error").textContent = d.error || "(none)";
      $("inspect-payload").textContent = prettyPayload(d.payload);
      var ol = $("inspect-timeline");
      ol.textContent = "";
      if (tl.length === 0) ol.appendChild(el("li", null, "No events."));
      tl.forEach(function (ev) {
        var li = el("li", { "data-kind": String(ev.kind) });
        var head = ev.kind === "attempt" ? "Attempt " + ev.number : ev.kind === "replay" ? "Replay" : ev.kind === "discard" ? "Discarded" : String(ev.kind);
        li.appendChild(el("strong", null, head + " "));
        if (ev.outcome) li.appendChild(badge(ev.outcome));
        var who = ev.actor ? " by " + ev.actor : "";
        var where = ev.instance ? " on " + ev.instance : "";
        var when = el("span", { className: "when" }, " " + fmtTime(ev.started_at) + (ev.ended_at && ev.ended_at !== ev.started_at ? " → " + fmtTime(ev.ended_at) : "") + who + where);
        li.appendChild(when);
        if (ev.reason) li.appendChild(el("span", { className: "reason" }, "Reason: " + ev.reason));
        if (ev.error) li.appendChild(el("span", { className: "err" }, ev.error));
        ol.appendChild(li);
      });
      var canAct = d.status === "failed";
      $("inspect-replay").disabled = !canAct;
      $("inspect-discard").disabled = !canAct;
    });
  }

  $("inspect-replay").addEventListener("click", function () { if (inspecting) replayOne(inspecting); });
  $("inspect-discard").addEventListener("click", function () { if (inspecting) discardOne(inspecting); });

  // ---- schedules ----------------------------------------------------------------------

  function renderSchedules(data) {
    var list = (data && data.schedules) || [];
    $("sched-empty").hidden = list.length > 0;
    syncList($("sched-rows"), list, function (s) { return s.name; }, function () {
      var tr = el("tr");
      ["Name", "Spec", "Next run", "Running on", "Last outcome"].forEach(function (l) { tr.appendChild(cell(l)); });
      var acts = cell("", "row-actions");
      var b = el("button", { type: "button", "data-act": "runs" }, "Runs");
      b.addEventListener("click", function () { showRuns(tr.dataset.key); });
      acts.appendChild(b);
      tr.appendChild(acts);
      return tr;
    }, function (tr, s) {
      var c = tr.children;
      c[0].textContent = s.name;
      c[1].textContent = s.spec + (s.location && s.location !== "UTC" ? " (" + s.location + ")" : "");
      c[2].textContent = ""; c[2].appendChild(timeEl(s.next_run));
      c[3].textContent = s.running_on || "–";
      c[4].textContent = "";
      if (s.last_outcome) {
        c[4].appendChild(badge(s.last_outcome));
        if (s.last_ended_at || s.last_started_at) c[4].appendChild(el("span", { className: "when" }, " " + fmtTime(s.last_ended_at || s.last_started_at)));
        if (s.last_error) c[4].appendChild(el("div", { className: "err" }, s.last_error));
      } else {
        c[4].textContent = "not run yet";
      }
      tr.querySelector("[data-act=runs]").setAttribute("aria-label", "Runs of " + s.name);
    });
  }

  function showRuns(name) {
    api("GET", "api/schedules/" + seg(name) + "/runs?limit=20").then(function (data) {
      $("runs-title").textContent = "Runs of " + name;
      var ol = $("runs-list");
      ol.textContent = "";
      var runs = (data && data.runs) || [];
      if (runs.length === 0) ol.appendChild(el("li", null, "No runs yet."));
      runs.forEach(function (r) {
        var li = el("li");
        li.appendChild(badge(r.outcome || "running"));
        li.appendChild(el("span", { className: "when" }, " due " + fmtTime(r.due_at) + ", ran " + fmtTime(r.started_at) + (r.ended_at ? " → " + fmtTime(r.ended_at) : "") + (r.instance ? " on " + r.instance : "")));
        if (r.error) li.appendChild(el("span", { className: "err" }, r.error));
        ol.appendChild(li);
      });
      $("runs-dialog").showModal();
      $("runs-close").focus();
    }).catch(failed);
  }

  // ---- start --------------------------------------------------------------------------

  $("token").focus();
})();
