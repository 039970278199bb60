// Refreshes <main> in place every data-refresh seconds: the layout, the
// scroll position and the footer stay; only the figures change. Same
// origin only (the Content-Security-Policy allows nothing else).
(function () {
  "use strict";
  // The day bars: on the first hover, every day gets its figures as a
  // title, from the uptime JSON.
  function percent(share) { return (Math.floor(share * 10000) / 100).toFixed(2) + "%"; }
  function ms(value) { return value >= 1000 ? (value / 1000).toFixed(1) + " s" : Math.round(value) + " ms"; }
  function describe(day) {
    var counts = [day.up + " up"];
    if (day.warn > 0) { counts.push(day.warn + " warn"); }
    if (day.down > 0) { counts.push(day.down + " down"); }
    var text = day.date + ": " + percent(day.uptime) + " up (" + counts.join(", ") + ")";
    if (day.p50_ms !== null && day.p95_ms !== null) { text += ", p50 " + ms(day.p50_ms) + ", p95 " + ms(day.p95_ms); }
    return text;
  }
  document.addEventListener("mouseover", function (event) {
    var bar = event.target.closest ? event.target.closest("div.bar[data-uptime]") : null;
    if (!bar || bar.getAttribute("data-described")) { return; }
    bar.setAttribute("data-described", "pending");
    fetch(bar.getAttribute("data-uptime"), { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (answer) {
        if (!answer) { return; }
        var byDate = {};
        answer.days.forEach(function (day) { byDate[day.date] = day; });
        var from = new Date(bar.getAttribute("data-from") + "T00:00:00Z");
        Array.prototype.forEach.call(bar.children, function (cell, i) {
          var date = new Date(from.getTime() + i * 86400000).toISOString().slice(0, 10);
          var day = byDate[date];
          cell.title = day && day.uptime !== null ? describe(day) : date + ": no results";
        });
        bar.setAttribute("data-described", "yes");
      })
      .catch(function () { bar.removeAttribute("data-described"); });
  });

  var main = document.querySelector("main[data-refresh]");
  if (!main || !window.fetch || !window.DOMParser) { return; }
  var every = parseInt(main.getAttribute("data-refresh"), 10) * 1000;
  function refresh() {
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (text) {
        if (!text) { return; }
        var page = new DOMParser().parseFromString(text, "text/html");
        var fresh = page.querySelector("main");
        var footer = page.querySelector("footer");
        if (fresh) { main.innerHTML = fresh.innerHTML; }
        if (footer) { document.querySelector("footer").innerHTML = footer.innerHTML; }
        main.setAttribute("data-refreshed", new Date().toISOString());
      })
      .catch(function () { /* the next tick tries again */ });
  }
  window.setInterval(refresh, every);
})();
