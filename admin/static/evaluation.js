// Follows a running evaluation: polls its JSON status, updates the progress bar and stage as
// text (never HTML), and reloads the page once the run has ended so that its report shows.
(function () {
  "use strict";
  var box = document.querySelector("[data-evaluation-status]");
  if (!box || !window.fetch) { return; }
  var url = box.getAttribute("data-evaluation-status");
  var bar = box.querySelector("progress");
  var stage = box.querySelector("[data-stage]");
  var percent = box.querySelector("[data-percent]");

  function show(run) {
    var share = Math.round(run.progress * 100) + "%";
    bar.value = run.progress;
    bar.textContent = share;
    stage.textContent = run.stage;
    percent.textContent = share;
  }

  function poll() {
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("status " + response.status); }
        return response.json();
      })
      .then(function (run) {
        if (run.status === "done" || run.status === "failed" || run.stalled) {
          window.location.reload();
          return;
        }
        show(run);
        window.setTimeout(poll, 2000);
      })
      .catch(function () { window.setTimeout(poll, 5000); });
  }

  window.setTimeout(poll, 2000);
}());
