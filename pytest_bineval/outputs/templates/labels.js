(function () {
  "use strict";
  // Labelling: mark verdicts agree / disagree (or yes / no for a judge error) and download the marks as a labels
  // file (JSON lines, the format of pytest_bineval.labels), built here: no server, no request. Every value comes
  // from the page's text and data attributes (the template escaped them); nothing here parses HTML (no innerHTML).
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

  // SHA-256 of a text's UTF-8 bytes, as hex: the question's digest is pytest_bineval.labels.question_digest, the
  // first 16 hex digits of the SHA-256 of the text with its whitespace (Python's str.split) collapsed.
  function ror(v, s) { return (v >>> s) | (v << (32 - s)); }
  function sha256(text) {
    var bytes = new TextEncoder().encode(text);
    var k = [], h = [], p = 2, i, j;
    function frac(x) { return ((x - Math.floor(x)) * 4294967296) | 0; }
    for (; k.length < 64; p++) {  // the round constants and initial hash from the first primes' roots
      for (j = 2; j * j <= p && p % j; j++) { /* trial division */ }
      if (j * j > p) {
        if (h.length < 8) h.push(frac(Math.sqrt(p)));
        k.push(frac(Math.pow(p, 1 / 3)));
      }
    }
    var n = bytes.length, total = ((n + 72) >> 6) << 4, words = [];
    for (i = 0; i < total; i++) words[i] = 0;
    for (i = 0; i < n; i++) words[i >> 2] |= bytes[i] << (24 - (i % 4) * 8);
    words[n >> 2] |= 0x80 << (24 - (n % 4) * 8);
    words[total - 2] = Math.floor(n / 536870912);  // the length in bits, high and low word
    words[total - 1] = (n * 8) | 0;
    for (j = 0; j < total; j += 16) {
      var w = words.slice(j, j + 16), a = h.slice();
      for (i = 0; i < 64; i++) {
        if (i >= 16) {
          var x15 = w[i - 15], x2 = w[i - 2];
          w[i] = (w[i - 16] + (ror(x15, 7) ^ ror(x15, 18) ^ (x15 >>> 3)) + w[i - 7] +
                  (ror(x2, 17) ^ ror(x2, 19) ^ (x2 >>> 10))) | 0;
        }
        var e = a[4], f = a[0];
        var t1 = (a[7] + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & a[5]) ^ (~e & a[6])) + k[i] + w[i]) | 0;
        var t2 = ((ror(f, 2) ^ ror(f, 13) ^ ror(f, 22)) + ((f & a[1]) ^ (f & a[2]) ^ (a[1] & a[2]))) | 0;
        a = [(t1 + t2) | 0].concat(a.slice(0, 7));
        a[4] = (a[4] + t1) | 0;
      }
      for (i = 0; i < 8; i++) h[i] = (h[i] + a[i]) | 0;
    }
    return h.map(function (v) { return ("0000000" + (v >>> 0).toString(16)).slice(-8); }).join("");
  }
  var SPACE = /[\t\n\v\f\r \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/;
  function questionDigest(text) {
    return sha256(text.split(SPACE).filter(Boolean).join(" ")).slice(0, 16);
  }

  // Each verdict's controls, made in its list item (before the inspector copies one): the verdict's id, its
  // evaluation's row, the question and its digest, its dimension and the judge's answer.
  Array.prototype.forEach.call(document.querySelectorAll("ol.verdicts > li.verdict"), function (item) {
    var span = item.querySelector(":scope > .lab");
    if (span && span.hasAttribute("data-code")) {  // a check decided it, not the judge: nothing to label
      span.className = "lab-code";
      span.textContent = "decided by code";
      return;
    }
    if (!span) {
      span = document.createElement("span");
      span.className = "lab";
      item.appendChild(span);
    }
    var row = rows[parseInt(item.closest(".detail").getAttribute("data-index"), 10)];
    var answer = item.querySelector(".a");
    var judge = ["yes", "no", "error"].filter(function (a) { return answer.classList.contains(a); })[0];
    var question = item.querySelector(".q").textContent;
    span.setAttribute("data-lab", item.id.replace(/^v-/, ""));
    span.setAttribute("data-test", row[0]);
    span.setAttribute("data-index", String(row[1]));
    span.setAttribute("data-od", row[2]);
    span.setAttribute("data-dimension", item.querySelector(".vd").textContent.replace(/^\[|\]$/g, ""));
    span.setAttribute("data-question", question);
    span.setAttribute("data-qd", questionDigest(question));
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
    own().forEach(function (id) {
      kept[id] = {answer: marks[id].answer, note: marks[id].note || "", created: marks[id].created || ""};
    });
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

  // A verdict the run's labels file labels: its label, unless a mark of this page replaces it.
  function fileLabel(id) {
    var span = first(id);
    if (span && span.hasAttribute("data-answer")) {
      marks[id] = {answer: span.getAttribute("data-answer"), note: span.getAttribute("data-note") || "",
                   fromFile: true};
    }
  }
  Array.prototype.forEach.call(document.querySelectorAll("ol.verdicts .lab[data-answer]"), function (span) {
    fileLabel(span.getAttribute("data-lab"));
  });
  try {
    var stored = JSON.parse(window.localStorage.getItem(storeKey) || "null");
    if (stored && stored.marks) {
      labeler.value = stored.labeler || "";
      Object.keys(stored.marks).forEach(function (id) {
        var m = stored.marks[id];
        if (first(id) && (m.answer === "yes" || m.answer === "no")) {
          marks[id] = {answer: m.answer, note: m.note || "", created: m.created || ""};
        }
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
    if (m && !m.fromFile && m.answer === answer) {  // pressed again: unmarked (the file's label, if any, is back)
      delete marks[id];
      fileLabel(id);
    }
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
    own().forEach(function (id) { delete marks[id]; fileLabel(id); render(id); });
    update();
    save();
  });
})();
