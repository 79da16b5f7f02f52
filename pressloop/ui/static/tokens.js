// API tokens: create one (shown once, here) through the API; revoke buttons use app.js.
"use strict";

(() => {
  const { api, toast } = Pressloop;
  const form = document.getElementById("new-token");
  if (!form) return;
  const shown = document.getElementById("new-token-shown");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const f = form.elements;
    const body = { name: f.name.value.trim(), role: f.role.value };
    if (!body.name) { toast("Give the token a name.", "error"); f.name.focus(); return; }
    if (f.expires_in.value.trim()) body.expires_in = f.expires_in.value.trim();
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const created = await api("POST", "/v1/tokens", body);
      document.getElementById("new-token-value").textContent = created.token;
      form.hidden = true;
      shown.hidden = false;
      toast(`Token ${created.name} created.`);
    } catch (error) {
      toast(error.message, "error");
    } finally {
      button.disabled = false;
    }
  });
  document.getElementById("new-token-done")?.addEventListener("click", () => window.location.reload());
})();
