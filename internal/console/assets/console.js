// The console's script: refreshes the live pages in place, and draws the
// usage chart from the data the server put on its canvas. It reads no
// other host and evaluates nothing it is sent: refreshed pages are parsed
// as HTML documents, whose scripts never run, and their escaped content
// replaces the old.
"use strict";

(function () {
  function refresh(main) {
    var every = parseInt(main.dataset.live, 10);
    if (!every) return;
    setInterval(function () {
      if (document.hidden) return;
      fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (r) {
          if (r.redirected || !r.ok) return null; // signed out, or failing: keep what is shown
          return r.text();
        })
        .then(function (html) {
          if (!html) return;
          var doc = new DOMParser().parseFromString(html, "text/html");
          var fresh = doc.getElementById("main");
          if (fresh) main.replaceChildren.apply(main, Array.from(fresh.childNodes).map(function (n) { return document.adoptNode(n); }));
        })
        .catch(function () {});
    }, every);
  }

  function chart(canvas) {
    if (typeof Chart === "undefined") return;
    var d = JSON.parse(canvas.dataset.chart || "{}");
    if (!d.labels || d.labels.length === 0) { canvas.parentNode.hidden = true; return; }
    var colors = ["#1f5fbf", "#7aa7e8", "#c2410c"];
    new Chart(canvas, {
      type: "bar",
      data: {
        labels: d.labels,
        datasets: d.series.map(function (s, i) {
          return s.axis === "usd"
            ? { type: "line", label: s.label, data: s.data, yAxisID: "usd", borderColor: colors[i], backgroundColor: colors[i] }
            : { label: s.label, data: s.data, yAxisID: "tokens", stack: "tokens", backgroundColor: colors[i] };
        })
      },
      options: {
        responsive: true, maintainAspectRatio: false, animation: false,
        scales: {
          tokens: { position: "left", stacked: true, beginAtZero: true, title: { display: true, text: "tokens" } },
          usd: { position: "right", beginAtZero: true, grid: { drawOnChartArea: false }, title: { display: true, text: "USD" } },
          x: { stacked: true }
        }
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var main = document.getElementById("main");
    if (main && main.dataset.live) refresh(main);
    var c = document.getElementById("usage-chart");
    if (c) chart(c);
  });
})();
