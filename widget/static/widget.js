/*
 * Taskfinder search widget: one dependency-free script, no build step (docs/notes/widget.md).
 *
 *   <link rel="stylesheet" href="https://taskfinder.example/widget.css">
 *   <div id="taskfinder"></div>
 *   <script src="https://taskfinder.example/widget.js" data-endpoint="https://taskfinder.example/api"
 *           data-target="#taskfinder" defer></script>
 *
 * Type-ahead shows the instant prefilter ranking (rerank=0) 120 ms after the last keystroke and
 * the re-ranked list (rerank=1) on Enter or after a 700 ms pause, unless the API says re-ranking is
 * unavailable (`rerank_available: false`: the instant list is final; a pause before any answer has
 * said waits for it). The input is a WAI-ARIA 1.2
 * combobox with a listbox popup: first the whole queries the same answer suggests (`completions`:
 * choosing one puts it in the box and searches it), then the tasks; the arrow keys walk both;
 * Enter with none active opens the first task. Back on the page a task was opened from, the
 * search is brought back (sessionStorage). Every string from the API is inserted with textContent (never
 * innerHTML), task URLs must be http(s), and nothing is inline, so the widget runs under a
 * Content-Security-Policy of script-src 'self'. Searches, clicks, dwell and returns are posted
 * to <endpoint>/events with an opaque per-tab session id (sessionStorage).
 */
(function (window, document) {
  "use strict";

  var DEFAULTS = {
    endpoint: null,          // API base URL, e.g. "https://taskfinder.example/api" (default: /api beside widget.js)
    target: "#taskfinder",   // CSS selector (or element) of the container the widget fills
    k: 8,                    // results shown
    completions: 5,          // suggested whole queries shown above the results (0: none)
    label: "Search tasks",   // the input's accessible name (a visible label)
    placeholder: "Describe what you need to do",
    roleToken: null,         // signed role token of the host (string, or a function returning one or a Promise)
    rerank: true,            // ask for the re-ranked list once the person pauses or presses Enter
    linkBase: null,          // base URL for relative task URLs (default: the host page)
    analytics: true,         // post impression/click/dwell/return events to <endpoint>/events
    debounceMs: 120,         // instant ranking this long after the last keystroke
    settleMs: 700,           // re-ranked list after this pause
    stallMs: 300,            // loading indicator only once a request takes this long
    slowMs: 2500,            // "taking longer than usual" after this long
    timeoutMs: 8000,         // an instant request is given up after this long
    rerankTimeoutMs: 25000,  // a re-ranked request (an LLM may answer it) after this long
    maxLength: 256,          // the API's MAX_QUERY_CHARS default
    lang: null,              // the language people type in here (default: the host page's <html lang>),
                             // sent as the API's `lang`: read only where a query's words show none
    roleHint: null           // where the host page lets a visitor pick a role, as the "N hidden" line
                             // names it ("choose a role under “Search as”"); null: a generic line
  };
  var SESSION_KEY = "taskfinder.session";
  var PENDING_KEY = "taskfinder.pending";
  var PENDING_MAX_AGE_MS = 30 * 60 * 1000;
  var SEARCHES_KEY = "taskfinder.searches";   // {"<page URL> <widget id>": {query, at}}: brought back on return
  var SEARCH_MAX_AGE_MS = 30 * 60 * 1000;
  var EVENT_FLUSH_MS = 1000;
  var EVENT_BATCH_MAX = 50;
  var TEXT_FIELDS = { name: true, aliases: true, help: true, category: true };
  var MESSAGES = {
    noConfident: "No confident match",   // an answer without `empty_state` (a server before issue 43 item 2)
    noResults: "No tasks found",
    // the API's `empty_state` (search/suggestions.py): "unsure" offers what it is unsure between,
    // "nothing" is sure no task matches
    unsure: "Not sure which task you mean",
    unsureBetween: "Is it one of these?",
    nothing: "Nothing matches",
    tryInstead: "Try one of these instead:",
    tryWords: "Try other words for what you need to do.",
    slow: "Search is taking longer than usual…",
    down: "Search is unavailable right now. Please try again in a moment.",
    busy: "Too many searches right now. Please wait a moment and try again.",
    quickOnly: "Showing quick results: refining them is unavailable right now.",
    reduced: "Search is running in a reduced mode right now; results may be less accurate.",
    noLink: "This task has no link.",
    completion: "suggested search",
    // `credential`: the response's access.credential ("none", "verified" or "rejected", api/roles.py)
    // `roleHint`: the host's words for where a role is picked (DEFAULTS.roleHint)
    hidden: function (n, credential, roleHint) {
      var count = n === 1 ? "1 result" : n + " results";
      var them = n === 1 ? "it" : "them";
      if (credential === "verified") return count + " hidden — only other roles can see " + them;
      if (credential === "rejected") return count + " hidden — your role could not be verified";
      if (roleHint) return count + " hidden — " + roleHint + " to see " + them;
      return count + " hidden — " + (n === 1 ? "it is" : "they are") + " for staff with a role";
    }
  };
  var counter = 0;
  var queues = {};
  var memorySession = null;

  // -- small helpers --------------------------------------------------------------------------
  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text != null) node.textContent = String(text);
    return node;
  }

  function randomId() {
    var bytes = new Uint8Array(16);
    (window.crypto || window.msCrypto).getRandomValues(bytes);
    var out = "";
    for (var i = 0; i < bytes.length; i++) out += (bytes[i] + 256).toString(16).slice(1);
    return out;
  }

  function storage() {
    try { return window.sessionStorage; } catch (e) { return null; }
  }

  /** The opaque per-tab session id (sessionStorage; in memory where storage is refused). */
  function sessionId() {
    var store = storage();
    try {
      var existing = store && store.getItem(SESSION_KEY);
      if (existing) return existing;
      var fresh = randomId();
      if (store) { store.setItem(SESSION_KEY, fresh); return fresh; }
    } catch (e) { /* storage full or blocked: fall through */ }
    return memorySession || (memorySession = randomId());
  }

  function readJson(key) {
    var store = storage();
    try { return store ? JSON.parse(store.getItem(key) || "null") : null; } catch (e) { return null; }
  }

  function writeJson(key, value) {
    var store = storage();
    try {
      if (!store) return;
      if (value == null) store.removeItem(key); else store.setItem(key, JSON.stringify(value));
    } catch (e) { /* ignore */ }
  }

  function fold(text) {
    return String(text).toLowerCase().normalize("NFD").replace(/[\u0300-\u036f]/g, "");
  }

  function numberOr(raw, fallback) {
    var value = Number(raw);
    return raw != null && raw !== "" && isFinite(value) && value >= 0 ? value : fallback;
  }

  function flag(raw, fallback) {
    if (raw == null || raw === "") return fallback;
    return !/^(0|false|no|off)$/i.test(String(raw));
  }

  function withoutHash(href) {
    return String(href).split("#")[0];
  }

  /** A task URL as an absolute http(s) URL, or null (javascript:, data: and garbage never open). */
  function safeUrl(raw, base) {
    if (!raw) return null;
    try {
      var url = new URL(String(raw), base || document.baseURI);
      return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
    } catch (e) { return null; }
  }

  function sameOrigin(url) {
    try { return new URL(url, document.baseURI).origin === window.location.origin; } catch (e) { return false; }
  }

  // -- analytics events ------------------------------------------------------------------------
  /** Batches events per endpoint and posts them as {session_id, events}: fetch with keepalive
   *  normally, navigator.sendBeacon when the page is being left. `token`: the role token of the
   *  latest search (set by Widget.request), sent along as the search sent it, so that the server
   *  can count a verified person's sessions apart from the rest of their office's address. */
  function EventQueue(url) {
    this.url = url;
    this.events = [];
    this.timer = null;
    this.token = null;
  }

  /** Where and how to post: a same-origin fetch carries the token as its header; a beacon (it
   *  cannot set headers) and a cross-origin fetch (no CORS preflight) as `role_token`. */
  EventQueue.prototype.target = function (beacon) {
    var headers = { "Content-Type": "application/json" };
    if (!this.token) return { url: this.url, headers: headers };
    if (!beacon && sameOrigin(this.url)) {
      headers.Authorization = "Bearer " + this.token;
      return { url: this.url, headers: headers };
    }
    var url = new URL(this.url, document.baseURI);
    url.searchParams.set("role_token", this.token);
    return { url: url.href, headers: headers };
  };

  EventQueue.prototype.push = function (event, urgent) {
    this.events.push(event);
    if (urgent || this.events.length >= EVENT_BATCH_MAX) { this.flush(urgent); return; }
    if (!this.timer) this.timer = window.setTimeout(this.flush.bind(this, false), EVENT_FLUSH_MS);
  };

  EventQueue.prototype.flush = function (leaving) {
    window.clearTimeout(this.timer);
    this.timer = null;
    while (this.events.length) {
      var body = JSON.stringify({ session_id: sessionId(), events: this.events.splice(0, EVENT_BATCH_MAX) });
      if (leaving && navigator.sendBeacon && sameOrigin(this.url)) {
        try {
          if (navigator.sendBeacon(this.target(true).url, new Blob([body], { type: "application/json" }))) continue;
        } catch (e) { /* fall back to fetch */ }
      }
      try {
        var target = this.target(false);
        window.fetch(target.url, { method: "POST", body: body, keepalive: true, credentials: "omit",
          headers: target.headers }).catch(function () {});
      } catch (e) { /* analytics never breaks the search */ }
    }
  };

  function queueFor(endpoint) {
    var url = endpoint + "/events";
    return queues[url] || (queues[url] = new EventQueue(url));
  }

  function flushAll() {
    for (var url in queues) if (Object.prototype.hasOwnProperty.call(queues, url)) queues[url].flush(true);
  }

  // -- explanations ----------------------------------------------------------------------------
  function unique(list) {
    var seen = {}, out = [];
    for (var i = 0; i < list.length; i++) if (!seen[list[i]]) { seen[list[i]] = true; out.push(list[i]); }
    return out;
  }

  function quoted(words) {
    return "“" + words.join("”, “") + "”";
  }

  /** The words of the query that matched in `field` (and their corrections), for highlighting. */
  function matchedWords(row, field) {
    var words = [];
    (row.matched || []).forEach(function (m) {
      if (m.field !== field) return;
      words.push(fold(m.corrected_to || m.begins || m.term));
      if (!m.corrected_to && !m.begins) words.push(fold(m.term));
    });
    return unique(words);
  }

  /** One line saying why this task is here: the LLM's reason if it gave one, else the strongest
   *  signals put into words. */
  function whyLine(row) {
    if (row.reason) return String(row.reason);
    if (row.pinned) return "The saved answer for this exact search";
    var direct = [], fixed = [], begun = [], read = {};
    (row.matched || []).forEach(function (m) {
      if (m.begins) {
        // the last word still being typed: it begins the task's word (search/prefilter.py,
        // fragment_readings), it is not read as another finished word
        if (TEXT_FIELDS[m.field]) begun.push("“" + m.term + "” begins “" + m.begins + "”");
      } else if (m.corrected_to) {
        // once per typed word: the first reading is the closest the API explains (search/prefilter.py,
        // explanation_targets, which leaves out any "correction" of a word spelled right)
        if (!Object.prototype.hasOwnProperty.call(read, m.term)) fixed.push("“" + m.term + "” as “" + m.corrected_to + "”");
        read[m.term] = true;
      } else if (TEXT_FIELDS[m.field]) direct.push(m.term);
    });
    var contributions = row.contributions || {};
    // each signal named by where its evidence comes from, as the API says it (`signal_phrases`:
    // search/signal/, for the signals that added to this score; `learned` only where use did)
    var phrases = row.signal_phrases || {};
    var parts = [];
    if (direct.length) parts.push("matches " + quoted(unique(direct)));
    if (begun.length) parts.push(unique(begun)[0]);
    if (fixed.length && contributions.typo > 0) parts.push("reads " + unique(fixed).join(", "));
    Object.keys(contributions)
      .filter(function (name) { return contributions[name] > 0 && phrases[name]; })
      .sort(function (a, b) { return contributions[b] - contributions[a]; })
      .forEach(function (name) { parts.push(String(phrases[name])); });
    parts = unique(parts).slice(0, 2);
    if (!parts.length) return "The closest task the search found";
    var line = parts.join(" · ");
    return line.charAt(0).toUpperCase() + line.slice(1);
  }

  /** The API's label for the category ("ERSEA", "Human Resources"), else the identifier with
   *  spaces for underscores (as written: no guessed capitals). */
  function categoryLabel(row) {
    return String(row.category_label || String(row.category).replace(/_/g, " "));
  }

  function highlights(token, words) {
    var t = fold(token);
    for (var i = 0; i < words.length; i++) {
      var w = words[i], shorter = t.length < w.length ? t : w, longer = shorter === t ? w : t;
      if (shorter === longer || (shorter.length >= 3 && longer.indexOf(shorter) === 0)) return true;
    }
    return false;
  }

  /** Append `text` to `parent`, wrapping the words that match `words` in <mark> (text nodes only). */
  function appendHighlighted(parent, text, words) {
    text = String(text || "");
    if (!words.length) { parent.appendChild(document.createTextNode(text)); return; }
    var pattern = /[0-9A-Za-z\u00C0-\u024F]+/g, last = 0, match;
    while ((match = pattern.exec(text)) !== null) {
      if (!highlights(match[0], words)) continue;
      if (match.index > last) parent.appendChild(document.createTextNode(text.slice(last, match.index)));
      parent.appendChild(el("mark", "tf-mark", match[0]));
      last = match.index + match[0].length;
    }
    if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
  }

  // -- the widget ------------------------------------------------------------------------------
  function Widget(container, options) {
    this.opts = options;
    this.id = "tf" + (++counter);
    this.endpoint = String(options.endpoint).replace(/\/+$/, "");
    this.roleToken = options.roleToken;
    this.events = options.analytics ? queueFor(this.endpoint) : null;
    this.seq = 0;
    this.controller = null;
    this.timers = {};
    this.list = null;         // {query, searchId, results, completions, final, stage}
    this.active = -1;
    this.settledQuery = null;
    this.impressed = {};
    this.dismissed = false;   // closed by Escape: answers arriving later do not reopen it
    this.rerankAvailable = null;   // unknown until the API says (rerank_available in each answer)
    this.rerankDeferred = null;    // a query that settled before any answer said whether re-ranking exists
    this.opening = null;      // {name, returnTo}: a task suggestion being opened (openNamed)
    this.build(container);
    this.resumePending();
    this.restore();
  }

  Widget.prototype.build = function (container) {
    var id = this.id;
    var root = this.root = el("div", "tf-widget");
    var label = el("label", "tf-label", this.opts.label);
    label.htmlFor = id + "-input";
    var box = el("div", "tf-box");
    var input = this.input = el("input", "tf-input");
    input.id = id + "-input";
    input.type = "text";
    input.setAttribute("role", "combobox");
    input.setAttribute("aria-autocomplete", "list");
    input.setAttribute("aria-expanded", "false");
    input.setAttribute("aria-controls", id + "-listbox");
    input.setAttribute("autocomplete", "off");
    input.setAttribute("autocapitalize", "off");
    input.setAttribute("spellcheck", "false");
    input.setAttribute("enterkeyhint", "search");
    input.maxLength = this.opts.maxLength;
    if (this.opts.placeholder) input.placeholder = this.opts.placeholder;
    this.spinner = el("span", "tf-spinner");
    this.spinner.setAttribute("aria-hidden", "true");
    box.appendChild(input);
    box.appendChild(this.spinner);

    var popup = this.popup = el("div", "tf-popup");
    popup.hidden = true;
    this.notice = el("p", "tf-notice");
    this.notice.hidden = true;
    var listbox = this.listbox = el("ul", "tf-listbox");
    listbox.id = id + "-listbox";
    listbox.setAttribute("role", "listbox");
    listbox.setAttribute("aria-label", this.opts.label + ": results");
    listbox.hidden = true;
    this.empty = el("div", "tf-empty");
    this.empty.hidden = true;
    popup.appendChild(this.notice);
    popup.appendChild(listbox);
    popup.appendChild(this.empty);
    this.hiddenNote = el("p", "tf-hidden");
    this.hiddenNote.hidden = true;
    popup.appendChild(this.hiddenNote);

    this.live = el("div", "tf-live");
    this.live.setAttribute("role", "status");
    this.live.setAttribute("aria-live", "polite");

    root.appendChild(label);
    root.appendChild(box);
    root.appendChild(popup);
    root.appendChild(this.live);
    while (container.firstChild) container.removeChild(container.firstChild);
    container.appendChild(root);

    input.addEventListener("input", this.onInput.bind(this));
    input.addEventListener("keydown", this.onKeydown.bind(this));
    listbox.addEventListener("mousedown", function (event) { event.preventDefault(); });  // keep focus in the input
    listbox.addEventListener("click", this.onOptionClick.bind(this));
    this.empty.addEventListener("click", this.onSuggestionClick.bind(this));
    root.addEventListener("focusout", this.onFocusOut.bind(this));
  };

  // -- input and keyboard ----------------------------------------------------------------------
  /** What was typed, with one trailing space kept where the person typed one: it tells the API
   *  that the last word is finished, not the start of a longer one (docs/prefix-search.md). */
  Widget.prototype.query = function () {
    var typed = this.input.value.replace(/^\s+/, "");
    return typed.trim() ? typed.replace(/\s+$/, " ") : "";
  };

  Widget.prototype.clearTimers = function () {
    window.clearTimeout(this.timers.debounce);
    window.clearTimeout(this.timers.settle);
    this.rerankDeferred = null;
  };

  /** Whether the list shown answers what is in the box now (not an older query still being typed over). */
  Widget.prototype.answersInput = function () {
    return !!this.list && this.list.query === this.query();
  };

  Widget.prototype.onInput = function () {
    var self = this, query = this.query();
    this.opening = null;
    this.clearTimers();
    this.setActive(-1);
    this.dismissed = false;
    if (!query) { this.reset(); return; }
    this.timers.debounce = window.setTimeout(function () { self.request(query, false); }, this.opts.debounceMs);
    this.timers.settle = window.setTimeout(function () { self.settle(query); }, this.opts.settleMs);
  };

  /** The person paused: ask for the re-ranked list, or (re-ranking off) take the instant one as final.
   *  Before any answer has said whether re-ranking exists (a slow first answer), the instant
   *  answer decides when it comes (show): a server without an LLM is never asked to re-rank. */
  Widget.prototype.settle = function (query) {
    this.settledQuery = query;
    if (this.opts.rerank && this.rerankAvailable === null) { this.rerankDeferred = query; return; }
    if (this.wantsRerank()) { this.request(query, true); return; }
    if (this.list && this.list.query === query && !this.list.final) this.finalise();
  };

  Widget.prototype.submit = function () {
    var query = this.query();
    this.clearTimers();
    this.dismissed = false;
    this.opening = null;
    if (!query) return;
    this.settledQuery = query;
    this.request(query, this.wantsRerank(), true);
  };

  /** Whether to ask for the re-ranked list: the host wants it and the API has not said that
   *  re-ranking is unavailable (`rerank_available: false`, no LLM configured). */
  Widget.prototype.wantsRerank = function () {
    return !!this.opts.rerank && this.rerankAvailable !== false;
  };

  Widget.prototype.onKeydown = function (event) {
    var key = event.key, count = this.optionCount();
    if (event.ctrlKey || event.metaKey || event.isComposing) return;
    if (key === "ArrowDown" || key === "Down") {
      if (event.altKey) {
        if (count) this.open(); else if (this.query()) this.submit();
      } else if (!this.isOpen()) {
        if (!count) return;
        this.open();
        this.setActive(0);
      } else if (count) {
        this.setActive((this.active + 1) % count);
      }
      event.preventDefault();
    } else if (key === "ArrowUp" || key === "Up") {
      if (event.altKey) {
        this.close();
      } else if (!this.isOpen()) {
        if (!count) return;
        this.open();
        this.setActive(count - 1);
      } else if (count) {
        this.setActive(this.active <= 0 ? count - 1 : this.active - 1);
      }
      event.preventDefault();
    } else if (key === "Enter") {
      event.preventDefault();   // never submits a host form around the widget
      if (this.isOpen() && this.active >= 0) this.choose(this.active);
      else if (this.isOpen() && this.answersInput() && this.list.results.length) this.select(0);   // the first task
      else this.submit();   // nothing listed for what is typed (yet): search it now
    } else if (key === "Escape" || key === "Esc") {
      if (this.isOpen()) {
        this.close();
        this.dismissed = true;
        event.preventDefault();
      } else if (this.input.value) {
        this.input.value = "";
        this.reset();
        event.preventDefault();
      }
    }
  };

  Widget.prototype.onFocusOut = function (event) {
    if (!event.relatedTarget || !this.root.contains(event.relatedTarget)) this.close();
  };

  Widget.prototype.onOptionClick = function (event) {
    var option = event.target.closest ? event.target.closest("[role=option]") : null;
    if (!option || !this.listbox.contains(option)) return;
    if (option.hasAttribute("data-completion")) this.complete(option.getAttribute("data-completion"));
    else this.select(Number(option.getAttribute("data-index")));
  };

  /** A completion chosen (click, or Enter on it): it becomes the query and is searched. */
  Widget.prototype.complete = function (text) {
    this.input.value = String(text);
    this.input.focus();
    this.submit();
  };

  Widget.prototype.onSuggestionClick = function (event) {
    var button = event.target.closest ? event.target.closest("button.tf-suggestion") : null;
    if (!button) return;
    this.input.focus();
    if (button.getAttribute("data-kind") === "task") { this.openNamed(button.textContent); return; }
    this.input.value = button.textContent;   // a spelling or topic suggestion: search for it
    this.submit();
  };

  /** A suggestion that names a task (`kind: "task"`; the API gives its name only): search the
   *  name as a whole query and open the result of that name (show) once it is listed, as if it
   *  had been chosen from the list. Back brings back the query the suggestion was offered for. */
  Widget.prototype.openNamed = function (name) {
    this.clearTimers();
    this.dismissed = false;
    this.opening = { name: String(name), returnTo: this.query() };
    this.request(this.opening.name, false, true);
  };

  /** The option at `index` of the listbox: a completion (searched) or a task (opened). */
  Widget.prototype.choose = function (index) {
    var completions = this.list ? this.list.completions : [];
    if (index < completions.length) this.complete(completions[index].text);
    else this.select(index - completions.length);
  };

  // -- popup state -----------------------------------------------------------------------------
  Widget.prototype.optionCount = function () {
    return this.list ? this.list.completions.length + this.list.results.length : 0;
  };

  Widget.prototype.isOpen = function () {
    return !this.popup.hidden;
  };

  Widget.prototype.open = function () {
    this.dismissed = false;
    this.popup.hidden = false;
    this.syncExpanded();
  };

  /** Show an answer that arrived: only while the person is in the widget and has not dismissed it. */
  Widget.prototype.reveal = function () {
    if (!this.dismissed && this.root.contains(document.activeElement)) this.open();
    this.syncExpanded();
  };

  Widget.prototype.close = function () {
    this.setActive(-1);
    this.popup.hidden = true;
    this.syncExpanded();
  };

  /** aria-expanded: true exactly while the listbox (with options) is displayed. */
  Widget.prototype.syncExpanded = function () {
    var shown = !this.popup.hidden && !this.listbox.hidden;
    this.input.setAttribute("aria-expanded", shown ? "true" : "false");
  };

  Widget.prototype.setActive = function (index) {
    var options = this.listbox.children;
    if (this.active >= 0 && options[this.active]) {
      options[this.active].setAttribute("aria-selected", "false");
      options[this.active].classList.remove("tf-active");
    }
    this.active = index >= 0 && index < options.length ? index : -1;
    if (this.active < 0) { this.input.removeAttribute("aria-activedescendant"); return; }
    var option = options[this.active];
    option.setAttribute("aria-selected", "true");
    option.classList.add("tf-active");
    this.input.setAttribute("aria-activedescendant", option.id);
    if (option.scrollIntoView) option.scrollIntoView({ block: "nearest" });
  };

  Widget.prototype.reset = function () {
    this.abort();
    this.clearTimers();
    this.opening = null;
    this.remember(null);   // emptied on purpose: not brought back
    this.list = null;
    this.settledQuery = null;
    this.setBusy(false);
    this.renderResults([], []);
    this.showEmpty(null);
    this.showHidden(0);
    this.setNotice(null);
    this.close();
    this.announce("");
  };

  Widget.prototype.setNotice = function (text, kind) {
    this.notice.textContent = text || "";
    this.notice.hidden = !text;
    this.notice.className = "tf-notice" + (kind ? " tf-notice-" + kind : "");
  };

  Widget.prototype.setBusy = function (busy) {
    this.root.classList.toggle("tf-busy", !!busy);
    if (busy) this.listbox.setAttribute("aria-busy", "true"); else this.listbox.removeAttribute("aria-busy");
  };

  Widget.prototype.announce = function (text) {
    this.live.textContent = text;
  };

  // -- requests --------------------------------------------------------------------------------
  Widget.prototype.abort = function () {
    this.seq++;   // whatever is in flight is now stale, answered or not
    if (this.controller) this.controller.abort();
    this.controller = null;
    window.clearTimeout(this.timers.stall);
    window.clearTimeout(this.timers.slow);
    window.clearTimeout(this.timers.timeout);
  };

  Widget.prototype.token = function () {
    var token = this.roleToken;
    try { token = typeof token === "function" ? token() : token; } catch (e) { token = null; }
    return Promise.resolve(token).catch(function () { return null; });
  };

  /** One search request; a newer one aborts it, and a response whose sequence number is no longer
   *  the latest is dropped (a stale answer never overwrites a newer one). */
  /** What the person sees now: the query of the list shown and its task ids (null: no list). */
  Widget.prototype.onScreen = function () {
    var list = this.list;
    return list ? { query: list.query, ids: list.results.map(function (row) { return String(row.id); }) } : null;
  };

  /** `screen` ({query, ids}, optional): what is on screen instead of the list shown (a restored search). */
  Widget.prototype.request = function (query, rerank, submitted, screen) {
    var self = this;
    this.abort();
    // The list shown no longer answers what was asked: it stops being final until the answer
    // comes (a host or a test waiting on data-final must not read the previous query's list).
    this.root.removeAttribute("data-final");
    var seq = this.seq, controller = window.AbortController ? new AbortController() : null;
    var timedOut = false;
    this.controller = controller;
    this.timers.stall = window.setTimeout(function () { if (seq === self.seq) self.setBusy(true); }, this.opts.stallMs);
    this.timers.slow = window.setTimeout(function () {
      if (seq === self.seq) { self.setNotice(MESSAGES.slow, "slow"); self.reveal(); }
    }, this.opts.slowMs);
    this.timers.timeout = window.setTimeout(function () {
      timedOut = true;
      if (controller) controller.abort();
      if (seq === self.seq) self.failed(query, rerank, "timeout");
    }, rerank ? this.opts.rerankTimeoutMs : this.opts.timeoutMs);

    this.token().then(function (token) {
      if (seq !== self.seq) return null;
      if (self.events) self.events.token = token || null;   // its events go with the same credential
      var url = new URL(self.endpoint + "/search", document.baseURI);
      url.searchParams.set("q", query);
      url.searchParams.set("k", String(self.opts.k));
      url.searchParams.set("rerank", rerank ? "1" : "0");
      // Enter: a whole query, judged as one; a keystroke (or a pause in typing): still being typed,
      // ranked and judged as a prefix (the fit's typing weights and thresholds, set on every
      // keystroke length); a restored search: as its text reads (the prefilter's reading)
      if (submitted) url.searchParams.set("typing", "0");
      else if (!screen) url.searchParams.set("typing", "1");
      var onScreen = screen || self.onScreen();
      if (!submitted && onScreen && onScreen.ids.length) {
        // What the person sees now: while the new text extends it, a task on screen is not
        // withdrawn unless the new characters speak against it (the API's `after` and `shown`).
        url.searchParams.set("after", onScreen.query);
        url.searchParams.set("shown", onScreen.ids.join(","));
      }
      var lang = pageLanguage(self.opts.lang);
      if (lang) url.searchParams.set("lang", lang);
      url.searchParams.set("session", sessionId());
      var headers = { Accept: "application/json" };
      if (token) {
        // Same origin: the header (kept out of URLs and logs). Cross-origin: the query parameter,
        // which needs no CORS preflight.
        if (sameOrigin(url.href)) headers.Authorization = "Bearer " + token;
        else url.searchParams.set("role_token", token);
      }
      return window.fetch(url.href, { headers: headers, credentials: "omit", signal: controller ? controller.signal : undefined })
        .then(function (response) {
          return response.json().catch(function () { return null; }).then(function (body) {
            return { status: response.status, body: body };
          });
        });
    }).then(function (answer) {
      if (!answer || seq !== self.seq || timedOut) return;
      self.finish();
      self.answered(query, rerank, answer.status, answer.body);
    }, function (error) {
      if (seq !== self.seq || timedOut) return;   // aborted by a newer request, or already timed out
      self.finish();
      self.failed(query, rerank, error && error.name === "AbortError" ? "aborted" : "network");
    });
  };

  Widget.prototype.finish = function () {
    window.clearTimeout(this.timers.stall);
    window.clearTimeout(this.timers.slow);
    window.clearTimeout(this.timers.timeout);
    this.controller = null;
    this.setBusy(false);
  };

  Widget.prototype.answered = function (query, rerank, status, body) {
    if (status === 200 && body && Array.isArray(body.results)) {
      this.show(query, rerank, body);
    } else if (status === 429) {
      this.failedWith(query, rerank, MESSAGES.busy);
    } else if (status >= 400 && status < 500 && body && body.error) {
      this.failedWith(query, rerank, String(body.error));
    } else {
      this.failed(query, rerank, "server");
    }
  };

  Widget.prototype.failed = function (query, rerank) {
    this.finish();
    this.failedWith(query, rerank, MESSAGES.down);
  };

  /** A failed request: a re-ranking that fails keeps the instant list of the same query (and
   *  says so); anything else clears the results and says what happened. */
  Widget.prototype.failedWith = function (query, rerank, message) {
    this.opening = null;
    var keep = rerank && this.list && this.list.query === query && this.list.results.length;
    if (keep && message === MESSAGES.down) {
      this.setNotice(MESSAGES.quickOnly, "degraded");
      this.finalise();
    } else {
      this.list = null;
      this.renderResults([], []);
      this.showEmpty(null);
      this.showHidden(0);
      this.setNotice(message, "error");
    }
    this.reveal();
    this.announce(message);
  };

  // -- rendering -------------------------------------------------------------------------------
  Widget.prototype.show = function (query, rerank, body) {
    var previous = this.opening ? null : this.activeKey();
    if (typeof body.rerank_available === "boolean") this.rerankAvailable = body.rerank_available;
    var deferred = !rerank && this.rerankDeferred === query;   // settled before this answer said (settle)
    if (deferred) this.rerankDeferred = null;
    var final = rerank || (!this.wantsRerank() && this.settledQuery === query);
    this.list = {
      query: query,
      searchId: body.search_id || ("local-" + randomId()),
      results: body.results.slice(0, this.opts.k),
      completions: (Array.isArray(body.completions) ? body.completions : [])
        .filter(function (c) { return c && c.text; }).slice(0, this.opts.completions),
      final: false,
      stage: rerank ? "reranked" : "instant"
    };
    this.renderResults(this.list.results, this.list.completions);
    this.showEmpty(this.list.results.length ? null : body);
    this.showHidden(body.hidden_by_role, body.access && body.access.credential);
    this.setNotice(this.degradedMessage(body), "degraded");
    this.reveal();
    if (previous) this.setActive(this.indexOfKey(previous));
    this.root.setAttribute("data-stage", this.list.stage);
    this.listbox.setAttribute("data-search-id", this.list.searchId);
    if (final) this.finalise();
    this.root.dispatchEvent(new CustomEvent("taskfinder:results", { detail: {
      query: query, stage: this.list.stage, final: final, searchId: this.list.searchId,
      completions: this.list.completions, response: body } }));
    this.openIfNamed(query);
    if (deferred && this.wantsRerank()) this.request(query, true);
  };

  /** The answer to a task suggestion's name (openNamed): open the listed task of that name; if
   *  none is listed, the name stays as the query with its results shown. */
  Widget.prototype.openIfNamed = function (query) {
    var opening = this.opening;
    if (!opening || opening.name !== query) return;
    this.opening = null;
    var wanted = fold(query).trim(), rows = this.list.results;
    for (var i = 0; i < rows.length; i++) {
      if (fold(rows[i].name || "").trim() === wanted) { this.select(i, opening.returnTo); return; }
    }
    this.input.value = query;   // not listed: the box says what the list shown answers
  };

  /** What the active option stands for ("task:<id>" or "completion:<text>"), to find it again
   *  in the next answer; null when none is active. */
  Widget.prototype.activeKey = function () {
    var option = this.active >= 0 ? this.listbox.children[this.active] : null;
    if (!option) return null;
    return option.hasAttribute("data-completion") ? "completion:" + option.getAttribute("data-completion")
                                                  : "task:" + option.getAttribute("data-task-id");
  };

  Widget.prototype.indexOfKey = function (key) {
    var options = this.listbox.children;
    for (var i = 0; i < options.length; i++) {
      var option = options[i];
      var own = option.hasAttribute("data-completion") ? "completion:" + option.getAttribute("data-completion")
                                                       : "task:" + option.getAttribute("data-task-id");
      if (own === key) return i;
    }
    return -1;
  };

  Widget.prototype.degradedMessage = function (body) {
    var flags = body.degraded || [];
    if (flags.indexOf("rerank_unavailable") >= 0 || flags.indexOf("rerank_invalid") >= 0) return MESSAGES.quickOnly;
    if (flags.length) return MESSAGES.reduced;
    return null;
  };

  /** The list is the settled answer to its query: announce it and count one impression. */
  Widget.prototype.finalise = function () {
    var list = this.list;
    if (!list) return;
    this.root.setAttribute("data-final", "true");   // again after a failed re-request of this query
    if (list.final) return;
    list.final = true;
    var n = list.results.length, c = list.completions.length;
    var offered = c ? c + (c === 1 ? " suggested search." : " suggested searches.") : "";
    var title = this.empty.getAttribute("data-title") || MESSAGES.noResults;
    this.announce(n ? n + (n === 1 ? " task" : " tasks") + " found. " + (offered ? offered + " " : "") +
                      "Use the up and down arrow keys to choose."
                    : title + (offered ? ". " + offered : ""));
    this.impression(list);
  };

  Widget.prototype.impression = function (list) {
    var key = list.searchId + "\u0000" + list.query;
    if (!this.events || this.impressed[key]) return;
    this.impressed[key] = true;
    this.events.push({ type: "impression", search_id: list.searchId, query: list.query,
      task_ids: list.results.map(function (row) { return row.id; }) });
  };

  /** The listbox: the completions first (each a whole query to search), then the tasks. */
  Widget.prototype.renderResults = function (results, completions) {
    var listbox = this.listbox, id = this.id;
    this.active = -1;
    this.input.removeAttribute("aria-activedescendant");
    this.root.removeAttribute("data-final");
    while (listbox.firstChild) listbox.removeChild(listbox.firstChild);
    (completions || []).forEach(function (completion, index) {
      var option = el("li", "tf-option tf-completion");
      option.id = id + "-completion-" + index;
      option.setAttribute("role", "option");
      option.setAttribute("aria-selected", "false");
      option.tabIndex = -1;   // as a task's option, below
      option.setAttribute("data-completion", String(completion.text));
      option.setAttribute("data-source", String(completion.source || ""));
      var text = el("span", "tf-completion-text", completion.text);
      // the language it is written in (a Spanish alias on an English page), for screen readers
      // and the browser's hyphenation (WCAG 3.1.2, language of parts)
      if (/^[a-z]{2,3}$/.test(String(completion.language || ""))) text.lang = completion.language;
      option.appendChild(text);
      option.appendChild(el("span", "tf-sr", ", " + MESSAGES.completion));
      listbox.appendChild(option);
    });
    results.forEach(function (row, index) {
      var option = el("li", "tf-option");
      option.id = id + "-option-" + index;
      option.setAttribute("role", "option");
      option.setAttribute("aria-selected", "false");
      // Focusable, never tabbable: focus stays in the input (aria-activedescendant; the listbox's
      // mousedown keeps it there), but a popup tall enough to scroll has content a keyboard can
      // reach (axe: scrollable-region-focusable; the active option is scrolled into view).
      option.tabIndex = -1;
      option.setAttribute("data-index", String(index));
      option.setAttribute("data-task-id", String(row.id));
      var name = el("span", "tf-name");
      appendHighlighted(name, row.name, matchedWords(row, "name"));
      option.appendChild(name);
      if (row.category) option.appendChild(el("span", "tf-category", categoryLabel(row)));
      if (row.help) {
        var help = el("span", "tf-help");
        appendHighlighted(help, row.help, matchedWords(row, "help"));
        option.appendChild(help);
      }
      option.appendChild(el("span", "tf-why", whyLine(row)));
      listbox.appendChild(option);
    });
    listbox.hidden = listbox.children.length === 0;
  };

  /** The empty state, as the response's `empty_state` says: "unsure" (the task chips are what
   *  the product is unsure between: "Not sure which task you mean. Is it one of these?"),
   *  "nothing" ("Nothing matches": it is sure; the chips are a spelling or topics to try), or,
   *  from a server that does not say, "No confident match" / "No tasks found"; the response's
   *  suggestions as buttons that search for them (a task's opens it). `body` null hides it.
   *  Every string goes in with textContent (el). */
  Widget.prototype.showEmpty = function (body) {
    var empty = this.empty;
    while (empty.firstChild) empty.removeChild(empty.firstChild);
    empty.hidden = !body;
    if (!body) { empty.removeAttribute("data-title"); empty.removeAttribute("data-state"); return; }
    var state = body.empty_state === "unsure" || body.empty_state === "nothing" ? body.empty_state : "";
    var title = state === "unsure" ? MESSAGES.unsure
      : state === "nothing" && body.no_confident_match ? MESSAGES.nothing
      : body.no_confident_match ? MESSAGES.noConfident : MESSAGES.noResults;
    empty.setAttribute("data-title", title);
    empty.setAttribute("data-state", state || "unknown");
    empty.appendChild(el("p", "tf-empty-title", title));
    var suggestions = (body.suggestions || []).filter(function (s) { return s && s.text; });
    if (!suggestions.length) { empty.appendChild(el("p", "tf-empty-text", MESSAGES.tryWords)); return; }
    empty.appendChild(el("p", "tf-empty-text", state === "unsure" ? MESSAGES.unsureBetween : MESSAGES.tryInstead));
    var list = el("ul", "tf-suggestions");
    suggestions.forEach(function (s) {
      var item = el("li");
      var button = el("button", "tf-suggestion tf-suggestion-" + String(s.kind || "query").replace(/[^a-z]/g, ""), s.text);
      button.type = "button";
      button.setAttribute("data-kind", String(s.kind || "query"));   // "task": opens it (openNamed)
      item.appendChild(button);
      list.appendChild(item);
    });
    empty.appendChild(list);
  };

  /** How many of the best tasks the caller's roles may not see (the API's `hidden_by_role`: a
   *  count, never which), as one line under the results; 0 hides it. */
  Widget.prototype.showHidden = function (count, credential) {
    var n = Number(count) || 0;
    this.hiddenNote.textContent = n > 0 ? MESSAGES.hidden(n, credential, this.opts.roleHint) : "";
    this.hiddenNote.hidden = !(n > 0);
  };

  // -- opening a task, and what happens after --------------------------------------------------
  /** Open the task at `index`: record the click (sent right away, surviving the navigation),
   *  remember it for dwell/return, and navigate, unless a `taskfinder:select` listener called
   *  preventDefault() (a single-page host routes itself). */
  Widget.prototype.select = function (index, returnTo) {
    var list = this.list, row = list && list.results[index];
    if (!row) return;
    this.remember(returnTo != null ? returnTo : this.query());
    var href = safeUrl(row.url, this.opts.linkBase);
    var proceed = this.root.dispatchEvent(new CustomEvent("taskfinder:select", { cancelable: true, detail: {
      task: row, url: href, position: index + 1, searchId: list.searchId, query: list.query } }));
    if (proceed && !href) { this.setNotice(MESSAGES.noLink, "error"); return; }
    if (this.events) {
      this.impression(list);
      this.events.push({ type: "click", search_id: list.searchId, task_id: row.id, position: index + 1 }, true);
      writeJson(PENDING_KEY, { search_id: list.searchId, task_id: row.id, at: Date.now(),
        from: withoutHash(window.location.href), to: href ? withoutHash(href) : null });
    }
    if (proceed) window.location.assign(href);
  };

  /** After a click: on the task's own page (a host that shows the widget there too) the dwell is
   *  sent when that page is left; back on the page the search was made on, the dwell (click to
   *  return) and a `return` are sent. Anywhere else the click is forgotten. */
  Widget.prototype.resumePending = function () {
    var self = this, pending = readJson(PENDING_KEY);
    if (!this.events || !pending || !pending.at) return;
    var here = withoutHash(window.location.href), age = Date.now() - pending.at;
    if (age < 0 || age > PENDING_MAX_AGE_MS) { writeJson(PENDING_KEY, null); return; }
    if (here === pending.from) {
      if (!pending.dwelt) this.events.push({ type: "dwell", search_id: pending.search_id, task_id: pending.task_id, dwell_ms: age });
      this.events.push({ type: "return", search_id: pending.search_id, task_id: pending.task_id });
      writeJson(PENDING_KEY, null);
    } else if (here === pending.to && !pending.dwelt) {
      window.addEventListener("pagehide", function () {
        var now = readJson(PENDING_KEY);
        if (!now || now.at !== pending.at || now.dwelt) return;
        self.events.push({ type: "dwell", search_id: pending.search_id, task_id: pending.task_id,
          dwell_ms: Date.now() - pending.at }, true);
        now.dwelt = true;
        writeJson(PENDING_KEY, now);
      });
    } else if (here !== pending.to) {
      writeJson(PENDING_KEY, null);
    }
  };

  // -- the search, kept for the way back ------------------------------------------------------------
  /** Keep `query` (null: forget it) as this widget's search on this page, for this tab
   *  (sessionStorage): set when a task is opened, dropped when the box is emptied. */
  Widget.prototype.remember = function (query) {
    var saved = readJson(SEARCHES_KEY) || {}, now = Date.now(), key = withoutHash(window.location.href) + " " + this.id;
    for (var k in saved) {
      if (Object.prototype.hasOwnProperty.call(saved, k) && !(now - saved[k].at < SEARCH_MAX_AGE_MS)) delete saved[k];
    }
    var screen = this.onScreen();   // the list as it was, so that Back brings back the same list
    if (query) saved[key] = { query: String(query), at: now, shown: screen && screen.query === query ? screen.ids : [] };
    else delete saved[key];
    writeJson(SEARCHES_KEY, Object.keys(saved).length ? saved : null);
  };

  /** Back on the page a task was opened from (the Back button, a link back, or the back-forward
   *  cache): the search is as it was left, its results open, focus in the box. A page restored
   *  from the back-forward cache still shows it; otherwise the query is put back and searched. */
  Widget.prototype.restore = function () {
    var saved = readJson(SEARCHES_KEY) || {};
    var entry = saved[withoutHash(window.location.href) + " " + this.id];
    if (!entry || !entry.query || !(Date.now() - entry.at < SEARCH_MAX_AGE_MS)) return;
    if (this.input.value && this.input.value !== entry.query) return;   // someone typed already
    try { this.input.focus({ preventScroll: true }); } catch (e) { this.input.focus(); }
    if (this.input.value === entry.query && this.answersInput()) { this.open(); return; }
    this.input.value = entry.query;
    // searched as it was on screen (the tasks it listed, held as typing holds them: the API's
    // `after`/`shown`), not as a new submitted query, so that Back shows the list that was left
    this.clearTimers();
    this.dismissed = false;
    this.opening = null;
    this.settledQuery = entry.query;
    this.request(entry.query, this.wantsRerank(), false,
                 { query: entry.query, ids: Array.isArray(entry.shown) ? entry.shown.map(String) : [] });
  };

  Widget.prototype.setRoleToken = function (token) {
    this.roleToken = token;
  };

  Widget.prototype.search = function (query) {
    this.input.value = String(query == null ? "" : query);
    this.submit();
  };

  Widget.prototype.destroy = function () {
    this.abort();
    this.clearTimers();
    if (this.root.parentNode) this.root.parentNode.removeChild(this.root);
    instances.splice(instances.indexOf(this), 1);
  };

  // -- configuration and mounting --------------------------------------------------------------
  var instances = [];
  var script = document.currentScript;

  function defaultEndpoint() {
    try { return new URL("/api", script && script.src ? script.src : document.baseURI).href; }
    catch (e) { return "/api"; }
  }

  /** The language tag to send as `lang`: the option, else the host page's <html lang>; "en_US"
   *  written with an underscore as "en-US"; nothing where it is no language tag (the API would
   *  refuse the search) or there is none. */
  function pageLanguage(option) {
    var tag = String(option || (document.documentElement && document.documentElement.lang) || "").replace(/_/g, "-");
    return tag.length <= 35 && /^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$/.test(tag) ? tag : null;
  }

  /** Options from the script tag's data-* attributes (see DEFAULTS and docs/notes/widget.md). */
  function optionsFromScript(tag) {
    var data = (tag && tag.dataset) || {};
    return {
      endpoint: data.endpoint || undefined,
      target: data.target || undefined,
      k: data.k ? Math.max(1, Math.min(50, Math.round(numberOr(data.k, DEFAULTS.k)))) : undefined,
      completions: data.completions ? (/^(off|false|no)$/i.test(data.completions) ? 0
        : Math.min(10, Math.round(numberOr(data.completions, DEFAULTS.completions)))) : undefined,
      label: data.label || undefined,
      lang: data.lang || undefined,
      roleHint: data.roleHint || undefined,
      placeholder: data.placeholder != null ? data.placeholder : undefined,
      roleToken: data.roleToken || undefined,
      rerank: flag(data.rerank, DEFAULTS.rerank),
      analytics: flag(data.analytics, DEFAULTS.analytics),
      linkBase: data.linkBase || undefined,
      debounceMs: numberOr(data.debounceMs, undefined),
      settleMs: numberOr(data.settleMs, undefined),
      stallMs: numberOr(data.stallMs, undefined),
      slowMs: numberOr(data.slowMs, undefined),
      timeoutMs: numberOr(data.timeoutMs, undefined),
      rerankTimeoutMs: numberOr(data.rerankTimeoutMs, undefined)
    };
  }

  function merge(base, extra) {
    var out = {}, key;
    for (key in base) if (Object.prototype.hasOwnProperty.call(base, key)) out[key] = base[key];
    for (key in extra || {}) {
      if (Object.prototype.hasOwnProperty.call(extra, key) && extra[key] !== undefined) out[key] = extra[key];
    }
    return out;
  }

  /** Mount a widget in `target` (selector or element); returns the instance. */
  function mount(target, options) {
    var opts = merge(merge(DEFAULTS, { endpoint: defaultEndpoint() }), options);
    var container = typeof target === "string" ? document.querySelector(target) : target;
    if (!container) throw new Error("Taskfinder: no element matches " + String(target));
    for (var i = 0; i < instances.length; i++) {
      if (instances[i].container === container) instances[i].destroy();
    }
    var widget = new Widget(container, opts);
    widget.container = container;
    instances.push(widget);
    return widget;
  }

  function get(target) {
    var container = typeof target === "string" ? document.querySelector(target) : target;
    for (var i = 0; i < instances.length; i++) if (instances[i].container === container) return instances[i];
    return null;
  }

  window.addEventListener("pagehide", flushAll);
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden") flushAll();
  });
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) instances.forEach(function (w) { w.resumePending(); w.restore(); });  // back from the task (bfcache)
  });

  window.Taskfinder = {
    mount: mount,
    get: get,
    setRoleToken: function (token) { instances.forEach(function (w) { w.setRoleToken(token); }); },
    instances: instances
  };

  function autoMount() {
    if (!script || script.getAttribute("data-autoinit") === "false") return;
    var options = optionsFromScript(script);
    var target = options.target || DEFAULTS.target;
    if (document.querySelector(target)) mount(target, options);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", autoMount);
  else autoMount();
})(window, document);
