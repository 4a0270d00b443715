// Schedule controls of the dashboard: a paused badge and Pause/Resume, Run now and Remove
// buttons on each schedule row, and the "Add schedule…" dialog. The routes are those of
// admin.ScheduleControls; a queue without them answers 404, and the controls hide.
(function () {
  "use strict";
  var A = window.switchboardAdmin;
  if (!A) return;
  var $ = A.$, el = A.el;

  // supported turns false when a control's route answers 404 naming ScheduleControls: the
  // queue shows its schedules but cannot change them.
  var supported = true;

  var addButton = el("button", { type: "button", id: "sched-add" }, "Add schedule…");
  $("sched-title").insertAdjacentElement("afterend", addButton);

  function unsupported(err) {
    if (err instanceof A.ApiError && err.status === 404 && /ScheduleControls/.test(err.message)) {
      supported = false;
      addButton.hidden = true;
      A.notify("This queue cannot change schedules: " + err.message, true);
      return true;
    }
    return false;
  }

  function act(path, body, done) {
    A.startAction();
    return A.api("POST", path, body).then(function () {
      A.notify(done);
      return A.refresh();
    }).catch(function (err) { if (!unsupported(err)) A.failed(err); });
  }

  function button(act, label, cls) {
    var attrs = { type: "button", "data-act": act };
    if (cls) attrs.className = cls;
    return el("button", attrs, label);
  }

  // Each row: its controls are made once, then set from the schedule at every refresh.
  A.addScheduleRow(function (tr, s) {
    var cells = tr.children, acts = cells[cells.length - 1];
    if (!acts.querySelector("[data-act=pause]")) {
      var pause = button("pause", "Pause"), resume = button("resume", "Resume"),
        now = button("run-now", "Run now"), remove = button("remove", "Remove…", "danger");
      pause.addEventListener("click", function () {
        var name = tr.dataset.key;
        A.confirmAction("Pause " + name + "?", "No instance starts its due runs until it is resumed; a run already going finishes.", "Pause")
          .then(function (ok) { if (ok) act("api/schedules/" + A.seg(name) + "/pause", {}, "Paused " + name + "."); });
      });
      resume.addEventListener("click", function () {
        var name = tr.dataset.key;
        act("api/schedules/" + A.seg(name) + "/resume", {}, "Resumed " + name + ": its next run is the next its spec names.");
      });
      now.addEventListener("click", function () {
        var name = tr.dataset.key;
        act("api/schedules/" + A.seg(name) + "/run-now", {}, "Asked for a run of " + name + " now: one instance starts it.");
      });
      remove.addEventListener("click", function () {
        var name = tr.dataset.key;
        A.confirmAction("Remove " + name + "?", "No instance runs it any more; its run log stays.", "Remove").then(function (ok) {
          if (!ok) return;
          A.startAction();
          A.api("DELETE", "api/schedules/" + A.seg(name), {}).then(function () {
            A.notify("Removed " + name + ".");
            return A.refresh();
          }).catch(function (err) { if (!unsupported(err)) A.failed(err); });
        });
      });
      [pause, resume, now, remove].forEach(function (b) { acts.appendChild(b); });
    }
    var removed = !!s.removed_at;
    // The name cell is rewritten at every refresh: the badges follow the name.
    if (s.paused) {
      cells[0].appendChild(document.createTextNode(" "));
      var b = A.badge("paused");
      b.title = "Paused by " + (s.paused_by || "?") + (s.paused_until ? " until " + s.paused_until : " until resumed");
      cells[0].appendChild(b);
    }
    if (removed) {
      cells[0].appendChild(document.createTextNode(" "));
      cells[0].appendChild(A.badge("removed"));
    }
    if (s.run_now_at) {
      cells[0].appendChild(document.createTextNode(" "));
      var p = A.badge("run_now_pending");
      p.textContent = "run now pending";
      cells[0].appendChild(p);
    }
    acts.querySelector("[data-act=pause]").hidden = !supported || removed || s.paused;
    acts.querySelector("[data-act=resume]").hidden = !supported || removed || !s.paused;
    acts.querySelector("[data-act=run-now]").hidden = !supported || removed;
    // A schedule declared in code is removed by deleting its Schedule call, not here.
    acts.querySelector("[data-act=remove]").hidden = !supported || removed || s.declared_in_code;
    acts.querySelector("[data-act=run-now]").disabled = !!s.run_now_at;
    ["pause", "resume", "run-now", "remove"].forEach(function (k) {
      acts.querySelector("[data-act=" + k + "]").setAttribute("aria-label",
        { pause: "Pause ", resume: "Resume ", "run-now": "Run now ", remove: "Remove " }[k] + s.name);
    });
  });

  // ---- Add schedule… -----------------------------------------------------------------

  var dialog = $("sched-add-dialog");

  addButton.addEventListener("click", function () {
    A.startAction();
    $("sched-add-error").textContent = "";
    dialog.returnValue = "";
    dialog.showModal();
    $("sched-add-name").focus();
  });

  $("sched-add-form").addEventListener("submit", function (ev) {
    if (!ev.submitter || ev.submitter.value !== "ok") return; // Cancel closes the dialog
    ev.preventDefault();
    var payload;
    try {
      payload = JSON.parse($("sched-add-payload").value.trim() || "{}");
    } catch (e) {
      $("sched-add-error").textContent = "Payload is not JSON: " + e.message;
      $("sched-add-payload").focus();
      return;
    }
    var body = {
      name: $("sched-add-name").value.trim(), spec: $("sched-add-spec").value.trim(),
      location: $("sched-add-location").value.trim(), request: $("sched-add-request").value.trim(), payload: payload
    };
    $("sched-add-ok").disabled = true;
    A.api("POST", "api/schedules", body).then(function () {
      dialog.close("ok");
      A.notify("Added schedule " + body.name + ".");
      return A.refresh();
    }, function (err) {
      if (unsupported(err)) { dialog.close(); return; }
      // The dialog stays open with the server's message, which names the wrong field.
      $("sched-add-error").textContent = err && err.message ? err.message : String(err);
    }).then(function () { $("sched-add-ok").disabled = false; });
  });
})();
