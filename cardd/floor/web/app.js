// What every page of the pit page shares: the session, the API, times in the floor's zone,
// building DOM from data (text only: nothing a table or a person sent is ever markup).

export const API = "/api/v1";

/** An element: `el("td", {class: "x"}, "text", child)`. Strings become text nodes. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

let session = null;

/** The session (who, role, pits, csrf, time_zone); the log-in page when there is none. */
export async function requireSession() {
  const answer = await fetch(`${API}/session`, { headers: { Accept: "application/json" } });
  if (answer.status === 401) {
    toLogin();
    throw new Error("no session");
  }
  if (!answer.ok) throw new Error(`the session could not be read (${answer.status})`);
  session = await answer.json();
  header();
  return session;
}

export function toLogin() {
  const next = location.pathname + location.search;
  location.assign(`/login?next=${encodeURIComponent(next)}`);
}

export function currentSession() {
  return session;
}

export function mayAcknowledge() {
  return session !== null && (session.role === "pit" || session.role === "admin");
}

/** A JSON API call; a refusal throws its one sentence. */
export async function api(path, { method = "GET", body = undefined } = {}) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") {
    headers["Content-Type"] = "application/json";
    headers["X-Requested-With"] = "cardfloor";
    if (session) headers["X-CSRF-Token"] = session.csrf;
  }
  const answer = await fetch(API + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (answer.status === 401) {
    toLogin();
    throw new Error("the session has ended: log in again");
  }
  if (answer.status === 204) return null;
  let data = null;
  try {
    data = await answer.json();
  } catch {
    throw new Error(`the floor service answered ${answer.status} without JSON`);
  }
  if (!answer.ok) throw new Error(data && data.error ? data.error : `refused (${answer.status})`);
  return data;
}

function zone() {
  return (session && session.time_zone) || "UTC";
}

const formats = new Map();
function format(kind) {
  const key = `${kind}|${zone()}`;
  if (!formats.has(key)) {
    const options = kind === "time"
      ? { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" }
      : { year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", hourCycle: "h23" };
    formats.set(key, new Intl.DateTimeFormat("en-GB", { ...options, timeZone: zone() }));
  }
  return formats.get(key);
}

/** A time as the floor reads it: its time zone's clock (today: the time alone). */
export function floorTime(text) {
  if (!text) return "—";
  const moment = new Date(text);
  if (Number.isNaN(moment.getTime())) return String(text);
  const sameDay = floorDay(moment) === floorDay(new Date());
  return sameDay ? format("time").format(moment) : format("full").format(moment);
}

/** A time's hours and minutes on the floor's clock, whatever its day. */
export function floorClock(text) {
  return format("time").format(new Date(text)).slice(0, 5);
}

/** The floor's date (YYYY-MM-DD) of a moment, in its time zone. */
export function floorDay(moment) {
  const parts = new Intl.DateTimeFormat("en-CA", { timeZone: zone(), year: "numeric", month: "2-digit", day: "2-digit" })
    .formatToParts(moment);
  const get = (type) => parts.find((p) => p.type === type).value;
  return `${get("year")}-${get("month")}-${get("day")}`;
}

/** An age in words: "45 s", "12 min", "3 h 5 min". */
export function age(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h >= 48 ? `${Math.floor(h / 24)} days` : `${h} h ${m} min`;
}

/** The page's header: the floor's pages, who is logged in, log out. */
function header() {
  const bar = document.getElementById("bar");
  if (!bar || !session) return;
  const here = location.pathname;
  const link = (href, text) => el("a", { href, "aria-current": (href === "/" ? here === "/" : here.startsWith(href)) ? "page" : null }, text);
  const logout = el("button", { type: "button", class: "quiet", onclick: logOut }, "Log out");
  bar.replaceChildren(
    el("nav", { "aria-label": "pages" }, link("/", "Floor"), link("/alarms", "Alarms"), link("/reports", "Reports")),
    el("span", { class: "who" }, `${session.user} (${session.role}${session.pits && session.pits.length ? ": " + session.pits.join(", ") : ""})`),
    logout);
}

async function logOut() {
  try {
    await api("/logout", { method: "POST" });
  } finally {
    location.assign("/login");
  }
}

/** One line saying what went wrong, in the page's notice area. */
export function notice(text) {
  const area = document.getElementById("notice");
  if (area) area.textContent = text || "";
}

/** The pit a table is in, as the floor's configuration says ("Unassigned": none). */
export function pitOf(table) {
  return table.pit || "Unassigned";
}

export function tablePath(site, table) {
  return `/tables/${encodeURIComponent(site)}/${encodeURIComponent(table)}`;
}

/** A floor alarm's kind in words (docs/floor-service.md "Floor alarms"). */
export const KIND_WORDS = {
  table_offline: "Table offline",
  table_alarm_open: "Table alarm open too long",
  backlog_old: "Export backlog too old",
  clock_offset: "Table clock off",
  chain: "Record chain problem",
  bad_message: "Message refused",
};

export function kindWords(kind) {
  return KIND_WORDS[kind] || kind;
}
