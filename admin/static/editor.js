/* Gold-task picker: search-as-you-type over the product's own search (GET /admin/api/task-search),
 * progressive: without JavaScript the form still works (tick/untick, type ids into "Add task ids").
 * Keyboard: type, ArrowDown/ArrowUp to move, Enter to add, Escape to close. Text goes into the page
 * with textContent only (never innerHTML), so task names cannot inject markup. */
(function () {
  "use strict";
  var MAX_GOLD = 5;

  function setup(fieldset) {
    var box = fieldset.querySelector("[data-picker-search]");
    var input = box.querySelector("input[type=search]");
    var results = box.querySelector("[role=listbox]");
    var list = fieldset.querySelector("[data-picker-list]");
    var url = fieldset.getAttribute("data-search-url");
    var timer = null, active = -1, items = [], serial = 0;
    box.hidden = false;

    function picked() {
      return Array.prototype.map.call(list.querySelectorAll("input[name=gold]"), function (c) { return c.value; });
    }

    function close() {
      results.replaceChildren();
      items = [];
      active = -1;
      input.setAttribute("aria-expanded", "false");
      input.removeAttribute("aria-activedescendant");
    }

    function highlight(index) {
      items.forEach(function (li, i) { li.setAttribute("aria-selected", i === index ? "true" : "false"); });
      active = index;
      if (index >= 0) {
        input.setAttribute("aria-activedescendant", items[index].id);
        items[index].scrollIntoView({ block: "nearest" });
      }
    }

    function add(task) {
      var existing = list.querySelector("input[name=gold][value=\"" + CSS.escape(task.id) + "\"]");
      if (existing) {
        existing.checked = true;
      } else {
        if (picked().length >= MAX_GOLD) { return; }
        var li = document.createElement("li");
        var label = document.createElement("label");
        var box = document.createElement("input");
        box.type = "checkbox";
        box.name = "gold";
        box.value = task.id;
        box.checked = true;
        var code = document.createElement("code");
        code.textContent = task.id;
        label.append(box, " " + task.name + " ", code);
        li.append(label);
        list.append(li);
      }
      input.value = "";
      close();
      input.focus();
    }

    function show(tasks) {
      close();
      var already = picked();
      tasks.forEach(function (task, i) {
        var li = document.createElement("li");
        li.id = "gold-option-" + i;
        li.setAttribute("role", "option");
        li.setAttribute("aria-selected", "false");
        li.textContent = task.name + " (" + task.id + ")" + (already.indexOf(task.id) >= 0 ? " ✓" : "");
        li.addEventListener("mousedown", function (event) { event.preventDefault(); add(task); });
        results.append(li);
        items.push(li);
        li.task = task;
      });
      input.setAttribute("aria-expanded", items.length ? "true" : "false");
    }

    function search() {
      var text = input.value.trim();
      var mine = ++serial;
      if (!text) { close(); return; }
      fetch(url + "?q=" + encodeURIComponent(text), { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) { return response.ok ? response.json() : { tasks: [] }; })
        .then(function (body) { if (mine === serial) { show(body.tasks || []); } })
        .catch(function () { if (mine === serial) { close(); } });
    }

    input.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(search, 150);
    });
    input.addEventListener("keydown", function (event) {
      if (event.key === "ArrowDown" && items.length) {
        event.preventDefault();
        highlight((active + 1) % items.length);
      } else if (event.key === "ArrowUp" && items.length) {
        event.preventDefault();
        highlight(active <= 0 ? items.length - 1 : active - 1);
      } else if (event.key === "Enter") {
        event.preventDefault();  /* Enter picks a task; it never submits the form from here */
        if (items.length) { add(items[active >= 0 ? active : 0].task); }
      } else if (event.key === "Escape") {
        close();
      }
    });
    input.addEventListener("blur", function () { setTimeout(close, 150); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("[data-picker]"), setup);
  });
}());
