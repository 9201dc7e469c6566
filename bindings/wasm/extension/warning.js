// Fills the warning page from its query: url (the blocked address), list
// (the threat list it is on), kind, stale ("1" when the verdict rests on an
// expired snapshot), framedIn (the page that framed it, when it was a
// frame's), download ("1" for a cancelled download, "saved" for one saved
// before its verdict came) and back (the tab's
// last address found safe).
// Every value is shown as text, never as markup: the URL is the attacker's.

const query = new URLSearchParams(location.search);
const url = query.get("url") ?? "";
document.getElementById("url").textContent = url;
const list = query.get("list");
if (list) {
  document.getElementById("list").textContent = list;
} else {
  document.getElementById("summary").textContent =
    "This page could not be confirmed safe and your settings block such pages.";
}
document.getElementById("stale").hidden = query.get("stale") !== "1";
const framedIn = query.get("framedIn");
if (framedIn) {
  document.getElementById("framedIn").textContent = framedIn;
  document.getElementById("framed").hidden = false;
}
document.getElementById("download").hidden = query.get("download") !== "1";
document.getElementById("downloadSaved").hidden = query.get("download") !== "saved";

const back = document.getElementById("back");
const target = query.get("back");
let safeTarget = null;
try {
  const parsed = new URL(target ?? "");
  if (parsed.protocol === "http:" || parsed.protocol === "https:") safeTarget = parsed.href;
} catch {
  // No usable previous address.
}
if (safeTarget) {
  back.href = safeTarget;
} else {
  back.textContent = "Close this tab";
  back.addEventListener("click", (event) => {
    event.preventDefault();
    window.close();
  });
}
