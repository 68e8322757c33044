// Asks before a form that cannot be undone is sent (docs/architecture.md §6): a form with
// data-confirm="question" is sent only once the person says OK, with confirmed=1 added so the
// server does not ask again. Without JavaScript the server asks with a page of its own.
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute ? form.getAttribute("data-confirm") : null;
    if (!question) { return; }
    if (!window.confirm(question)) {
      event.preventDefault();
      return;
    }
    var confirmed = form.querySelector('input[name="confirmed"]');
    if (!confirmed) {
      confirmed = document.createElement("input");
      confirmed.type = "hidden";
      confirmed.name = "confirmed";
      form.appendChild(confirmed);
    }
    confirmed.value = "1";
  });
}());
