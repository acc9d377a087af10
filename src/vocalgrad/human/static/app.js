// Listening-test client. The server decides everything that matters (order, unlocking,
// correctness); this page plays audio, reports playback start and end, and sends answers.
// A pending answer is kept in localStorage and re-sent after a reload or lost connection;
// the server treats a repeated submission as a no-op.
"use strict";

const $ = (id) => document.getElementById(id);
const SECTIONS = ["loading", "welcome", "volume", "trial", "feedback", "done", "excluded", "failed"];
const PENDING = "vg-pending-answer";
const KEYS = { increase: ["i", "arrowup"], decrease: ["d", "arrowdown"], 1: ["1"], 2: ["2"], 3: ["3"] };

let state = null;          // last /api/state response
let audio = null;          // HTMLAudioElement of the current trial
let audioUrl = null;       // its blob URL
let playing = false;
let playStart = 0;         // performance.now() when playback started
let endedAt = null;        // performance.now() at the end of the last full play
let busy = false;          // an answer is being sent
let volumePlayed = false;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function uuid() {
  if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

function notice(text) {
  $("notice").textContent = text || "";
  $("notice").hidden = !text;
}

function show(name) {
  for (const s of SECTIONS) $(s).hidden = s !== name;
  document.body.dataset.page = name;
}

// fetch with retries on network errors, 5xx and 429 (after its Retry-After); returns {status, data}
async function api(path, body) {
  const opts = body === undefined
    ? { credentials: "same-origin" }
    : { method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
  for (let attempt = 0; ; attempt++) {
    try {
      const r = await fetch(path, opts);
      if (r.status === 429 && attempt < 6) {
        await sleep(1000 * (Number(r.headers.get("retry-after")) || 1));
        continue;
      }
      if (r.status >= 500) throw new Error("server error " + r.status);
      const data = (r.headers.get("content-type") || "").includes("json") ? await r.json() : null;
      notice("");
      return { status: r.status, data };
    } catch (err) {
      if (attempt >= 6) { notice("Connection lost. Reload the page to continue."); throw err; }
      notice("Connection problem, retrying…");
      await sleep(400 * 2 ** attempt);
    }
  }
}

function fail(text) {
  $("failed-text").textContent = text;
  show("failed");
}

async function refresh() {
  const r = await api("/api/state");
  if (r.status === 401) return fail("This page needs the personal link you were sent. Open it again.");
  if (r.status === 410) return fail("Your link has expired. Ask the study team for a new one.");
  if (r.status !== 200) return fail("Unexpected answer from the server (" + r.status + ").");
  render(r.data);
}

function render(s) {
  state = s;
  $("progress").textContent = s.step ? `${s.step.index} / ${s.step.of}` : "";
  if (s.phase === "welcome") return show("welcome");
  if (s.phase === "volume") return show("volume");
  if (s.phase === "done") return show("done");
  if (s.phase === "excluded") return show("excluded");
  return showTrial(s);
}

function dropAudio() {
  if (audio) { audio.pause(); audio.src = ""; }
  if (audioUrl) URL.revokeObjectURL(audioUrl);
  audio = null; audioUrl = null; playing = false;
}

async function showTrial(s) {
  const t = s.trial;
  const titles = { screening: "Headphone check", practice: "Practice", test: "Question" };
  $("trial-title").textContent = titles[s.phase] || "Question";
  $("question").textContent = t.question;
  $("trial").dataset.trial = t.id;
  const box = $("answers");
  box.replaceChildren();
  // buttons show the format's words ("loud", "higher") and answer with their labels
  t.options.forEach((word, i) => {
    const opt = (t.labels || t.options)[i];
    const b = document.createElement("button");
    b.className = "answer";
    b.dataset.answer = opt;
    const key = (KEYS[opt] || [])[0] || "";
    b.innerHTML = "";
    b.append(word + " ");
    const k = document.createElement("kbd");
    k.textContent = key.toUpperCase();
    b.append(k);
    b.addEventListener("click", () => answer(opt));
    box.append(b);
  });
  endedAt = t.answerable ? performance.now() : null;
  setAnswerable(t.answerable);
  $("play-status").textContent = "Loading the sound…";
  $("play").disabled = true;
  show("trial");
  dropAudio();
  const r = await fetch(t.audio, { credentials: "same-origin" });
  if (!r.ok) return fail("Could not load the sound (" + r.status + "). Reload the page.");
  audioUrl = URL.createObjectURL(await r.blob());
  audio = new Audio(audioUrl);
  audio.preload = "auto";
  audio.addEventListener("ended", onEnded);
  $("play").disabled = false;
  $("play-status").textContent = t.answerable
    ? `Played ${t.plays}×. Answer, or play again.`
    : "Play the sound to the end to unlock the answers.";
}

function setAnswerable(on) {
  for (const b of document.querySelectorAll("#answers button")) b.disabled = !on || busy;
}

async function play() {
  if (!audio || playing || busy || $("trial").hidden) return;
  playing = true;
  $("play").disabled = true;
  $("play-status").textContent = "Playing…";
  const trialId = state.trial.id;
  const r = await api(`/api/trials/${trialId}/play`, { event: "start" });
  if (r.status !== 200) { playing = false; return refresh(); }
  audio.currentTime = 0;
  playStart = performance.now();
  try { await audio.play(); } catch (err) {
    playing = false; $("play").disabled = false;
    $("play-status").textContent = "The browser blocked playback; press Play again.";
  }
}

async function onEnded() {
  const played = (performance.now() - playStart) / 1000;
  const trialId = state.trial.id;
  const r = await api(`/api/trials/${trialId}/play`, { event: "ended", played_s: played });
  playing = false;
  $("play").disabled = false;
  if (r.status === 200) {
    endedAt = performance.now();
    state.trial.plays = r.data.plays;
    setAnswerable(r.data.answerable);
    $("play-status").textContent = `Played ${r.data.plays}×. Answer, or play again.`;
  } else {
    $("play-status").textContent = "That play did not count (it did not reach the end). Play again.";
  }
}

async function sendAnswer(p) {
  const r = await api(`/api/trials/${p.trial}/answer`,
    { answer: p.answer, rt_s: p.rt_s, submission_id: p.submission_id });
  localStorage.removeItem(PENDING);
  return r;
}

async function answer(opt) {
  if (busy || !state || !state.trial || $("trial").hidden) return;
  if (!(state.trial.labels || state.trial.options).includes(opt)) return;
  const buttons = document.querySelectorAll("#answers button");
  if (!buttons.length || buttons[0].disabled) return;
  busy = true;
  setAnswerable(false);
  $("play").disabled = true;
  const rt = endedAt === null ? 0 : Math.max(0, (performance.now() - endedAt) / 1000);
  const p = { trial: state.trial.id, answer: opt, rt_s: Math.min(rt, 3600), submission_id: uuid() };
  localStorage.setItem(PENDING, JSON.stringify(p));
  try {
    const r = await sendAnswer(p);
    dropAudio();
    if (r.status === 200 && r.data.feedback) return showFeedback(r.data.feedback);
    await refresh();
  } finally {
    busy = false;
  }
}

function showFeedback(f) {
  const el = $("feedback-text");
  el.textContent = f.correct
    ? `Correct: it was “${f.answer}”.`
    : `Not quite: the right answer was “${f.answer}”.`;
  el.className = "feedback " + (f.correct ? "right" : "wrong");
  $("progress").textContent = "";
  show("feedback");
}

async function playVolume() {
  const r = await fetch("/api/calibration", { credentials: "same-origin" });
  if (!r.ok) return;
  const a = new Audio(URL.createObjectURL(await r.blob()));
  a.addEventListener("ended", () => { volumePlayed = true; $("volume-done").disabled = false; });
  try { await a.play(); } catch (err) { volumePlayed = true; $("volume-done").disabled = false; }
}

async function post(path) {
  const r = await api(path, {});
  if (r.status === 200) render(r.data); else await refresh();
}

document.addEventListener("keydown", (e) => {
  if (e.repeat || e.ctrlKey || e.metaKey || e.altKey) return;
  const key = e.key.toLowerCase();
  const page = document.body.dataset.page;
  if (page === "trial") {
    if (key === " " || key === "p") { e.preventDefault(); play(); return; }
    for (const opt of (state && state.trial ? (state.trial.labels || state.trial.options) : [])) {
      if ((KEYS[opt] || []).includes(key)) { e.preventDefault(); answer(opt); return; }
    }
  } else if (key === "enter") {
    if (page === "feedback") { e.preventDefault(); refresh(); }
    else if (page === "welcome") { e.preventDefault(); post("/api/begin"); }
  }
});

window.addEventListener("DOMContentLoaded", async () => {
  $("start").addEventListener("click", () => post("/api/begin"));
  $("volume-play").addEventListener("click", playVolume);
  $("volume-done").addEventListener("click", () => { if (volumePlayed) post("/api/volume"); });
  $("play").addEventListener("click", play);
  $("feedback-next").addEventListener("click", refresh);
  const pending = localStorage.getItem(PENDING);
  if (pending) {
    try { await sendAnswer(JSON.parse(pending)); } catch (err) { /* refresh shows the state */ }
  }
  await refresh();
});
