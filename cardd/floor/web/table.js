// A table's page: its devices, shoe, current round (no cards), recent records with their reason
// codes in words, its floor alarms with acknowledgement, and its rounds per hour today.
import { age, api, currentSession, el, floorClock, floorTime, notice, requireSession } from "./app.js";
import { alarmTable, repaintSoon } from "./ack.js";
import { live } from "./live.js";
import { activity, TABLE_WORDS } from "./tiles.js";

const [, , siteName, tableName] = location.pathname.split("/").map(decodeURIComponent);
const base = `/tables/${encodeURIComponent(siteName)}/${encodeURIComponent(tableName)}`;
let reasons = {};

const ROUND_REASONS = new Set(["ROUND_STATE", "ROUND_HELD", "ROUND_RESUMED", "ROUND_VOID", "REDEAL"]);

function currentRound(records) {
  const last = records.find((r) => ROUND_REASONS.has(r.reason));
  if (!last) return "No round in the recent records.";
  const data = last.data || {};
  const number = data.round !== undefined ? `Round ${data.round}` : "The last round";
  const words = { ROUND_HELD: "held", ROUND_RESUMED: "resumed", ROUND_VOID: "void", REDEAL: "to be dealt again" };
  const state = last.reason === "ROUND_STATE" ? String(data.state || "changed") : words[last.reason];
  return `${number}: ${state} (${floorTime(last.time)})`;
}

function explained(reason) {
  const text = reasons[reason];
  return text ? text : "";
}

function hourlyChart(rows, target) {
  const max = Math.max(target || 0, ...rows.map((r) => r.rounds), 1);
  const width = 24 * 22, height = 140, top = 10, bottom = 24;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${width + 30} ${height}`);
  svg.setAttribute("role", "img");
  svg.setAttribute("class", "chart");
  const title = document.createElementNS(ns, "title");
  title.textContent = `Rounds per hour today: ${rows.map((r) => r.rounds).join(", ")}`;
  svg.append(title);
  const scale = (v) => (height - bottom) - ((height - bottom - top) * v) / max;
  rows.forEach((row, i) => {
    const bar = document.createElementNS(ns, "rect");
    const y = scale(row.rounds);
    bar.setAttribute("x", String(30 + i * 22 + 2));
    bar.setAttribute("y", String(y));
    bar.setAttribute("width", "18");
    bar.setAttribute("height", String(height - bottom - y));
    bar.setAttribute("class", "bar");
    const tip = document.createElementNS(ns, "title");
    tip.textContent = `${floorClock(row.start)}: ${row.rounds} rounds`;
    bar.append(tip);
    svg.append(bar);
    if (i % 3 === 0) {
      const label = document.createElementNS(ns, "text");
      label.setAttribute("x", String(30 + i * 22 + 11));
      label.setAttribute("y", String(height - 8));
      label.setAttribute("class", "axis");
      label.textContent = floorClock(row.start);
      svg.append(label);
    }
  });
  if (target) {
    const line = document.createElementNS(ns, "line");
    line.setAttribute("x1", "30");
    line.setAttribute("x2", String(width + 30));
    line.setAttribute("y1", String(scale(target)));
    line.setAttribute("y2", String(scale(target)));
    line.setAttribute("class", "target");
    svg.append(line);
    const label = document.createElementNS(ns, "text");
    label.setAttribute("x", "0");
    label.setAttribute("y", String(scale(target) + 4));
    label.setAttribute("class", "axis start");
    label.textContent = `${target}/h`;
    svg.append(label);
  }
  return svg;
}

async function paint() {
  const session = currentSession();
  const target = session.target_rounds_per_hour || 60;
  const day = new Date().toISOString().slice(0, 10); // the report's days are UTC days
  const [detail, records, hourly] = await Promise.all([
    api(base), api(`${base}/records?limit=30`),
    api(`/reports/hourly?day=${day}&site=${encodeURIComponent(siteName)}&table=${encodeURIComponent(tableName)}`)]);
  const t = detail.table;
  const state = activity(t);
  document.getElementById("title").textContent = `${t.table} (${t.site})`;
  document.title = `${t.table} · cardfloor`;
  const facts = el("dl", { class: "facts" },
    el("dt", {}, "State"), el("dd", {}, el("span", { class: `badge ${state}` }, TABLE_WORDS[state]),
      el("span", { class: `badge ${t.online ? "online" : "offline"}` }, t.online ? "Online" : "Offline")),
    el("dt", {}, "Last seen"), el("dd", {}, floorTime(t.last_seen)),
    el("dt", {}, "Shoe"), el("dd", {}, t.shoe ? `${t.shoe.state.replace("_", " ")}, penetration ${t.shoe.penetration}` : "none"),
    el("dt", {}, "Rounds"), el("dd", {}, `${t.rounds_this_hour} this hour (target ${target}/h), ${t.rounds_today} today`),
    el("dt", {}, "Current round"), el("dd", { id: "round" }, currentRound(records.records)),
    el("dt", {}, "Export backlog"), el("dd", {}, t.backlog ? `${t.backlog} records, oldest ${age(t.backlog_age_s)}` : "none"),
    el("dt", {}, "Release"), el("dd", {}, detail.release || "—"),
    el("dt", {}, "House rules"), el("dd", {}, detail.rules ? detail.rules.name : "—"),
    el("dt", {}, "Gaps in the archive"), el("dd", {}, detail.gaps.length ? detail.gaps.map((g) => `${g[0]}–${g[1]}`).join(", ") : "none"));
  const devices = el("table", { class: "list" },
    el("thead", {}, el("tr", {}, el("th", {}, "Device"), el("th", {}, "State"), el("th", {}, "Link"), el("th", {}, "URL"))),
    el("tbody", {}, t.devices.map((d) => el("tr", {}, el("td", {}, d.role), el("td", {}, d.state),
      el("td", {}, el("span", { class: `badge ${d.connected ? "online" : "offline"}` }, d.connected ? "Connected" : "Disconnected")),
      el("td", {}, (detail.device_urls.find((u) => u.role === d.role) || {}).url || "—")))));
  const tableAlarms = t.alarms.length
    ? el("ul", {}, t.alarms.map((a) => el("li", { class: "alarm" }, el("span", { class: "tag alarm" }, "Table alarm"),
      ` ${a.reason}: ${explained(a.reason) || "an alarm of the table"} · open ${age(a.age_s)}`)))
    : el("p", {}, "None open.");
  const recordRows = records.records.map((r) => el("tr", { class: r.severity },
    el("td", {}, String(r.seq)), el("td", {}, floorTime(r.time)),
    el("td", {}, el("span", { class: `badge ${r.severity}` }, r.severity)),
    // the words under every alarm and warning; an info record's on hover and focus (its title)
    el("td", {}, el("code", { title: explained(r.reason) || null, tabindex: r.severity === "info" && explained(r.reason) ? "0" : null }, r.reason),
      r.severity === "info" ? null : el("div", { class: "muted" }, explained(r.reason))),
    el("td", {}, r.message, r.who ? el("span", { class: "muted" }, ` (${r.who})`) : null)));
  document.getElementById("table").replaceChildren(
    facts,
    el("h2", {}, "Devices"), t.devices.length ? devices : el("p", {}, "No device reported."),
    el("h2", {}, "Table alarms"), tableAlarms,
    el("h2", {}, "Floor alarms"), alarmTable(detail.alarms, () => refetchSoon(0), { showTable: false }),
    el("h2", {}, "Rounds per hour today (the UTC day, hours on the floor's clock)"), hourlyChart(hourly.rows, target),
    el("h2", {}, "Recent records"),
    el("table", { class: "list records" },
      el("thead", {}, el("tr", {}, el("th", {}, "Seq"), el("th", {}, "Time"), el("th", {}, "Severity"), el("th", {}, "Reason"), el("th", {}, "Message"))),
      el("tbody", {}, recordRows)));
  document.body.dataset.painted = String(Date.now());
}

const refetchSoon = repaintSoon(paint, 500);


function ours(change) {
  return change.site === siteName && change.table === tableName;
}

async function main() {
  await requireSession();
  try {
    reasons = await (await fetch("/static/reasons.json")).json();
  } catch { /* the codes alone */ }
  await paint();
  live({
    snapshot: () => refetchSoon(0),
    table: (c) => ours(c) && refetchSoon(),
    alarm: (c) => ours(c) && refetchSoon(0),
    records: (c) => ours(c) && refetchSoon(),
  });
}

main().catch((error) => notice(error.message));
