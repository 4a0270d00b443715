// switchboard admin dashboard: the Busiest keys panel. Loaded after app.js, whose helpers it
// reaches through window.switchboardAdmin; values reach the DOM through textContent only.
(function () {
  "use strict";

  var A = window.switchboardAdmin;
  if (!A) return;
  var $ = A.$, el = A.el;

  function percent(share) {
    var p = share * 100;
    return (p >= 10 || p === 0 ? Math.round(p) : p.toFixed(1)) + " %";
  }

  function windowText(seconds) {
    if (seconds >= 90) return Math.round(seconds / 60) + " minutes";
    return Math.max(1, Math.round(seconds)) + " seconds";
  }

  function render(data) {
    var list = (data && data.keys) || [];
    $("busiest-empty").hidden = list.length > 0;
    $("busiest-table").hidden = list.length === 0;
    $("busiest-window").textContent = data && data.window_seconds > 0 ? windowText(data.window_seconds) : "5 minutes";
    var others = $("busiest-others");
    others.hidden = !(data && data.others > 0);
    if (data && data.others > 0) {
      others.textContent = data.others + " of " + data.total + " claims (" + percent(data.others / data.total) + ") were of other keys.";
    }
    A.syncList($("busiest-rows"), list, function (k) { return k.key; }, function () {
      var tr = el("tr");
      ["Key", "Claims", "Share"].forEach(function (h) { tr.appendChild(el("td", { "data-label": h })); });
      var m = el("meter", { min: "0", max: "1" });
      tr.children[2].appendChild(m);
      tr.children[2].appendChild(el("span", { "class": "share-text" }));
      return tr;
    }, function (tr, k) {
      tr.dataset.key = k.key;
      var c = tr.children;
      A.setBreakable(c[0], k.key);
      c[1].textContent = String(k.claims);
      var m = c[2].querySelector("meter");
      m.value = k.share;
      m.setAttribute("aria-label", k.key + ": " + percent(k.share) + " of the claims");
      c[2].querySelector(".share-text").textContent = " " + percent(k.share);
    });
  }

  A.addPanel(function () {
    return A.section("busiest-title", A.api("GET", "api/busiest-keys?limit=10").then(render));
  });
})();
