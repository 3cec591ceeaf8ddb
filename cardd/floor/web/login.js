// The log-in page: POST /api/v1/login, then the page asked for (same origin only).
import { API } from "./app.js";

const form = document.getElementById("login");
const notice = document.getElementById("notice");

function next() {
  const asked = new URLSearchParams(location.search).get("next") || "/";
  // only a path of this server: never "//elsewhere" or "https://elsewhere"
  return asked.startsWith("/") && !asked.startsWith("//") && !asked.startsWith("/\\") ? asked : "/";
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const button = form.querySelector("button");
  button.disabled = true;
  notice.textContent = "";
  try {
    const answer = await fetch(`${API}/login`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Requested-With": "cardfloor", Accept: "application/json" },
      body: JSON.stringify({ user: form.user.value, password: form.password.value }),
    });
    if (answer.ok) {
      location.assign(next());
      return;
    }
    let sentence = `the log-in was refused (${answer.status})`;
    try {
      const data = await answer.json();
      if (data && data.error) sentence = data.error;
    } catch { /* not JSON: the status says it */ }
    if (answer.status === 429) {
      const wait = answer.headers.get("Retry-After");
      sentence = `Too many failed log-ins: try again${wait ? ` in ${wait} s` : " later"}.`;
    }
    notice.textContent = sentence.charAt(0).toUpperCase() + sentence.slice(1);
    form.password.value = "";
    form.password.focus();
  } catch {
    notice.textContent = "The floor service does not answer: try again in a moment.";
  } finally {
    button.disabled = false;
  }
});
