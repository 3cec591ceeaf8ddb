// The floor page: every table a tile, grouped by pit, the ones needing a person first; live.
import { age, api, el, floorTime, kindWords, notice, pitOf, requireSession, tablePath } from "./app.js";
import { live } from "./live.js";
import { activity, applyChange, attention, pace, TABLE_WORDS } from "./tiles.js";

const tables = new Map(); // "site/table" -> its summary
const alarms = new Map(); // floor alarm id -> the alarm (open or acknowledged, not cleared)
let target = 60;
let refetching = null;
let painted = 0;
let through = 0; // the id of the newest change applied: a paint shows it and every change before it

const key = (site, table) => `${site}/${table}`;

function ageNow(alarm, table) {
  if (alarm.since) return (Date.now() - Date.parse(alarm.since)) / 1000 - (table.clock_offset_s || 0);
  return alarm.age_s;
}

function floorAlarmAge(alarm) {
  return (Date.now() - Date.parse(alarm.raised_at)) / 1000;
}

function tile(table) {
  const own = [...alarms.values()].filter((a) => a.site === table.site && a.table === table.table);
  const open = own.filter((a) => a.state === "open");
  const state = activity(table);
  const why = attention(table, open);
  const speed = pace(table.rounds_this_hour, table.online ? target : 0);
  const devices = (table.devices || []).map((d) =>
    el("li", { class: d.connected ? "" : "bad" }, `${d.role}: ${d.state}${d.connected ? "" : " (disconnected)"}`));
  const tableAlarms = (table.alarms || []).map((a) =>
    el("li", { class: "alarm" }, el("span", { class: "tag alarm" }, "Table alarm"), ` ${a.reason} · ${age(ageNow(a, table))}`));
  const floorAlarms = own.map((a) =>
    el("li", { class: a.state === "open" ? "alarm" : "acked" },
      el("span", { class: `tag ${a.state === "open" ? "alarm" : "acked"}` }, a.state === "open" ? "Floor alarm" : "Acknowledged"),
      ` ${kindWords(a.kind)}${a.key ? ` (${a.key})` : ""} · ${age(floorAlarmAge(a))}`));
  const lines = [
    el("p", { class: "pace" + (speed.behind ? " behind" : "") }, speed.text),
    el("p", { class: "shoe" }, (table.online ? "" : "Last known: ") +
      (table.shoe ? `shoe ${table.shoe.state.replace("_", " ")} · ${table.shoe.penetration}` : "no shoe")),
  ];
  if (table.backlog) lines.push(el("p", { class: "backlog" }, `Backlog: ${table.backlog} ${table.backlog === 1 ? "record" : "records"}` +
    (table.backlog_age_s === null || table.backlog_age_s === undefined ? "" : `, the oldest ${age(table.backlog_age_s)}`)));
  if (!table.online) lines.push(el("p", {}, `Last seen ${floorTime(table.last_seen)}`));
  return el("li", { class: `tile ${state}${why.length ? " attention" : ""}`, "data-table": key(table.site, table.table) },
    el("a", { class: "name", href: tablePath(table.site, table.table) }, table.table,
      el("span", { class: "site" }, ` ${table.site}`)),
    el("p", { class: "state" }, el("span", { class: `badge ${state}` }, TABLE_WORDS[state]),
      table.online ? el("span", { class: "badge online" }, "Online") : null),
    why.length ? el("p", { class: "why" }, `Needs attention: ${why.join(", ")}`) : null,
    ...lines,
    devices.length ? el("ul", { class: "devices", "aria-label": "devices" }, devices) : null,
    tableAlarms.length || floorAlarms.length ? el("ul", { class: "alarms", "aria-label": "alarms" }, tableAlarms, floorAlarms) : null);
}

function paint() {
  painted = 0;
  const byPit = new Map();
  for (const table of tables.values()) {
    const pit = pitOf(table);
    if (!byPit.has(pit)) byPit.set(pit, []);
    byPit.get(pit).push(table);
  }
  const pits = [...byPit.keys()].sort((a, b) => (a === "Unassigned") - (b === "Unassigned") || a.localeCompare(b));
  const sections = pits.map((pit) => {
    const tiles = byPit.get(pit).map((t) => {
      const open = [...alarms.values()].filter((a) => a.site === t.site && a.table === t.table && a.state === "open");
      return { t, need: attention(t, open).length };
    }).sort((a, b) => (b.need > 0) - (a.need > 0) || a.t.table.localeCompare(b.t.table) || a.t.site.localeCompare(b.t.site));
    const needing = tiles.filter((x) => x.need).length;
    return el("section", { class: "pit", "aria-label": pit },
      el("h2", {}, pit, el("span", { class: "count" }, ` ${tiles.length} ${tiles.length === 1 ? "table" : "tables"}${needing ? `, ${needing} ${needing === 1 ? "needs" : "need"} attention` : ""}`)),
      el("ul", { class: "tiles" }, tiles.map((x) => tile(x.t))));
  });
  const floorWide = [...alarms.values()].filter((a) => a.state === "open");
  const summary = document.getElementById("summary");
  summary.textContent = `${tables.size} tables · ${[...tables.values()].filter((t) => t.online).length} online · ` +
    `${floorWide.length} open floor alarms`;
  document.getElementById("floor").replaceChildren(...sections);
  if (!tables.size) document.getElementById("floor").append(el("p", {}, "No table has reported to the floor yet."));
  // what this paint shows and when, for a change-to-painted measure (benchmarks/floor.py)
  document.body.dataset.paintedThrough = String(through);
  document.body.dataset.paintedAt = (performance.timeOrigin + performance.now()).toFixed(1);
  document.body.dataset.painted = String(Date.now());
}

function applied(id) {
  if (id) through = Math.max(through, Number(id));
}

function schedulePaint() {
  if (painted) return;
  painted = requestAnimationFrame(paint);
}

/** Rounds and floor-alarm counts come from the archive: read /floor again, at most once a second. */
function refetchSoon() {
  if (refetching) return;
  refetching = setTimeout(async () => {
    try {
      const floor = await api("/floor");
      for (const table of floor.tables) tables.set(key(table.site, table.table), table);
      schedulePaint();
    } catch (error) {
      notice(error.message);
    } finally {
      refetching = null;
    }
  }, 1000);
}

function snapshot(data, id) {
  applied(id);
  tables.clear();
  alarms.clear();
  for (const table of data.floor.tables) tables.set(key(table.site, table.table), table);
  for (const alarm of data.alarms) alarms.set(alarm.id, alarm);
  if (data.floor.target_rounds_per_hour) target = data.floor.target_rounds_per_hour;
  schedulePaint();
}

function tableChange(change, id) {
  applied(id);
  const k = key(change.site, change.table);
  const known = tables.get(k);
  if (!known) {
    refetchSoon();
    return;
  }
  tables.set(k, applyChange(known, change));
  schedulePaint();
}

function alarmChange(alarm, id) {
  applied(id);
  if (alarm.state === "cleared") alarms.delete(alarm.id);
  else alarms.set(alarm.id, alarm);
  schedulePaint();
  refetchSoon();
}

async function main() {
  const session = await requireSession();
  if (session.target_rounds_per_hour) target = session.target_rounds_per_hour;
  live({ snapshot, table: tableChange, alarm: alarmChange, records: refetchSoon });
  setInterval(schedulePaint, 10000); // ages move on
}

main().catch((error) => notice(error.message));
