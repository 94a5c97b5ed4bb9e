// The labeling workspace: keyboard shortcuts, per-step timing, focus that survives htmx row swaps, and
// visible errors. Every rating still goes through the server (hx-post); nothing here decides a rule.
(function () {
  "use strict";
  // Swapped rows must take the next click at once: htmx wires new buttons up when it settles.
  if (window.htmx) { window.htmx.config.defaultSettleDelay = 0; }

  // PRM800K's keys; a campaign with another label scale names its own on each rating button (data-key).
  var KEY_RATINGS = { "1": "-1", "-": "-1", "2": "0", "0": "0", "3": "1", "+": "1", "=": "1" };
  var ERROR_VALUES = ["-1"]; // the scale's values that stop the solution (data-error-values)

  function readScale() {
    var ws = workspace();
    if (!ws) { return; }
    if (ws.getAttribute("data-error-values")) { ERROR_VALUES = ws.getAttribute("data-error-values").split(","); }
    if (ws.getAttribute("data-scale") === "pm1") { return; }
    var keys = {};
    Array.prototype.forEach.call(document.querySelectorAll("button[data-rating][data-key]"), function (button) {
      keys[button.getAttribute("data-key")] = button.getAttribute("data-rating");
    });
    if (Object.keys(keys).length) { KEY_RATINGS = keys; }
  }
  var focusKey = null; // "step:completion" of the focused unit, kept across swaps
  var lastActionAt = Date.now(); // per-step time: since page load or the previous rating

  function workspace() { return document.getElementById("workspace"); }
  function units() { return Array.prototype.slice.call(document.querySelectorAll("[data-focus-unit]")); }

  function keyOf(unit) {
    var row = unit.closest("[data-step-index]");
    var completion = unit.getAttribute("data-completion-index") || "0";
    return (row ? row.getAttribute("data-step-index") : "?") + ":" + completion;
  }

  function focusUnit(unit) {
    units().forEach(function (u) { u.classList.remove("is-focused"); });
    if (!unit) { return; }
    unit.classList.add("is-focused");
    focusKey = keyOf(unit);
    unit.focus({ preventScroll: true });
    unit.scrollIntoView({ block: "nearest" });
  }

  function focused() {
    var all = units();
    for (var i = 0; i < all.length; i++) { if (keyOf(all[i]) === focusKey) { return all[i]; } }
    return null;
  }

  function firstToDo() {
    var all = units();
    for (var i = 0; i < all.length; i++) {
      if (!all[i].hasAttribute("data-rated") && !all[i].querySelector("button[data-rating]:disabled")) { return all[i]; }
    }
    return all.length ? all[all.length - 1] : null;
  }

  function move(delta) {
    var all = units();
    if (!all.length) { return; }
    var index = all.indexOf(focused());
    index = index < 0 ? 0 : Math.max(0, Math.min(all.length - 1, index + delta));
    focusUnit(all[index]);
  }

  function isTyping(target) {
    if (!target || !target.tagName) { return false; }
    var tag = target.tagName.toLowerCase();
    return tag === "input" || tag === "textarea" || tag === "select" || target.isContentEditable;
  }

  function showAlert(message) {
    var box = document.getElementById("alerts");
    if (!box) { return; }
    box.innerHTML = "";
    var div = document.createElement("div");
    div.className = "alert alert-client";
    var p = document.createElement("p");
    p.textContent = message; // text only: never HTML from anywhere
    div.appendChild(p);
    box.appendChild(div);
  }

  function clickIfEnabled(button) {
    if (button && !button.disabled) { button.click(); return true; }
    return false;
  }

  function toggleHelp() {
    var dialog = document.getElementById("shortcuts");
    if (!dialog) { return; }
    if (dialog.open) { dialog.close(); } else { dialog.showModal(); }
  }

  // Keys pressed while a row request is in flight wait for its swap, so fast typing never hits stale buttons.
  var pending = 0;
  var queue = [];

  function isRowRequest(elt) {
    return !!(elt && elt.matches && elt.matches("[data-rating], [data-flag], [data-bad-split], [data-choose], [data-error-category], form.write-own, form.rationale"));
  }

  // An error category's own key (a letter no rating uses): the focused error step's category, else the error
  // step's (a stepwise pass has one).
  function categoryButton(key) {
    if (!/^[a-z]$/.test(key)) { return null; }
    var selector = 'button[data-error-category][data-key="' + key + '"]';
    var unit = focused();
    var row = unit ? unit.closest(".step-row") : null;
    return (row && row.querySelector(selector)) || document.querySelector(".step-row.is-error " + selector);
  }

  function handleKey(key) {
    var category = categoryButton(key);
    if (category) { clickIfEnabled(category); return; }
    var unit = focused() || firstToDo();
    if (unit && unit.querySelector("button[data-rating]:disabled") && firstToDo()) { unit = firstToDo(); }
    if (KEY_RATINGS.hasOwnProperty(key)) {
      if (unit) { focusUnit(unit); clickIfEnabled(unit.querySelector('button[data-rating="' + KEY_RATINGS[key] + '"]')); }
    } else if (key === "j" || key === "ArrowDown") {
      move(1);
    } else if (key === "k" || key === "ArrowUp") {
      move(-1);
    } else if (key === "f") {
      if (unit) { focusUnit(unit); clickIfEnabled(unit.querySelector("button[data-flag]")); }
    } else if (key === "s") {
      var row = unit ? unit.closest(".step-row") : null;
      if (row) { focusUnit(unit); clickIfEnabled(row.querySelector("button[data-bad-split]")); }
    } else if (key === "c") {
      if (unit) { clickIfEnabled(unit.querySelector("button[data-choose]")); }
    } else if (key === "Enter") {
      var next = document.querySelector('[data-action="next"]');
      if (!next) { return; }
      if (next.getAttribute("aria-disabled") === "true") {
        showAlert("Not finished yet: rate every step (or give a −1) before going to the next solution.");
        return;
      }
      next.click();
    }
  }

  function drain() {
    while (queue.length && pending === 0 && !retry) { handleKey(queue.shift()); }
  }

  // A row request lost in flight (connection down; server or database restarting: 502/503/504) is sent again,
  // with backoff, before anything else is: the POSTs are idempotent, so a retry of a rating the server already
  // had is still one rating, and keys typed meanwhile wait in the queue. Only after RETRY_FOR_MS does it give up.
  var RETRYABLE = { 0: true, 502: true, 503: true, 504: true };
  var RETRY_DELAYS_MS = [500, 1000, 2000, 4000, 8000, 15000];
  var RETRY_FOR_MS = 5 * 60 * 1000;
  var retry = null; // {elt, attempt, since, timeMs}: the one request being retried

  function scheduleRetry(elt, timeMs) {
    if (!retry || retry.elt !== elt) { retry = { elt: elt, attempt: 0, since: Date.now(), timeMs: timeMs }; }
    if (Date.now() - retry.since > RETRY_FOR_MS || !document.body.contains(elt)) {
      retry = null;
      showAlert("Connection lost: your last action was NOT saved. Check your connection and do it again; " +
        "everything saved before is kept.");
      return;
    }
    var delay = RETRY_DELAYS_MS[Math.min(retry.attempt, RETRY_DELAYS_MS.length - 1)];
    retry.attempt += 1;
    showAlert("Connection lost: saving your last action again (attempt " + retry.attempt + ")… Nothing is lost; " +
      "keep this page open.");
    setTimeout(function () { if (retry && retry.elt === elt) { elt.click(); } }, delay);
  }

  var HANDLED_KEYS = /^([-+=0-3jkfcs]|ArrowDown|ArrowUp|Enter)$/;
  document.addEventListener("keydown", function (event) {
    // Esc in a −1's reason field hands the keys back to rating without saving what was typed.
    if (event.key === "Escape" && event.target && event.target.matches && event.target.matches("input[data-rationale]")) {
      event.preventDefault();
      focusUnit(event.target.closest("[data-focus-unit]") || focused());
      return;
    }
    if (!workspace() || event.ctrlKey || event.metaKey || event.altKey || isTyping(event.target)) { return; }
    if (event.key === "?") { event.preventDefault(); toggleHelp(); return; }
    var dialog = document.getElementById("shortcuts");
    // the scale's own keys, and the error categories' letters
    // (a letter typed while a rating is in flight waits too: its category buttons come with that rating's row)
    var extra = KEY_RATINGS.hasOwnProperty(event.key) || !!categoryButton(event.key) ||
      ((pending > 0 || !!retry) && /^[a-z]$/.test(event.key));
    if ((dialog && dialog.open) || !(HANDLED_KEYS.test(event.key) || extra)) { return; }
    event.preventDefault();
    if (pending > 0 || retry) { queue.push(event.key); return; }
    handleKey(event.key);
  });

  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail.elt;
    if (!isRowRequest(elt)) { return; }
    if (retry && retry.elt !== elt) {
      // Another click while a lost action is being re-sent: it would overtake it (steps go in order).
      event.preventDefault();
      return;
    }
    pending += 1;
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var config = event.detail.requestConfig;
    var elt = config ? config.elt : event.detail.elt;
    if (!isRowRequest(elt)) { return; }
    pending = Math.max(0, pending - 1);
    var status = event.detail.xhr ? event.detail.xhr.status : 0;
    if (event.detail.successful !== true && RETRYABLE.hasOwnProperty(status)) {
      scheduleRetry(elt, config && config.parameters ? config.parameters.time_ms : undefined);
    } else if (retry && retry.elt === elt) {
      retry = null;
      if (status < 300) { var box = document.getElementById("alerts"); if (box) { box.innerHTML = ""; } }
    }
    if (pending === 0 && !retry) { setTimeout(drain, 0); }
  });

  document.addEventListener("click", function (event) {
    var target = event.target.closest ? event.target.closest("[data-action='shortcuts']") : null;
    if (target) { toggleHelp(); return; }
    var unit = event.target.closest ? event.target.closest("[data-focus-unit]") : null;
    if (unit) { focusUnit(unit); }
  });

  // Per-step time: how long since the previous rating (or page load), sent with every rating.
  document.addEventListener("htmx:configRequest", function (event) {
    var elt = event.detail.elt;
    if (elt && elt.hasAttribute && elt.hasAttribute("data-rating")) {
      var resent = retry && retry.elt === elt && retry.timeMs !== undefined;  // the time of the first try
      event.detail.parameters.time_ms = resent ? retry.timeMs : String(Math.max(0, Date.now() - lastActionAt));
      var unit = elt.closest("[data-focus-unit]");
      if (unit) { focusKey = keyOf(unit); }
    }
  });

  // Refused requests come back retargeted to #alerts (HX-Retarget): show them instead of dropping them.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var xhr = event.detail.xhr;
    var target = event.detail.target;
    if (xhr.status < 300 && target && !document.body.contains(target)) {
      // The row was re-rendered while this request ran: the server has it, so show the server's page.
      event.detail.shouldSwap = false;
      window.location.reload();
      return;
    }
    if (xhr.status >= 400 && xhr.getResponseHeader("HX-Retarget")) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    } else if (xhr.status >= 400 && !RETRYABLE.hasOwnProperty(xhr.status)) {
      showAlert("The server refused this (" + xhr.status + "). It was not saved; reload the page.");
    } else if (xhr.status < 300) {
      var box = document.getElementById("alerts");
      if (box && event.detail.target && event.detail.target.id !== "alerts" && box.querySelector(".alert-client")) {
        box.innerHTML = "";
      }
    }
  });

  // One request can swap several rows (the rated one and, out of band, the next): act once per request.
  var handled = typeof WeakSet === "function" ? new WeakSet() : null;
  var focusSubmit = false; // set by a −1's swap, done once the whole response has settled
  var focusRationale = null; // the unit just rated −1 where the campaign takes reasons: its reason field is next
  document.addEventListener("htmx:afterSwap", function (event) {
    var elt = event.detail.elt;
    var xhr = event.detail.xhr;
    if (!elt || !elt.matches || !elt.matches(".step-row")) { return; }
    if (handled && xhr) { if (handled.has(xhr)) { return; } handled.add(xhr); }
    var requester = event.detail.requestConfig ? event.detail.requestConfig.elt : null;
    var all = units();
    var current = focused();
    if (requester && requester.hasAttribute && requester.hasAttribute("data-rating")) {
      lastActionAt = Date.now();
      // After a −1 the later steps are locked: the keyboard focus goes to "Submit" once every swap is in
      // (to the −1's reason field first, where the campaign takes reasons).
      focusSubmit = ERROR_VALUES.indexOf(requester.getAttribute("data-rating")) >= 0;
      focusRationale = focusSubmit && current ? keyOf(current) : null;
      // After a rating, move on to the next unit that still needs one and can take it.
      var index = all.indexOf(current);
      var next = null;
      for (var i = index + 1; i < all.length; i++) {
        if (!all[i].hasAttribute("data-rated") && !all[i].querySelector("button[data-rating]:disabled")) {
          next = all[i]; break;
        }
      }
      focusUnit(next || current || firstToDo());
    } else if (requester && requester.matches && requester.matches("form.rationale")) {
      // The reason is saved: the keys go back to rating, and "Submit" is next after a −1.
      focusUnit(current || firstToDo());
      focusSubmit = true;
    } else {
      focusUnit(current || firstToDo());
    }
  });

  // htmx's settle step resets swapped rows' class attributes: put the focus ring back afterwards.
  document.addEventListener("htmx:afterSettle", function () {
    var unit = focused();
    if (unit && !unit.classList.contains("is-focused")) { unit.classList.add("is-focused"); }
    var rated = focusRationale ? units().filter(function (u) { return keyOf(u) === focusRationale; })[0] : null;
    var reason = rated ? rated.querySelector("input[data-rationale]") : null;
    focusRationale = null;
    if (reason) {
      focusSubmit = false;
      reason.focus();
    } else if (focusSubmit) {
      focusSubmit = false;
      var submit = document.querySelector('[data-action="next"][data-found-error]');
      if (submit) { submit.focus(); }
    }
  });

  // Give up / bad problem: both buttons stay disabled until a reason is typed.
  function syncReasonButtons() {
    var reason = document.querySelector("textarea[data-reason]");
    if (!reason) { return; }
    var empty = !reason.value.trim();
    document.querySelectorAll("button[data-needs-reason]").forEach(function (button) { button.disabled = empty; });
  }
  document.addEventListener("input", function (event) {
    if (event.target && event.target.matches && event.target.matches("textarea[data-reason]")) { syncReasonButtons(); }
  });

  document.addEventListener("DOMContentLoaded", function () {
    if (!workspace()) { return; }
    readScale();
    syncReasonButtons();
    var submit = document.querySelector('[data-action="next"][data-found-error]');
    if (submit) {
      // A pass with a −1 waits for "Submit"; the −1 row keeps the keys' attention so 1/2/3 can still change it.
      focusUnit(document.querySelector(".step-row.is-error[data-focus-unit]"));
      submit.focus();
    } else {
      focusUnit(firstToDo());
    }
    // A hook for scripts and tests: from here on the keyboard shortcuts are live.
    workspace().setAttribute("data-keyboard-ready", "true");
  });
})();
