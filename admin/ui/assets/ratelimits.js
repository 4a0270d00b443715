// switchboard admin dashboard: the Rate limits panel. Loaded after app.js, whose helpers it
// reaches through window.switchboardAdmin; values reach the DOM through textContent only.
(function () {
  "use strict";

  var A = window.switchboardAdmin;
  if (!A) return;
  var $ = A.$, el = A.el;

  function rateText(l) {
    return l.rate + "/s" + (l.burst > 1 ? " (burst " + l.burst + ")" : "");
  }

  function render(data) {
    var list = (data && data.rate_limits) || [];
    $("rate-limits-empty").hidden = list.length > 0;
    $("rate-limits-table").hidden = list.length === 0;
    var total = (data && data.total) || list.length;
    var more = $("rate-limits-more");
    if (!more) {
      more = el("p", { "class": "hint", id: "rate-limits-more" });
      $("rate-limits-empty").after(more);
    }
    more.hidden = total <= list.length;
    more.textContent = "showing " + list.length + " of " + total + " keys";
    var many = A.manySources(list, "limiter");
    A.syncList($("rate-limits-rows"), list, function (l) { return A.sourceKey(l.limiter, l.key); }, function () {
      var tr = el("tr");
      ["Key", "Rate", "Free now", "Waiting", "Refused", "Shared"].forEach(function (h) { tr.appendChild(el("td", { "data-label": h })); });
      return tr;
    }, function (tr, l) {
      tr.dataset.limiter = l.limiter || "default";
      tr.dataset.fallback = String(!!l.fallback);
      var c = tr.children;
      A.setSourced(c[0], l.limiter, l.key, many);
      c[1].textContent = rateText(l);
      c[2].textContent = String(l.available);
      c[3].textContent = String(l.waiting);
      c[4].textContent = String(l.refused);
      c[5].textContent = "";
      if (!l.fleet) {
        c[5].textContent = "this instance only";
        return;
      }
      c[5].appendChild(document.createTextNode("fleet of " + l.instances + " · " + l.leased + " leased "));
      if (l.fallback) c[5].appendChild(A.badge("share"));
    });
  }

  A.addPanel(function () {
    return A.section("rate-limits-title", A.api("GET", "api/rate-limits").then(render));
  });
})();
