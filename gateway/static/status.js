// statefed /status: polls the JSON the gateway builds (gateway/overview.py) and draws it.
// Every value is put into the page as text (textContent), never as HTML.
"use strict";
(function () {
  const SOURCE = document.body.dataset.source;
  const POLL_MS = 1500;
  const HISTORY_MS = 5 * 60 * 1000;
  const COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  const SVG = "http://www.w3.org/2000/svg";
  const history = []; // [{t, lags: {partition: lag}}], the last HISTORY_MS
  const tokenKey = "statefed.status.token";

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
    if (takeFragmentToken()) poll();
  });
  document.getElementById("token-form").addEventListener("submit", function (event) {
    event.preventDefault();
    const value = document.getElementById("token").value.trim();
    if (value) sessionStorage.setItem(tokenKey, value); else sessionStorage.removeItem(tokenKey);
    document.getElementById("token").value = "";
    poll();
  });

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }
  function row(cells, attributes) {
    const tr = document.createElement("tr");
    for (const [name, value] of Object.entries(attributes || {})) tr.setAttribute(name, value);
    for (const cell of cells) tr.appendChild(cell instanceof Node ? cell : el("td", cell));
    return tr;
  }
  function fill(tableId, rows) {
    const body = document.querySelector("#" + tableId + " tbody");
    body.replaceChildren(...rows);
  }
  function seconds(ms) {
    return ms === null || ms === undefined ? "never" : (ms / 1000).toFixed(1) + " s ago";
  }

  function drawNodes(nodes) {
    fill("nodes", nodes.map((n) => row([
      n.id, n.state, n.alive ? "yes" : "no", seconds(n.heartbeat_age_ms),
      n.active.join(" "), n.standby.join(" "),
    ], { "data-node": n.id, class: n.alive ? "" : "dead" })));
  }

  function restoreCell(copies) {
    const td = el("td");
    for (const c of copies.filter((c) => c.restoring)) {
      const bar = el("progress");
      bar.max = Math.max(1, c.restore_total);
      bar.value = c.restore_done;
      td.appendChild(el("span", c.node + " "));
      td.appendChild(bar);
      td.appendChild(el("span", " " + c.restore_done + "/" + (c.restore_total || "?")));
    }
    return td;
  }

  function drawPartitions(status) {
    fill("partitions", status.partitions.map((p) => {
      const active = p.copies.filter((c) => c.role === "ACTIVE");
      const standby = p.copies.filter((c) => c.role === "STANDBY");
      const lag = active.length ? active[0].lag : "";
      return row([
        el("td", p.partition),
        el("td", active.map((c) => c.node).join(" ") || "none", "active"),
        el("td", standby.map((c) => c.node).join(" "), "standby"),
        el("td", lag),
        restoreCell(p.copies),
      ], { "data-partition": p.partition, class: active.length ? "" : "unowned" });
    }));
    const unassigned = status.unassigned;
    document.getElementById("unassigned").textContent = unassigned.length
      ? "Partitions without a live ACTIVE owner: " + unassigned.join(" ") : "";
  }

  function remember(status) {
    const lags = {};
    for (const p of status.partitions) {
      const active = p.copies.find((c) => c.role === "ACTIVE");
      if (active) lags[p.partition] = active.lag;
    }
    const now = Date.now();
    history.push({ t: now, lags: lags });
    while (history.length && history[0].t < now - HISTORY_MS) history.shift();
  }

  function drawLag(partitionCount) {
    const svg = document.getElementById("lag");
    const width = 600, height = 160, pad = 30;
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    const now = Date.now();
    let max = 1;
    for (const point of history) for (const v of Object.values(point.lags)) max = Math.max(max, v);
    const x = (t) => pad + (width - pad) * (1 - (now - t) / HISTORY_MS);
    const y = (v) => height - pad / 2 - (height - pad) * (v / max);
    const children = [];
    const label = (text, atX, atY, anchor) => {
      const node = document.createElementNS(SVG, "text");
      node.setAttribute("x", atX);
      node.setAttribute("y", atY);
      node.setAttribute("text-anchor", anchor);
      node.textContent = text;
      children.push(node);
    };
    label(max + " records", 2, 12, "start");
    label("0", 2, height - pad / 2, "start");
    label("5 min ago", pad, height - 2, "start");
    label("now", width - 2, height - 2, "end");
    const legend = [];
    for (let p = 0; p < partitionCount; p++) {
      const points = history.filter((h) => p in h.lags).map((h) => x(h.t) + "," + y(h.lags[p]));
      const colour = COLOURS[p % COLOURS.length];
      if (points.length) {
        const line = document.createElementNS(SVG, "polyline");
        line.setAttribute("points", points.join(" "));
        line.setAttribute("stroke", colour);
        line.setAttribute("fill", "none");
        line.setAttribute("data-partition", p);
        children.push(line);
      }
      const key = el("span", "partition " + p, "key");
      key.style.borderColor = colour;
      legend.push(key);
    }
    svg.replaceChildren(...children);
    document.getElementById("legend").replaceChildren(...legend);
  }

  function drawViews(views) {
    fill("views", views.map((v) => row([
      v.name, v.kind, v.batch_id === null ? "none yet" : v.batch_id, seconds(v.updated_age_ms),
      v.source_offsets, v.changelog_offsets, v.late_dropped,
    ], { "data-view": v.name })));
  }

  function drawDeadLetters(dead) {
    document.getElementById("dead-total").textContent =
      dead.total + " input record(s) rejected to statefed.deadletter" +
      (dead.recent.length ? "; the newest:" : "");
    fill("dead", dead.recent.map((d) => row([d.reason, d.topic, d.partition, d.offset])));
  }

  function problem(text) {
    const node = document.getElementById("problem");
    node.textContent = text || "";
    node.hidden = !text;
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
        problem(response.status + ": " + (error.message || "the gateway refused"));
        return;
      }
      problem("");
      remember(body);
      drawNodes(body.nodes);
      drawPartitions(body);
      drawLag(body.partition_count || body.partitions.length);
      drawViews(body.views);
      drawDeadLetters(body.dead_letters);
      document.getElementById("updated").textContent =
        "routing version " + body.routing_version + ", updated " +
        new Date().toLocaleTimeString() +
        (body.routing_stale_since_ms ? " (membership stalled: the broker does not answer)" : "");
    } catch (exc) {
      problem("cannot read " + SOURCE + ": " + exc);
    }
  }

  poll();
  setInterval(poll, POLL_MS);
})();
