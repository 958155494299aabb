// The job form: show the fields of the kind chosen, and keep the quote beside the submit
// button up to date as the fields that price the job change. Without a script, every field
// shows and the Quote button opens the quote on a page of its own.
(function () {
  "use strict";
  var form = document.getElementById("job-form");
  if (!form) return;
  var quote = document.getElementById("quote");
  var PRICED = ["price_ceiling", "timeout_s", "slices", "replicas", "gpu_tiers", "region"];
  var timer = null;

  function showKind() {
    var chosen = form.querySelector("input[name=kind]:checked");
    var kind = chosen ? chosen.value : "script";
    form.querySelectorAll("fieldset[data-kind]").forEach(function (group) {
      group.hidden = group.getAttribute("data-kind") !== kind;
    });
  }

  function fetchQuote() {
    var params = new URLSearchParams();
    new FormData(form).forEach(function (value, name) {
      if (PRICED.indexOf(name) >= 0 && typeof value === "string") params.append(name, value);
    });
    fetch(form.getAttribute("data-quote-url") + "?" + params.toString(), {
      credentials: "same-origin", cache: "no-store"
    })
      .then(function (r) { return r.text(); })
      .then(function (html) { quote.innerHTML = html; })
      .catch(function () { quote.textContent = "No quote: the hub did not answer."; });
  }

  function later() {
    clearTimeout(timer);
    timer = setTimeout(fetchQuote, 300);
  }

  form.addEventListener("change", function (event) {
    if (event.target.name === "kind") showKind();
    later();
  });
  form.addEventListener("input", function (event) {
    if (PRICED.indexOf(event.target.name) >= 0) later();
  });
  document.getElementById("quote-button").addEventListener("click", function (event) {
    event.preventDefault();
    fetchQuote();
  });
  showKind();
  fetchQuote();
})();
