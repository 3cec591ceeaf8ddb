// A floor alarm's acknowledgement: who and when once made; a note and a button while it is open
// (for the roles that may acknowledge).
import { age, api, el, floorTime, kindWords, mayAcknowledge, notice } from "./app.js";

let forms = 0;
// A note being written survives the list painted again under it (a live change): its text, and
// its focus, by alarm id.
const drafts = new Map();
let focused = null;

export function acknowledgement(alarm, done) {
  if (alarm.acknowledged_at) {
    return el("span", { class: "acked-by" },
      `Acknowledged by ${alarm.acknowledged_by} at ${floorTime(alarm.acknowledged_at)}`,
      alarm.note ? el("q", {}, alarm.note) : null);
  }
  if (alarm.state !== "open") return el("span", {}, "—");
  if (!mayAcknowledge()) return el("span", { class: "muted" }, "Not acknowledged (your role may not acknowledge)");
  const id = `note-${++forms}`;
  const note = el("input", { id, name: "note", maxlength: "500", placeholder: "what was done" });
  note.value = drafts.get(alarm.id) || "";
  note.addEventListener("input", () => drafts.set(alarm.id, note.value));
  note.addEventListener("focus", () => { focused = alarm.id; });
  note.addEventListener("blur", () => { if (focused === alarm.id) focused = null; });
  if (focused === alarm.id) requestAnimationFrame(() => note.focus());
  const said = el("span", { class: "notice", role: "alert" });
  const button = el("button", { type: "submit" }, "Acknowledge");
  const form = el("form", { class: "ack" }, el("label", { for: id, class: "sr" }, "Note"), note, button, said);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    button.disabled = true;
    try {
      const acked = await api(`/alarms/${alarm.id}/ack`, { method: "POST", body: { note: note.value || drafts.get(alarm.id) || "" } });
      drafts.delete(alarm.id);
      note.value = "";
      note.blur();
      done(acked);
    } catch (error) {
      said.textContent = error.message;
      button.disabled = false;
    }
  });
  return form;
}

const STATE_WORDS = { open: "Open", acknowledged: "Acknowledged", cleared: "Cleared" };

/** A table of floor alarms, each with its acknowledgement. */
export function alarmTable(list, done, { showTable = true } = {}) {
  if (!list.length) return el("p", {}, "No alarms.");
  return el("table", { class: "list alarms-list" },
    el("thead", {}, el("tr", {}, showTable ? el("th", {}, "Table") : null, el("th", {}, "State"), el("th", {}, "Kind"),
      el("th", {}, "What"), el("th", {}, "Raised"), el("th", {}, "Acknowledgement"))),
    el("tbody", {}, list.map((a) => el("tr", { "data-alarm": a.id, class: a.state },
      showTable ? el("td", {}, el("a", { href: `/tables/${encodeURIComponent(a.site)}/${encodeURIComponent(a.table)}` }, `${a.site}/${a.table}`)) : null,
      el("td", {}, el("span", { class: `badge ${a.state}` }, STATE_WORDS[a.state] || a.state)),
      el("td", {}, kindWords(a.kind), a.key ? el("span", { class: "muted" }, ` ${a.key}`) : null),
      el("td", {}, a.detail),
      el("td", {}, `${floorTime(a.raised_at)} (${age((Date.now() - Date.parse(a.raised_at)) / 1000)} ago)`,
        a.cleared_at ? el("div", { class: "muted" }, `cleared ${floorTime(a.cleared_at)}`) : null),
      el("td", {}, acknowledgement(a, done))))));
}

/** Whether a person is writing a note now: the list is not painted again under them until done. */
export function writingNote() {
  return [...document.querySelectorAll("form.ack input[name=note]")]
    .some((input) => input.value !== "" || input === document.activeElement);
}

/** A page's repaint ``paint`` as a function asking for it ``delay`` ms from now: one pending at a
 * time, put off while a note is being written, its failure said in the notice line. */
export function repaintSoon(paint, defaultDelay) {
  let pending = null;
  const soon = (delay = defaultDelay) => {
    if (pending) return;
    pending = setTimeout(() => {
      pending = null;
      if (writingNote()) {
        soon(1000);
        return;
      }
      paint().then(() => notice(""), (error) => notice(error.message));
    }, delay);
  };
  return soon;
}
