// Steplab reward-model charts (Chart.js, served locally): the loss curve on a job page and the
// PRM-vs-ORM dashboard. Data comes from <script type="application/json"> blocks (CSP: no inline code).
(function () {
  "use strict";
  const COLORS = { prm: "#2f6fdb", orm: "#c0392b", majority: "#7f8c8d", pass: "#27ae60" };
  const LABELS = { prm: "PRM", orm: "ORM", majority: "Majority vote", pass: "pass@N" };
  const charts = new Map();

  function readJson(id) {
    const node = document.getElementById(id);
    return node ? JSON.parse(node.textContent) : null;
  }

  function draw(canvas, config) {
    const old = charts.get(canvas);
    if (old) old.destroy();
    config.options = Object.assign({ animation: false, responsive: true }, config.options || {});
    charts.set(canvas, new window.Chart(canvas, config));
    canvas.dataset.drawn = "true";
  }

  // every figure on the dashboard reads in percent (the table cells too)
  const percentTick = (value) => Math.round(value * 100) + " %";

  // N on a log2 axis: ticks at 1, 2, 4, … (Chart.js's own log ticks are 1, 2, 3, … 10, 20, …).
  function log2Axis(title, maxN) {
    return {
      type: "logarithmic", min: 1, max: Math.max(2, maxN), title: { display: true, text: title },
      afterBuildTicks: (scale) => {
        const ticks = [];
        for (let n = 1; n <= scale.max * 1.0001; n *= 2) ticks.push({ value: n });
        scale.ticks = ticks;
      },
      ticks: { callback: (value) => String(value) },
    };
  }

  function lossChart(canvas) {
    const curve = readJson(canvas.dataset.source) || [];
    draw(canvas, {
      type: "line",
      data: { datasets: [{ label: "training loss", borderColor: COLORS.prm, pointRadius: 2,
        data: curve.filter((p) => p.loss !== null).map((p) => ({ x: p.step, y: p.loss })) }] },
      options: { scales: { x: { type: "linear", title: { display: true, text: "optimizer step" } },
                           y: { title: { display: true, text: "loss" } } } },
    });
  }

  function bestOfN(canvas, rows) {
    if (!rows.length) return;
    const datasets = [];
    for (const method of ["prm", "orm", "majority", "pass"]) {
      const points = rows.filter((r) => r[method + "_mean"] !== null);
      if (!points.length) continue;
      const color = COLORS[method];
      // ±1 std band: upper line, then lower line filled up to it, then the mean.
      datasets.push({ label: LABELS[method] + " +1σ", data: points.map((r) => ({ x: r.n, y: r[method + "_mean"] + r[method + "_std"] })),
        borderColor: "transparent", pointRadius: 0, fill: false });
      datasets.push({ label: LABELS[method] + " −1σ", data: points.map((r) => ({ x: r.n, y: r[method + "_mean"] - r[method + "_std"] })),
        borderColor: "transparent", backgroundColor: color + "33", pointRadius: 0, fill: "-1" });
      datasets.push({ label: LABELS[method], data: points.map((r) => ({ x: r.n, y: r[method + "_mean"] })),
        borderColor: color, backgroundColor: color, pointRadius: 3, fill: false });
    }
    draw(canvas, {
      type: "line", data: { datasets },
      options: {
        plugins: { legend: { labels: { filter: (item) => !item.text.includes("σ") } } },
        scales: { x: log2Axis("N = solutions per problem (log2)", Math.max(...rows.map((r) => r.n))),
                  y: { min: 0, max: 1, title: { display: true, text: "problems solved (best-of-N)" },
                       ticks: { callback: percentTick } } },
      },
    });
  }

  function scatterByKind(canvas, rows, xKey, yKey, xTitle) {
    if (!rows.length) return;
    const datasets = ["prm", "orm"].map((kind) => ({
      label: LABELS[kind], borderColor: COLORS[kind], backgroundColor: COLORS[kind], showLine: true,
      data: rows.filter((r) => r.kind === kind && r[yKey] !== null).map((r) => ({ x: r[xKey], y: r[yKey] }))
        .sort((a, b) => a.x - b.x),
    }));
    draw(canvas, { type: "scatter", data: { datasets },
      options: { scales: { x: { type: "logarithmic", title: { display: true, text: xTitle } },
                           y: { min: 0, max: 1, title: { display: true, text: "best-of-N at the pool size" },
                                ticks: { callback: percentTick } } } } });
  }

  function historyChart(canvas, rows) {
    if (!rows.length) return;
    const labels = rows.map((r) => r.dataset_version);
    draw(canvas, { type: "line", data: { labels, datasets: ["prm", "orm"].map((kind) => ({
      label: LABELS[kind], borderColor: COLORS[kind], backgroundColor: COLORS[kind], spanGaps: true,
      data: rows.map((r) => r[kind]) })) },
      options: { scales: { y: { min: 0, max: 1, title: { display: true, text: "best-of-N at the pool size" },
                                ticks: { callback: percentTick } } } } });
  }

  function render(root) {
    if (!window.Chart) return;
    root.querySelectorAll('canvas[data-chart="loss"]').forEach(lossChart);
    const dashboard = readJson("dashboard-data");
    if (!dashboard) return;
    const f = dashboard.figures;
    root.querySelectorAll("canvas[data-chart]").forEach((canvas) => {
      const kind = canvas.dataset.chart;
      if (kind === "best-of-n") bestOfN(canvas, f["best-of-n"]);
      if (kind === "data-efficiency") scatterByKind(canvas, f["data-efficiency"], "trained_on", "accuracy",
        "labeled paths trained on (PRM: step-labeled paths, ORM: graded solutions; log)");
      if (kind === "history") historyChart(canvas, f.history);
    });
  }

  document.addEventListener("DOMContentLoaded", () => render(document));
  document.addEventListener("htmx:afterSwap", (event) => render(event.detail.target.parentNode || document));
})();
