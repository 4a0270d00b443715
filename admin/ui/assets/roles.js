// Roles: the dashboard disables every action the signed-in principal's role may not use, and
// says why in the button's title. The server refuses them anyway (403 naming the role); this
// spares a viewer buttons that can only fail.
//
// app.js sets <body data-role="viewer|operator|admin"> when a session starts and removes it
// when it ends. Every button is an action that needs the operator role unless it is listed
// below: as reading (any role) or as changing the configuration (admin). So a button added
// without a line here is disabled for a viewer, never left enabled by mistake. A mutation
// observer applies the rule to every button the panels render or enable again.
(function () {
  "use strict";

  var RANK = { viewer: 0, operator: 1, admin: 2 };

  // Buttons that only read, open a view or close one: any role.
  var READ = [
    "#pause", "#logout", "#login-submit", "#find-submit", "#find-close", "form.filters button", "#f-clear",
    "#bulk-clear", "#bulk-results-close", "#dl-prev", "#dl-next", "#items-prev", "#items-next",
    "#audit-newest", "#audit-older", "[data-act=inspect]", "[data-act=runs]", "button.more", "button.close",
    "#pause-cancel", "#limit-cancel", "#confirm-cancel", "#discard-cancel", "#sched-add-cancel", "#ba-cancel", "#item-cancel-back"
  ].join(", ");

  // Buttons that change the configuration: schedules added or removed, concurrency limits.
  var ADMIN = [
    "#sched-add", "#sched-add-ok", "#sched-rows [data-act=remove]",
    "#limit-open", "#limit-ok", "#limits-rows [data-act=change]", "#limits-rows [data-act=remove]"
  ].join(", ");

  function need(b) {
    if (b.matches(READ)) return "viewer";
    return b.matches(ADMIN) ? "admin" : "operator";
  }

  function apply() {
    var role = document.body.dataset.role;
    if (!role) return; // signed out: the app is hidden; the next session's role decides
    var rank = RANK[role] === undefined ? -1 : RANK[role];
    Array.prototype.forEach.call(document.querySelectorAll("button"), function (b) {
      var n = need(b);
      if (rank >= RANK[n]) {
        // Held by a lower role of an earlier session in this page: given back. A panel's own
        // rule (a trip of an open breaker) is applied again at its next render.
        if (b.dataset.needs) {
          delete b.dataset.needs;
          b.removeAttribute("title");
          b.disabled = false;
        }
        return;
      }
      // Set only what differs: the observer sees its own changes, and must come to rest.
      if (!b.disabled) b.disabled = true;
      var why = "Needs the " + n + " role; you are " + (role === "operator" || role === "admin" ? "an " : "a ") + role;
      if (b.title !== why) b.title = why;
      if (b.dataset.needs !== n) b.dataset.needs = n;
    });
  }

  new MutationObserver(apply).observe(document.documentElement, {
    subtree: true, childList: true, attributes: true, attributeFilter: ["disabled", "data-role"]
  });
})();
