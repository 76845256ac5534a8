/* ghost report: draws the charts and the decision table from the JSON embedded in the page.
 *
 * Every text from the run reaches the page through textContent (or as an option's
 * text), never as markup. The table holds every decision as columns (dictionary-
 * encoded texts, numbers) and draws one page of rows at a time, so a run of a
 * million decisions costs a few milliseconds per search, sort or page turn.
 */
(function () {
  "use strict";

  var PAGE_SIZE = 50;
  var TEXT_KEYS = ["verdict", "agent", "verb", "resource", "rule", "chain"];
  var VERDICTS = ["allow", "narrow", "scrub", "pending", "deny"];
  var CHAINS = ["verified", "broken", "assessment_missing", "no_assessment_claimed"];
  var COLUMNS = [
    { key: "index", label: "#", kind: "index" },
    { key: "time", label: "time (UTC)", kind: "number" },
    { key: "verdict", label: "verdict", kind: "text" },
    { key: "agent", label: "agent", kind: "text" },
    { key: "verb", label: "verb", kind: "text" },
    { key: "resource", label: "resource", kind: "text" },
    { key: "rule", label: "rule", kind: "text" },
    { key: "latency", label: "latency", kind: "number" },
    { key: "chain", label: "chain status", kind: "text" }
  ];

  function readJson(id) {
    return JSON.parse(document.getElementById(id).textContent);
  }

  function byId(id) {
    return document.getElementById(id);
  }

  // --- charts ------------------------------------------------------------------------------

  function drawCharts() {
    var config = { displaylogo: false, responsive: true };
    return Promise.all(readJson("ghost-charts").map(function (chart) {
      var element = byId(chart.id);
      return Plotly.newPlot(element, chart.figure.data, chart.figure.layout, config)
        .then(function () { element.setAttribute("data-drawn", "true"); });
    }));
  }

  // --- the table's data --------------------------------------------------------------------

  var raw = readJson("ghost-decisions");
  var count = raw.count;
  var firstMs = raw.first_ms;
  var firstRestNs = raw.first_rest_ns;
  var offsetNs = Float64Array.from(raw.offset_ns);
  var latencyNs = Float64Array.from(raw.latency_ns);
  var text = {};
  TEXT_KEYS.forEach(function (key) {
    var column = raw.columns[key];
    text[key] = { values: column.values, codes: Uint32Array.from(column.codes), lower: null };
  });
  raw = null;  // the parsed arrays are copied into typed arrays: let the collector have them

  function identity() {
    var rows = new Uint32Array(count);
    for (var i = 0; i < count; i++) rows[i] = i;
    return rows;
  }

  // Codes are ranks of sorted texts, so sorting by a text column is a counting sort: linear,
  // stable (ties stay in stream order).
  function sortByCode(codes, size, descending) {
    var starts = new Float64Array(size);
    for (var i = 0; i < count; i++) starts[codes[i]] += 1;
    var position = 0;
    for (var k = 0; k < size; k++) {
      var code = descending ? size - 1 - k : k;
      var n = starts[code];
      starts[code] = position;
      position += n;
    }
    var rows = new Uint32Array(count);
    for (var r = 0; r < count; r++) rows[starts[codes[r]]++] = r;
    return rows;
  }

  function sortRows(key, descending) {
    var column = COLUMNS.filter(function (c) { return c.key === key; })[0];
    if (column.kind === "text") {
      return sortByCode(text[key].codes, text[key].values.length, descending);
    }
    var rows = identity();
    if (column.kind === "index") return descending ? rows.reverse() : rows;
    var keys = key === "time" ? offsetNs : latencyNs;
    rows.sort(descending
      ? function (a, b) { return keys[b] - keys[a] || a - b; }
      : function (a, b) { return keys[a] - keys[b] || a - b; });
    return rows;
  }

  function entryMatches(key, query) {
    var column = text[key];
    if (column.lower === null) {
      column.lower = column.values.map(function (v) { return v === null ? null : v.toLowerCase(); });
    }
    var matches = new Uint8Array(column.values.length);
    var any = false;
    for (var j = 0; j < matches.length; j++) {
      var value = column.lower[j];
      if (value !== null && value.indexOf(query) !== -1) { matches[j] = 1; any = true; }
    }
    return any ? { codes: column.codes, matches: matches } : null;
  }

  // --- state and drawing -------------------------------------------------------------------

  var state = { key: "index", descending: false, query: "", verdict: -1, chain: -1, page: 0 };
  var order = identity();
  var view = order;

  function filter() {
    var query = state.query.toLowerCase();
    if (query === "" && state.verdict < 0 && state.chain < 0) { view = order; return; }
    var searched = [];
    if (query !== "") {
      TEXT_KEYS.forEach(function (key) {
        var found = entryMatches(key, query);
        if (found !== null) searched.push(found);
      });
    }
    var verdictCodes = text.verdict.codes, chainCodes = text.chain.codes;
    var out = new Uint32Array(order.length);
    var kept = 0;
    for (var i = 0; i < order.length; i++) {
      var r = order[i];
      if (state.verdict >= 0 && verdictCodes[r] !== state.verdict) continue;
      if (state.chain >= 0 && chainCodes[r] !== state.chain) continue;
      if (query !== "") {
        var hit = false;
        for (var s = 0; s < searched.length && !hit; s++) {
          hit = searched[s].matches[searched[s].codes[r]] === 1;
        }
        if (!hit) continue;
      }
      out[kept++] = r;
    }
    view = out.subarray(0, kept);
  }

  function pad(number, width) {
    var digits = String(number);
    while (digits.length < width) digits = "0" + digits;
    return digits;
  }

  function timeText(row) {
    var ns = firstRestNs + offsetNs[row];
    var wholeMs = Math.floor(ns / 1e6);
    var date = new Date(firstMs + wholeMs);
    if (isNaN(date.getTime())) return (firstMs + wholeMs) + " ms since the epoch";
    var iso = date.toISOString();
    return iso.slice(0, 10) + " " + iso.slice(11, 23) + pad(Math.round(ns - wholeMs * 1e6), 6);
  }

  function durationText(ns) {
    var scales = [["s", 1e9], ["ms", 1e6], ["\u00b5s", 1e3]];
    for (var i = 0; i < scales.length; i++) {
      if (Math.abs(ns) >= scales[i][1]) {
        return String(Number((ns / scales[i][1]).toPrecision(3))) + " " + scales[i][0];
      }
    }
    return String(ns) + " ns";
  }

  function cell(column, row) {
    var td = document.createElement("td");
    if (column.kind === "index") {
      td.textContent = String(row + 1);
    } else if (column.key === "time") {
      td.textContent = timeText(row);
    } else if (column.key === "latency") {
      td.textContent = durationText(latencyNs[row]);
      td.title = String(latencyNs[row]) + " ns";
    } else {
      var value = text[column.key].values[text[column.key].codes[row]];
      if (value === null) {
        td.textContent = "\u2014";
        td.className = "unknown";
      } else {
        td.textContent = value;
        if (column.key === "verdict" && VERDICTS.indexOf(value) !== -1) td.className = "verdict v-" + value;
        if (column.key === "chain" && CHAINS.indexOf(value) !== -1) td.className = "chain c-" + value;
      }
    }
    td.setAttribute("data-column", column.key);
    return td;
  }

  var tbody = document.querySelector("#decision-table tbody");
  var headRow = document.querySelector("#decision-table thead tr");

  function pageCount() {
    return Math.max(1, Math.ceil(view.length / PAGE_SIZE));
  }

  function draw() {
    var pages = pageCount();
    state.page = Math.min(Math.max(state.page, 0), pages - 1);
    var start = state.page * PAGE_SIZE;
    var end = Math.min(start + PAGE_SIZE, view.length);
    var fragment = document.createDocumentFragment();
    for (var i = start; i < end; i++) {
      var tr = document.createElement("tr");
      for (var c = 0; c < COLUMNS.length; c++) tr.appendChild(cell(COLUMNS[c], view[i]));
      fragment.appendChild(tr);
    }
    tbody.textContent = "";
    tbody.appendChild(fragment);
    var shown = count === 0 ? "no decisions in this run"
      : view.length === 0 ? "no decision matches"
      : "decisions " + (start + 1).toLocaleString("en") + "\u2013" + end.toLocaleString("en")
        + " of " + view.length.toLocaleString("en") + " shown";
    byId("table-status").textContent = shown
      + (view.length === count ? "" : " (" + count.toLocaleString("en") + " in the run)");
    byId("page-number").value = String(state.page + 1);
    byId("page-number").max = String(pages);
    byId("page-count").textContent = pages.toLocaleString("en");
    byId("page-first").disabled = byId("page-prev").disabled = state.page === 0;
    byId("page-next").disabled = byId("page-last").disabled = state.page >= pages - 1;
    Array.prototype.forEach.call(headRow.children, function (th) {
      var key = th.getAttribute("data-column");
      if (key === state.key) th.setAttribute("aria-sort", state.descending ? "descending" : "ascending");
      else th.removeAttribute("aria-sort");
    });
  }

  function sortBy(key) {
    state.descending = state.key === key ? !state.descending : false;
    state.key = key;
    order = sortRows(key, state.descending);
    filter();
    state.page = 0;
    draw();
  }

  function buildControls() {
    COLUMNS.forEach(function (column) {
      var th = document.createElement("th");
      th.scope = "col";
      th.setAttribute("data-column", column.key);
      var button = document.createElement("button");
      button.type = "button";
      button.textContent = column.label;
      button.addEventListener("click", function () { sortBy(column.key); });
      th.appendChild(button);
      headRow.appendChild(th);
    });
    [["filter-verdict", "verdict"], ["filter-chain", "chain"]].forEach(function (pair) {
      var select = byId(pair[0]);
      text[pair[1]].values.forEach(function (value, code) {
        var option = document.createElement("option");
        option.value = String(code);
        option.textContent = value === null ? "\u2014" : value;
        select.appendChild(option);
      });
      select.addEventListener("change", function () {
        state[pair[1]] = select.value === "" ? -1 : Number(select.value);
        filter();
        state.page = 0;
        draw();
      });
    });
    var pending = null;
    byId("search").addEventListener("input", function (event) {
      if (pending !== null) clearTimeout(pending);
      pending = setTimeout(function () {
        pending = null;
        state.query = event.target.value;
        filter();
        state.page = 0;
        draw();
      }, 150);
    });
    var turns = {
      "page-first": function () { return 0; },
      "page-prev": function () { return state.page - 1; },
      "page-next": function () { return state.page + 1; },
      "page-last": function () { return pageCount() - 1; }
    };
    Object.keys(turns).forEach(function (id) {
      byId(id).addEventListener("click", function () { state.page = turns[id](); draw(); });
    });
    byId("page-number").addEventListener("change", function (event) {
      var wanted = parseInt(event.target.value, 10);
      if (!isNaN(wanted)) state.page = wanted - 1;
      draw();
    });
  }

  buildControls();
  draw();
  drawCharts().then(
    function () { document.body.setAttribute("data-ready", "true"); },
    function (error) { console.error("ghost report: a chart could not be drawn", error); }
  );
})();
