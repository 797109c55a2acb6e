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
  /** "Try “a”, “b” or “c”." with the picked viewer's examples (data-examples on its <option>:
   *  test cases it gets a right answer for, widget.blueprint.example_searches), as text. */
  function showExamples() {
    var target = document.getElementById("home-examples");
    var option = select.options[select.selectedIndex];
    if (!target || !option) return;
    var examples = [];
    try { examples = JSON.parse(option.getAttribute("data-examples") || "[]"); } catch (e) { examples = []; }
    target.textContent = examples.length ? "Try " + examples.map(function (text, i) {
      return (i === 0 ? "" : i === examples.length - 1 ? " or " : ", ") + "“" + text + "”";
    }).join("") + "." : "";
  }

  showExamples();   // a role the browser kept selected on reload or Back
  select.addEventListener("change", function () {
    showExamples();
    window.Taskfinder.instances.forEach(function (widget) {
      var query = widget.input.value.trim();
      if (query) widget.search(query);
    });
  });
})(window, document);
