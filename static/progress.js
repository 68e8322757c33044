// Keeps a server-rendered batch or task page fresh: polls its JSON with If-None-Match every
// poll_after_ms, waits for one answer before the next, slows down while the tab is hidden,
// backs off on errors, stops at a terminal state. Writes textContent only.
(function () {
  "use strict";
  var TERMINAL = { succeeded: 1, failed: 1, canceled: 1, partial: 1 };
  var root = document.querySelector("[data-poll-url]");
  if (!root) { return; }
  var url = root.getAttribute("data-poll-url");
  var kind = root.getAttribute("data-kind");
  var etag = null;
  var failures = 0;

  function field(scope, name) { return scope.querySelector('[data-field="' + name + '"]'); }
  function setText(el, text) { if (el && el.textContent !== text) { el.textContent = text; } }

  function statusText(task) {
    if (task.status === "retrying" && task.next_attempt_at) {
      var secs = Math.max(0, Math.round((Date.parse(task.next_attempt_at) - Date.now()) / 1000));
      return "Attempt " + (task.attempts + 1) + " of " + task.max_attempts + " in " + secs + " s";
    }
    return task.status_text;
  }

  function renderTask(scope, task) {
    scope.setAttribute("data-status", task.status);
    var bar = field(scope, "progress");
    if (bar) { bar.value = task.progress; bar.textContent = task.progress + " %"; }
    var words = field(scope, "status_text");
    if (words) {
      words.className = "status status-" + task.status;
      setText(words, statusText(task));
    }
    setText(field(scope, "step_detail"), task.step_detail);
    setText(field(scope, "attempts"), task.attempts + " of " + task.max_attempts);
    var error = field(scope, "error");
    if (error) {
      error.hidden = !task.error;
      setText(error, task.error ? task.error.step + ": " + task.error.message : "");
    }
    var retryable = task.status === "canceled" ||
      (task.status === "failed" && task.error && task.error.retryable);
    toggle(scope, "retry", retryable);
    toggle(scope, "cancel", !TERMINAL[task.status]);
  }

  function toggle(scope, action, shown) {
    var form = scope.querySelector('[data-action="' + action + '"]');
    if (form) { form.hidden = !shown; }
  }

  function renderBatch(batch) {
    root.setAttribute("data-status", batch.status);
    var bar = field(root, "batch_progress");
    if (bar) { bar.value = batch.progress; bar.textContent = batch.progress + " %"; }
    setText(field(root, "batch_status"), batch.status.charAt(0).toUpperCase() + batch.status.slice(1));
    Object.keys(batch.counts).forEach(function (status) {
      setText(root.querySelector('[data-count="' + status + '"]'), String(batch.counts[status]));
    });
    batch.tasks.forEach(function (task) {
      var row = root.querySelector('[data-task-id="' + task.id + '"]');
      if (row) { renderTask(row, task); }
    });
  }

  function schedule(ms) {
    window.setTimeout(poll, document.hidden ? ms * 4 : ms);
  }

  function poll() {
    var headers = etag ? { "If-None-Match": etag } : {};
    fetch(url, { headers: headers, credentials: "same-origin" }).then(function (response) {
      if (response.status === 304) { return null; }
      if (!response.ok) { throw new Error("HTTP " + response.status); }
      etag = response.headers.get("ETag");
      return response.json();
    }).then(function (state) {
      failures = 0;
      if (state) {
        if (kind === "batch") { renderBatch(state); } else { renderTask(root, state); }
        if (TERMINAL[state.status]) { return; }
        schedule(state.poll_after_ms || 1500);
      } else {
        schedule(1500);
      }
    }).catch(function () {
      failures += 1;
      schedule(Math.min(30000, 1000 * Math.pow(2, failures)));
    });
  }

  if (!TERMINAL[root.getAttribute("data-status")]) { schedule(500); }
}());
