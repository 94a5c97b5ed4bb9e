// Render LaTeX in every element marked .math-text, on load and after each htmx swap.
// KaTeX runs with trust off (no \href / \url javascript: links) and throwOnError off.
(function () {
  "use strict";
  var options = {
    delimiters: [
      { left: "$$", right: "$$", display: true },
      { left: "\\[", right: "\\]", display: true },
      { left: "\\(", right: "\\)", display: false },
      { left: "$", right: "$", display: false }
    ],
    throwOnError: false,
    trust: false,
    strict: "ignore"
  };
  function render(root) {
    if (typeof window.renderMathInElement !== "function") { return; }
    var nodes = root.querySelectorAll ? root.querySelectorAll(".math-text") : [];
    if (root.classList && root.classList.contains("math-text")) { nodes = [root].concat(Array.prototype.slice.call(nodes)); }
    Array.prototype.forEach.call(nodes, function (node) { window.renderMathInElement(node, options); });
  }
  window.steplabRenderMath = render;
  document.addEventListener("DOMContentLoaded", function () { render(document.body); });
  document.addEventListener("htmx:afterSwap", function (event) { render(event.detail.elt); });
  document.addEventListener("htmx:oobAfterSwap", function (event) { render(event.detail.target || event.detail.elt); });
})();
