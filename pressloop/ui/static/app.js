// Pressloop admin UI: the helpers every page uses. No framework, no build step.
"use strict";

const Pressloop = (() => {
  const FINAL = new Set(["succeeded", "failed", "timed_out", "cancelled", "dead"]);

  // Every change goes through the /v1 API with the session cookie; the header proves the request
  // comes from a Pressloop page (the API refuses cookie-only writes without it).
  async function api(method, path, body) {
    const init = { method, credentials: "same-origin", headers: { "X-Pressloop-UI": "1", Accept: "application/json" } };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(path, init);
    const text = await response.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
    if (!response.ok) {
      const message = (data && data.error && data.error.message) || `${response.status} ${response.statusText}`;
      const error = new Error(message);
      error.status = response.status;
      throw error;
    }
    return data;
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function toast(message, kind = "info") {
    const box = document.getElementById("toasts");
    if (!box) return;
    const item = el("div", { class: `toast ${kind}`, role: kind === "error" ? "alert" : null }, message);
    box.append(item);
    setTimeout(() => item.remove(), kind === "error" ? 10000 : 4000);
  }

  function status(value) {
    return el("span", { class: `status status-${value}`, "data-status": value }, String(value).replace(/_/g, " "));
  }

  function when(iso) {
    if (!iso) return "—";
    const date = new Date(iso);
    return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
  }

  function localTimes(root = document) {
    for (const node of root.querySelectorAll("time[datetime]")) {
      const value = node.getAttribute("datetime");
      if (value) { node.title = node.textContent; node.textContent = when(value); }
    }
  }

  function pretty(value) {
    return JSON.stringify(value, null, 2);
  }

  // Buttons that post (or delete) and then show the new state of the page.
  document.addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-post], button[data-delete]");
    if (!button) return;
    if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
    button.disabled = true;
    try {
      if (button.dataset.post) await api("POST", button.dataset.post, {});
      else await api("DELETE", button.dataset.delete);
      toast(button.dataset.done || `${button.textContent.trim()}: done`);
      if (button.dataset.then !== "stay") setTimeout(() => window.location.reload(), 300);
    } catch (error) {
      toast(error.message, "error");
    } finally {
      button.disabled = false;
    }
  });

  // Approval cards, on the approvals page and inline in the chat: approve (maybe with edited
  // params) or reject, with an optional note for the agent.
  document.addEventListener("submit", async (event) => {
    const form = event.target.closest("form[data-approval-form]");
    if (!form) return;
    event.preventDefault();
    const id = form.dataset.approvalForm;
    const decision = event.submitter ? event.submitter.value : "approve";
    const note = form.elements.note.value.trim() || null;
    const body = { note };
    if (decision === "approve") {
      const original = form.elements.params.defaultValue;
      const edited = form.elements.params.value;
      if (edited.trim() !== original.trim()) {
        try { body.params = JSON.parse(edited); } catch (error) {
          toast(`The parameters are not valid JSON: ${error.message}`, "error");
          form.elements.params.focus();
          return;
        }
      }
    }
    for (const button of form.querySelectorAll("button")) button.disabled = true;
    try {
      const decided = await api("POST", `/v1/approvals/${id}/${decision}`, body);
      toast(decision === "approve" ? "Approved: the run goes on." : "Rejected: the agent is told.");
      form.replaceWith(el("p", { class: "decided" }, status(decided.status), ` by ${decided.decided_by || "you"}`));
      // A live timeline of this run reconnects now (the server told it to wait 15 s).
      window.dispatchEvent(new CustomEvent("pressloop:decided", { detail: { runId: decided.run_id } }));
      if (form.dataset.then === "reload") setTimeout(() => window.location.reload(), 600);
    } catch (error) {
      toast(error.message, "error");
      for (const button of form.querySelectorAll("button")) button.disabled = false;
    }
  });

  // A form a page script sends (data-needs-script) has no method of its own: submitted before
  // its script listens, the browser would put what was typed in the page's URL (history, access
  // logs) and drop it. Its buttons come disabled; DOMContentLoaded fires once every deferred
  // script has run, so by then each form has its listener. A button that posts (data-post,
  // data-delete) does nothing before this script listens, so it comes disabled too: a person
  // who clicks Cancel run sees it is not ready, rather than a click that silently did nothing.
  function formsReady() {
    for (const form of document.querySelectorAll("form[data-needs-script]")) {
      for (const button of form.querySelectorAll("button[type=submit]")) button.disabled = false;
      form.removeAttribute("data-needs-script");
    }
    for (const button of document.querySelectorAll("button[data-needs-script]")) {
      button.disabled = false;
      button.removeAttribute("data-needs-script");
    }
  }

  document.addEventListener("DOMContentLoaded", () => { formsReady(); localTimes(); });

  return { api, el, toast, status, when, localTimes, pretty, FINAL };
})();
