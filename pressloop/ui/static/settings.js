// Settings: the kill switch and the site's per-trigger policies (admin only).
"use strict";

(() => {
  const { api, toast } = Pressloop;

  const kill = document.getElementById("kill-switch");
  kill?.addEventListener("click", async () => {
    const turnOff = kill.dataset.disabled !== "true";
    if (turnOff && !window.confirm("Turn the agent off? No run will start until it is turned back on.")) return;
    kill.disabled = true;
    try {
      await api("PATCH", "/v1/settings", { agent_disabled: turnOff });
      toast(turnOff ? "The agent is off." : "The agent is on.");
      setTimeout(() => window.location.reload(), 300);
    } catch (error) {
      toast(error.message, "error");
      kill.disabled = false;
    }
  });

  // Only the values that differ from the built-in defaults are stored, so a later change of a
  // default still reaches the fields nobody set.
  const form = document.getElementById("policies");
  form?.addEventListener("submit", async (event) => {
    event.preventDefault();
    const defaults = JSON.parse(form.dataset.defaults);
    const policy = {};
    for (const row of form.querySelectorAll("tr[data-trigger]")) {
      const trigger = row.dataset.trigger;
      const changes = {};
      for (const input of row.querySelectorAll("input, select")) {
        const value = input.type === "number" ? Number(input.value) : input.value;
        if (input.type === "number" && !(value > 0)) {
          toast(`${input.getAttribute("aria-label")} must be a positive number.`, "error");
          input.focus();
          return;
        }
        if (value !== defaults[trigger][input.name]) changes[input.name] = value;
      }
      policy[trigger] = changes;  // {} puts a trigger back on the built-in defaults
    }
    try {
      await api("PATCH", "/v1/settings", { policies: policy });
      toast("Policies saved: they apply to the next run.");
    } catch (error) {
      toast(error.message, "error");
    }
  });
  // MCP servers (admin only): a name and the server's entry as in mcp.json, kept through the
  // API (which refuses any secret value); removing uses app.js's data-delete buttons.
  const mcpForm = document.getElementById("new-mcp-server");
  mcpForm?.addEventListener("submit", async (event) => {
    event.preventDefault();
    const f = mcpForm.elements;
    const name = f.name.value.trim();
    let entry;
    try {
      entry = JSON.parse(f.entry.value);
    } catch (error) {
      toast(`The server is not valid JSON: ${error.message}`, "error");
      f.entry.focus();
      return;
    }
    // A whole mcp.json pasted: take this name's entry from it.
    if (entry && typeof entry.mcpServers === "object" && entry.mcpServers !== null) {
      entry = entry.mcpServers[name];
      if (!entry) { toast(`The pasted mcpServers has no server named ${name}.`, "error"); return; }
    }
    if (!entry || typeof entry !== "object" || Array.isArray(entry)) {
      toast("The server must be a JSON object.", "error");
      return;
    }
    delete entry.type;  // some desktop configs name the transport; command or url decides here
    delete entry.transport;
    const button = mcpForm.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      await api("PUT", `/v1/settings/mcp-servers/${encodeURIComponent(name)}`, entry);
      toast(`MCP server ${name} saved.`);
      setTimeout(() => window.location.reload(), 300);
    } catch (error) {
      toast(error.message, "error");
      button.disabled = false;
    }
  });
})();
