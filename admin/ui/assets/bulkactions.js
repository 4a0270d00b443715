// Bulk actions: replay or discard every failed letter the dead-letter filter selects, with a
// dry run to confirm (its count and a sample), and the progress of the recent actions, which
// every refresh updates. Values are set through textContent only.
(function () {
  "use strict";
  var A = window.switchboardAdmin;
  if (!A) return;
  var $ = A.$, el = A.el;

  // filter reads the dead-letter filter form as a bulk action's filter, or throws a message
  // naming the field that is wrong.
  function filter() {
    if (($("f-status").value || "failed") !== "failed") {
      throw new Error("Only failed letters can be replayed or discarded: set Status to failed.");
    }
    var f = {};
    var src = $("f-source").value.trim(), errText = $("f-error").value.trim();
    if (src) f.source = src;
    if (errText) f.error = errText;
    [["f-from", "from", "From"], ["f-to", "to", "To"]].forEach(function (t) {
      var v = A.filterTime($(t[0]).value);
      if (v === null) throw new Error(t[2] + " " + JSON.stringify($(t[0]).value.trim()) + " is not a time: give an ISO 8601 date or date and time, such as 2026-01-31T08:00Z.");
      if (v) f[t[1]] = v;
    });
    return f;
  }

  function describe(f) {
    var parts = [];
    if (f.source) parts.push("source " + f.source);
    if (f.error) parts.push("error containing " + JSON.stringify(f.error));
    if (f.from) parts.push("from " + f.from);
    if (f.to) parts.push("before " + f.to);
    return parts.length ? parts.join(", ") : "every failed letter";
  }

  // ask opens the confirmation of a bulk action with the dry run's answer; it resolves to
  // {reason, rate}, or null when cancelled.
  function ask(kind, f, dry) {
    var d = $("ba-dialog");
    var verb = kind === "replay" ? "Replay" : "Discard";
    $("ba-dialog-title").textContent = verb + " " + dry.matched + " matching letter" + (dry.matched === 1 ? "" : "s") + "?";
    $("ba-count").textContent = dry.matched + " failed letter" + (dry.matched === 1 ? "" : "s") + " match " + describe(f) +
      (kind === "replay" ? ". Each is replayed once; letters whose breaker refuses calls wait." : ". Each is discarded with the reason below.");
    var list = $("ba-sample");
    list.textContent = "";
    dry.sample.forEach(function (l) {
      var li = el("li");
      li.appendChild(el("code", null, "#" + l.id));
      li.appendChild(document.createTextNode(" " + l.source + ": " + l.error));
      list.appendChild(li);
    });
    if (!dry.sample.length) list.appendChild(el("li", null, "None."));
    $("ba-reason-label").textContent = kind === "discard" ? "Reason (required, kept in the audit trail)" : "Reason (optional, kept in the audit trail)";
    $("ba-reason").value = "";
    $("ba-rate").value = "50";
    $("ba-error").textContent = "";
    $("ba-ok").textContent = verb + " " + dry.matched;
    $("ba-ok").disabled = dry.matched === 0;
    $("ba-form").dataset.kind = kind;
    d.returnValue = "";
    return new Promise(function (resolve) {
      d.addEventListener("close", function onClose() {
        d.removeEventListener("close", onClose);
        resolve(d.returnValue === "ok" ? { reason: $("ba-reason").value.trim(), rate: Number($("ba-rate").value) } : null);
      });
      d.showModal();
      $("ba-cancel").focus();
    });
  }

  $("ba-form").addEventListener("submit", function (ev) {
    if (!ev.submitter || ev.submitter.value !== "ok") return;
    var rate = Number($("ba-rate").value);
    if (this.dataset.kind === "discard" && !$("ba-reason").value.trim()) {
      ev.preventDefault();
      $("ba-error").textContent = "A reason is required.";
      $("ba-reason").focus();
    } else if (!(rate > 0)) {
      ev.preventDefault();
      $("ba-error").textContent = "Letters per second must be a positive number.";
      $("ba-rate").focus();
    }
  });

  function start(kind) {
    A.startAction();
    var f;
    try { f = filter(); } catch (e) { A.notify(e.message, true); return; }
    A.api("POST", "api/dead-letters/actions", { kind: kind, filter: f, dry_run: true }).then(function (dry) {
      return ask(kind, f, dry).then(function (ans) {
        if (!ans) return;
        return A.api("POST", "api/dead-letters/actions", { kind: kind, filter: f, reason: ans.reason, rate: ans.rate }).then(function (res) {
          A.notify("Bulk " + kind + " #" + res.action.id + " started: " + res.action.matched + " letters.");
          return A.refresh();
        });
      });
    }).catch(A.failed);
  }

  $("ba-replay").addEventListener("click", function () { start("replay"); });
  $("ba-discard").addEventListener("click", function () { start("discard"); });

  var finished = { done: true, cancelled: true, failed: true };

  function create() {
    var li = el("li", { className: "bulk-action" });
    var head = el("div", { className: "ba-head" });
    head.appendChild(el("span", { "data-f": "state" }));
    head.appendChild(el("strong", { "data-f": "title" }));
    head.appendChild(el("span", { className: "ba-filter", "data-f": "filter" }));
    li.appendChild(head);
    var bar = el("progress", { "data-f": "bar", max: "1", value: "0" });
    li.appendChild(bar);
    li.appendChild(el("p", { className: "ba-progress", "data-f": "progress" }));
    li.appendChild(el("p", { className: "ba-totals", "data-f": "totals" }));
    li.appendChild(el("p", { className: "ba-wait", "data-f": "wait" }));
    var cancel = el("button", { type: "button", "data-act": "cancel", className: "danger" }, "Cancel");
    li.appendChild(cancel);
    cancel.addEventListener("click", function () {
      var id = li.dataset.key;
      A.confirmAction("Cancel bulk action #" + id + "?", "The letters it settled stay settled; a letter being replayed finishes; no other is taken.", "Cancel action").then(function (ok) {
        if (!ok) return;
        A.api("POST", "api/dead-letters/actions/" + A.seg(id) + "/cancel", {}).then(function (res) {
          A.notify("Bulk action #" + id + " is " + res.action.state + ".");
          return A.refresh();
        }).catch(A.failed);
      });
    });
    return li;
  }

  function update(li, a) {
    var f = function (name) { return li.querySelector('[data-f="' + name + '"]'); };
    var b = A.badge(a.state), state = f("state");
    state.className = b.className;
    state.textContent = b.textContent;
    f("title").textContent = "#" + a.id + " " + a.kind + " by " + a.actor;
    f("filter").textContent = " " + describe(a.filter) + (a.reset_breaker ? "; breaker " + a.reset_breaker + " reset first" : "");
    var bar = f("bar");
    bar.max = Math.max(a.matched, 1);
    bar.value = Math.min(a.settled, a.matched);
    bar.setAttribute("aria-label", "Progress of bulk action #" + a.id);
    f("progress").textContent = a.settled + " of " + a.matched + " settled";
    var t = a.totals, parts = [];
    if (a.kind === "replay") parts.push(t.replayed + " replayed", t.still_failed + " still failed");
    else parts.push(t.discarded + " discarded");
    if (t.unknown) parts.push(t.unknown + " outcome unknown");
    if (t.skipped) parts.push(t.skipped + " settled by others");
    f("totals").textContent = parts.join(" · ");
    var wait = f("wait");
    wait.textContent = a.state === "paused_on_breaker" ? "Waiting on breaker " + a.waiting_key + ": its letters stay failed, untouched, until it lets calls through."
      : a.state === "paused" ? "Paused: " + a.error
        : a.state === "waiting" ? (a.error ? "Waiting: " + a.error : "Waiting for letters another replay holds.")
          : a.state === "failed" ? "Failed: " + a.error : "";
    wait.hidden = !wait.textContent;
    li.querySelector('[data-act="cancel"]').hidden = !!finished[a.state];
  }

  function render(data) {
    var list = data.actions || [];
    $("ba-empty").hidden = list.length > 0;
    A.syncList($("ba-list"), list, function (a) { return a.id; }, create, update);
  }

  A.addPanel(function () {
    return A.section("ba-title", A.api("GET", "api/dead-letters/actions?limit=5").then(render));
  });
})();
