// The floor's alarms: filters (state, table, kind), each with its acknowledgement; live.
import { api, el, notice, requireSession } from "./app.js";
import { alarmTable, repaintSoon } from "./ack.js";
import { live } from "./live.js";

const form = document.getElementById("filters");

function readFilters() {
  const query = new URLSearchParams(location.search);
  for (const name of ["state", "kind"]) if (query.get(name)) form[name].value = query.get(name);
  return query;
}

async function tables(query) {
  const floor = await api("/floor");
  const select = form.table;
  for (const t of floor.tables) {
    const value = `${t.site}/${t.table}`;
    select.append(el("option", { value, selected: query.get("table") === value }, value));
  }
}

async function paint() {
  const params = new URLSearchParams({ state: form.state.value, limit: "200" });
  if (form.table.value) {
    const [site, table] = form.table.value.split("/");
    params.set("site", site);
    params.set("table", table);
  }
  if (form.kind.value) params.set("kind", form.kind.value);
  const found = await api(`/alarms?${params}`);
  document.getElementById("alarms").replaceChildren(alarmTable(found.alarms, () => refetchSoon(0)));
  document.body.dataset.painted = String(Date.now());
}

const refetchSoon = repaintSoon(paint, 300);


form.addEventListener("submit", (event) => {
  event.preventDefault();
  const query = new URLSearchParams();
  for (const name of ["state", "table", "kind"]) if (form[name].value) query.set(name, form[name].value);
  history.replaceState(null, "", `/alarms?${query}`);
  refetchSoon(0);
});

async function main() {
  await requireSession();
  const query = readFilters();
  await tables(query);
  await paint();
  live({ snapshot: () => refetchSoon(0), alarm: () => refetchSoon() });
}

main().catch((error) => notice(error.message));
