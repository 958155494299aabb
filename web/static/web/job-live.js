// The job's page while the job runs: fetch its changing part again every 2 s and put it in
// place, until the part says the job has ended. Without a script the page is still whole.
(function () {
  "use strict";
  var box = document.getElementById("job-live");
  if (!box) return;
  var PERIOD_MS = 2000;
  function ended() {
    var section = box.querySelector("[data-ended]");
    return !section || section.getAttribute("data-ended") === "1";
  }
  function poll() {
    if (ended()) return;
    fetch(box.getAttribute("data-url"), { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) { box.innerHTML = html; })
      .catch(function () { /* a missed poll: the next one tries again */ })
      .then(function () { if (!ended()) setTimeout(poll, PERIOD_MS); });
  }
  setTimeout(poll, PERIOD_MS);
})();
