// switchboard admin dashboard: the Schedules panel's list, each schedule's spec, next run, the
// instance running it and its last outcome, and the dialog of its runs. Loaded after app.js,
// whose helpers it reaches through window.switchboardAdmin, and before schedules.js, whose
// controls it adds to each row (addScheduleRow); values reach the DOM through textContent only.
(function () {
  "use strict";

  var A = window.switchboardAdmin;
  if (!A) return;
  var $ = A.$, el = A.el;

  function cell(label, cls) {
    var td = el("td", cls ? { className: cls } : null);
    if (label) td.setAttribute("data-label", label);
    return td;
  }

  function renderSchedules(data) {
    var list = (data && data.schedules) || [];
    $("sched-empty").hidden = list.length > 0;
    $("sched-table").hidden = list.length === 0; // no header over an empty table
    A.syncList($("sched-rows"), list, function (s) { return s.name; }, function () {
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
      A.setBreakable(c[0], s.name);
      c[1].textContent = s.spec + (s.location && s.location !== "UTC" ? " (" + s.location + ")" : "");
      c[2].textContent = ""; c[2].appendChild(A.whenEl(s.next_run));
      c[3].textContent = s.running_on || "–";
      c[4].textContent = "";
      if (s.last_outcome) {
        c[4].appendChild(A.badge(s.last_outcome));
        if (s.last_ended_at || s.last_started_at) {
          c[4].appendChild(document.createTextNode(" "));
          c[4].appendChild(A.whenEl(s.last_ended_at || s.last_started_at));
        }
        if (s.last_error) c[4].appendChild(el("div", { className: "err" }, s.last_error));
      } else {
        c[4].textContent = "not run yet";
      }
      tr.querySelector("[data-act=runs]").setAttribute("aria-label", "Runs of " + s.name);
      scheduleRowHooks.forEach(function (h) { h(tr, s); });
    });
  }

  // The hooks of other files that add to each schedule row (addScheduleRow): called with the
  // row and its schedule at every refresh.
  var scheduleRowHooks = [];

  function showRuns(name) {
    A.startAction();
    A.api("GET", "api/schedules/" + A.seg(name) + "/runs?limit=20").then(function (data) {
      $("runs-title").textContent = "Runs of " + name;
      var ol = $("runs-list");
      ol.textContent = "";
      var runs = (data && data.runs) || [];
      ol.hidden = runs.length === 0;
      $("runs-empty").hidden = runs.length > 0;
      runs.forEach(function (r) {
        var li = el("li");
        li.appendChild(A.badge(r.outcome || "running"));
        var when = el("span", { className: "when" }, " due ");
        when.appendChild(A.timeEl(r.due_at));
        when.appendChild(document.createTextNode(" · ran "));
        if (r.ended_at) A.spanEls(when, r.started_at, r.ended_at);
        else { when.appendChild(A.timeEl(r.started_at)); when.appendChild(document.createTextNode(r.outcome ? "" : ", still running")); }
        if (r.instance) when.appendChild(document.createTextNode(" · on " + r.instance));
        if (r.run_now_by) when.appendChild(document.createTextNode(" · run now by " + r.run_now_by));
        li.appendChild(when);
        if (r.error) li.appendChild(el("span", { className: "err" }, r.error));
        ol.appendChild(li);
      });
      $("runs-dialog").showModal();
      $("runs-close").focus();
    }).catch(A.failed);
  }

  A.addScheduleRow = function (hook) { scheduleRowHooks.push(hook); };
  A.addPanel(function () { return A.section("sched-title", A.api("GET", "api/schedules").then(renderSchedules)); });
})();
