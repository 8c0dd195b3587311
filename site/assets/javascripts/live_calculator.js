// The calculator in the browser. Every number on this page comes from the course's own Python calculator
// (part1_capacity: plan, profiles, the cache laws), run here by Pyodide, a CPython compiled to WebAssembly.
// Pyodide, numpy and the calculator's Python files are served by this site: nothing is fetched from elsewhere.
// This script only wires the pickers and sliders to part1_capacity.calculator.browser.plan() and shows what it returns.
(function () {
  "use strict";
  const script = document.currentScript;
  const ASSETS = new URL("../", script.src);                 // the site's assets/ folder
  const PYODIDE = new URL("pyodide/", ASSETS).href;
  const BUNDLE = new URL("calculator/python.json", ASSETS).href;
  const BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
  const MIN_CONTEXT = 256;

  const $ = (id) => document.getElementById(id);
  // The page's own words, in the page's language (the Korean edition's pages are <html lang="ko">). The numbers and
  // the calculator's verdict come from the Python calculator as it prints them.
  const KO = (document.documentElement.lang || "").startsWith("ko");
  const WORDS = KO
    ? { tokens: " 토큰", sequence: "시퀀스 ", sequences: "시퀀스 ", loading: "numpy와 계산기를 불러오는 중…",
        failed: "이 브라우저에서는 계산기를 시작할 수 없습니다: " }
    : { tokens: " tokens", sequence: " sequence", sequences: " sequences", loading: "Loading numpy and the calculator…",
        failed: "The calculator could not start in this browser: " };
  let py = null, choices = null;

  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const s = document.createElement("script");
      s.src = src; s.onload = resolve; s.onerror = () => reject(new Error("could not load " + src));
      document.head.appendChild(s);
    });
  }

  function pyString(obj) { return JSON.stringify(JSON.stringify(obj)); }  // a JSON string is a Python literal

  function contexts(maxContext) {        // powers of two from 1K up to the model's maximum (the maximum itself last)
    const out = [];
    for (let t = MIN_CONTEXT; t < maxContext; t *= 2) out.push(t);
    out.push(maxContext);
    return out;
  }

  function tokens(n) { return n >= 1024 && n % 1024 === 0 ? (n / 1024).toLocaleString("en") + "K" : n.toLocaleString("en"); }

  function fill(select, items, label, value) {
    select.innerHTML = "";
    for (const it of items) {
      const o = document.createElement("option");
      o.value = value(it); o.textContent = label(it);
      select.appendChild(o);
    }
  }

  function model() { return choices.models.find((m) => m.id === $("lc-model").value); }

  function setContextSlider(keep) {
    const ctx = contexts(model().max_context);
    const slider = $("lc-context");
    const old = keep ? Number(slider.dataset.tokens || 0) : 32768;
    slider.max = String(ctx.length - 1);
    let i = ctx.findIndex((t) => t >= old);
    slider.value = String(i < 0 ? ctx.length - 1 : i);
  }

  function inputs() {
    const ctx = contexts(model().max_context);
    return {
      model: $("lc-model").value,
      accelerator: $("lc-accelerator").value,
      context: ctx[Number($("lc-context").value)],
      batch: BATCHES[Number($("lc-batch").value)],
      weights_dtype: $("lc-weights").value || null,
      kv_dtype: $("lc-kv").value,
    };
  }

  function update() {
    const args = inputs();
    $("lc-context").dataset.tokens = String(args.context);
    $("lc-context-value").textContent = tokens(args.context) + WORDS.tokens;
    const count = args.batch.toLocaleString("en");
    $("lc-batch-value").textContent = KO ? WORDS.sequences + count + "개"
                                         : count + (args.batch === 1 ? WORDS.sequence : WORDS.sequences);
    const res = JSON.parse(py.runPython("browser.plan(**json.loads(" + pyString(args) + "))"));
    const out = $("lc-out");
    if (res.error) {
      $("lc-error").textContent = res.error; $("lc-error").hidden = false; out.hidden = true;
      return;
    }
    $("lc-error").hidden = true; out.hidden = false;
    for (const cell of out.querySelectorAll("[data-key]")) {
      const key = cell.dataset.key;
      cell.textContent = res.text[key] || "—";
      const v = res.plan[key];
      cell.dataset.value = v === null || v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : String(v);
    }
    $("lc-implication").textContent = res.text.implication;
    out.dataset.inputs = JSON.stringify(args);      // what the numbers are for (read by the site's test)
  }

  async function main() {
    const status = $("lc-status");
    try {
      await loadScript(PYODIDE + "pyodide.js");
      py = await loadPyodide({ indexURL: PYODIDE });
      status.textContent = WORDS.loading;
      await py.loadPackage("numpy");
      const files = await (await fetch(BUNDLE)).json();
      const FS = py.FS || py._module.FS;
      for (const [path, text] of Object.entries(files)) {
        FS.mkdirTree("/calculator/" + path.split("/").slice(0, -1).join("/"));
        FS.writeFile("/calculator/" + path, text);
      }
      py.runPython("import json, sys\nsys.path.insert(0, '/calculator')\nfrom part1_capacity.calculator import browser");
      choices = JSON.parse(py.runPython("browser.choices()"));
    } catch (err) {
      status.textContent = WORDS.failed + err.message;
      return;
    }
    fill($("lc-model"), choices.models, (m) => `${m.name} (${m.structure})`, (m) => m.id);
    fill($("lc-accelerator"), choices.accelerators, (a) => `${a.name} (${a.memory})`, (a) => a.id);
    fill($("lc-weights"), [""].concat(choices.weights_dtypes), (d) => d || "native", (d) => d);
    fill($("lc-kv"), choices.kv_dtypes, (d) => d, (d) => d);
    $("lc-model").value = choices.models.some((m) => m.id === "llama-3.1-70b") ? "llama-3.1-70b" : choices.models[0].id;
    $("lc-accelerator").value = choices.accelerators.some((a) => a.id === "h100") ? "h100" : choices.accelerators[0].id;
    $("lc-kv").value = "bf16";
    $("lc-batch").max = String(BATCHES.length - 1);
    $("lc-batch").value = String(BATCHES.indexOf(8));
    setContextSlider(false);
    $("lc-model").addEventListener("change", () => { setContextSlider(true); update(); });
    for (const id of ["lc-accelerator", "lc-weights", "lc-kv"]) $(id).addEventListener("change", update);
    for (const id of ["lc-context", "lc-batch"]) $(id).addEventListener("input", update);
    status.hidden = true;
    $("lc-form").hidden = false;
    update();
    $("live-calculator").dataset.ready = "true";
  }

  main();
})();
