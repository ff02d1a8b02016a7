(function () {
  "use strict";
  // Interactivity only: every text is already in the page (escaped by the template). Nothing here
  // parses HTML (no innerHTML): the inspector is a clone of a verdict's DOM node.
  var root = document.documentElement;
  root.classList.add("js");
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr.test"));
  var shown = document.getElementById("shown");
  var grid = document.getElementById("grid");

  function detail(index) {
    return document.getElementById("detail-" + index);
  }

  function clearFocus() {
    Array.prototype.forEach.call(document.querySelectorAll(".verdict.focus, td.cell.active"), function (el) {
      el.classList.remove("focus");
      el.classList.remove("active");
    });
  }

  function inspect(panel, cellId) {
    var box = panel.querySelector(".inspector");
    var item = document.getElementById("v-" + cellId);
    if (!item) return;
    item.classList.add("focus");
    var copy = item.cloneNode(true);
    copy.removeAttribute("id");
    copy.classList.remove("focus");
    var list = document.createElement("ul");
    list.appendChild(copy);
    box.replaceChildren(list);
    var cell = grid.querySelector('td[data-cell="' + cellId + '"]');
    if (cell) cell.classList.add("active");
  }

  function select(row, cellId) {
    rows.forEach(function (r) { r.classList.toggle("selected", r === row); });
    Array.prototype.forEach.call(document.querySelectorAll(".detail.shown"), function (el) {
      el.classList.remove("shown");
    });
    clearFocus();
    var panel = detail(row.getAttribute("data-index"));
    if (!panel) return;
    panel.classList.add("shown");
    if (cellId) inspect(panel, cellId);
  }

  function matches(row, mode) {
    if (mode === "failing") return row.getAttribute("data-outcome") !== "passed";
    if (mode === "regressed") return row.getAttribute("data-regressed") === "1";
    return true;
  }

  function applyFilter() {
    var checked = document.querySelector('input[name="show"]:checked');
    var mode = checked ? checked.value : "all";
    var visible = 0;
    rows.forEach(function (r) {
      r.hidden = !matches(r, mode);
      if (!r.hidden) visible += 1;
    });
    if (shown) shown.textContent = "showing " + visible + " of " + rows.length;
    var current = document.querySelector("tr.test.selected");
    if (!current || current.hidden) {
      var first = rows.filter(function (r) { return !r.hidden; })[0];
      if (first) select(first, null);
    }
  }

  // The hover text of a cell (question, answer, explanation) is made from its verdict in the detail list
  // when the pointer first reaches it: the page does not carry every text twice.
  function hoverText(cellId) {
    var item = document.getElementById("v-" + cellId);
    if (!item) return "";
    var parts = [];
    ["vd", "q", "a", "x", "was"].forEach(function (name) {
      var el = item.querySelector("." + name);
      if (el) parts.push((name === "a" ? "answer: " : "") + el.textContent);
    });
    return parts.length > 1 ? parts[0] + " " + parts.slice(1).join("\n") : parts.join("");
  }

  if (grid) {
    grid.addEventListener("mouseover", function (event) {
      var cell = event.target instanceof Element ? event.target.closest("td.cell") : null;
      if (cell && !cell.hasAttribute("title")) cell.setAttribute("title", hoverText(cell.getAttribute("data-cell")));
    });
    grid.addEventListener("click", function (event) {
      var target = event.target instanceof Element ? event.target : null;
      var row = target ? target.closest("tr.test") : null;
      if (!row) return;
      var cell = target.closest("td.cell");
      select(row, cell ? cell.getAttribute("data-cell") : null);
    });
    grid.addEventListener("keydown", function (event) {
      var row = event.target instanceof Element ? event.target.closest("tr.test") : null;
      if (!row) return;
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        select(row, null);
      } else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        var visible = rows.filter(function (r) { return !r.hidden; });
        var next = visible[visible.indexOf(row) + (event.key === "ArrowDown" ? 1 : -1)];
        if (next) { next.focus(); select(next, null); }
      }
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll('input[name="show"]'), function (input) {
    input.addEventListener("change", applyFilter);
  });

  // Start on the first test that did not pass (the one a reviewer opens the report for).
  var start = rows.filter(function (r) { return r.getAttribute("data-outcome") !== "passed"; })[0] || rows[0];
  applyFilter();
  if (start) select(start, null);
})();
