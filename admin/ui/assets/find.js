// switchboard admin dashboard: Find. The search box of the top bar finds the items whose
// reference (the application's own id, durable.WithReference), token or dedupe key is the text,
// and their dead letters (GET api/find), in a panel under Now; each opens in its dialog. Loaded
// after app.js and items.js, whose helpers it reaches through window.switchboardAdmin; values
// reach the DOM through textContent only.
(function () {
  "use strict";

  var A = window.switchboardAdmin;
  if (!A) return;
  var $ = A.$, el = A.el;

  function cell(label, value) {
    var td = el("td", { "data-label": label });
    if (value instanceof Node) td.appendChild(value);
    else td.textContent = value === undefined || value === null || value === "" ? "–" : String(value);
    return td;
  }

  function render(text, data) {
    var items = (data && data.items) || [], letters = (data && data.dead_letters) || [];
    $("find-title").textContent = "Found for “" + text + "”: " + items.length + (items.length === 1 ? " item, " : " items, ") +
      letters.length + (letters.length === 1 ? " dead letter" : " dead letters");
    var rows = $("find-item-rows");
    rows.textContent = "";
    items.forEach(function (it) {
      var tr = el("tr", { "data-key": String(it.id) });
      tr.appendChild(cell("Id", it.id));
      tr.appendChild(cell("Name", it.name));
      tr.appendChild(cell("State", A.badge(it.state)));
      tr.appendChild(cell("Reference", it.reference));
      tr.appendChild(cell("Queue attempts", it.attempts));
      tr.appendChild(cell("Created", A.whenEl(it.created_at)));
      var acts = el("td", { className: "row-actions" });
      var b = el("button", { type: "button", "data-act": "inspect", "aria-label": "Inspect item " + it.id }, "Inspect");
      b.addEventListener("click", function () { if (A.inspectItem) A.inspectItem(it.id); });
      acts.appendChild(b);
      tr.appendChild(acts);
      rows.appendChild(tr);
    });
    var ul = $("find-letter-rows");
    ul.textContent = "";
    letters.forEach(function (d) {
      var li = el("li", { "data-key": String(d.id) });
      li.appendChild(A.badge(d.status));
      li.appendChild(document.createTextNode(" Dead letter " + d.id + " · " + d.source + (d.guard_key || d.key ? " · " + (d.guard_key || d.key) : "") + " · "));
      li.appendChild(A.whenEl(d.created_at));
      li.appendChild(document.createTextNode(" "));
      var b = el("button", { type: "button", "data-act": "inspect", "aria-label": "Inspect dead letter " + d.id }, "Inspect");
      b.addEventListener("click", function () { A.inspectLetter(d.id); });
      li.appendChild(b);
      ul.appendChild(li);
    });
    $("find-items-title").hidden = $("find-items").hidden = items.length === 0;
    $("find-letters-title").hidden = ul.hidden = letters.length === 0;
    $("find-empty").hidden = items.length + letters.length > 0;
    var panel = $("find-panel");
    panel.hidden = false;
    panel.scrollIntoView({ block: "start" });
    panel.focus();
  }

  $("find-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var text = $("find-q").value.trim();
    if (!text) {
      A.notify("Type a reference, a token or a dedupe key to find.", true);
      return;
    }
    A.api("GET", "api/find?q=" + encodeURIComponent(text)).then(function (data) { render(text, data); }).catch(A.failed);
  });

  $("find-close").addEventListener("click", function () {
    $("find-panel").hidden = true;
    $("find-q").focus();
  });
})();
