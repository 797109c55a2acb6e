/*
 * The demo homepage's role switcher (widget/templates/widget/home.html): the visitor picks a role,
 * this asks the server for a short-lived role token (GET /demo/role-token, demo mode only) and
 * hands the widget a function that returns it (Taskfinder.setRoleToken), exactly as a host
 * platform hands the widget the token it signed for its signed-in user. The current search is
 * run again as the new role.
 */
(function (window, document) {
  "use strict";
  var form = document.getElementById("demo-roles");
  if (!form || !window.Taskfinder) return;
  var select = form.querySelector("select");
  var url = form.getAttribute("data-token-url");
  var cached = null;   // {role, token, until}
  var RENEW_BEFORE_MS = 30 * 1000;

  function token() {
    var role = select.value;
    if (!role) return null;
    if (cached && cached.role === role && cached.until - RENEW_BEFORE_MS > Date.now()) return cached.token;
    return window.fetch(url + "?role=" + encodeURIComponent(role), { credentials: "same-origin",
      headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (body) {
        if (!body || !body.token) return null;
        cached = { role: role, token: body.token, until: Date.now() + body.expires_in * 1000 };
        return body.token;
      });
  }

  window.Taskfinder.setRoleToken(token);
  form.addEventListener("submit", function (event) { event.preventDefault(); });
  select.addEventListener("change", function () {
    window.Taskfinder.instances.forEach(function (widget) {
      var query = widget.input.value.trim();
      if (query) widget.search(query);
    });
  });
})(window, document);
