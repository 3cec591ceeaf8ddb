// The daily report, per table per day (UTC days), and its CSV.
import { api, el, notice, requireSession } from "./app.js";

const form = document.getElementById("period");
const csv = document.getElementById("csv");

function query(format) {
  const params = new URLSearchParams({ from: form.from.value, to: form.to.value });
  if (form.table.value) {
    const [site, table] = form.table.value.split("/");
    params.set("site", site);
    params.set("table", table);
  }
  if (format) params.set("format", format);
  return params;
}

function alarmsCell(alarms) {
  const entries = Object.entries(alarms || {});
  return entries.length ? entries.map(([reason, n]) => `${reason} × ${n}`).join(", ") : "none";
}

async function paint() {
  csv.href = `/api/v1/reports/daily?${query("csv")}`;
  csv.setAttribute("download", `cardfloor-daily-${form.from.value}-${form.to.value}.csv`);
  const report = await api(`/reports/daily?${query()}`);
  const head = ["Table", "Day", "Rounds", "Hands", "Shoes", "Voids", "Device faults", "Minutes offline", "Alarms"];
  document.getElementById("report").replaceChildren(report.rows.length ? el("table", { class: "list" },
    el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
    el("tbody", {}, report.rows.map((r) => el("tr", {},
      el("td", {}, `${r.site}/${r.table}`), el("td", {}, r.start.slice(0, 10)), el("td", { class: "n" }, String(r.rounds)),
      el("td", { class: "n" }, String(r.hands)), el("td", { class: "n" }, String(r.shoes)), el("td", { class: "n" }, String(r.voids)),
      el("td", { class: "n" }, String(r.device_faults)), el("td", { class: "n" }, String(r.minutes_offline)),
      el("td", {}, alarmsCell(r.alarms))))))
    : el("p", {}, "No table in this period."));
  document.body.dataset.painted = String(Date.now());
}

async function main() {
  await requireSession();
  const today = new Date().toISOString().slice(0, 10);
  form.from.value = today;
  form.to.value = today;
  const floor = await api("/floor");
  for (const t of floor.tables) form.table.append(el("option", { value: `${t.site}/${t.table}` }, `${t.site}/${t.table}`));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    paint().then(() => notice(""), (error) => notice(error.message));
  });
  await paint();
}

main().catch((error) => notice(error.message));
