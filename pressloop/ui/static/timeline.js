// Following a run's events live (EventSource over /v1/runs/{id}/events) and drawing them.
"use strict";

const Timeline = (() => {
  const { api, el, status, pretty } = Pressloop;
  const TYPES = ["run.started", "thinking", "message", "action", "step", "result", "approval", "tokens", "run.finished", "error"];

  // Calls onEvent once per frame, in order, across reconnects (the browser resends Last-Event-ID
  // and the server resumes after it; positions guard against any repeat). A frame's id is the
  // event's seq "N", or "N.k" for a text delta sent before its commit (event N, then k text
  // parts after it): positions compare as (N, k). Text from parts of an attempt that died before
  // committing them is followed by the retry's run.started.
  // When the stream closes, the run's state decides: final -> stop; otherwise the browser
  // reconnects by itself. A run.finished event alone decides nothing: a run parked for an
  // approval reports one, and so does every attempt of a run that was later requeued.
  // A stream that ends on a run parked for an approval asks the browser to reconnect only after
  // 15 s; a decision taken on this page reconnects at once ("pressloop:decided").
  function follow(runId, { onEvent, onRest }) {
    let last = [0, 0];
    let stopped = false;
    let source = null;
    const position = (id) => {
      const [seq, part] = String(id).split(".");
      return [Number(seq), Number(part || 0)];
    };
    const isStoredDelta = (event) => {
      const d = event.data || {};
      return (event.type === "message" || event.type === "thinking") && typeof d.delta === "string"
        && Object.keys(d).every((key) => key === "delta" || key === "parts");
    };
    const handle = (message) => {
      let event = JSON.parse(message.data);
      const at = message.lastEventId ? position(message.lastEventId) : [event.seq, 0];
      if (at[0] < last[0] || (at[0] === last[0] && at[1] <= last[1])) return;
      if (last[1] && !at[1] && at[0] === last[0] + 1 && isStoredDelta(event)) {
        // Reopened with ?after=N after k parts: the stored events skip those parts' text, as
        // the server does on Last-Event-ID (lengths in code points, as the server counts).
        const sent = last[1];
        const lengths = event.data.parts || [Array.from(event.data.delta).length];
        if (sent >= lengths.length) {
          last = [at[0], sent - lengths.length];
          return;
        }
        const cut = lengths.slice(0, sent).reduce((a, b) => a + b, 0);
        event = { ...event, data: { delta: Array.from(event.data.delta).slice(cut).join(""), after_part: sent } };
      }
      last = at;
      onEvent(event);
    };
    function open() {
      const after = last[0] ? `?after=${last[0]}` : "";
      source = new EventSource(`/v1/runs/${encodeURIComponent(runId)}/events${after}`);
      for (const type of TYPES) source.addEventListener(type, handle);
      source.onerror = async () => {
        if (stopped) return;
        try {
          const run = await api("GET", `/v1/runs/${encodeURIComponent(runId)}`);
          if (onRest) onRest(run);
          if (Pressloop.FINAL.has(run.status)) stop();
        } catch (error) {
          if (error.status === 401 || error.status === 404) stop();
        }
      };
    }
    const decided = (event) => {
      if (stopped || event.detail.runId !== runId) return;
      source.close();
      open();
    };
    function stop() {
      stopped = true;
      source.close();
      window.removeEventListener("pressloop:decided", decided);
    }
    open();
    window.addEventListener("pressloop:decided", decided);
    return { stop, get last() { return last[0]; } };
  }

  function summary(event) {
    const d = event.data || {};
    switch (event.type) {
      case "run.started": return `attempt ${d.attempt} started (${d.trigger}) on ${d.worker}`;
      case "thinking": return d.text || "";
      case "message": return d.text !== undefined ? `${d.by === "pressloop" ? "Pressloop" : d.final ? "answer" : "said"}: ${d.text}` : `… ${d.delta}`;
      case "action": return `${d.action} (${(d.index ?? 0) + 1} of ${d.total ?? 1}) ${JSON.stringify(d.params || {})}`;
      case "step": return `step ${(d.index ?? 0) + 1} of ${d.total ?? 1}: ${d.status}`;
      case "result": return `${d.status}: ${d.summary || d.message || ""}`;
      case "approval": return `${d.action} (${d.risk}) waits for approval ${d.approval_id}`;
      case "tokens": return `${d.input} in + ${d.output} out tokens`;
      case "run.finished": return `finished: ${d.status}${d.notice ? ` — Pressloop: ${d.notice}` : ""}`;
      case "error": return `${d.cls || "error"}: ${d.message || ""}${d.retry_at ? ` — retry at ${Pressloop.when(d.retry_at)}` : ""}`;
      default: return JSON.stringify(d);
    }
  }

  function item(event) {
    return el("li", { class: `ev ev-${event.type.replace(".", "-")}`, "data-seq": event.seq, "data-type": event.type },
      el("span", { class: "ev-seq" }, `#${event.seq}`),
      el("span", { class: "ev-type" }, event.type),
      el("time", { datetime: event.ts }, new Date(event.ts).toLocaleTimeString()),
      el("span", { class: "ev-text" }, summary(event)),
      el("details", {}, el("summary", {}, "data"), el("pre", {}, pretty(event.data))));
  }

  function previewNode(preview) {
    if (preview && typeof preview.before === "object" && typeof preview.after === "object" && preview.before && preview.after) {
      const fields = [...new Set([...Object.keys(preview.before), ...Object.keys(preview.after)])];
      const text = (v) => (v === undefined ? "—" : typeof v === "string" ? v : JSON.stringify(v));
      return el("table", { class: "diff" },
        el("caption", {}, "What would change"),
        el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Field"), el("th", { scope: "col" }, "Before"), el("th", { scope: "col" }, "After"))),
        el("tbody", {}, fields.map((f) => {
          const before = text(preview.before[f]);
          const after = text(f in preview.after ? preview.after[f] : preview.before[f]);
          const same = before === after;  // unchanged fields are shown plain, not struck out
          return el("tr", { class: same ? "same" : "changed" },
            el("th", { scope: "row" }, f),
            el("td", {}, same ? before : el("del", {}, before)),
            el("td", {}, same ? after : el("ins", {}, after)));
        })));
    }
    return preview ? el("pre", { class: "preview" }, pretty(preview)) : el("p", { class: "muted" }, "No preview for this action.");
  }

  // The same card the approvals page renders on the server, drawn here for the live chat.
  function approvalCard(a, canOperate) {
    const card = el("article", { class: "card approval", id: `approval-${a.id}`, "data-approval-id": a.id },
      el("h3", {}, el("span", { class: `tag risk-${a.risk}` }, a.risk), ` ${a.action} needs your approval`),
      el("p", { class: "small" }, `Asked by ${a.asked_by || a.trigger} · expires ${Pressloop.when(a.expires_at)}`),
      a.reason ? el("p", {}, el("strong", {}, "Why: "), a.reason) : null,
      previewNode(a.preview));
    const edited = a.edited_params && JSON.stringify(a.edited_params) !== JSON.stringify(a.params);
    if (edited) {
      // What runs is what the person approved; the agent's own params stay one click away.
      card.append(el("p", {}, el("strong", {}, `Runs with the parameters ${a.decided_by || "a person"} edited:`)),
        el("pre", { class: "params-run" }, pretty(a.run_params)),
        el("details", {}, el("summary", {}, "Parameters the agent asked for"), el("pre", {}, pretty(a.params))));
    } else {
      card.append(el("details", {}, el("summary", {}, "Parameters"), el("pre", {}, pretty(a.params))));
    }
    if (a.status !== "pending") {
      card.append(el("p", { class: "decided" }, status(a.status), a.decided_by ? ` by ${a.decided_by}` : ""));
      if (a.step) card.append(el("p", { class: "small" }, "The step: ", status(a.step), a.step_summary ? ` ${a.step_summary}` : ""));
    } else if (canOperate) {
      const paramsId = `params-${a.id}`;
      const noteId = `note-${a.id}`;
      const textarea = el("textarea", { id: paramsId, name: "params", rows: 4, class: "mono" });
      textarea.defaultValue = pretty(a.params);
      card.append(el("form", { class: "decide stack", "data-approval-form": a.id },
        el("label", { for: paramsId }, "Parameters (edit to run the step with other values)"), textarea,
        el("label", { for: noteId }, "Note to the agent (optional)"),
        el("input", { id: noteId, name: "note", type: "text", maxlength: 2000 }),
        el("div", { class: "actions" },
          el("button", { type: "submit", class: "primary", name: "decision", value: "approve" }, "Approve"),
          el("button", { type: "submit", class: "danger", name: "decision", value: "reject" }, "Reject"))));
    }
    return card;
  }

  return { follow, item, summary, approvalCard, previewNode };
})();
