// The Retry budgets panel: per key of each retry budget (named when there are several), the calls counted over its window, the
// retries it allowed and refused, and the retries the window allows. It reaches the
// dashboard's helpers through window.switchboardAdmin.
(function () {
  "use strict";
  var A = window.switchboardAdmin;
  var $ = A.$, el = A.el;

  function fmtAllowed(n) { return n >= 100 || n === Math.floor(n) ? String(Math.floor(n)) : n.toFixed(1); }

  function row(b, many) {
    var tr = el("tr", { "data-key": A.sourceKey(b.budget, b.key), "data-budget": b.budget || "default" });
    // Each cell names its column (data-label): narrow screens show a row as a card, labels and all.
    var key = el("td", { className: "key", "data-label": "Key" });
    A.setSourced(key, b.budget, b.key, many);
    tr.appendChild(key);
    tr.appendChild(el("td", { className: "num", "data-label": "Calls" }, b.calls));
    tr.appendChild(el("td", { className: "num", "data-label": "Retries" }, b.retries));
    tr.appendChild(el("td", { className: "num", "data-label": "Refused", "data-f": "refused" }, b.refused));
    tr.appendChild(el("td", { className: "num", "data-label": "Allowed" }, fmtAllowed(b.allowed)));
    var use = el("td", { "data-label": "Use" });
    var share = b.allowed > 0 ? Math.min(1, b.retries / b.allowed) : 0;
    var m = el("meter", { min: "0", max: "1", low: "0.5", high: "0.9", optimum: "0", value: String(share),
      "aria-label": "Retries used of the allowance for " + b.key });
    use.appendChild(m);
    use.appendChild(el("span", { className: "use" }, " " + Math.round(share * 100) + " %"));
    if (b.refused > 0) {
      use.appendChild(document.createTextNode(" "));
      use.appendChild(A.badge("exceeded"));
    }
    tr.appendChild(use);
    return tr;
  }

  function render(data) {
    var budgets = (data && data.budgets) || [];
    var body = $("budgets-rows");
    body.textContent = "";
    var many = A.manySources(budgets, "budget");
    budgets.forEach(function (b) { body.appendChild(row(b, many)); });
    // No header over an empty table: the sentence says there is nothing.
    $("budgets-empty").hidden = budgets.length > 0;
    $("budgets-table").hidden = budgets.length === 0;
  }

  A.addPanel(function () { return A.section("budgets-title", A.api("GET", "api/retry-budgets").then(render)); });
})();
