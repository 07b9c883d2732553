// statefed /status: polls the JSON the gateway builds (gateway/cluster/overview.py) and draws it.
// Every value is put into the page as text (textContent), never as HTML.
"use strict";
(function () {
  const SOURCE = document.body.dataset.source;
  const POLL_MS = 1500;
  const HISTORY_MS = 5 * 60 * 1000;
  const GAP_MS = 3 * POLL_MS; // no sample for this long: the line breaks (poll failed, tab asleep)
  const SERIES_COLOURS = 8; // .s0 ... .s7 in status.css
  const SVG = "http://www.w3.org/2000/svg";
  const LEVELS = ["problem", "warning", "notice"];
  const CONDITIONS = {
    OK: ["ok", "OK"], RESTORING: ["notice", "RESTORING"], LAG_UNKNOWN: ["warning", "LAG UNKNOWN"],
    STORE_ERROR: ["problem", "STORE ERROR"], UNASSIGNED: ["problem", "NO OWNER"],
  };
  const samples = []; // [{t, lags: {partition: lag, or null while unknown}}], the last HISTORY_MS
  const tokenKey = "statefed.status.token";
  let timer = null;

  // a token in the URL fragment (#token=...) is taken and removed from the address bar, on
  // opening the page and when only the fragment changes (no reload then)
  function takeFragmentToken() {
    const token = new URLSearchParams(location.hash.slice(1)).get("token");
    if (!token) return false;
    sessionStorage.setItem(tokenKey, token);
    window.history.replaceState(null, "", location.pathname + location.search);
    return true;
  }
  takeFragmentToken();
  window.addEventListener("hashchange", function () {
    if (takeFragmentToken()) tick();
  });
  document.getElementById("token-form").addEventListener("submit", function (event) {
    event.preventDefault();
    const value = document.getElementById("token").value.trim();
    if (value) sessionStorage.setItem(tokenKey, value); else sessionStorage.removeItem(tokenKey);
    document.getElementById("token").value = "";
    tick();
  });

  // -- small helpers --------------------------------------------------------------------

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }
  function svg(tag, attributes, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function badge(level, text) {
    return el("span", text, "badge " + level);
  }
  function row(cells, attributes) {
    const tr = document.createElement("tr");
    for (const [name, value] of Object.entries(attributes || {})) tr.setAttribute(name, value);
    for (const cell of cells) {
      if (cell instanceof HTMLTableCellElement) tr.appendChild(cell);
      else if (cell instanceof Node) tr.appendChild(el("td")).appendChild(cell);
      else tr.appendChild(el("td", cell));
    }
    return tr;
  }
  // a cell holding `node`, with a class the page's tests and styles can select
  function cellOf(node, className) {
    const td = el("td", null, className);
    td.appendChild(node);
    return td;
  }
  function fill(tableId, rows, emptyText) {
    const table = document.getElementById(tableId);
    if (!rows.length) {
      const td = el("td", emptyText, "empty");
      td.colSpan = table.tHead.rows[0].cells.length;
      rows = [row([td])];
    }
    table.tBodies[0].replaceChildren(...rows);
  }
  function number(n) {
    return n === null || n === undefined ? "unknown" : Number(n).toLocaleString();
  }
  function age(ms) {
    if (ms === null || ms === undefined) return "never";
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s ago";
    return Math.round(ms / 60000) + " min ago";
  }
  function plural(n, word) {
    return n + " " + word + (n === 1 ? "" : "s");
  }
  function worst(levels) {
    return LEVELS.find((level) => levels.includes(level)) || "ok";
  }

  // -- summary: verdict, findings, tiles ------------------------------------------------

  function drawSummary(status) {
    const findings = status.findings;
    const count = (level) => findings.filter((f) => f.level === level).length;
    const level = worst(findings.map((f) => f.level));
    const verdict = document.getElementById("verdict");
    verdict.className = "verdict " + level;
    const counts = LEVELS.filter(count).map((lvl) => plural(count(lvl), lvl)).join(", ");
    verdict.textContent = {
      problem: "Needs attention", warning: "Degraded", notice: "Healthy", ok: "Healthy",
    }[level] + (counts ? ": " + counts : "");
    document.getElementById("findings").replaceChildren(...findings.map((f) => {
      const li = el("li", null, f.level);
      li.append(el("span", f.level, "level"), f.text);
      return li;
    }));
    document.getElementById("tiles").replaceChildren(...tiles(status).map(([lvl, label, value, note]) => {
      const tile = el("div", null, "tile " + lvl);
      tile.append(el("span", label, "label"), el("span", value, "value"), el("span", note, "note"));
      return tile;
    }));
  }

  // [level, label, value, note] of each tile
  function tiles(status) {
    const alive = status.nodes.filter((n) => n.alive);
    const running = alive.filter((n) => n.state === "RUNNING").length;
    const owned = status.partitions.filter((p) => p.owner !== null).length;
    const missing = status.unassigned.length;
    const known = status.partitions.filter((p) => p.lag !== null).map((p) => p.lag);
    const unknown = status.partitions.filter((p) => p.owner !== null && p.lag === null).length;
    const reported = status.views.filter((v) => v.batch_id !== null);
    const newest = Math.min(...reported.map((v) => v.updated_age_ms));
    const stale = status.routing_stale_since_ms;
    const dead = status.dead_letters.total;
    return [
      [!status.nodes.length ? "problem" : alive.length < status.nodes.length ? "warning" : "ok",
        "Nodes alive", alive.length + " / " + status.nodes.length, running + " running"],
      [worst(status.partitions.map((p) => CONDITIONS[p.condition][0])), "Partitions served",
        owned + " / " + status.partitions.length,
        missing ? plural(missing, "partition") + " without owner" : "by an ACTIVE copy"],
      [unknown ? "warning" : "ok", "Lag now (records)",
        known.length ? number(Math.max(...known)) : "–",
        unknown ? plural(unknown, "partition") + " unknown" : "highest of any partition"],
      [stale === null ? "ok" : "problem", "Broker", stale === null ? "answering" : "not answering",
        stale === null ? "membership is current" : "since " + new Date(stale).toLocaleTimeString()],
      [reported.length < status.views.length ? "notice" : "ok", "Pipeline",
        reported.length + " / " + plural(status.views.length, "view"),
        reported.length ? "newest report " + age(newest) : "no report yet"],
      [dead ? "notice" : "ok", "Dead letters", number(dead), "input records rejected"],
    ];
  }

  // -- tables ---------------------------------------------------------------------------

  function nodeBadge(n) {
    if (!n.alive) return badge("problem", "DEAD");
    if (n.suspect) return badge("warning", "SUSPECT");
    return badge(n.state === "RUNNING" ? "ok" : "notice", n.state);
  }

  function drawNodes(nodes) {
    fill("nodes", nodes.map((n) => row([
      n.id,
      cellOf(nodeBadge(n), !n.alive ? "dead" : n.suspect ? "suspect" : "alive"),
      age(n.heartbeat_age_ms), n.active.join(" ") || "–", n.standby.join(" ") || "–",
    ], { "data-node": n.id })), "No node is known yet: start one (statefed node).");
  }

  function restoreCell(copies) {
    const td = el("td");
    for (const c of copies.filter((c) => c.restoring)) {
      const line = el("div");
      const bar = el("progress");
      bar.max = Math.max(1, c.restore_total);
      bar.value = c.restore_done;
      line.append(c.node + " ", bar, " " + number(c.restore_done) + " / " +
        (c.restore_total ? number(c.restore_total) : "?"));
      td.appendChild(line);
    }
    return td;
  }

  function drawPartitions(status) {
    fill("partitions", status.partitions.map((p) => {
      const [level, word] = CONDITIONS[p.condition];
      const standby = p.copies.filter((c) => c.role === "STANDBY")
        .map((c) => c.node + " (" + (c.restoring ? "restoring" : "lag " + number(c.lag)) + ")");
      return row([
        p.partition, badge(level, word), el("td", p.owner || "none", "active"),
        el("td", p.owner === null ? "–" : number(p.lag), "num"),
        el("td", standby.join(", ") || "–", "standby"),
        restoreCell(p.copies),
      ], { "data-partition": p.partition });
    }), "The partition count is not known yet.");
  }

  function drawViews(views) {
    fill("views", views.map((v) => row([
      v.name, v.kind, v.batch_id === null ? badge("notice", "none yet") : v.batch_id,
      age(v.updated_age_ms), el("td", number(v.source_offsets), "num"),
      el("td", number(v.changelog_offsets), "num"), el("td", number(v.late_dropped), "num"),
    ], { "data-view": v.name })), "The catalogue has no view.");
  }

  function drawDeadLetters(dead) {
    document.getElementById("dead-total").textContent = dead.total
      ? plural(dead.total, "input record") + " rejected to statefed.deadletter; the newest:"
      : "None: no input record was rejected.";
    fill("dead", dead.recent.map((d) => row([d.reason, d.topic, d.partition, d.offset])),
      "–");
    document.getElementById("dead").hidden = !dead.recent.length;
  }

  // -- the lag chart: a series per partition, kept in the page ---------------------------

  function remember(status, now) {
    const lags = {};
    for (const p of status.partitions) lags[p.partition] = p.lag;
    samples.push({ t: now, lags: lags });
    while (samples.length && samples[0].t < now - HISTORY_MS) samples.shift();
  }

  // the runs of known lag of `partition`, as [[t, lag], ...]: a line breaks where its lag
  // was unknown, where it had no owner and where the page took no sample
  function runs(partition) {
    const found = [];
    let current = [];
    let previous = null;
    for (const s of samples) {
      const lag = s.lags[partition];
      if (lag === null || lag === undefined || (previous !== null && s.t - previous > GAP_MS)) {
        if (current.length) found.push(current);
        current = [];
      }
      if (lag !== null && lag !== undefined) current.push([s.t, lag]);
      previous = s.t;
    }
    if (current.length) found.push(current);
    return found;
  }

  // the smallest 1, 2 or 5 times a power of ten at or above `value` (at least 1)
  function niceCeiling(value) {
    if (value <= 1) return 1;
    const power = Math.pow(10, Math.floor(Math.log10(value)));
    return [1, 2, 5, 10].map((m) => m * power).find((top) => top >= value);
  }

  function drawLag(now) {
    const chart = document.getElementById("lag");
    const width = Math.max(300, Math.round(chart.getBoundingClientRect().width));
    const height = 220, left = 56, right = 12, top = 22, bottom = 24;
    chart.setAttribute("viewBox", "0 0 " + width + " " + height);
    const partitions = [...new Set(samples.flatMap((s) => Object.keys(s.lags)))]
      .map(Number).sort((a, b) => a - b);
    const series = partitions.map((p) => ({ partition: p, runs: runs(p) }));
    const peak = Math.max(0, ...series.flatMap((s) => s.runs.flat().map((point) => point[1])));
    const yTop = niceCeiling(peak);
    const x = (t) => left + (width - left - right) * (1 - (now - t) / HISTORY_MS);
    const y = (lag) => height - bottom - (height - top - bottom) * (lag / yTop);
    const children = [svg("text", { x: 0, y: 12 }, "records behind")];
    for (const tick of peak > 0 ? [0, yTop / 2, yTop].filter(Number.isInteger) : [0]) {
      children.push(svg("line", { x1: left, x2: width - right, y1: y(tick), y2: y(tick),
        class: tick === 0 ? "axis" : "grid" }));
      children.push(svg("text", { x: left - 6, y: y(tick) + 4, "text-anchor": "end" },
        number(tick)));
    }
    for (let minutes = 5; minutes >= 0; minutes--) {
      const at = x(now - minutes * 60000);
      children.push(svg("text", { x: at, y: height - 6, "text-anchor": minutes === 5 ? "start" :
        minutes === 0 ? "end" : "middle" }, minutes ? "−" + minutes + " min" : "now"));
    }
    // lines at zero too: a flat line says "caught up" where a blank chart says nothing
    for (const s of series) children.push(...seriesShapes(s, x, y));
    chart.replaceChildren(...children);
    drawLegend(series);
    drawLagEmpty(peak, series, now);
  }

  function seriesShapes(s, x, y) {
    const colour = "s" + (s.partition % SERIES_COLOURS);
    return s.runs.map((run) => {
      const shape = run.length === 1
        ? svg("circle", { cx: x(run[0][0]), cy: y(run[0][1]), r: 2.5, class: "dot " + colour })
        : svg("polyline", { points: run.map(([t, lag]) => x(t) + "," + y(lag)).join(" "),
          class: "series " + colour });
      shape.setAttribute("data-partition", s.partition);
      shape.appendChild(svg("title", {}, "partition " + s.partition));
      return shape;
    });
  }

  function drawLegend(series) {
    document.getElementById("legend").hidden = series.every((s) => !s.runs.length);
    document.getElementById("legend").replaceChildren(...series.map((s) => {
      const lags = s.runs.flat().map((point) => point[1]);
      const latest = samples.length ? samples[samples.length - 1].lags[s.partition] : null;
      const li = el("li");
      li.append(el("span", null, "swatch s" + (s.partition % SERIES_COLOURS)),
        "partition " + s.partition + ": now " + number(latest) +
        ", highest " + (lags.length ? number(Math.max(...lags)) : "unknown"));
      return li;
    }));
  }

  // the chart's message when there is no line to draw: no sample yet, or no lag at all
  function drawLagEmpty(peak, series, now) {
    const note = document.getElementById("lag-empty");
    note.hidden = peak > 0;
    note.classList.toggle("waiting", !samples.length);
    if (peak > 0) return;
    if (!samples.length) {
      note.textContent = "Waiting for the first sample…";
      return;
    }
    const unknown = series.filter((s) => samples.some((sample) => sample.lags[s.partition] === null));
    if (series.every((s) => !s.runs.length)) {
      note.classList.add("waiting");
      note.textContent = "No lag known: no partition has an ACTIVE copy whose lag is known.";
      return;
    }
    const span = now - samples[0].t;
    const since = span >= HISTORY_MS - 2 * POLL_MS ? "in the last 5 minutes"
      : "since this page opened" + (span >= 1000 ? " " + Math.round(span / 1000) + " s ago" : "");
    const caveat = unknown.length ? " (lag not known at times for " +
      plural(unknown.length, "partition") + ": " + unknown.map((s) => s.partition).join(", ") + ")" : "";
    note.textContent = "No lag " + since + ": the ACTIVE copies were caught up at each of " +
      plural(samples.length, "sample") + caveat + ".";
  }

  // -- polling --------------------------------------------------------------------------

  function problem(text) {
    const node = document.getElementById("problem");
    node.textContent = text || "";
    node.hidden = !text;
    document.body.classList.toggle("stale", Boolean(text));
  }

  async function poll() {
    const headers = { Accept: "application/json" };
    const token = sessionStorage.getItem(tokenKey);
    if (token) headers.Authorization = "Bearer " + token;
    try {
      const response = await fetch(SOURCE, { headers: headers, cache: "no-store" });
      const body = await response.json();
      if (!response.ok) {
        const error = (body.errors && body.errors[0]) || {};
        problem(response.status + ": " + (error.message || "the gateway refused") +
          (response.status === 401 || response.status === 403
            ? " (paste a token with the operator scope above)" : ""));
        return;
      }
      draw(body);
      problem("");
    } catch (exc) {
      problem("cannot read " + SOURCE + ": " + exc + "; showing the last data read");
    }
  }

  function draw(body) {
    const now = Date.now();
    remember(body, now);
    drawSummary(body);
    drawLag(now);
    drawNodes(body.nodes);
    drawPartitions(body);
    drawViews(body.views);
    drawDeadLetters(body.dead_letters);
    document.getElementById("updated").textContent = "updated " +
      new Date(now).toLocaleTimeString() + " · routing version " + body.routing_version;
  }

  // one poll at a time; a new token polls at once and the next poll follows it
  async function tick() {
    clearTimeout(timer);
    await poll();
    clearTimeout(timer);
    timer = setTimeout(tick, POLL_MS);
  }
  tick();
})();
