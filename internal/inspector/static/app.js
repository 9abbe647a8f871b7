// prunesched inspector: sortable tables, the strip's timeline slider and
// item panel. Plain JavaScript, no build step. Every write goes to the API's
// own handlers (the ones the CLI calls), mounted under /ui/sessions/ where a
// login cookie is accepted, as JSON and carrying the page's tenant query.
(function () {
  "use strict";
  var query = document.body.dataset.query || "";

  // Sortable tables: click a header to sort by its column.
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.querySelectorAll("thead th");
    heads.forEach(function (th, col) {
      th.addEventListener("click", function () {
        var asc = !th.classList.contains("asc");
        heads.forEach(function (h) { h.classList.remove("asc", "desc"); });
        th.classList.add(asc ? "asc" : "desc");
        var num = th.dataset.type === "num";
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[col], y = b.cells[col];
          if (!x || !y) return 0;
          var u = x.dataset.v !== undefined ? x.dataset.v : x.textContent;
          var v = y.dataset.v !== undefined ? y.dataset.v : y.textContent;
          var c = num ? (parseFloat(u) - parseFloat(v)) : u.localeCompare(v);
          return asc ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });

  var strip = document.querySelector("#strip-section > .strip");
  if (!strip) return;
  var session = location.pathname.split("/")[3];
  var panel = document.getElementById("panel");
  var cert = document.getElementById("cert");
  var base = "/ui/sessions/" + encodeURIComponent(session);

  function api(path) { return base + path + query; }

  // The item panel: certificate (server-rendered fragment) and original
  // (the API's item endpoint, raw).
  function openItem(id) {
    document.querySelectorAll(".strip .b.sel").forEach(function (b) { b.classList.remove("sel"); });
    var blk = document.querySelector('.strip .b[data-item="' + CSS.escape(id) + '"]');
    if (blk) blk.classList.add("sel");
    panel.hidden = false;
    cert.textContent = "loading…";
    var url = "/ui/sessions/" + encodeURIComponent(session) + "/items/" + encodeURIComponent(id) + query;
    fetch(url, { credentials: "same-origin" }).then(function (r) { return r.text(); }).then(function (html) {
      cert.innerHTML = html;
      var pre = cert.querySelector("pre.original");
      fetch(base + "/original/" + encodeURIComponent(id) + (query ? query + "&" : "?") + "format=raw", { credentials: "same-origin" })
        .then(function (r) { return r.text().then(function (t) { return { ok: r.ok, t: t }; }); })
        .then(function (res) { pre.textContent = res.t; pre.removeAttribute("data-loading"); pre.dataset.loaded = res.ok ? "1" : "error"; });
      cert.querySelectorAll("button[data-action]").forEach(function (btn) {
        btn.addEventListener("click", function () { act(btn.dataset.action, id); });
      });
      history.replaceState(null, "", location.pathname + query + "#item=" + encodeURIComponent(id));
    });
  }

  // A button records a fact through the API, then the page re-renders.
  function act(action, id) {
    var status = cert.querySelector(".status");
    status.textContent = action + "…";
    fetch(api("/" + action), {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ item: id, by: "inspector", reason: action + " from the inspector" })
    }).then(function (r) { return r.json().then(function (j) { return { ok: r.ok, j: j }; }); }).then(function (res) {
      if (!res.ok) { status.textContent = "failed: " + (res.j.error || "error"); return; }
      status.textContent = "recorded " + res.j.type + " (event " + res.j.event + ")";
      location.reload();
    }).catch(function (e) { status.textContent = "failed: " + e; });
  }

  document.addEventListener("click", function (e) {
    var t = e.target;
    if (t.classList.contains("b") && t.dataset.item) { openItem(t.dataset.item); return; }
    if (t.classList.contains("itemlink")) { e.preventDefault(); openItem(t.dataset.item); return; }
    var agg = t.closest(".agg");
    if (agg) {
      var url = "/ui/sessions/" + encodeURIComponent(session) + "/strip" + (query ? query + "&" : "?") + "from=" + agg.dataset.from + "&to=" + agg.dataset.to;
      fetch(url, { credentials: "same-origin" }).then(function (r) { return r.text(); }).then(function (html) {
        document.getElementById("zoom").innerHTML = html;
        applyStep(current);
      });
    }
  });

  // The timeline: the strip as request k saw it.
  var stepsEl = document.getElementById("steps");
  var steps = stepsEl ? JSON.parse(stepsEl.textContent) : [];
  var slider = document.getElementById("slider");
  var current = steps.length;
  function applyStep(k) {
    current = k;
    var now = k >= steps.length;
    document.querySelectorAll(".strip .b").forEach(function (b) {
      var c = b.dataset.c, r = +b.dataset.r, p = +b.dataset.p, h = +b.dataset.h;
      var cls = c;
      if (!now) {
        if (h >= 0 && h <= k) cls = "host-removed";
        else if (c === "pruned" || c === "host-removed") cls = (p >= 0 && p <= k) ? "pruned" : "kept";
      }
      b.className = "b " + cls + (!now && r > k ? " future" : "") + (b.classList.contains("sel") ? " sel" : "");
    });
    document.querySelectorAll(".strip .agg").forEach(function (a) {
      a.classList.toggle("future", !now && +a.dataset.r > k);
    });
    if (!slider) return;
    var label = document.getElementById("step-label");
    var info = document.getElementById("step-info");
    var cached = document.getElementById("cached");
    var apps = document.getElementById("apps");
    apps.innerHTML = "";
    var cursor = document.getElementById("cursor");
    if (cursor && +cursor.dataset.n > 1) {
      var x = +cursor.dataset.left + (+cursor.dataset.width) * Math.min(k, steps.length - 1) / (+cursor.dataset.n - 1);
      cursor.setAttribute("x1", x); cursor.setAttribute("x2", x);
    }
    if (now) {
      label.textContent = "now (after request " + steps.length + ")";
      cached.setAttribute("width", 0);
      info.textContent = "The strip shows the bundle as it is now.";
      return;
    }
    var s = steps[k];
    var scale = s.b > 0 ? 1160 / s.b : 0;
    cached.setAttribute("width", Math.min(1160, s.c * scale));
    var parts = [];
    s.a.forEach(function (a) {
      var ns = "http://www.w3.org/2000/svg";
      var rad = document.createElementNS(ns, "rect");
      rad.setAttribute("class", "radius"); rad.setAttribute("x", a.fd * scale); rad.setAttribute("y", 4);
      rad.setAttribute("width", Math.max(1, a.mr * scale)); rad.setAttribute("height", 26);
      apps.appendChild(rad);
      var fd = document.createElementNS(ns, "line");
      fd.setAttribute("class", "fd"); fd.setAttribute("x1", a.fd * scale); fd.setAttribute("x2", a.fd * scale);
      fd.setAttribute("y1", 0); fd.setAttribute("y2", 34);
      apps.appendChild(fd);
      parts.push(a.trigger + ": " + a.marks + " marks, " + a.removed + " tokens removed, first divergence " + a.fd + ", mutation radius " + a.mr);
    });
    label.textContent = "request " + (k + 1) + " of " + steps.length + " · " + s.t;
    info.textContent = "Bundle " + s.b + " tokens, cached prefix " + s.c + ". " + (parts.length ? "Applied here — " + parts.join("; ") : "No application at this request.");
  }
  if (slider) slider.addEventListener("input", function () { applyStep(+slider.value); });

  var m = /#item=(.+)$/.exec(location.hash);
  if (m) openItem(decodeURIComponent(m[1]));
})();
