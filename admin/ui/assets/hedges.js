// switchboard admin dashboard: the Hedging panel. Loaded after app.js, whose helpers it
// reaches through window.switchboardAdmin; values reach the DOM through textContent only.
(function () {
  "use strict";

  var A = window.switchboardAdmin;
  if (!A) return;
  var $ = A.$, el = A.el;

  function pct(n, of) { return of > 0 ? " (" + (100 * n / of).toFixed(1) + " %)" : ""; }

  function fmtDelay(ms) { return ms >= 1000 ? (ms / 1000).toFixed(2) + " s" : ms.toFixed(ms < 10 ? 2 : 0) + " ms"; }

  function create() {
    var tr = el("tr");
    ["Key", "Calls", "Hedges sent", "Won", "Refused by budget", "Delay"].forEach(function (l) {
      tr.appendChild(el("td", { "data-label": l }));
    });
    return tr;
  }

  var many = false; // the keys listed are of more than one hedging behavior

  function update(tr, h) {
    var c = tr.children;
    tr.dataset.hedgeKey = h.key;
    tr.dataset.behavior = h.behavior || "default";
    A.setSourced(c[0], h.behavior, h.key, many);
    c[1].textContent = String(h.calls);
    c[2].textContent = h.hedges_sent + pct(h.hedges_sent, h.calls);
    c[3].textContent = h.hedges_won + pct(h.hedges_won, h.hedges_sent);
    c[4].textContent = String(h.hedges_refused);
    c[5].textContent = fmtDelay(h.delay_ms) + (h.samples > 0 ? " · p of " + h.samples + " samples" : "");
  }

  function render(data) {
    var list = (data && data.hedges) || [];
    $("hedges-empty").hidden = list.length > 0;
    $("hedges-table").hidden = list.length === 0;
    many = A.manySources(list, "behavior");
    A.syncList($("hedges-rows"), list, function (h) { return A.sourceKey(h.behavior, h.key); }, create, update);
  }

  A.addPanel(function () {
    return A.section("hedges-title", A.api("GET", "api/hedges").then(render));
  });
})();
