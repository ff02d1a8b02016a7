(function () {
  "use strict";
  // Labelling: mark verdicts agree / disagree (or yes / no for a judge error) and download the marks as a labels
  // file (JSON lines, the format of pytest_bineval.labels), built here: no server, no request. Every value comes
  // from data attributes the template escaped; nothing here parses HTML (no innerHTML).
  var bar = document.getElementById("labelling");
  if (!bar) return;
  var rows = JSON.parse(bar.getAttribute("data-rows"));  // per row of the grid: [test, index, output digest]
  var storeKey = "bineval-labels:" + bar.getAttribute("data-report");
  var marks = {};  // verdict id ("t3-c5") -> {answer, note, fromFile}
  var counter = document.getElementById("lab-count");
  var download = document.getElementById("lab-download");
  var clear = document.getElementById("lab-clear");
  var labeler = document.getElementById("labeler");

  function button(mark, title) {
    var b = document.createElement("button");
    b.type = "button";
    b.className = "lab-b";
    b.setAttribute("data-mark", mark);
    b.setAttribute("aria-pressed", "false");
    b.title = title;
    b.textContent = mark;
    return b;
  }

  // Each verdict's controls, made from its list item (before any copy of it is made): the verdict's id, its
  // evaluation's row, the question, its dimension and the judge's answer.
  Array.prototype.forEach.call(document.querySelectorAll("li.verdict > .lab"), function (span) {
    var item = span.parentElement;
    var row = rows[parseInt(item.closest(".detail").getAttribute("data-index"), 10)];
    var answer = item.querySelector(".a");
    var judge = ["yes", "no", "error"].filter(function (a) { return answer.classList.contains(a); })[0];
    span.setAttribute("data-lab", item.id.replace(/^v-/, ""));
    span.setAttribute("data-test", row[0]);
    span.setAttribute("data-index", String(row[1]));
    span.setAttribute("data-od", row[2]);
    span.setAttribute("data-dimension", item.querySelector(".vd").textContent.replace(/^\[|\]$/g, ""));
    span.setAttribute("data-question", item.querySelector(".q").textContent);
    span.setAttribute("data-judge", judge);
    if (judge === "error") {
      span.appendChild(button("yes", "your answer: yes"));
      span.appendChild(button("no", "your answer: no"));
    } else {
      span.appendChild(button("agree", "the judge is right: label " + judge));
      span.appendChild(button("disagree", "the judge is wrong: label " + opposite(judge)));
    }
    var state = document.createElement("span");
    state.className = "lab-state";
    span.appendChild(state);
    var note = document.createElement("input");
    note.type = "text";
    note.className = "lab-note";
    note.placeholder = "note (optional)";
    note.setAttribute("aria-label", "note of this label");
    span.appendChild(note);
  });

  function spans(id) {
    return Array.prototype.filter.call(document.querySelectorAll(".lab"), function (s) {
      return s.getAttribute("data-lab") === id;
    });
  }
  function first(id) { return spans(id)[0] || null; }
  function opposite(answer) { return answer === "yes" ? "no" : "yes"; }

  function answerOf(span, mark) {
    var judge = span.getAttribute("data-judge");
    if (mark === "agree") return judge;
    if (mark === "disagree") return opposite(judge);
    return mark;
  }

  function markOf(span, answer) {
    var judge = span.getAttribute("data-judge");
    if (judge === "error") return answer;
    return answer === judge ? "agree" : "disagree";
  }

  function render(id) {
    var m = marks[id];
    spans(id).forEach(function (span) {
      var mark = m ? markOf(span, m.answer) : null;
      Array.prototype.forEach.call(span.querySelectorAll("button[data-mark]"), function (b) {
        b.setAttribute("aria-pressed", b.getAttribute("data-mark") === mark ? "true" : "false");
      });
      span.classList.toggle("marked", !!m);
      span.classList.toggle("disagrees", !!m && mark === "disagree");
      span.querySelector(".lab-state").textContent = m ? "label: " + m.answer + (m.fromFile ? " (from the labels file)" : "") : "";
      var note = span.querySelector(".lab-note");
      if (note && note !== document.activeElement) note.value = m ? (m.note || "") : "";
    });
    var grid = document.getElementById("grid");
    var cell = grid ? grid.querySelector('td[data-cell="' + id + '"]') : null;
    if (cell) cell.classList.toggle("labelled", !!m);
  }

  function own() {
    return Object.keys(marks).filter(function (id) { return !marks[id].fromFile; });
  }

  function update() {
    var ids = own();
    var count = {agree: 0, disagree: 0};
    ids.forEach(function (id) {
      var mark = markOf(first(id), marks[id].answer);
      if (mark in count) count[mark] += 1;
    });
    var errors = ids.length - count.agree - count.disagree;
    var fromFile = Object.keys(marks).length - ids.length;
    counter.textContent = ids.length + " marked (" + count.agree + " agree, " + count.disagree + " disagree" +
      (errors ? ", " + errors + " answered where the judge erred" : "") + ")" +
      (fromFile ? "; " + fromFile + " labelled in the run's labels file" : "");
    download.disabled = ids.length === 0;
    clear.disabled = ids.length === 0;
  }

  function save() {
    var kept = {};
    own().forEach(function (id) { kept[id] = {answer: marks[id].answer, note: marks[id].note || ""}; });
    try {
      window.localStorage.setItem(storeKey, JSON.stringify({labeler: labeler.value, marks: kept}));
    } catch (e) { /* no storage (a private window): marks last as long as the page */ }
  }

  function label(id) {
    var span = first(id);
    var m = marks[id];
    var line = {
      test: span.getAttribute("data-test"),
      index: parseInt(span.getAttribute("data-index"), 10) || 0,
      dimension: span.getAttribute("data-dimension"),
      question: span.getAttribute("data-question"),
      question_digest: span.getAttribute("data-qd"),
      answer: m.answer
    };
    if (span.getAttribute("data-od")) line.output_digest = span.getAttribute("data-od");
    line.judge = span.getAttribute("data-judge");
    if (labeler.value.trim()) line.labeler = labeler.value.trim();
    if (m.note && m.note.trim()) line.note = m.note.trim();
    line.created = m.created || new Date().toISOString();
    return JSON.stringify(line) + "\n";
  }

  Array.prototype.forEach.call(document.querySelectorAll(".lab[data-answer]"), function (span) {
    var id = span.getAttribute("data-lab");
    marks[id] = {answer: span.getAttribute("data-answer"), note: span.getAttribute("data-note") || "", fromFile: true};
  });
  try {
    var stored = JSON.parse(window.localStorage.getItem(storeKey) || "null");
    if (stored && stored.marks) {
      labeler.value = stored.labeler || "";
      Object.keys(stored.marks).forEach(function (id) {
        var m = stored.marks[id];
        if (first(id) && (m.answer === "yes" || m.answer === "no")) marks[id] = {answer: m.answer, note: m.note || ""};
      });
    }
  } catch (e) { /* unreadable storage: start afresh */ }
  Object.keys(marks).forEach(render);
  update();

  document.addEventListener("click", function (event) {
    var button = event.target instanceof Element ? event.target.closest(".lab button[data-mark]") : null;
    if (!button) return;
    var span = button.closest(".lab");
    var id = span.getAttribute("data-lab");
    var answer = answerOf(span, button.getAttribute("data-mark"));
    var m = marks[id];
    if (m && !m.fromFile && m.answer === answer) delete marks[id];  // pressed again: unmarked
    else marks[id] = {answer: answer, note: m ? m.note : "", created: new Date().toISOString()};
    render(id);
    update();
    save();
  });
  document.addEventListener("input", function (event) {
    var input = event.target instanceof Element ? event.target.closest(".lab .lab-note") : null;
    if (input) {
      var id = input.closest(".lab").getAttribute("data-lab");
      if (!marks[id]) return;
      marks[id].note = input.value;
      marks[id].fromFile = false;
      spans(id).forEach(function (s) { var n = s.querySelector(".lab-note"); if (n !== input) n.value = input.value; });
      update();
      save();
    } else if (event.target === labeler) {
      save();
    }
  });
  download.addEventListener("click", function () {
    // a data: link with the download attribute saves the text as a file (a labels file is a few kilobytes)
    var a = document.createElement("a");
    a.setAttribute("href", "data:application/x-ndjson;charset=utf-8," + encodeURIComponent(own().map(label).join("")));
    a.setAttribute("download", "bineval-labels.jsonl");
    document.body.appendChild(a);
    a.click();
    a.remove();
  });
  clear.addEventListener("click", function () {
    own().forEach(function (id) { delete marks[id]; render(id); });
    update();
    save();
  });
})();
