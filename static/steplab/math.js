// Render LaTeX in every element marked .math-text, on load and after each htmx swap.
// Each math span is rendered on its own: one that KaTeX cannot render (a parse error, a nesting deep enough
// to overflow the stack) is shown as its text, and the spans after it still render. KaTeX runs with trust off
// (no \href / \url javascript: links), throwOnError off, sizes capped (maxSize: a \rule cannot cover the page)
// and macro expansion capped (maxExpand); spans longer than MAX_MATH_CHARS are not handed to KaTeX at all.
// The work is capped per page too (per render call: the page on load, each htmx swap): every span is charged its
// length, and a span that defines macros (\def and kin) the expansions it may make (maxExpand). Past PAGE_BUDGET
// units, or PAGE_MILLISECONDS of rendering, the page's remaining spans are shown as escaped text with a note:
// 2,000 spans that each expand macros a thousand times would otherwise hold the page for a minute.
(function () {
  "use strict";
  var MAX_MATH_CHARS = 8000; // the longest genuine step formulas are a few hundred characters
  var PAGE_BUDGET = 200000; // 2,000 ordinary 60-character spans cost 120,000
  var PAGE_MILLISECONDS = 3000;
  var MACRO_DEFINITION = /\\(?:[gex]?def|let|futurelet|(?:re|provide)?newcommand|newenvironment|DeclareMathOperator)(?![a-zA-Z])/g;
  var DELIMITERS = [
    { left: "$$", right: "$$", display: true },
    { left: "\\[", right: "\\]", display: true },
    { left: "\\(", right: "\\)", display: false },
    { left: "$", right: "$", display: false }
  ];
  var OPTIONS = { throwOnError: false, trust: false, strict: "ignore", maxSize: 10, maxExpand: 1000 };
  var SKIP = { SCRIPT: true, NOSCRIPT: true, STYLE: true, TEXTAREA: true, PRE: true, CODE: true, OPTION: true };

  // Where the math that starts at `start` ends: the closing delimiter outside any braces, or -1.
  function findEnd(right, text, start) {
    var depth = 0;
    for (var i = start; i < text.length; i++) {
      var ch = text.charAt(i);
      if (depth <= 0 && text.substr(i, right.length) === right) { return i; }
      if (ch === "\\") { i++; } else if (ch === "{") { depth++; } else if (ch === "}") { depth--; }
    }
    return -1;
  }

  function leftAt(text, i) {
    for (var d = 0; d < DELIMITERS.length; d++) {
      var delimiter = DELIMITERS[d];
      if (text.substr(i, delimiter.left.length) !== delimiter.left) { continue; }
      if (delimiter.left.charAt(0) === "$" && i > 0 && text.charAt(i - 1) === "\\") { return null; } // \$ is a dollar
      return delimiter;
    }
    return null;
  }

  // The text split into plain pieces and math pieces, in order.
  function split(text) {
    var pieces = [];
    var plainFrom = 0;
    var i = 0;
    while (i < text.length) {
      var ch = text.charAt(i);
      var delimiter = ch === "$" || ch === "\\" ? leftAt(text, i) : null;
      if (!delimiter) { i++; continue; }
      var end = findEnd(delimiter.right, text, i + delimiter.left.length);
      if (end < 0) { i += delimiter.left.length; continue; } // never closed: plain text
      if (i > plainFrom) { pieces.push({ math: false, text: text.slice(plainFrom, i) }); }
      pieces.push({ math: true, tex: text.slice(i + delimiter.left.length, end),
                    text: text.slice(i, end + delimiter.right.length), display: delimiter.display });
      i = end + delimiter.right.length;
      plainFrom = i;
    }
    if (plainFrom < text.length) { pieces.push({ math: false, text: text.slice(plainFrom) }); }
    return pieces;
  }

  function asText(piece, note) {
    var span = document.createElement("span");
    span.className = "math-fallback";
    var source = document.createElement("span");
    source.className = "math-too-long";
    source.textContent = piece.text; // text only: never HTML
    var remark = document.createElement("span");
    remark.className = "math-note";
    remark.textContent = " (" + note + ")";
    span.appendChild(source);
    span.appendChild(remark);
    return span;
  }

  function cost(tex) {
    var definitions = tex.match(MACRO_DEFINITION);
    return tex.length + (definitions ? definitions.length * OPTIONS.maxExpand : 0);
  }

  function renderPiece(piece, budget) {
    if (piece.tex.length > MAX_MATH_CHARS) {
      return asText(piece, "formula of " + piece.tex.length + " characters, too long to display as math; shown as text");
    }
    budget.left -= cost(piece.tex);
    if (budget.left < 0 || Date.now() > budget.until) {
      budget.exhausted = true;
      return asText(piece, "this page has more math than is displayed at once; shown as text");
    }
    var span = document.createElement("span");
    try {
      window.katex.render(piece.tex, span, Object.assign({ displayMode: piece.display }, OPTIONS));
      return span;
    } catch (error) { // e.g. RangeError (stack) on absurd nesting: this span only
      return asText(piece, "could not be displayed as math; shown as text");
    }
  }

  function renderTextNode(node, budget) {
    var text = node.nodeValue;
    if (text.indexOf("$") < 0 && text.indexOf("\\") < 0) { return; }
    var pieces = split(text);
    if (!pieces.some(function (piece) { return piece.math; })) { return; }
    var fragment = document.createDocumentFragment();
    pieces.forEach(function (piece) {
      fragment.appendChild(piece.math ? renderPiece(piece, budget) : document.createTextNode(piece.text));
    });
    node.parentNode.replaceChild(fragment, node);
  }

  function renderElement(element, budget) {
    var children = Array.prototype.slice.call(element.childNodes);
    children.forEach(function (child) {
      if (child.nodeType === 3) {
        renderTextNode(child, budget);
      } else if (child.nodeType === 1 && !SKIP[child.tagName] && !child.classList.contains("katex") &&
                 !child.classList.contains("math-fallback")) {
        renderElement(child, budget);
      }
    });
  }

  function render(root) {
    if (!window.katex || !root) { return; }
    var nodes = root.querySelectorAll ? Array.prototype.slice.call(root.querySelectorAll(".math-text")) : [];
    if (root.classList && root.classList.contains("math-text")) { nodes.unshift(root); }
    var budget = { left: PAGE_BUDGET, until: Date.now() + PAGE_MILLISECONDS, exhausted: false };
    nodes.forEach(function (node) {
      try { renderElement(node, budget); } catch (error) { /* one element's failure leaves the others rendering */ }
    });
    if (budget.exhausted && root.setAttribute) { root.setAttribute("data-math-budget-spent", "true"); }
  }
  window.steplabRenderMath = render;
  document.addEventListener("DOMContentLoaded", function () { render(document.body); });
  document.addEventListener("htmx:afterSwap", function (event) { render(event.detail.elt); });
  document.addEventListener("htmx:oobAfterSwap", function (event) { render(event.detail.target || event.detail.elt); });
})();
