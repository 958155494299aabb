// Shows every <time datetime="…"> in the viewer's own time zone, to the second, and tells the hub
// that zone for what it formats itself. The server writes UTC text, so a page reads correctly
// without this script too.
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
  // The hub renders what it formats itself (the admin's lists) in the zone this cookie names
  // (core.viewer_zone): a year, on the whole site, sent over HTTPS where the page came by it.
  var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  if (zone && /^[A-Za-z0-9_+\/-]+$/.test(zone)) {  // IANA names need no escaping
    document.cookie = "tz=" + zone + "; path=/; max-age=31536000; SameSite=Lax" +
      (location.protocol === "https:" ? "; Secure" : "");
  }
  document.addEventListener("DOMContentLoaded", function () { localise(document); });
})();
