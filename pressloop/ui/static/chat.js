// The chat console: send a message, then watch the turn live (deltas, actions, steps, results,
// approval cards, the final answer). A dropped connection resumes where it stopped.
"use strict";

(() => {
  const { api, el, toast, status } = Pressloop;
  const pane = document.querySelector(".chat-pane");
  const transcript = document.getElementById("transcript");
  const composer = document.getElementById("composer");
  const canOperate = ["operator", "admin"].includes(document.body.dataset.role);
  let threadId = pane.dataset.threadId || null;

  function scrollDown() {
    transcript.lastElementChild?.scrollIntoView({ block: "end", behavior: "smooth" });
  }

  // Pressloop's own words: why a run failed or stopped, or what a parked run waits for.
  function notice(text) {
    return el("div", { class: "bubble pressloop", role: "status" },
      el("span", { class: "tag" }, "Pressloop"), " ", text);
  }

  // One turn drawn live: a bubble for the agent's words, a card per action.
  function liveTurn(runId) {
    const turn = el("section", { class: "turn", "data-run-id": runId, "aria-label": "The agent's turn" });
    const state = el("p", { class: "turn-state small" }, status("queued"), " ",
      el("a", { href: `/ui/runs/${runId}` }, "run details"));
    turn.append(state);
    transcript.append(turn);
    let bubble = null;
    const cards = new Map();

    function setState(value) {
      state.firstChild.replaceWith(status(value));
      turn.dataset.status = value;
    }
    function words() {
      if (!bubble) {
        bubble = el("div", { class: "bubble agent streaming" });
        turn.insertBefore(bubble, state);
      }
      return bubble;
    }
    function add(node) {
      turn.insertBefore(node, state);
      scrollDown();
    }

    async function onEvent(event) {
      const d = event.data || {};
      switch (event.type) {
        case "run.started": setState("running"); break;
        case "thinking": add(el("p", { class: "thinking" }, d.text || "")); break;
        case "message":
          if (d.by === "pressloop") { add(notice(d.text || "")); bubble = null; }
          else if (d.delta !== undefined) { words().textContent += d.delta; scrollDown(); }
          else if (d.text !== undefined) {
            const node = words();
            node.textContent = d.text;
            node.classList.remove("streaming");
            if (d.final) node.classList.add("final");
            bubble = null;
          }
          break;
        case "action": {
          bubble = null;
          const card = el("div", { class: "call", "data-action": d.action },
            el("span", { class: "tag" }, `step ${(d.index ?? 0) + 1}/${d.total ?? 1}`), " ",
            el("strong", {}, d.action), " ", el("code", {}, JSON.stringify(d.params || {})), " ",
            status("running"), el("div", { class: "call-result small" }));
          cards.set(d.index ?? 0, card);
          add(card);
          break;
        }
        case "step": {
          const card = cards.get(d.index ?? 0);
          if (card) card.querySelector(".status").replaceWith(status(d.status));
          break;
        }
        case "result": {
          const card = cards.get(d.index ?? 0);
          if (card) card.querySelector(".call-result").textContent = d.summary || d.message || "";
          break;
        }
        case "approval": {
          setState("waiting_approval");
          try {
            const approval = await api("GET", `/v1/approvals/${encodeURIComponent(d.approval_id)}`);
            add(Timeline.approvalCard(approval, canOperate));
          } catch (error) { toast(error.message, "error"); }
          break;
        }
        case "error": add(el("p", { class: "error", role: "alert" }, Timeline.summary(event))); break;
        case "run.finished":
          if (d.notice) add(notice(d.notice));
          setState(d.status); composer?.querySelector("button")?.removeAttribute("disabled"); break;
        default: break;
      }
    }
    Timeline.follow(runId, {
      onEvent,
      onRest: (run) => setState(run.status),
    });
  }

  async function send(message) {
    if (!threadId) {
      const thread = await api("POST", "/v1/threads", { title: message.slice(0, 80) });
      threadId = thread.id;
      pane.dataset.threadId = threadId;
      history.replaceState(null, "", `/ui/chat?thread=${encodeURIComponent(threadId)}`);
    }
    const accepted = await api("POST", `/v1/threads/${encodeURIComponent(threadId)}/runs`,
      { message, mode: "background", trigger: "chat" });
    transcript.append(el("div", { class: "bubble user" }, el("span", { class: "sr" }, "You said:"), message));
    liveTurn(accepted.run.id);
    scrollDown();
  }

  composer?.addEventListener("submit", async (event) => {
    event.preventDefault();
    const box = composer.elements.message;
    const message = box.value.trim();
    if (!message) { box.focus(); return; }
    const button = composer.querySelector("button");
    button.disabled = true;
    try {
      await send(message);
      box.value = "";
    } catch (error) {
      toast(error.message, "error");
    } finally {
      button.disabled = false;
      box.focus();
    }
  });

  composer?.elements.message.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) composer.requestSubmit();
  });

  if (pane.dataset.liveRun) liveTurn(pane.dataset.liveRun);
  scrollDown();
})();
