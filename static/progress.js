// Keeps a server-rendered batch or task page fresh (docs/architecture.md §6). It follows the page's
// event stream (data-events-url) and falls back to polling its JSON (data-poll-url) every
// poll_after_ms with If-None-Match, one request per refresh for the whole batch. It stops at a
// terminal state, slows down while the tab is hidden, backs off on errors, and writes
// textContent only. Words and thresholds come from the page (data-words, data-now); what a
// person may do, and whether anything can still change, from the JSON (can_retry, can_cancel).
(function () {
  "use strict";
  var root = document.querySelector("[data-poll-url]");
  if (!root) { return; }
  var kind = root.getAttribute("data-kind");
  var pollUrl = root.getAttribute("data-poll-url");
  var eventsUrl = root.getAttribute("data-events-url");
  var words = JSON.parse(root.getAttribute("data-words") || "{}");
  var skew = Number(root.getAttribute("data-now")) - Date.now() || 0;
  var stalledAfter = 1000 * Number(root.getAttribute("data-stalled-after") || 120);
  var announcer = document.querySelector("[data-announce]");
  var filter = new URLSearchParams(window.location.search).get("status") || "";
  var useStream = Boolean(eventsUrl && window.EventSource);
  var known = {};          // task id -> its last JSON, for countdowns and "no progress" hints
  var following = true, source = null, timer = null, ticker = null;
  var etag = null, interval = 1500, failures = 0, streamErrors = 0;
  var heard = {}, heardOrder = [], announceTimer = null, previewAsked = false;

  function field(scope, name) { return scope.querySelector('[data-field="' + name + '"]'); }
  function setText(el, text) { if (el && el.textContent !== text) { el.textContent = text; } }
  function show(el, shown) { if (el) { el.hidden = !shown; } }
  function now() { return Date.now() + skew; }
  function capital(text) { return text ? text.charAt(0).toUpperCase() + text.slice(1) : ""; }
  function setBar(scope, name, value) {
    var bar = field(scope, name);
    if (bar) { bar.value = value; bar.textContent = value + " %"; }
    setText(field(scope, name + "_text"), value + " %");
  }

  function fill(template, values) {  // "Attempt {n} of {of} in {s} s" with values
    return template.replace(/\{(\w+)\}/g, function (all, name) { return String(values[name]); });
  }

  function statusText(task) {
    if (task.status === "retrying" && task.next_attempt_at && words.attempt) {
      var secs = Math.round((Date.parse(task.next_attempt_at) - now()) / 1000);
      return fill(words.attempt[secs > 0 ? "in" : "soon"],
        { n: task.attempts + 1, of: task.max_attempts, s: secs });
    }
    return task.status_text;
  }

  function stalledText(task) {
    var age = now() - Date.parse(task.updated_at);
    return task.status === "running" && age >= stalledAfter ?
      "No progress for " + Math.floor(age / 60000) + " min" : "";
  }

  function renderClock(scope, task) {
    var status = field(scope, "status_text");
    if (status) { status.className = "status status-" + task.status; setText(status, statusText(task)); }
    var hint = field(scope, "stalled"), text = stalledText(task);
    setText(hint, text);
    show(hint, text !== "");
  }

  function stepText(task) {  // as webapp/display.py's step_text
    if (task.status === "failed") { return "Stopped in " + capital((task.error || {}).step || "processing"); }
    return task.status === "canceled" ? "" : task.step_detail;
  }

  function renderError(scope, task) {
    var error = field(scope, "error"), when = error && error.getAttribute("data-show");
    var shown = Boolean(task.error) && (!when || when === task.status);
    setText(error, shown ? capital(task.error.step) + ": " + task.error.message : "");
    show(error, shown);
    show(field(scope, "error_box"), Boolean(task.error));
    var failed = task.status === "failed" && Boolean(task.error);
    var advice = field(scope, "advice");
    setText(advice, failed ? words.advice[task.error.retryable ? "retry" : "fix"] : "");
    show(advice, failed);
  }

  function renderTask(scope, task) {
    var before = scope.getAttribute("data-status");
    known[task.id] = { task: task, scope: scope };
    scope.setAttribute("data-status", task.status);
    setBar(scope, "progress", task.progress);
    renderClock(scope, task);
    setText(field(scope, "step_detail"), stepText(task));
    setText(field(scope, "attempts"), task.attempts + " of " + task.max_attempts);
    renderError(scope, task);
    toggle(scope, "data-action", "retry", Boolean(task.can_retry));
    toggle(scope, "data-action", "cancel", Boolean(task.can_cancel));
    if (kind === "task") { renderDetails(task); }
    if (before && before !== task.status) { announce(task); }
    if (kind === "batch") { applyFilter(scope); }
  }

  function toggle(scope, attribute, name, shown) {
    show(scope.querySelector("[" + attribute + '="' + name + '"]'), shown);
  }

  function resultText(r) {  // as webapp/display.py's result_text
    if (!r) { return ""; }
    var pages = count(r.pages, "page") + (r.ocr_pages ? " (" + r.ocr_pages + " read by OCR)" : "");
    return pages + ", " + count(r.characters, "character") + ", " + count(r.chunks, "chunk") + ".";
  }

  function count(number, noun) {
    number = Number(number || 0);
    return number.toLocaleString("en-US") + " " + noun + (number === 1 ? "" : "s");
  }

  function locationText(location, chunk) {  // as webapp/display.py's location_text
    var parts = [];
    if (location && location.page !== undefined) { parts.push(pagesText(location)); }
    ["slide", "sheet"].forEach(function (name) {
      if (location && location[name] !== undefined) { parts.push(name + " " + location[name]); }
    });
    if (location && location.heading) { parts.push("\u201c" + location.heading + "\u201d"); }
    return parts.length ? parts.join(" \u00b7 ") : "chunk " + (chunk + 1);
  }

  function pagesText(location) {  // as webapp/display.py's _pages: "page 4" or "pages 4–5"
    var last = location.page_end === undefined ? location.page : location.page_end;
    return last === location.page ? "page " + location.page
      : "pages " + location.page + "\u2013" + last;
  }

  function listItems(list, items, build) {
    if (list) { list.replaceChildren.apply(list, items.map(build)); }
  }

  // A task that succeeds while its page is open shows its first chunks, as a reload would.
  function showPreview() {
    var preview = field(root, "preview");
    if (!preview || !preview.hidden || previewAsked) { return; }
    previewAsked = true;
    fetch(preview.getAttribute("data-chunks-url"), { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (page) {
        if (!page || !page.chunks.length) { return; }
        listItems(field(root, "preview_list"), page.chunks, function (chunk) {
          var item = document.createElement("li"), where = document.createElement("span");
          var text = document.createElement("p");
          where.className = "location";
          where.textContent = locationText(chunk.location, chunk.chunk);
          text.className = "chunk-text";
          text.textContent = chunk.text.length > 600 ? chunk.text.slice(0, 597) + "..." : chunk.text;
          item.appendChild(where);
          item.appendChild(text);
          return item;
        });
        show(preview, true);
      }).catch(function () { previewAsked = false; });
  }

  function renderDetails(task) {
    var result = field(root, "result"), r = task.result;
    setText(result, resultText(r));
    show(result, Boolean(r));
    var warnings = (r && r.warnings) || [];
    listItems(field(root, "warnings"), warnings, function (warning) {
      var item = document.createElement("li");
      item.textContent = warning;
      return item;
    });
    show(field(root, "warnings"), warnings.length > 0);
    if (task.status === "succeeded") { showPreview(); }
    var body = field(root, "steps"), rows = [];
    task.steps.forEach(function (step) {
      var row = document.createElement("tr");
      var seconds = (Date.parse(step.ended_at) - Date.parse(step.started_at)) / 1000;
      [capital(step.name), String(step.attempt), (step.started_at || "").slice(11, 19),
       (step.ended_at || "").slice(11, 19), isNaN(seconds) ? "" : seconds.toFixed(2) + " s"
      ].forEach(function (text, i) {
        var cell = document.createElement("td");
        cell.textContent = text;
        if (i === 4) { cell.className = "num"; }
        row.appendChild(cell);
      });
      rows.push(row);
    });
    if (body) { body.replaceChildren.apply(body, rows); }
  }

  // As webapp/display.py eta_text words it.
  function etaText(seconds) {
    if (!seconds) { return ""; }
    if (seconds < 60) { return "less than a minute left"; }
    if (seconds < 3600) { return "about " + Math.round(seconds / 60) + " min left"; }
    return "about " + (seconds / 3600).toFixed(1) + " h left";
  }

  function renderBatch(batch) {
    root.setAttribute("data-status", batch.status);
    setBar(root, "batch_progress", batch.progress);
    var eta = field(root, "batch_eta");
    if (eta && "eta_seconds" in batch) { setText(eta, etaText(batch.eta_seconds)); }
    var status = field(root, "batch_status");
    status.className = "status status-" + batch.status;
    setText(status, words.batch[batch.status] || batch.status);
    var counts = batch.counts;
    Object.keys(counts).forEach(function (name) {
      setText(root.querySelector('[data-count="' + name + '"]'), String(counts[name]));
    });
    toggle(root, "data-batch-action", "retry-failed", Boolean(batch.can_retry));
    toggle(root, "data-batch-action", "cancel", Boolean(batch.can_cancel));
    (batch.tasks || []).forEach(renderRow);
    show(root.querySelector("[data-filter-empty]"), Boolean(filter) && !counts[filter]);
  }

  function renderRow(task) {
    var row = document.getElementById("t-" + task.id);
    if (row) { renderTask(row, task); }
  }

  // Status changes are announced in words ("handbook.pdf: Succeeded"), gathered for a second
  // so that a burst becomes one short sentence: each document's latest status, once.
  function announce(task) {
    if (!(task.id in heard)) { heardOrder.push(task.id); }
    heard[task.id] = task.document_id + ": " + (task.status === "failed" ? task.status_text
      : words.labels[task.status]);
    if (!announceTimer) { announceTimer = window.setTimeout(flush, 1000); }
  }

  function flush() {
    announceTimer = null;
    var said = heardOrder.map(function (id) { return heard[id]; });
    setText(announcer, said.length > 5 ? said.length + " documents changed status." : said.join(". "));
    heard = {};
    heardOrder = [];
  }

  // Filter by status: the server hides rows for ?status= (so it works without JS); here the
  // links do the same in place.
  function applyFilter(row) { row.hidden = Boolean(filter) && row.getAttribute("data-status") !== filter; }

  function onFilter(event) {
    var link = event.target.closest("[data-filter]");
    if (!link) { return; }
    event.preventDefault();
    filter = link.getAttribute("data-filter");
    root.querySelectorAll("[data-filter]").forEach(function (other) {
      if (other === link) { other.setAttribute("aria-current", "true"); }
      else { other.removeAttribute("aria-current"); }
    });
    root.querySelectorAll("tr[data-task-id]").forEach(applyFilter);
    var count = filter && root.querySelector('[data-count="' + filter + '"]');
    show(root.querySelector("[data-filter-empty]"), Boolean(count) && count.textContent === "0");
    window.history.replaceState(null, "", link.href);
  }

  function tick() {
    Object.keys(known).forEach(function (id) {
      if (known[id].task.can_cancel) { renderClock(known[id].scope, known[id].task); }
    });
  }

  function render(state) {
    if (kind === "batch") { renderBatch(state); } else { renderTask(root, state); }
    if (!state.can_cancel) { stop(); }  // nothing live is left: nothing changes by itself
  }

  function stop() {
    following = false;
    if (source) { source.close(); source = null; }
    window.clearTimeout(timer);
    window.clearInterval(ticker);
  }

  function listen() {
    source = new EventSource(eventsUrl);
    source.addEventListener("open", function () { streamErrors = 0; });
    source.addEventListener("task", function (event) {
      var task = JSON.parse(event.data);
      if (kind === "batch") { renderRow(task); }
      else if (task.id === root.getAttribute("data-task-id")) { render(task); }
    });
    source.addEventListener("batch", function (event) {
      if (kind === "batch") { render(JSON.parse(event.data)); }
    });
    source.addEventListener("error", function () {
      // A stream that ends reconnects by itself (retry hint); one that keeps failing, or an
      // error answer, falls back to polling with backoff.
      streamErrors += 1;
      if (source && (source.readyState === EventSource.CLOSED || streamErrors >= 3)) {
        source.close();
        source = null;
        useStream = false;
        failures += 1;
        schedule(backoff());
      }
    });
  }

  function backoff() { return Math.min(30000, 1000 * Math.pow(2, failures)); }

  function schedule(ms) {
    if (!following || source) { return; }
    window.clearTimeout(timer);
    timer = window.setTimeout(poll, document.hidden ? ms * 4 : ms);
  }

  function poll() {
    var headers = etag ? { "If-None-Match": etag } : {};
    fetch(pollUrl, { headers: headers, credentials: "same-origin" }).then(function (response) {
      if (response.status === 304) { return null; }
      if (response.status === 404) { stop(); return null; }
      if (!response.ok) { throw new Error("HTTP " + response.status); }
      etag = response.headers.get("ETag");
      return response.json();
    }).then(function (state) {
      failures = 0;
      if (state && following) {
        interval = state.poll_after_ms || interval;
        render(state);
      }
      schedule(interval);
    }).catch(function () {
      failures += 1;
      schedule(backoff());
    });
  }

  document.addEventListener("visibilitychange", function () {
    if (!following) { return; }
    if (document.hidden && source) {
      source.close();       // a hidden tab holds no server thread: it polls, four times slower
      source = null;
      schedule(interval);
    } else if (!document.hidden && useStream && !source) {
      window.clearTimeout(timer);
      listen();
    } else if (!document.hidden) {
      schedule(0);
    }
  });

  root.addEventListener("click", onFilter);
  if (root.getAttribute("data-live") !== "true") { return; }
  ticker = window.setInterval(tick, 1000);
  if (useStream && !document.hidden) { listen(); } else { schedule(500); }
}());
