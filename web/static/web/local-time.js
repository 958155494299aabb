// Shows every <time datetime="…"> in the viewer's own time zone, to the second. The server
// writes UTC text, so a page reads correctly without this script too.
(function () {
  "use strict";
  var format = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric",
    hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23",
    timeZoneName: "short"
  });
  function localise(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      var moment = new Date(el.getAttribute("datetime"));
      if (isNaN(moment.getTime())) { return; }
      el.title = el.textContent;
      el.textContent = format.format(moment);
    });
  }
  document.addEventListener("DOMContentLoaded", function () { localise(document); });
})();
