// Parley admin: copy buttons, confirmations, "all models" checkboxes. No inline script.
"use strict";

document.addEventListener("click", async (event) => {
  const copy = event.target.closest("[data-copy]");
  if (copy) {
    const source = document.getElementById(copy.dataset.copy);
    const text = source ? source.textContent.trim() : "";
    try {
      await navigator.clipboard.writeText(text);
      copy.textContent = "Copied";
    } catch (error) {
      const range = document.createRange();
      range.selectNodeContents(source);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      copy.textContent = "Press Ctrl+C";
    }
    setTimeout(() => { copy.textContent = "Copy"; }, 2000);
    return;
  }
  const confirming = event.target.closest("[data-confirm]");
  if (confirming && !window.confirm(confirming.dataset.confirm)) {
    event.preventDefault();
  }
});

document.addEventListener("change", (event) => {
  const box = event.target;
  const fieldset = box.closest("fieldset.models");
  if (!fieldset) return;
  const all = fieldset.querySelector("[data-all-models]");
  if (box === all && all.checked) {
    fieldset.querySelectorAll("[data-model]").forEach((model) => { model.checked = false; });
  } else if (box.matches("[data-model]") && box.checked) {
    all.checked = false;
  }
});
