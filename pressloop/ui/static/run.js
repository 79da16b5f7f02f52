// One run: its timeline live, its facts (status, attempts, backoff, lease, error) and its steps
// with undo, refreshed as events arrive.
"use strict";

(() => {
  const { api, el, toast, status, when, pretty } = Pressloop;
  const root = document.getElementById("run");
  const runId = root.dataset.runId;
  const undoable = new Set((root.dataset.undoable || "").split(",").filter(Boolean));
  const canOperate = ["operator", "admin"].includes(document.body.dataset.role);
  const timeline = document.getElementById("timeline");
  const liveDot = document.getElementById("live-dot");

  function field(name, ...content) {
    const node = root.querySelector(`[data-field="${name}"]`);
    if (node) node.replaceChildren(...content);
  }

  function showFacts(run) {
    field("status", status(run.status));
    field("attempt", `${run.attempt} of ${run.max_attempts}`);
    field("not_before", when(run.not_before));
    field("lease", run.lease_owner ? `${run.lease_owner} until ${when(run.lease_expires_at)}` : "none");
    const u = run.usage || {};
    field("usage", `${(u.input_tokens || 0) + (u.output_tokens || 0)} tokens · ${u.model_calls || 0} model calls · ${u.action_calls || 0} actions`);
    field("error", run.error ? el("span", {}, el("strong", {}, run.error.cls), run.error.retryable ? " (retryable)" : "", `: ${run.error.message}`) : "—");
    field("finished_at", when(run.finished_at));
    for (const button of root.querySelectorAll("[data-show-when]")) {
      button.hidden = !button.dataset.showWhen.split(" ").includes(run.status);
    }
    liveDot.hidden = Pressloop.FINAL.has(run.status);
  }

  function stepNode(step, entry) {
    const node = el("li", { class: "step", "data-action": step.action },
      el("strong", {}, step.action), " ", step.risk ? el("span", { class: `tag risk-${step.risk}` }, step.risk) : null, " ",
      status(step.status),
      el("details", {}, el("summary", {}, "parameters"), el("pre", {}, pretty(step.params || {}))),
      step.result_summary ? el("p", { class: "small" }, step.result_summary) : null);
    if (entry) {
      if (entry.undo_state === "undone") node.append(el("p", { class: "small" }, status("undone")));
      else if (canOperate && entry.status === "done" && undoable.has(entry.action) && entry.outcome && entry.outcome.status === "succeeded") {
        node.append(el("button", { type: "button", "data-post": `/v1/ledger/${entry.id}/undo`,
          "data-confirm": `Undo ${entry.action}?`, "data-done": "Undone." }, "Undo"));
      }
    }
    return node;
  }

  async function showSteps() {
    const box = document.getElementById("steps");
    try {
      const [run, ledger] = await Promise.all([
        api("GET", `/v1/runs/${runId}`),
        api("GET", `/v1/runs/${runId}/ledger`),
      ]);
      showFacts(run);
      const ledgerByCall = new Map(ledger.map((entry) => [entry.call_id, entry]));
      const steps = (run.result && run.result.steps) || ledger.map((e) => ({
        index: e.step_index, call_id: e.call_id, action: e.action, params: e.params, risk: e.risk,
        status: e.outcome ? e.outcome.status : e.status, result_summary: e.outcome ? e.outcome.summary : "",
      }));
      box.replaceChildren(steps.length
        ? el("ol", { class: "steps" }, steps.map((s) => stepNode(s, ledgerByCall.get(s.call_id))))
        : el("p", { class: "muted" }, "No actions yet."));
    } catch (error) {
      box.replaceChildren(el("p", { class: "error" }, error.message));
    }
  }

  let pending = null;
  function refreshSoon() {
    if (pending) return;
    pending = setTimeout(() => { pending = null; showSteps(); }, 250);
  }

  Timeline.follow(runId, {
    onEvent: (event) => {
      timeline.append(Timeline.item(event));
      if (["run.started", "step", "run.finished", "error", "approval"].includes(event.type)) refreshSoon();
    },
    onRest: (run) => { showFacts(run); refreshSoon(); },
  });
  showSteps();
})();
