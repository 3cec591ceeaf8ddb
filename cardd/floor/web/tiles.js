// A table's state in words (and a class for its colour), from its summary as /floor gives it.

export const TABLE_WORDS = {
  offline: "Offline",
  held: "Held",
  dealing: "Dealing",
  shuffling: "Shuffling",
  idle: "Idle",
};

const HOLDING = new Set(["ROUND_HELD", "SHUFFLER_MALFUNCTION", "FACE_UP_CARD", "FOREIGN_CARD", "MISSING_READ",
  "CONFLICTING_READ", "DEALING_BLOCKED", "SHOE_REFUSED"]);

/** offline, held, shuffling, dealing or idle. */
export function activity(table) {
  if (!table.online) return "offline";
  if ((table.alarms || []).some((a) => HOLDING.has(a.reason))) return "held";
  const devices = table.devices || [];
  if (devices.some((d) => d.state === "shuffling" || d.state === "verifying")) return "shuffling";
  const shoe = table.shoe ? table.shoe.state : null;
  if (shoe === "shuffling" || shoe === "verifying") return "shuffling";
  if (devices.some((d) => d.state === "dealing") || shoe === "in_play" || shoe === "burning") return "dealing";
  return "idle";
}

/** Why the table needs a person now (empty: it does not). */
export function attention(table, floorAlarms) {
  const why = [];
  const state = activity(table);
  if (state === "offline") why.push("offline");
  if (state === "held") why.push("held");
  if ((table.alarms || []).length) why.push("table alarm");
  if (floorAlarms.length) why.push("floor alarm");
  if ((table.devices || []).some((d) => !d.connected)) why.push("device disconnected");
  return why;
}

/** Rounds this hour against the pace target: the words and whether it is behind. */
export function pace(rounds, target, now = new Date()) {
  if (!target) return { text: `Rounds this hour: ${rounds}`, behind: false };
  const minutes = now.getUTCMinutes() + now.getUTCSeconds() / 60;
  const expected = (target * minutes) / 60;
  const behind = minutes >= 10 && rounds < expected * 0.75;
  return { text: `Rounds this hour: ${rounds} (target ${target}/h)${behind ? " · behind pace" : ""}`, behind };
}

/** A table's summary with what a `table` change says (its status and last state). */
export function applyChange(table, change) {
  const next = { ...table, online: change.online, session: change.session, clock_offset_s: change.clock_offset_s };
  const state = change.state;
  if (state) {
    next.devices = state.devices;
    next.shoe = state.shoe;
    next.alarms = state.alarms.map((a) => ({ reason: a.reason, since: a.since, age_s: null }));
    next.backlog = state.export.backlog;
    next.backlog_age_s = state.export.backlog ? state.export.oldest_undelivered_s : null;
  }
  next.last_seen = new Date().toISOString();
  return next;
}
