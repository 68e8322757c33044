// The upload form, enhanced: files come from the pickers, a whole folder or a drop; each is
// listed with its size and checked against the server's limits (read from data-* attributes;
// the server stays the authority). The chosen files then travel to POST /api/documents with a
// progress bar, each with its relative path as its document_id, and the page goes on to the
// batch. Without JavaScript the same form posts to /upload. Writes textContent only.
(function () {
  "use strict";
  var form = document.querySelector("form.upload[data-api-url]");
  if (!form || !window.FormData || !window.XMLHttpRequest) { return; }
  var limits = {
    file: Number(form.getAttribute("data-max-file-bytes")),
    files: Number(form.getAttribute("data-max-files")),
    request: Number(form.getAttribute("data-max-request-bytes"))
  };
  var accepted = form.getAttribute("data-accept").split(",");
  var zone = form.querySelector("[data-drop-zone]");
  var list = form.querySelector("[data-chosen-list]");
  var summary = form.querySelector("[data-chosen-summary]");
  var progress = form.querySelector("[data-upload-progress]");
  var outcome = form.querySelector("[data-upload-result]");
  var submit = form.querySelector("button[type=submit]");
  var chosen = [];           // {file, path, problem}

  function size(bytes) {
    if (bytes < 1024) { return bytes + " B"; }
    if (bytes < 1048576) { return (bytes / 1024).toFixed(1) + " KiB"; }
    return (bytes / 1048576).toFixed(1) + " MiB";
  }

  function problemOf(file) {
    var dot = file.name.lastIndexOf(".");
    if (dot <= 0 || accepted.indexOf(file.name.slice(dot).toLowerCase()) < 0) {
      return "Not a supported type";
    }
    if (file.size === 0) { return "Empty"; }
    if (file.size > limits.file) { return "Larger than " + size(limits.file); }
    return "";
  }

  function add(items) {
    var seen = {};
    chosen.forEach(function (item) { seen[item.path] = true; });
    items.forEach(function (item) {
      if (!seen[item.path]) { seen[item.path] = true; item.problem = problemOf(item.file); chosen.push(item); }
    });
    render();
  }

  function sendable() { return chosen.filter(function (item) { return !item.problem; }); }

  // What stops the upload as a whole, if anything.
  function blocker(good) {
    var bytes = good.reduce(function (sum, item) { return sum + item.file.size; }, 0);
    if (!good.length) { return chosen.length ? "None of these files can be uploaded." : ""; }
    if (good.length > limits.files) { return "At most " + limits.files + " files at once: remove some."; }
    if (bytes > limits.request) { return "At most " + size(limits.request) + " at once: remove some."; }
    return "";
  }

  function cell(row, text, className) {
    var td = document.createElement("td");
    td.textContent = text;
    if (className) { td.className = className; }
    row.appendChild(td);
  }

  function render() {
    var rows = chosen.map(function (item) {
      var row = document.createElement("tr");
      cell(row, item.path);
      cell(row, size(item.file.size), "num");
      cell(row, item.problem || "OK", item.problem ? "status status-failed" : "status status-succeeded");
      return row;
    });
    list.replaceChildren.apply(list, rows);
    var good = sendable(), stop = blocker(good), skipped = chosen.length - good.length;
    summary.textContent = good.length + " of " + chosen.length + " files ready, " +
      size(good.reduce(function (sum, item) { return sum + item.file.size; }, 0)) +
      (skipped ? "; " + skipped + " will be skipped." : ".") + (stop ? " " + stop : "");
    form.querySelector("[data-chosen]").hidden = chosen.length === 0;
    submit.disabled = Boolean(stop);
  }

  function fromInput(input) {
    add(Array.prototype.map.call(input.files, function (file) {
      return { file: file, path: file.webkitRelativePath || file.name };
    }));
    input.value = "";   // the list above is what gets sent, not the input
  }

  // A dropped folder is walked with the entries API; a browser without it gives plain files.
  function walk(entry) {
    if (entry.isFile) {
      return new Promise(function (resolve, reject) {
        entry.file(function (file) {
          resolve([{ file: file, path: entry.fullPath.replace(/^\//, "") }]);
        }, reject);
      });
    }
    var reader = entry.createReader(), entries = [];
    return new Promise(function (resolve, reject) {
      (function more() {
        reader.readEntries(function (batch) {
          if (batch.length) { entries = entries.concat(Array.prototype.slice.call(batch)); more(); return; }
          Promise.all(entries.map(walk)).then(function (lists) {
            resolve([].concat.apply([], lists));
          }, reject);
        }, reject);
      }());
    });
  }

  function onDrop(event) {
    event.preventDefault();
    zone.classList.remove("dragging");
    var transfer = event.dataTransfer, items = transfer.items || [];
    var entries = Array.prototype.map.call(items, function (item) {
      return item.webkitGetAsEntry ? item.webkitGetAsEntry() : null;
    }).filter(Boolean);
    if (!entries.length) {
      fromInput(transfer);
      return;
    }
    Promise.all(entries.map(walk)).then(function (lists) { add([].concat.apply([], lists)); });
  }

  // again: the files the server found already ingested unchanged, offered for a forced upload.
  function say(lines, link, again) {
    var items = lines.map(function (line) {
      var li = document.createElement("li");
      li.textContent = line;
      return li;
    });
    var ul = document.createElement("ul");
    ul.replaceChildren.apply(ul, items);
    outcome.replaceChildren(ul);
    if (again && again.length) {
      var button = document.createElement("button");
      button.type = "button";
      button.setAttribute("data-upload-again", "");
      button.textContent = "Upload again anyway";
      button.addEventListener("click", function () { upload(again, true); });
      outcome.appendChild(button);
    }
    if (link) {
      var a = document.createElement("a");
      a.href = link;
      a.textContent = "Continue to the batch";
      outcome.appendChild(a);
    }
    outcome.hidden = false;
    if (link) { outcome.querySelector("a").focus(); }
  }

  function rejections(body) {
    return (body.rejected || []).map(function (r) { return "Not accepted: " + r.message; });
  }

  // The chosen items the server answered as duplicates (matched by document id).
  function duplicatesOf(body, sent) {
    var ids = {};
    (body.tasks || []).forEach(function (t) { if (t.duplicate) { ids[t.document_id] = true; } });
    return sent.filter(function (item) { return ids[item.path]; });
  }

  function send(event) {
    event.preventDefault();
    var good = sendable();
    if (!chosen.length) { say(["Choose one or more files first."]); return; }
    if (!good.length || blocker(good)) { render(); return; }
    upload(good, form.querySelector("[data-force]").checked);
  }

  function upload(good, force) {
    var data = new FormData();
    good.forEach(function (item) {
      data.append("files", item.file, item.file.name);
      data.append("document_id", item.path);
    });
    if (force) { data.append("force", "1"); }
    var bar = progress.querySelector("progress");
    var percent = progress.querySelector("[data-upload-percent]");
    var xhr = new XMLHttpRequest();
    xhr.open("POST", form.getAttribute("data-api-url"));
    xhr.setRequestHeader("Accept", "application/json");
    xhr.upload.onprogress = function (e) {
      if (!e.lengthComputable) { return; }
      var value = Math.floor(100 * e.loaded / e.total);
      bar.value = value;
      percent.textContent = value + " %";
    };
    xhr.onload = function () {
      var body = {};
      try { body = JSON.parse(xhr.responseText); } catch (ignore) { body = {}; }
      submit.disabled = false;
      if (xhr.status === 202) {
        var lines = rejections(body), again = duplicatesOf(body, good);
        if (!lines.length && !again.length) { window.location.assign(body.page_url); return; }
        if (again.length) {
          lines.push(again.length + " of these files " + (again.length === 1 ? "was" : "were") +
            " already ingested unchanged and " + (again.length === 1 ? "was" : "were") +
            " not processed again: " + again.map(function (i) { return i.path; }).join(", "));
        }
        say(lines, body.page_url, again);
        return;
      }
      say([(body.error && body.error.message) || "The upload failed (HTTP " + xhr.status + ")."]
        .concat(rejections(body)));
    };
    xhr.onerror = function () {
      submit.disabled = false;
      say(["The upload did not reach the server. Check the connection and try again."]);
    };
    outcome.hidden = true;
    progress.hidden = false;
    submit.disabled = true;
    xhr.send(data);
  }

  form.querySelectorAll("input[type=file]").forEach(function (input) {
    input.addEventListener("change", function () { fromInput(input); });
  });
  form.querySelector("[data-clear]").addEventListener("click", function () { chosen = []; render(); });
  zone.addEventListener("dragover", function (event) {
    event.preventDefault();
    zone.classList.add("dragging");
  });
  zone.addEventListener("dragleave", function () { zone.classList.remove("dragging"); });
  zone.addEventListener("drop", onDrop);
  form.querySelector("[data-drop-hint]").hidden = false;
  form.addEventListener("submit", send);
}());
