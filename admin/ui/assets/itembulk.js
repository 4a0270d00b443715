// Bulk actions on items: cancel, run now or give a priority to every pending item the Items
// filter selects (state pending or parked, request name, breaker key), with a dry run to
// confirm (its count and a sample), and the progress of the recent actions, which every refresh
// updates. Values are set through textContent only.
(function () {
  "use strict";
  var A = window.switchboardAdmin;
  if (!A) return;
  var $ = A.$, el = A.el;

  var verbs = { cancel: "Cancel", run_now: "Run now", set_priority: "Set priority of" };
  var done = { cancel: "cancelled", run_now: "made due", set_priority: "given the priority" };

  // filter reads the Items filter as an action's filter, or throws a message naming the field
  // that is wrong.
  function filter() {
    var st = $("i-state").value;
    if (st !== "pending" && st !== "parked") {
      throw new Error("Only pending items can be cancelled, run now or given a priority: set State to pending or parked.");
    }
    var f = { state: st };
    var name = $("i-name").value.trim(), key = $("i-key").value.trim();
    if (name) f.name = name;
    if (key) f.key = key;
    return f;
  }

  function describe(f) {
    var parts = [];
    if (f.state === "parked" || f.key) parts.push("parked" + (f.key ? " on " + f.key : ""));
    if (f.name) parts.push("request " + f.name);
    return parts.length ? parts.join(", ") : "every pending item";
  }

  function priority() {
    var p = Number($("ib-priority").value);
    if (!(p >= 0 && p <= 9 && Math.floor(p) === p)) throw new Error("Priority must be a whole number from 0 to 9.");
    return p;
  }

  function title(kind, p) { return kind === "set_priority" ? "Set priority " + p + " of" : verbs[kind]; }

  // ask opens the confirmation with the dry run's answer; it resolves to {reason, rate}, or
  // null when cancelled.
  function ask(kind, p, f, dry) {
    var d = $("ib-dialog"), n = dry.matched, items = n + " pending item" + (n === 1 ? "" : "s");
    $("ib-dialog-title").textContent = title(kind, p) + " " + items + "?";
    $("ib-count").textContent = items + " match " + describe(f) + (kind === "cancel" ? ". Each is cancelled with the reason below; an item claimed meanwhile runs on and is skipped."
      : kind === "run_now" ? ". Each is made due now; an item a pause holds back is skipped." : ". Each is given priority " + p + ".");
    var list = $("ib-sample");
    list.textContent = "";
    dry.sample.forEach(function (it) {
      var li = el("li");
      li.appendChild(el("code", null, "#" + it.id));
      li.appendChild(document.createTextNode(" " + it.name + (it.parked_key ? " (parked on " + it.parked_key + ")" : "")));
      list.appendChild(li);
    });
    if (!dry.sample.length) list.appendChild(el("li", null, "None."));
    $("ib-reason-label").textContent = kind === "cancel" ? "Reason (required, kept in the audit trail)" : "Reason (optional, kept in the audit trail)";
    $("ib-reason").value = "";
    $("ib-rate").value = "50";
    $("ib-error").textContent = "";
    $("ib-ok").textContent = title(kind, p) + " " + n;
    $("ib-ok").disabled = n === 0;
    $("ib-form").dataset.kind = kind;
    d.returnValue = "";
    return new Promise(function (resolve) {
      d.addEventListener("close", function onClose() {
        d.removeEventListener("close", onClose);
        resolve(d.returnValue === "ok" ? { reason: $("ib-reason").value.trim(), rate: Number($("ib-rate").value) } : null);
      });
      d.showModal();
      $("ib-cancel").focus();
    });
  }

  $("ib-form").addEventListener("submit", function (ev) {
    if (!ev.submitter || ev.submitter.value !== "ok") return;
    var rate = Number($("ib-rate").value);
    if (this.dataset.kind === "cancel" && !$("ib-reason").value.trim()) {
      ev.preventDefault();
      $("ib-error").textContent = "A reason is required.";
      $("ib-reason").focus();
    } else if (!(rate > 0)) {
      ev.preventDefault();
      $("ib-error").textContent = "Items per second must be a positive number.";
      $("ib-rate").focus();
    }
  });

  $("ib-kind").addEventListener("change", function () {
    var prio = this.value === "set_priority";
    $("ib-priority").hidden = !prio;
    $("ib-priority-label").hidden = !prio;
  });

  $("ib-start").addEventListener("click", function () {
    A.startAction();
    var kind = $("ib-kind").value, f, p;
    try {
      f = filter();
      if (kind === "set_priority") p = priority();
    } catch (e) { A.notify(e.message, true); return; }
    var body = { kind: kind, filter: f, dry_run: true };
    if (kind === "set_priority") body.priority = p;
    A.api("POST", "api/items/actions", body).then(function (dry) {
      return ask(kind, p, f, dry).then(function (ans) {
        if (!ans) return;
        body = { kind: kind, filter: f, reason: ans.reason, rate: ans.rate };
        if (kind === "set_priority") body.priority = p;
        return A.api("POST", "api/items/actions", body).then(function (res) {
          A.notify("Bulk " + kind.replace("_", " ") + " #" + res.action.id + " started: " + res.action.matched + " items.");
          return A.refresh();
        });
      });
    }).catch(A.failed);
  });

  var finished = { done: true, cancelled: true, failed: true };

  function create() {
    var li = el("li", { className: "bulk-action" });
    var head = el("div", { className: "ba-head" });
    head.appendChild(el("span", { "data-f": "state" }));
    head.appendChild(el("strong", { "data-f": "title" }));
    head.appendChild(el("span", { className: "ba-filter", "data-f": "filter" }));
    li.appendChild(head);
    li.appendChild(el("progress", { "data-f": "bar", max: "1", value: "0" }));
    li.appendChild(el("p", { className: "ba-progress", "data-f": "progress" }));
    li.appendChild(el("p", { className: "ba-totals", "data-f": "totals" }));
    li.appendChild(el("p", { className: "ba-wait", "data-f": "wait" }));
    var cancel = el("button", { type: "button", "data-act": "cancel", className: "danger" }, "Cancel");
    li.appendChild(cancel);
    cancel.addEventListener("click", function () {
      var id = li.dataset.key;
      A.confirmAction("Cancel bulk action #" + id + "?", "The items it changed stay changed; no other is taken.", "Cancel action").then(function (ok) {
        if (!ok) return;
        A.api("POST", "api/items/actions/" + A.seg(id) + "/cancel", {}).then(function (res) {
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
    f("title").textContent = "#" + a.id + " " + a.kind.replace("_", " ") + (a.kind === "set_priority" ? " " + a.priority : "") + " by " + a.actor;
    f("filter").textContent = " " + describe(a.filter);
    var bar = f("bar");
    bar.max = Math.max(a.matched, 1);
    bar.value = Math.min(a.settled, a.matched);
    bar.setAttribute("aria-label", "Progress of bulk action #" + a.id);
    f("progress").textContent = a.settled + " of " + a.matched + " settled";
    var t = a.totals, parts = [t.changed + " " + done[a.kind]];
    if (t.skipped) parts.push(t.skipped + " skipped (no longer pending)");
    f("totals").textContent = parts.join(" · ");
    var wait = f("wait");
    wait.textContent = a.state === "failed" ? "Failed: " + a.error : a.state === "waiting" && a.error ? "Waiting: " + a.error : "";
    wait.hidden = !wait.textContent;
    li.querySelector('[data-act="cancel"]').hidden = !!finished[a.state];
  }

  function render(data) {
    A.syncList($("ib-list"), data.actions || [], function (a) { return a.id; }, create, update);
  }

  A.addPanel(function () {
    return A.api("GET", "api/items/actions?limit=5").then(function (data) {
      $("ib-bar").hidden = $("ib-list").hidden = false;
      render(data);
    }, function (err) {
      // A queue without bulk actions on items: the bar is hidden, the listing stays.
      if (err && err.status === 404) { $("ib-bar").hidden = $("ib-list").hidden = true; return; }
      throw err;
    });
  });
})();
