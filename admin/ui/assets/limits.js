// switchboard admin dashboard: the Concurrency limits panel. Loaded after app.js, whose helpers
// it reaches through window.switchboardAdmin; values reach the DOM through textContent and
// attributes only.
(function () {
  "use strict";

  var A = window.switchboardAdmin;
  if (!A) return;
  var $ = A.$, el = A.el;

  function renderLimits(data) {
    var list = (data && data.limits) || [];
    $("limits-empty").hidden = list.length > 0;
    $("limits-table").hidden = list.length === 0;
    A.syncList($("limits-rows"), list, function (l) { return l.key; }, createLimit, updateLimit);
  }

  function createLimit() {
    var tr = el("tr");
    ["Key", "Running", "By", "Reason"].forEach(function (l) { tr.appendChild(el("td", { "data-label": l })); });
    var td = el("td", { className: "actions" });
    var change = el("button", { type: "button", "data-act": "change" }, "Change…");
    change.addEventListener("click", function () { openDialog(tr.dataset.key, Number(tr.dataset.max)); });
    var remove = el("button", { type: "button", "data-act": "remove" }, "Remove");
    remove.addEventListener("click", function () { removeLimit(tr.dataset.key); });
    td.appendChild(change);
    td.appendChild(remove);
    tr.appendChild(td);
    return tr;
  }

  function updateLimit(tr, l) {
    tr.dataset.key = l.key;
    tr.dataset.max = String(l.max);
    tr.dataset.inUse = String(l.in_use);
    var c = tr.children;
    A.setBreakable(c[0], l.key);
    c[1].textContent = l.in_use + " of " + l.max;
    if (l.in_use >= l.max) { c[1].appendChild(document.createTextNode(" ")); c[1].appendChild(A.badge("full")); }
    c[2].textContent = "";
    c[2].appendChild(document.createTextNode(l.actor + " · "));
    c[2].appendChild(A.whenEl(l.created_at));
    c[3].textContent = l.reason || "–";
    tr.querySelector("[data-act=change]").setAttribute("aria-label", "Change the limit of " + l.key);
    tr.querySelector("[data-act=remove]").setAttribute("aria-label", "Remove the limit of " + l.key);
  }

  function removeLimit(key) {
    A.confirmAction("Remove the limit of " + key + "?",
      "Its items run without a bound on how many at once, on every instance; those waiting for a slot run now.",
      "Remove").then(function (ok) {
      if (!ok) return;
      return A.api("DELETE", "api/concurrency-limits/" + A.seg(key)).then(function (r) {
        A.notify(r && r.removed ? "Removed the limit of " + key + "." : key + " was not limited any more.");
      }).then(A.refresh);
    }).catch(A.failed);
  }

  function openDialog(key, max) {
    A.startAction();
    $("limit-key").value = key || "";
    $("limit-key").readOnly = !!key;
    $("limit-max").value = max ? String(max) : "";
    $("limit-reason").value = "";
    $("limit-error").textContent = "";
    ["limit-key", "limit-max", "limit-reason"].forEach(function (id) { $(id).setAttribute("aria-invalid", "false"); });
    $("limit-dialog").returnValue = "";
    $("limit-dialog").showModal();
    (key ? $("limit-max") : $("limit-key")).focus();
  }

  $("limit-open").addEventListener("click", function () { openDialog("", 0); });

  $("limit-form").addEventListener("submit", function (ev) {
    if (!ev.submitter || ev.submitter.value !== "ok") return; // cancel closes the dialog
    ev.preventDefault();
    var key = $("limit-key").value.trim();
    var maxText = $("limit-max").value.trim();
    var max = Number(maxText);
    var reason = $("limit-reason").value.trim();
    var problems = [];
    if (!key) problems.push(["limit-key", "A breaker key is required."]);
    if (!/^\d+$/.test(maxText) || max < 1 || max > 1000000) problems.push(["limit-max", "The limit is a whole number from 1 to 1000000."]);
    if (!reason) problems.push(["limit-reason", "A reason is required."]);
    ["limit-key", "limit-max", "limit-reason"].forEach(function (id) {
      $(id).setAttribute("aria-invalid", String(problems.some(function (p) { return p[0] === id; })));
    });
    if (problems.length) {
      $("limit-error").textContent = problems.map(function (p) { return p[1]; }).join(" ");
      $(problems[0][0]).focus();
      return;
    }
    $("limit-ok").disabled = true;
    A.api("PUT", "api/concurrency-limits/" + A.seg(key), { max: max, reason: reason }).then(function (r) {
      $("limit-dialog").close("ok");
      var l = (r && r.limit) || { key: key, max: max };
      A.notify("At most " + l.max + " items of " + l.key + " run at once.");
      return A.refresh();
    }, function (err) {
      // The server names the bad field: show it in the dialog, which stays open.
      $("limit-error").textContent = err && err.message ? err.message : String(err);
    }).then(function () { $("limit-ok").disabled = false; });
  });

  A.addPanel(function () {
    return A.section("limits-title", A.api("GET", "api/concurrency-limits").then(renderLimits));
  });
})();
