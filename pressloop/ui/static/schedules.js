// Creating a schedule from the form (interval in minutes or a cron rule, timezone, active hours).
"use strict";

(() => {
  const { api, toast } = Pressloop;
  const form = document.getElementById("new-schedule");
  if (!form) return;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const f = form.elements;
    const kind = f.kind.value;
    const body = { kind, timezone: f.timezone.value.trim() || "UTC" };
    if (kind === "interval") {
      const seconds = Math.round(Number(f.interval.value) * Number(f.unit.value));
      if (!(seconds >= 1)) { toast("Give an interval of at least 1 second.", "error"); f.interval.focus(); return; }
      body.interval_s = seconds;
    } else {
      body.cron = f.cron.value.trim();
      if (!body.cron) { toast("Give a cron rule, such as 0 9 * * 1-5.", "error"); f.cron.focus(); return; }
    }
    if (f.start.value || f.end.value) {
      if (!(f.start.value && f.end.value)) { toast("Active hours need both a start and an end.", "error"); return; }
      body.active_hours = { start: f.start.value, end: f.end.value };
    }
    if (f.message.value.trim()) body.message = f.message.value.trim();
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      await api("POST", "/v1/schedules", body);
      toast("Schedule created.");
      setTimeout(() => window.location.reload(), 300);
    } catch (error) {
      toast(error.message, "error");
      button.disabled = false;
    }
  });
})();
