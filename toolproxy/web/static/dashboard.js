// Adds new transforms to the table every two seconds. Every value goes in through textContent, never as HTML:
// model output and client names are untrusted.
"use strict";
(function () {
  const table = document.getElementById("records");
  if (!table) { return; }
  const body = table.querySelector("tbody");
  let latest = Number(table.dataset.latest || 0);
  const columns = ["id", "time", "model", "client", "protocol", "route", "strategy", "status", "calls", "dialects",
                   "issue_count", "overhead_ms", "upstream_ms", "first_byte_ms"];

  function cell(row, name) {
    const td = document.createElement("td");
    const value = row[name];
    if (name === "id") {
      const link = document.createElement("a");
      link.href = "/dashboard/record/" + encodeURIComponent(String(value));
      link.textContent = String(value);
      td.appendChild(link);
    } else if (Array.isArray(value)) {
      td.textContent = value.join(", ");
    } else if (typeof value === "number" && name.endsWith("_ms")) {
      td.textContent = value.toFixed(1);
    } else {
      td.textContent = value === null || value === undefined ? "" : String(value);
    }
    return td;
  }

  function add(row) {
    const tr = document.createElement("tr");
    tr.dataset.id = String(row.id);
    if (row.issue_count) { tr.className = "issues"; }
    columns.forEach(function (name) { tr.appendChild(cell(row, name)); });
    body.insertBefore(tr, body.firstChild);
  }

  function poll() {
    const query = new URLSearchParams(window.location.search);
    query.set("after_id", String(latest));
    fetch("/dashboard/records.json?" + query.toString(), {credentials: "same-origin"})
      .then(function (response) { return response.ok ? response.json() : {records: []}; })
      .then(function (data) {
        data.records.slice().reverse().forEach(function (row) {
          if (row.id > latest) { add(row); latest = row.id; }
        });
      })
      .catch(function () { /* the next poll tries again */ });
  }
  window.setInterval(poll, 2000);
}());
