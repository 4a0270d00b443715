// switchboard admin dashboard: the Pauses and Audit log panels. Loaded after app.js, whose
// helpers it reaches through window.switchboardAdmin; values reach the DOM through
// textContent and attributes only.
(function () {
  "use strict";

  var A = window.switchboardAdmin;
  if (!A) return;
  var $ = A.$, el = A.el;

  var AUDIT_PAGE = 20;
  var auditBefore = 0;     // 0: the newest page; else the id the shown page is older than
  var auditNext = null;    // the next older page's cursor, null when none
  var pausedKeys = {};     // breaker key -> pause, for the breaker cards

  // ---- pauses -------------------------------------------------------------------------

  function kindText(kind) { return kind === "breaker_key" ? "breaker key" : "request name"; }

  function renderPauses(data) {
    var list = (data && data.pauses) || [];
    $("pauses-empty").hidden = list.length > 0;
    $("pauses-table").hidden = list.length === 0;
    pausedKeys = {};
    list.forEach(function (p) { if (p.kind === "breaker_key" && !p.expired) pausedKeys[p.target] = p; });
    A.syncList($("pauses-rows"), list, function (p) { return p.kind + "\u0000" + p.target; }, createPause, updatePause);
    markBreakers();
  }

  function createPause(p) {
    var tr = el("tr");
    ["Kind", "Target", "Until", "By", "Reason"].forEach(function (l) { tr.appendChild(el("td", { "data-label": l })); });
    var td = el("td", { className: "actions" });
    var b = el("button", { type: "button", "data-act": "resume" }, "Resume");
    b.addEventListener("click", function () { resume(tr.dataset.kind, tr.dataset.target); });
    td.appendChild(b);
    tr.appendChild(td);
    return tr;
  }

  function updatePause(tr, p) {
    tr.dataset.kind = p.kind;
    tr.dataset.target = p.target;
    tr.dataset.expired = String(!!p.expired);
    var c = tr.children;
    c[0].textContent = kindText(p.kind);
    A.setBreakable(c[1], p.target);
    c[2].textContent = "";
    if (p.until) {
      c[2].appendChild(A.whenEl(p.until));
      if (p.expired) { c[2].appendChild(document.createTextNode(" ")); c[2].appendChild(A.badge("expired")); }
    } else {
      c[2].textContent = "until resumed";
    }
    c[3].textContent = "";
    c[3].appendChild(document.createTextNode(p.actor + " · "));
    c[3].appendChild(A.whenEl(p.created_at));
    c[4].textContent = p.reason || "–";
    var b = tr.querySelector("[data-act=resume]");
    b.textContent = p.expired ? "Remove" : "Resume";
    b.setAttribute("aria-label", (p.expired ? "Remove the ended pause of " : "Resume ") + kindText(p.kind) + " " + p.target);
  }

  function resume(kind, target) {
    A.confirmAction("Resume " + kindText(kind) + " " + target + "?",
      kind === "breaker_key"
        ? "Its items parked on the key run again now, on every instance."
        : "Its items are claimed again from now on, by every instance.",
      "Resume").then(function (ok) {
      if (!ok) return;
      return A.api("POST", "api/pauses/resume", { kind: kind, target: target }).then(function (r) {
        A.notify(r && r.resumed ? "Resumed " + kindText(kind) + " " + target + "." : kindText(kind) + " " + target + " was not paused any more.");
      }).then(A.refresh);
    }).catch(A.failed);
  }

  // The breaker cards of paused keys say so.
  function markBreakers() {
    var list = $("breakers");
    if (!list) return;
    Array.prototype.forEach.call(list.children, function (li) {
      var p = pausedKeys[li.dataset.key];
      var mark = li.querySelector("[data-f=paused]");
      if (p && !mark) {
        mark = A.badge("paused");
        mark.setAttribute("data-f", "paused");
        var head = li.querySelector(".breaker-head") || li;
        head.appendChild(mark);
      } else if (!p && mark) {
        mark.remove();
      }
      if (mark && p) mark.title = "Paused by " + p.actor + (p.reason ? ": " + p.reason : "") + (p.until ? " until " + A.fmtTime(p.until) : " until resumed");
    });
  }
  if ($("breakers")) new MutationObserver(markBreakers).observe($("breakers"), { childList: true });

  // ---- the pause dialog ---------------------------------------------------------------

  // untilValue turns the dialog's time into RFC 3339: "" for none, null when unreadable. A
  // time without a zone is UTC, as the dead-letter filters read it.
  function untilValue(v) {
    v = v.trim();
    if (!v) return "";
    if (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(v)) v += "Z";
    if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(v)) return null;
    var d = new Date(v);
    return isNaN(d.getTime()) ? null : d.toISOString();
  }

  $("pause-open").addEventListener("click", function () {
    A.startAction();
    $("pause-target").value = "";
    $("pause-until").value = "";
    $("pause-reason").value = "";
    $("pause-error").textContent = "";
    $("pause-dialog").returnValue = "";
    $("pause-dialog").showModal();
    $("pause-kind").focus();
  });

  // Enter in a one-line field pauses, as the dialog's main action; the form's own default
  // would be its first button, Cancel.
  ["pause-target", "pause-until"].forEach(function (id) {
    $(id).addEventListener("keydown", function (ev) {
      if (ev.key !== "Enter") return;
      ev.preventDefault();
      $("pause-ok").click();
    });
  });

  $("pause-form").addEventListener("submit", function (ev) {
    if (!ev.submitter || ev.submitter.value !== "ok") return; // cancel closes the dialog
    ev.preventDefault();
    var body = { kind: $("pause-kind").value, target: $("pause-target").value.trim(), reason: $("pause-reason").value.trim() };
    var until = untilValue($("pause-until").value);
    var problems = [];
    if (!body.target) problems.push(["pause-target", "A name or key is required."]);
    if (until === null) problems.push(["pause-until", "The end time is not an ISO 8601 time such as 2026-01-02T15:04:05Z."]);
    if (!body.reason) problems.push(["pause-reason", "A reason is required."]);
    ["pause-target", "pause-until", "pause-reason"].forEach(function (id) {
      $(id).setAttribute("aria-invalid", String(problems.some(function (p) { return p[0] === id; })));
    });
    if (problems.length) {
      $("pause-error").textContent = problems.map(function (p) { return p[1]; }).join(" ");
      $(problems[0][0]).focus();
      return;
    }
    if (until) body.until = until;
    $("pause-ok").disabled = true;
    A.api("POST", "api/pauses", body).then(function (r) {
      $("pause-dialog").close("ok");
      var p = (r && r.pause) || body;
      A.notify("Paused " + kindText(p.kind) + " " + p.target + (p.until ? " until " + A.fmtTime(p.until) : " until resumed") + ".");
      return A.refresh();
    }, function (err) {
      // The server names the bad field: show it in the dialog, which stays open.
      $("pause-error").textContent = err && err.message ? err.message : String(err);
    }).then(function () { $("pause-ok").disabled = false; });
  });

  // ---- audit log ----------------------------------------------------------------------

  function renderAudit(data) {
    var list = (data && data.entries) || [];
    auditNext = data && data.next_before ? data.next_before : null;
    $("audit-empty").hidden = list.length > 0;
    $("audit-table").hidden = list.length === 0;
    $("audit-older").disabled = auditNext === null;
    $("audit-newest").disabled = auditBefore === 0;
    A.syncList($("audit-rows"), list, function (e) { return e.id; }, function () {
      var tr = el("tr");
      ["When", "Actor", "Action", "Target", "Outcome", "Detail"].forEach(function (l) { tr.appendChild(el("td", { "data-label": l })); });
      return tr;
    }, function (tr, e) {
      var c = tr.children;
      c[0].textContent = ""; c[0].appendChild(A.whenEl(e.at));
      c[1].textContent = e.actor;
      c[2].textContent = e.action;
      c[3].textContent = "";
      c[3].appendChild(el("span", { className: "muted" }, e.target_kind.replace(/_/g, " ") + " "));
      c[3].appendChild(el("code", null, e.target));
      c[4].textContent = ""; c[4].appendChild(A.badge(e.outcome));
      c[5].textContent = e.detail || "–";
    });
  }

  function auditQuery() {
    return "api/audit?limit=" + AUDIT_PAGE + (auditBefore ? "&before=" + auditBefore : "");
  }

  $("audit-older").addEventListener("click", function () {
    if (auditNext === null) return;
    auditBefore = auditNext;
    A.api("GET", auditQuery()).then(renderAudit).catch(A.failed);
  });
  $("audit-newest").addEventListener("click", function () {
    auditBefore = 0;
    A.api("GET", auditQuery()).then(renderAudit).catch(A.failed);
  });

  A.addPanel(function () {
    return Promise.all([
      A.section("pauses-title", A.api("GET", "api/pauses").then(renderPauses)),
      A.section("audit-title", A.api("GET", auditQuery()).then(renderAudit))
    ]);
  });
})();
