// Draws /cluster/shards/{type}/map every second: one column per node,
// one box per shard with its entity count; shards being handed off are
// dashed. URLs are relative, so the page works wherever the handler is
// mounted.
"use strict";

const pollInterval = 1000;
const typeSelect = document.getElementById("type");
const nodesEl = document.getElementById("nodes");
const errorEl = document.getElementById("error");

async function getJSON(url) {
  const res = await fetch(url, { cache: "no-store" });
  const body = await res.json();
  if (!res.ok) {
    throw new Error(body.error || res.status + " " + res.statusText);
  }
  return body;
}

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

async function loadTypes() {
  const types = await getJSON("cluster/shards");
  const current = typeSelect.value;
  const names = types.map((t) => t.type);
  if (names.join("\n") === Array.from(typeSelect.options).map((o) => o.value).join("\n")) return;
  typeSelect.replaceChildren(...names.map((n) => el("option", "", n)));
  if (names.includes(current)) typeSelect.value = current;
}

function shardBox(s) {
  const box = el("span", "shard", s.id);
  if (s.handingOff) box.classList.add("handoff");
  if (s.unallocated) box.classList.add("unallocated");
  if (s.failed) box.classList.add("failed");
  box.dataset.shard = s.id;
  box.dataset.entities = String(s.entities);
  box.dataset.handoff = String(!!s.handingOff);
  box.title = "shard " + s.id + ": " + (s.failed ? "no answer" : s.entities + " entities") +
    (s.handingOff ? ", handing off" : "") + (s.unallocated ? ", stopping" : "");
  box.append(el("small", "", s.failed ? "?" : String(s.entities)));
  return box;
}

function nodeColumn(n) {
  const col = el("section", "node " + n.status);
  col.dataset.member = n.id;
  col.dataset.address = n.address;
  const h = el("h2", "", n.address);
  if (n.coordinator) h.append(el("span", "badge coordinator", "coordinator"));
  if (n.status !== "Up") h.append(el("span", "badge " + n.status, n.status));
  if (n.self) h.append(el("span", "badge", "this node"));
  col.append(h);
  const roles = n.roles.length ? " · roles " + n.roles.join(", ") : "";
  col.append(el("div", "meta", n.id.slice(0, 8) + " · age " + n.age + roles + " · " +
    n.shards.length + " shards, " + n.entities + " entities"));
  if (!n.region) {
    col.append(el("div", "empty", "no region of this type"));
  } else if (n.shards.length === 0) {
    col.append(el("div", "empty", "no shards"));
  } else {
    const shards = el("div", "shards");
    shards.append(...n.shards.map(shardBox));
    col.append(shards);
  }
  return col;
}

function render(map) {
  nodesEl.replaceChildren(...map.nodes.map(nodeColumn));
  const c = map.coordinator;
  let summary = "cluster " + map.cluster + " · " + map.shards + " shards, " + map.entities + " entities · coordinator on " + c.address +
    " (" + c.state + ", epoch " + c.epoch + ")";
  if (map.handOffs.length) summary += " · handing off: " + map.handOffs.map((h) => h.shard).join(", ");
  document.getElementById("summary").textContent = summary;
  document.body.dataset.handoffs = String(map.handOffs.length);
}

async function update() {
  try {
    await loadTypes();
    if (typeSelect.value) {
      render(await getJSON("cluster/shards/" + encodeURIComponent(typeSelect.value) + "/map"));
    }
    errorEl.hidden = true;
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    errorEl.textContent = "could not update: " + e.message;
    errorEl.hidden = false;
  }
  document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
}

async function poll() {
  await update();
  setTimeout(poll, pollInterval);
}

typeSelect.addEventListener("change", update);
poll();
