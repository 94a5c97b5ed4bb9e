// Candidate-pool upload: the form goes by htmx (XHR), whose upload events feed the progress bar; once the
// file is sent, the server splits and grades every candidate, which the text says.
(function () {
  "use strict";
  document.addEventListener("htmx:beforeRequest", (event) => {
    const form = event.detail.elt;
    if (!form.matches || !form.matches("[data-pool-upload]")) return;
    form.querySelector("[data-upload-status]").hidden = false;
  });
  document.addEventListener("htmx:xhr:progress", (event) => {
    const form = event.detail.elt;
    if (!form.matches || !form.matches("[data-pool-upload]") || !event.detail.lengthComputable) return;
    const percent = Math.round((100 * event.detail.loaded) / event.detail.total);
    form.querySelector("[data-upload-progress]").value = percent;
    form.querySelector("[data-upload-phase]").textContent =
      percent >= 100 ? "sent; splitting and grading the candidates…" : percent + " %";
  });
})();
