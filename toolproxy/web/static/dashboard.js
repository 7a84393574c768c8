// The dashboard, live: new transforms join the table every two seconds, and the charts are drawn (uPlot, served
// from /static/vendor) and redrawn from /dashboard/charts.json. Every value goes in through textContent or the
// chart's canvas, never as HTML: model output and client names are untrusted. Without this script the page is
// the tables the server wrote.
"use strict";
(function () {
  const query = new URLSearchParams(window.location.search);

  // The table: its columns as the server declared them (web/columns.py), in the table's data-columns.
  const table = document.getElementById("records");
  if (table) {
    const body = table.querySelector("tbody");
    const columns = JSON.parse(table.dataset.columns || "[]");
    let latest = Number(table.dataset.latest || 0);

    const cell = function (row, column) {
      const td = document.createElement("td");
      const value = row[column.key];
      if (column.kind === "link") {
        const link = document.createElement("a");
        link.href = "/dashboard/record/" + encodeURIComponent(String(value));
        link.textContent = String(value);
        td.appendChild(link);
      } else if (column.kind === "list") {
        td.textContent = (value || []).join(", ");
      } else if (column.kind === "ms") {
        td.textContent = typeof value === "number" ? value.toFixed(1) : "";
      } else {
        td.textContent = value === null || value === undefined ? "" : String(value);
      }
      return td;
    };

    const add = function (row) {
      const tr = document.createElement("tr");
      tr.dataset.id = String(row.id);
      if (row.issue_count) { tr.className = "issues"; }
      columns.forEach(function (column) { tr.appendChild(cell(row, column)); });
      body.insertBefore(tr, body.firstChild);
    };

    const poll = function () {
      const filters = new URLSearchParams(query);
      filters.set("after_id", String(latest));
      fetch("/dashboard/records.json?" + filters.toString(), {credentials: "same-origin"})
        .then(function (response) { return response.ok ? response.json() : {records: []}; })
        .then(function (data) {
          data.records.slice().reverse().forEach(function (row) {
            if (row.id > latest) { add(row); latest = row.id; }
          });
        })
        .catch(function () { /* the next poll tries again */ });
    };
    window.setInterval(poll, 2000);
  }

  // The charts: one uPlot per figure, redrawn with each answer of charts.json.
  const box = document.getElementById("charts");
  if (!box || typeof uPlot !== "function") { return; }
  const COLORS = ["#2f7d32", "#1565c0", "#c62828", "#ef6c00", "#6a1b9a", "#757575", "#00838f", "#ad1457"];
  const drawn = {};

  const draw = function (figure, times, series, unit) {
    const width = Math.max(280, Math.floor(figure.clientWidth || 480));
    // A share is a percentage, and a gap where a model had no request: each value shows as a point of its own.
    const share = unit === "%";
    const options = {
      width: width, height: 220, scales: share ? {x: {time: true}, y: {range: [0, 100]}} : {x: {time: true}},
      axes: [{}, {label: unit, size: 60}],
      series: [{}].concat(series.map(function (item, index) {
        return {label: item.label, stroke: COLORS[index % COLORS.length], width: 2, spanGaps: false,
                points: share ? {show: true, size: 7, fill: COLORS[index % COLORS.length]} : {size: 5}};
      })),
    };
    const data = [times].concat(series.map(function (item) { return item.values; }));
    if (drawn[figure.id]) { drawn[figure.id].destroy(); }
    drawn[figure.id] = new uPlot(options, data, figure);
    let total = 0;
    series.forEach(function (item) {
      item.values.forEach(function (value) { if (typeof value === "number") { total += value; } });
    });
    figure.dataset.series = String(series.length);  // what was drawn, for a reader of the page (and its tests)
    figure.dataset.total = String(Math.round(total * 1000) / 1000);
  };

  const refresh = function () {
    fetch("/dashboard/charts.json?window=" + encodeURIComponent(box.dataset.window || "3600"),
          {credentials: "same-origin"})
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (data) {
        if (!data) { return; }
        box.querySelectorAll("figure[data-chart]").forEach(function (figure) {
          const series = data.charts[figure.dataset.chart];
          if (series) { draw(figure, data.times, series, figure.dataset.unit || ""); }
        });
      })
      .catch(function () { /* the next refresh tries again */ });
  };
  refresh();
  window.setInterval(refresh, 5000);
}());
