// The live feed (GET /api/v1/stream): EventSource resumes by itself with Last-Event-ID; when the
// server answers with an error instead (restarting, the session gone) it gives up, so we open a
// new one, which starts with a snapshot: the page catches up either way. A banner says when the
// connection is lost; another when cardfloor's own link to the broker is (the snapshot's
// floor.broker, then each `broker` change), which the page's connection alone cannot show.
import { API, floorClock, requireSession } from "./app.js";

const RETRY_MS = 2000;

/** The broker banner from the floor's link to the broker (/floor's `broker`). */
export function brokerLink(link) {
  if (!link) return;
  const banner = document.getElementById("broker");
  document.body.dataset.broker = link.connected ? "connected" : "lost";
  if (!banner) return;
  banner.hidden = link.connected;
  banner.textContent = link.connected ? "" : `cardfloor has lost the broker since ${link.since ? floorClock(link.since) : "its start"}` +
    " — tables' changes are held at the tables and will arrive";
}

export function live(handlers) {
  const banner = document.getElementById("connection");
  let source = null;
  let lostAt = null;

  function lost() {
    if (lostAt === null) lostAt = Date.now();
    if (banner) {
      banner.hidden = false;
      banner.textContent = "Connection lost — reconnecting…";
    }
    document.body.dataset.connection = "lost";
  }

  function back() {
    lostAt = null;
    if (banner) banner.hidden = true;
    document.body.dataset.connection = "live";
  }

  function open() {
    // only the kinds this page handles (the broker's link comes to every page)
    const kinds = Object.keys(handlers).filter((kind) => kind !== "snapshot").join(",");
    source = new EventSource(`${API}/stream?kinds=${encodeURIComponent(kinds)}`);
    source.addEventListener("open", back);
    source.addEventListener("error", () => {
      lost();
      if (source.readyState === EventSource.CLOSED) {
        source.close();
        setTimeout(async () => {
          try {
            await requireSession(); // the log-in page when the session has ended
          } catch {
            setTimeout(open, RETRY_MS);
            return;
          }
          open();
        }, RETRY_MS);
      }
    });
    source.addEventListener("broker", (event) => {
      back();
      brokerLink(JSON.parse(event.data));
    });
    for (const [kind, handle] of Object.entries(handlers)) {
      source.addEventListener(kind, (event) => {
        back();
        const data = JSON.parse(event.data);
        if (kind === "snapshot") brokerLink(data.floor.broker); // every page takes the snapshot
        handle(data, event.lastEventId);
      });
    }
  }

  open();
  return () => source && source.close();
}
