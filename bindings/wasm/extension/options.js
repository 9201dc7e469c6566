// The options page: edits the configuration the service worker reads
// (chrome.storage.local "config", which takes precedence over the packaged
// config.json) and shows the agent's status.

const fields = ["publisher", "lists", "key", "updateMinutes", "failurePolicy"];
const message = document.getElementById("message");

async function showStatus(type = "status") {
  const status = await chrome.runtime.sendMessage({ type });
  document.getElementById("status").textContent = JSON.stringify(status, null, 2);
}

async function load() {
  const { config } = await chrome.storage.local.get("config");
  let shown = config;
  if (!shown) {
    const response = await fetch(chrome.runtime.getURL("config.json")).catch(() => null);
    shown = response?.ok ? await response.json() : {};
  }
  for (const name of fields) {
    const value = shown[name];
    if (value !== undefined) {
      // Several keys one per line; several lists on one line.
      document.getElementById(name).value = Array.isArray(value) ? value.join(name === "key" ? "\n" : ", ") : String(value);
    }
  }
}

document.getElementById("config").addEventListener("submit", async (event) => {
  event.preventDefault();
  const config = {
    publisher: document.getElementById("publisher").value.trim(),
    lists: document
      .getElementById("lists")
      .value.split(",")
      .map((s) => s.trim())
      .filter(Boolean),
    // One key or several, as typed (one per line or separated by commas):
    // the service worker splits them, and says when none is left.
    key: document.getElementById("key").value.trim(),
    updateMinutes: Number(document.getElementById("updateMinutes").value || 30),
    failurePolicy: document.getElementById("failurePolicy").value,
  };
  await chrome.storage.local.set({ config });
  message.textContent = "Saved; the agent restarts with it.";
  setTimeout(showStatus, 1000);
});

document.getElementById("reset").addEventListener("click", async () => {
  await chrome.storage.local.remove("config");
  message.textContent = "Using the packaged config.json.";
  await load();
  setTimeout(showStatus, 1000);
});

document.getElementById("update").addEventListener("click", () => showStatus("update"));

load().then(() => showStatus());
