// Refreshes <main> in place every data-refresh seconds: the layout, the
// scroll position and the footer stay; only the figures change. Same
// origin only (the Content-Security-Policy allows nothing else).
(function () {
  "use strict";
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
