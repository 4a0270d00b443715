// The Items panel: pending, parked, running and finished items of the durable queue, a page at
// a time by cursor; inspect one (payload, attempts), cancel a pending one with a reason, run
// one now. It reaches the dashboard's helpers through window.switchboardAdmin.
(function () {
  "use strict";
  var A = window.switchboardAdmin;
  var $ = A.$, el = A.el;

  // cursors[i] is the "after" of page i+1 (the first page's is ""); the last is the page shown.
  var cursors = [""];
  var next = "";
  var inspecting = 0;

  // The time each state's listing is ordered by, as its column heading says.
  var timeCol = { pending: "Due", parked: "Due", running: "Lease ends", succeeded: "Finished", dead: "Finished", cancelled: "Cancelled" };
  var hints = {
    pending: "In the order they run: soonest due first.",
    parked: "Waiting for a breaker to let calls through, by breaker then when due.",
    running: "By when their lease runs out. Cancelling a running item does not interrupt it.",
    succeeded: "Newest first.", dead: "Newest first.", cancelled: "Newest first."
  };

  function state() { return $("i-state").value; }

  function query() {
    var p = new URLSearchParams();
    p.set("state", state());
    var name = $("i-name").value.trim(), key = $("i-key").value.trim();
    if (name) p.set("name", name);
    if (key) p.set("key", key);
    p.set("limit", $("i-limit").value);
    var after = cursors[cursors.length - 1];
    if (after) p.set("after", after);
    return p.toString();
  }

  function timeOf(it) {
    switch (state()) {
      case "pending": case "parked": return it.next_at;
      case "running": return it.lease_until;
    }
    return it.updated_at;
  }

  function actionable(it) { return it.state === "pending" || it.state === "running"; }

  function row(it) {
    var tr = el("tr");
    // Each cell names its column (data-label): narrow screens show a row as a card, labels and all.
    tr.appendChild(el("td", { className: "num", "data-label": "Id" }, it.id));
    tr.appendChild(el("td", { "data-label": "Name" }, it.name));
    var st = el("td", { "data-label": "State" });
    st.appendChild(A.badge(it.state));
    tr.appendChild(st);
    tr.appendChild(el("td", { className: "num", "data-label": "Queue attempts" }, it.attempts));
    var t = el("td", { "data-label": $("items-time-col").textContent || "Time" });
    t.appendChild(A.whenEl(timeOf(it)));
    tr.appendChild(t);
    tr.appendChild(el("td", { "data-label": "Parked on" }, it.parked_key || "–"));
    tr.appendChild(el("td", { className: "err", "data-label": "Last error" }, it.last_error || "–"));
    var acts = el("td", { className: "row-actions" });
    acts.appendChild(el("button", { type: "button", "data-act": "inspect", "data-id": it.id, "aria-label": "Inspect item " + it.id }, "Inspect"));
    if (actionable(it)) {
      acts.appendChild(el("button", { type: "button", "data-act": "run-now", "data-id": it.id, "aria-label": "Run item " + it.id + " now" }, "Run now"));
      acts.appendChild(el("button", { type: "button", "data-act": "cancel", "data-id": it.id, className: "danger", "aria-label": "Cancel item " + it.id }, "Cancel…"));
    }
    tr.appendChild(acts);
    return tr;
  }

  function render(data) {
    var items = (data && data.items) || [];
    next = (data && data.next) || "";
    var body = $("items-rows");
    // Keep the focus on the same button across a refresh.
    var f = document.activeElement, keep = null;
    if (f && body.contains(f)) keep = { act: f.dataset.act, id: f.dataset.id };
    body.textContent = "";
    items.forEach(function (it) { body.appendChild(row(it)); });
    if (keep) {
      var b = body.querySelector('button[data-act="' + keep.act + '"][data-id="' + keep.id + '"]');
      if (b) b.focus();
    }
    // No header over an empty table: the sentence says there is nothing.
    $("items-empty").hidden = items.length > 0;
    $("items-table").hidden = items.length === 0;
    $("items-time-col").textContent = timeCol[state()] || "Time";
    $("items-hint").textContent = hints[state()] || "";
    $("items-page").textContent = "Page " + cursors.length;
    $("items-prev").disabled = cursors.length < 2;
    $("items-next").disabled = !next;
  }

  function load() { return A.section("items-title", A.api("GET", "api/items?" + query()).then(render)); }

  A.addPanel(load);
  A.inspectItem = inspect;

  $("items-filters").addEventListener("submit", function (ev) {
    ev.preventDefault();
    cursors = [""];
    load().catch(A.failed);
  });
  $("i-state").addEventListener("change", function () { cursors = [""]; load().catch(A.failed); });
  $("items-next").addEventListener("click", function () {
    if (!next) return;
    cursors.push(next);
    load().catch(A.failed);
  });
  $("items-prev").addEventListener("click", function () {
    if (cursors.length < 2) return;
    cursors.pop();
    load().catch(A.failed);
  });

  $("items-rows").addEventListener("click", function (ev) {
    var b = ev.target.closest("button[data-act]");
    if (!b) return;
    var id = b.dataset.id;
    if (b.dataset.act === "inspect") inspect(id);
    else if (b.dataset.act === "run-now") runNow(id);
    else if (b.dataset.act === "cancel") cancel(id);
  });

  // ---- actions ------------------------------------------------------------------------

  function after(done) {
    return function (r) {
      A.notify(done(r));
      if ($("item-dialog").open && inspecting) inspect(inspecting);
      return A.refresh();
    };
  }

  function runNow(id) {
    A.confirmAction("Run item " + id + " now?",
      "It becomes due now, and this instance's scheduler claims it at once. If the breaker it waits on still refuses calls, it is parked again; a pause of its request name or breaker key holds it back until resumed.",
      "Run now").then(function (ok) {
      if (!ok) return;
      return A.api("POST", "api/items/" + A.seg(id) + "/run-now", {}).then(after(function () {
        return "Item " + id + " is due now.";
      }));
    }).catch(A.failed);
  }

  function askCancelReason(id) {
    A.startAction();
    var d = $("item-cancel-dialog");
    $("item-cancel-title").textContent = "Cancel item " + id + "?";
    $("item-cancel-reason").value = "";
    $("item-cancel-error").textContent = "";
    d.returnValue = "";
    return new Promise(function (resolve) {
      d.addEventListener("close", function onClose() {
        d.removeEventListener("close", onClose);
        resolve(d.returnValue === "ok" ? $("item-cancel-reason").value.trim() : null);
      });
      d.showModal();
      $("item-cancel-reason").focus();
    });
  }

  $("item-cancel-form").addEventListener("submit", function (ev) {
    if (ev.submitter && ev.submitter.value === "ok" && !$("item-cancel-reason").value.trim()) {
      ev.preventDefault();
      $("item-cancel-error").textContent = "A reason is required.";
      $("item-cancel-reason").focus();
    }
  });

  function cancel(id) {
    askCancelReason(id).then(function (reason) {
      if (reason === null) return;
      return A.api("POST", "api/items/" + A.seg(id) + "/cancel", { reason: reason }).then(after(function () {
        return "Item " + id + " cancelled.";
      }));
    }).catch(A.failed);
  }

  // ---- inspect ------------------------------------------------------------------------

  function fact(dl, name, value) {
    var div = el("div");
    div.appendChild(el("dt", null, name));
    var dd = el("dd");
    if (value instanceof Node) dd.appendChild(value);
    else dd.textContent = value === undefined || value === null || value === "" ? "–" : String(value);
    div.appendChild(dd);
    dl.appendChild(div);
  }

  function inspect(id) {
    return A.api("GET", "api/items/" + A.seg(id)).then(function (data) {
      var it = data.item;
      inspecting = it.id;
      $("item-title").textContent = "Item " + it.id + " (" + it.name + ")";
      var dl = $("item-facts");
      dl.textContent = "";
      fact(dl, "State", A.badge(it.state));
      fact(dl, "Queue attempts", it.attempts);
      fact(dl, "Next run", it.next_at ? A.whenEl(it.next_at) : "–");
      fact(dl, "Parked on", it.parked_key);
      fact(dl, "Running on", it.lease_owner ? it.lease_owner + " until " + A.fmtTime(it.lease_until) : "");
      fact(dl, "Reference", it.reference);
      fact(dl, "Token", it.token);
      fact(dl, "Dedupe key", it.dedupe_key);
      fact(dl, "Debounce key", it.debounce_key);
      fact(dl, "Ordering key", it.ordering_key);
      fact(dl, "Fairness key", it.fairness_key);
      fact(dl, "Priority", it.priority);
      fact(dl, "Deadline", it.deadline ? A.fmtTime(it.deadline) : "");
      fact(dl, "Created", A.whenEl(it.created_at));
      fact(dl, "Updated", A.whenEl(it.updated_at));
      $("item-error").textContent = it.last_error || "–";
      // The last error is of the last failed attempt or deferral; a success keeps it.
      $("item-error-hint").textContent = it.state === "succeeded" && it.last_error
        ? "of the last failed attempt or deferral, before the attempt that succeeded"
        : "of the last failed attempt or deferral";
      $("item-payload").textContent = typeof it.payload === "string" ? it.payload : JSON.stringify(it.payload, null, 2);
      var list = $("item-attempts");
      list.textContent = "";
      (data.attempts || []).forEach(function (a) {
        var li = el("li");
        li.appendChild(el("strong", null, "#" + a.number + " "));
        li.appendChild(A.badge(a.outcome));
        li.appendChild(document.createTextNode(" on " + a.instance + " at "));
        li.appendChild(A.timeEl(a.started_at));
        if (a.error) li.appendChild(el("pre", { className: "code" }, a.error));
        list.appendChild(li);
      });
      $("item-attempts-empty").hidden = (data.attempts || []).length > 0;
      $("item-run-now").hidden = $("item-cancel").hidden = !actionable(it);
      var d = $("item-dialog");
      if (!d.open) {
        d.showModal();
        $("item-close").focus();
      }
    }).catch(A.failed);
  }

  $("item-close").addEventListener("click", function () { inspecting = 0; $("item-dialog").close(); });
  $("item-run-now").addEventListener("click", function () { if (inspecting) runNow(String(inspecting)); });
  $("item-cancel").addEventListener("click", function () { if (inspecting) cancel(String(inspecting)); });
})();
