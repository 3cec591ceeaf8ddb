// The floor page: every table a tile, grouped by pit, the ones needing a person first; live.
import { age, api, el, floorTime, kindWords, notice, pitOf, requireSession, tablePath } from "./app.js";
import { live } from "./live.js";
import { activity, applyChange, attention, pace, TABLE_WORDS } from "./tiles.js";

const tables = new Map(); // "site/table" -> its summary
const alarms = new Map(); // floor alarm id -> the alarm (open or acknowledged, not cleared)
const tiles = new Map(); // "site/table" -> { node, need, pit, table, behind } as last painted
const sections = new Map(); // pit -> { node, heading, list } as last painted
const dirty = new Set(); // the tables whose tiles the next paint makes again
let allDirty = true; // every tile (a snapshot, a read of /floor)
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

/** The table's rounds this hour against the target (an offline table has none to keep). */
function paceOf(table) {
  return pace(table.rounds_this_hour, table.online ? target : 0);
}

function tile(table, own) {
  const open = own.filter((a) => a.state === "open");
  const state = activity(table);
  const why = attention(table, open);
  const speed = paceOf(table);
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

/** The floor alarms not cleared, by table. */
function alarmsByTable() {
  const by = new Map();
  for (const alarm of alarms.values()) {
    const k = key(alarm.site, alarm.table);
    if (!by.has(k)) by.set(k, []);
    by.get(k).push(alarm);
  }
  return by;
}

const collate = new Intl.Collator().compare; // one collator: localeCompare makes one a call

function order(a, b) {
  return (b.need > 0) - (a.need > 0) || collate(a.table.table, b.table.table) || collate(a.table.site, b.table.site);
}

/** Children of ``parent`` made ``wanted``, in order: a node made again where the order is the
 * same takes its old one's place, and the others stay (re-inserting a thousand tiles restyles a
 * thousand); only a new order puts them all in again. */
function keep(parent, wanted) {
  const now = parent.children;
  if (now.length === wanted.length) {
    const swaps = [];
    let inPlace = true;
    for (let at = 0; at < wanted.length && inPlace; at++) {
      if (now[at] === wanted[at]) continue;
      inPlace = wanted[at].parentNode !== parent; // a node moving is a new order
      swaps.push([now[at], wanted[at]]);
    }
    if (inPlace) {
      for (const [old, made] of swaps) old.replaceWith(made);
      return;
    }
  }
  parent.replaceChildren(...wanted);
}

/** One paint an animation frame, whatever arrived meanwhile: the tiles of the tables that
 * changed are made again, the others kept; the order (those needing a person first) and the
 * pits' counts follow. */
function paint() {
  painted = 0;
  const own = alarmsByTable();
  for (const k of allDirty ? new Set([...tiles.keys(), ...tables.keys()]) : dirty) {
    const table = tables.get(k);
    if (!table) {
      tiles.delete(k);
      continue;
    }
    const floorAlarms = own.get(k) || [];
    const need = attention(table, floorAlarms.filter((a) => a.state === "open")).length;
    const node = tile(table, floorAlarms);
    const before = tiles.get(k);
    // a tile that reads the same is kept (one made again for its ages every 10 s, say)
    tiles.set(k, { node: before && before.node.isEqualNode(node) ? before.node : node, need, pit: pitOf(table), table,
      behind: paceOf(table).behind });
  }
  dirty.clear();
  allDirty = false;
  const byPit = new Map();
  for (const entry of tiles.values()) {
    if (!byPit.has(entry.pit)) byPit.set(entry.pit, []);
    byPit.get(entry.pit).push(entry);
  }
  const pits = [...byPit.keys()].sort((a, b) => (a === "Unassigned") - (b === "Unassigned") || collate(a, b));
  for (const pit of sections.keys()) if (!byPit.has(pit)) sections.delete(pit);
  const shown = pits.map((pit) => {
    const entries = byPit.get(pit).sort(order);
    const needing = entries.filter((x) => x.need).length;
    let section = sections.get(pit);
    if (!section) {
      const heading = el("h2", {});
      const list = el("ul", { class: "tiles" });
      section = { node: el("section", { class: "pit", "aria-label": pit }, heading, list), heading, list };
      sections.set(pit, section);
    }
    section.heading.replaceChildren(pit, el("span", { class: "count" }, ` ${entries.length} ${entries.length === 1 ? "table" : "tables"}` +
      `${needing ? `, ${needing} ${needing === 1 ? "needs" : "need"} attention` : ""}`));
    keep(section.list, entries.map((x) => x.node));
    return section.node;
  });
  const floorWide = [...alarms.values()].filter((a) => a.state === "open");
  const summary = document.getElementById("summary");
  summary.textContent = `${tables.size} tables · ${[...tables.values()].filter((t) => t.online).length} online · ` +
    `${floorWide.length} open floor alarms`;
  const floor = document.getElementById("floor");
  if (tables.size) keep(floor, shown);
  else floor.replaceChildren(el("p", {}, "No table has reported to the floor yet."));
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

/** A table not known yet, or a new hour: read /floor again, at most once a second. */
function refetchSoon() {
  if (refetching) return;
  refetching = setTimeout(async () => {
    try {
      const floor = await api("/floor");
      for (const table of floor.tables) tables.set(key(table.site, table.table), table);
      allDirty = true;
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
  allDirty = true;
  schedulePaint();
}

/** A change to a known table's summary: ``update(known)`` is its new summary, its tile is
 * painted again; a table not known yet is read with the rest of /floor. */
function tableUpdate(change, id, update) {
  applied(id);
  const k = key(change.site, change.table);
  const known = tables.get(k);
  if (!known) {
    refetchSoon();
    return;
  }
  tables.set(k, update(known));
  dirty.add(k);
  schedulePaint();
}

function tableChange(change, id) {
  tableUpdate(change, id, (known) => applyChange(known, change));
}

/** Rounds completed at a table: its counts go up without a read of the archive (a read of
 * /floor that saw those rounds already, a moment before their change came, counts one twice
 * until the next read: at the hour at the latest). */
function roundsChange(change, id) {
  tableUpdate(change, id, (known) => ({ ...known, rounds_this_hour: known.rounds_this_hour + change.rounds,
    rounds_today: known.rounds_today + change.rounds }));
}

function alarmChange(alarm, id) {
  applied(id);
  if (alarm.state === "cleared") alarms.delete(alarm.id);
  else alarms.set(alarm.id, alarm);
  dirty.add(key(alarm.site, alarm.table));
  schedulePaint();
}

async function main() {
  const session = await requireSession();
  if (session.target_rounds_per_hour) target = session.target_rounds_per_hour;
  live({ snapshot, table: tableChange, alarm: alarmChange, rounds: roundsChange });
  setInterval(() => { // ages move on: the tiles that show one (an alarm's, a backlog's) are made again
    for (const alarm of alarms.values()) dirty.add(key(alarm.site, alarm.table));
    for (const [k, table] of tables) {
      if (table.backlog || (table.alarms && table.alarms.length)) dirty.add(k);
      // and a table falling behind pace as the hour goes on, with no change of its own
      const shown = tiles.get(k);
      if (shown && shown.behind !== paceOf(table).behind) dirty.add(k);
    }
    schedulePaint();
  }, 10000);
  hourly();
}

/** The counts of this hour start again at the hour (and today's at the day): read /floor then. */
function hourly() {
  const now = new Date();
  const next = 3600000 - (now.getUTCMinutes() * 60000 + now.getUTCSeconds() * 1000 + now.getUTCMilliseconds());
  setTimeout(() => {
    refetchSoon();
    hourly();
  }, next + 2000);
}

main().catch((error) => notice(error.message));
