// The calculator in the browser. Every number on this page comes from the course's own Python calculator
// (part1_capacity: plan, profiles, the cache laws, the config reader), run here by Pyodide, a CPython compiled to
// WebAssembly. Pyodide and the calculator's Python files are served by this site: nothing is fetched from
// elsewhere. This script only wires the inputs to part1_capacity.calculator.uses.browser.plan() and shows what it
// returns; the inputs live in the page's address (#model=…&context=128K…), so a link reproduces a plan.
(function () {
  "use strict";
  const script = document.currentScript;
  const ASSETS = new URL("../", script.src);                 // the site's assets/ folder
  const PYODIDE = new URL("pyodide/", ASSETS).href;
  const BUNDLE = new URL("calculator/python.json", ASSETS).href;
  const BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
  const MIN_CONTEXT = 256;

  const $ = (id) => document.getElementById(id);
  let py = null, choices = null;
  const fetched = new Map();       // url → {name, loaded, total}: what the status line shows while loading

  // --- loading, with what is fetched and how much ----------------------------------------------------------------
  function mb(n) { return (n / 1e6).toFixed(1) + " MB"; }

  function showProgress(stage) {
    const parts = [...fetched.values()].map((f) => f.name + " " + (f.total ? mb(f.loaded) + " of " + mb(f.total)
                                                                            : mb(f.loaded)));
    const loaded = [...fetched.values()].reduce((s, f) => s + f.loaded, 0);
    $("lc-status").textContent = stage + " — " + mb(loaded) + " fetched" + (parts.length ? ": " + parts.join(", ") : "");
  }

  // Count the bytes of every response from this site while Python starts (Pyodide fetches its own files).
  function countingFetch(stage) {
    const plain = window.fetch;
    window.fetch = async function (input, init) {
      const res = await plain(input, init);
      const url = input instanceof Request ? input.url : String(input);
      if (!res.body || !url.startsWith(ASSETS.href)) return res;
      const entry = { name: url.split("/").pop(), loaded: 0, total: Number(res.headers.get("Content-Length")) || 0 };
      fetched.set(url, entry);
      const reader = res.body.getReader();
      const body = new ReadableStream({
        async pull(ctrl) {
          const { done, value } = await reader.read();
          if (done) { ctrl.close(); showProgress(stage()); return; }
          entry.loaded += value.byteLength; showProgress(stage()); ctrl.enqueue(value);
        },
      });
      return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
    };
    return () => { window.fetch = plain; };
  }

  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const s = document.createElement("script");
      s.src = src; s.onload = resolve; s.onerror = () => reject(new Error("could not load " + src));
      document.head.appendChild(s);
    });
  }

  function pyString(obj) { return JSON.stringify(JSON.stringify(obj)); }  // a JSON string is a Python literal

  // --- inputs -------------------------------------------------------------------------------------------------------
  function contexts(maxContext) {        // slider stops: powers of two up to the model's maximum (the maximum last)
    const out = [];
    for (let t = MIN_CONTEXT; t < maxContext; t *= 2) out.push(t);
    out.push(maxContext);
    return out;
  }

  function tokens(n) { return n >= 1024 && n % 1024 === 0 ? n / 1024 + "K" : String(n); }

  function fill(select, items, label, value) {
    select.innerHTML = "";
    for (const it of items) {
      const o = document.createElement("option");
      o.value = value(it); o.textContent = label(it);
      select.appendChild(o);
    }
  }

  function model() { return choices.models.find((m) => m.id === $("lc-model").value); }
  function maxContext() { return $("lc-config").value.trim() ? 1 << 30 : model().max_context; }

  function syncSliders() {               // the sliders follow what is typed (nearest stop at or above it)
    const ctx = contexts(Math.min(maxContext(), 1 << 24));
    const T = parseTokens($("lc-context-text").value);
    $("lc-context").max = String(ctx.length - 1);
    const i = ctx.findIndex((t) => t >= T);
    $("lc-context").value = String(i < 0 ? ctx.length - 1 : i);
    const B = parseTokens($("lc-batch-text").value);
    $("lc-batch").max = String(BATCHES.length - 1);
    const j = BATCHES.findIndex((b) => b >= B);
    $("lc-batch").value = String(j < 0 ? BATCHES.length - 1 : j);
  }

  function parseTokens(s) {              // for the sliders only: Python reads the typed text itself
    const m = /^\s*(\d+)\s*([kKmM]?)\s*$/.exec(s || "");
    return m ? Number(m[1]) * (m[2] ? (/[kK]/.test(m[2]) ? 1024 : 1048576) : 1) : 0;
  }

  function inputs() {
    return {
      model: $("lc-model").value,
      accelerator: $("lc-accelerator").value,
      context: $("lc-context-text").value.trim(),
      batch: $("lc-batch-text").value.trim(),
      weights_dtype: $("lc-weights").value || null,
      kv_dtype: $("lc-kv").value,
      engine: $("lc-engine").value,
      config: $("lc-config").value.trim() || null,
    };
  }

  // --- the address: every input, so a link reproduces the plan ---------------------------------------------------
  function b64url(text) {
    const bytes = new TextEncoder().encode(text);
    let s = ""; for (const b of bytes) s += String.fromCharCode(b);
    return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function unb64url(s) {
    const bin = atob(s.replace(/-/g, "+").replace(/_/g, "/"));
    return new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
  }

  function writeAddress(args) {
    const q = new URLSearchParams();
    for (const k of ["model", "accelerator", "context", "batch", "weights_dtype", "kv_dtype", "engine"]) {
      if (args[k]) q.set(k, args[k]);
    }
    if (args.config) {
      let compact = args.config;
      try { compact = JSON.stringify(JSON.parse(args.config)); } catch (e) { /* shared as typed */ }
      q.set("config", b64url(compact));
    }
    history.replaceState(null, "", "#" + q.toString());
    $("lc-link").href = location.href;
  }

  function readAddress() {
    const q = new URLSearchParams(location.hash.slice(1));
    const set = (id, v, ok) => { if (v !== null && (!ok || ok(v))) $(id).value = v; };
    set("lc-model", q.get("model"), (v) => choices.models.some((m) => m.id === v));
    set("lc-accelerator", q.get("accelerator"), (v) => choices.accelerators.some((a) => a.id === v));
    set("lc-weights", q.get("weights_dtype"), (v) => choices.weights_dtypes.includes(v));
    set("lc-kv", q.get("kv_dtype"), (v) => choices.kv_dtypes.includes(v));
    set("lc-engine", q.get("engine"), (v) => choices.engines.includes(v));
    set("lc-context-text", q.get("context"));
    set("lc-batch-text", q.get("batch"));
    if (q.get("config")) {
      $("lc-config").closest("details").open = true;
      try { $("lc-config").value = JSON.stringify(JSON.parse(unb64url(q.get("config"))), null, 1); }
      catch (e) { $("lc-config").value = ""; }
    }
  }

  // --- a pasted or dropped config.json -----------------------------------------------------------------------------
  async function readFiles(files) {
    for (const f of files) {
      const text = await f.text();
      if (/safetensors\.index\.json$/.test(f.name)) {
        $("lc-error").textContent = "model.safetensors.index.json lists which file holds each tensor, not its shape " +
          "or type: exact weight bytes need the safetensors headers (capacity plan --model <folder>)";
        $("lc-error").hidden = false;
      } else {
        $("lc-config").value = text;
      }
    }
    await update();
  }

  // --- the plan -----------------------------------------------------------------------------------------------------
  let pending = Promise.resolve();
  function update() { pending = pending.then(run, run); return pending; }

  async function run() {
    const args = inputs();
    $("lc-model").disabled = !!args.config;
    syncSliders();
    writeAddress(args);
    const call = "browser.plan(**json.loads(" + pyString(args) + "))";
    const res = JSON.parse(py.runPython(call));
    const out = $("lc-out");
    out.dataset.inputs = JSON.stringify(args);      // what the numbers are for (read by the site's test)
    if (res.error) {
      $("lc-error").textContent = res.error; $("lc-error").hidden = false; out.hidden = true;
      $("lc-implication").textContent = "";
      out.dataset.plan = ""; out.dataset.error = res.error;
      return;
    }
    $("lc-error").hidden = true; out.hidden = false; out.dataset.error = "";
    $("lc-context-value").textContent = res.inputs.context.toLocaleString("en") + " tokens";
    $("lc-batch-value").textContent = res.inputs.batch.toLocaleString("en") + (res.inputs.batch === 1 ? " sequence" : " sequences");
    for (const cell of out.querySelectorAll("[data-key]")) {
      const key = cell.dataset.key;
      cell.textContent = res.text[key] || "—";
      const v = res.plan[key];
      cell.dataset.value = v === null || v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : String(v);
    }
    for (const row of out.querySelectorAll("tr.lc-vllm")) {   // vLLM's start-up figures: only when it has them
      row.hidden = !row.querySelector("td").dataset.value;
    }
    $("lc-implication").textContent = res.text.implication;
    out.dataset.plan = JSON.stringify(res.plan);    // the whole `capacity plan --json` (read by the site's test)
  }

  async function main() {
    const status = $("lc-status");
    let stage = "Fetching Python (Pyodide)";
    const restore = countingFetch(() => stage);
    const t0 = performance.now();
    try {
      await loadScript(PYODIDE + "pyodide.js");
      const bundle = fetch(BUNDLE).then((r) => r.json());
      py = await loadPyodide({ indexURL: PYODIDE });
      performance.mark("lc-python-started");
      stage = "Starting the calculator";
      showProgress(stage);
      const files = await bundle;
      for (const [path, text] of Object.entries(files)) {
        py.FS.mkdirTree("/calculator/" + path.split("/").slice(0, -1).join("/"));
        py.FS.writeFile("/calculator/" + path, text);
      }
      py.runPython("import json, sys\nsys.path.insert(0, '/calculator')\nfrom part1_capacity.calculator.uses import browser");
      choices = JSON.parse(py.runPython("browser.choices()"));
      performance.mark("lc-calculator-imported");
    } catch (err) {
      status.textContent = "The calculator could not start in this browser: " + err.message;
      restore();
      return;
    }
    restore();
    const loadedBytes = [...fetched.values()].reduce((s, f) => s + f.loaded, 0);
    fill($("lc-model"), choices.models, (m) => `${m.name} (${m.structure})`, (m) => m.id);
    fill($("lc-accelerator"), choices.accelerators, (a) => `${a.name} (${a.memory})`, (a) => a.id);
    fill($("lc-weights"), [""].concat(choices.weights_dtypes), (d) => d || "native", (d) => d);
    fill($("lc-kv"), choices.kv_dtypes, (d) => d, (d) => d);
    fill($("lc-engine"), choices.engines, (e) => ({ law: "the law (no engine)", "llama.cpp": "llama.cpp", vllm: "vLLM" })[e] || e, (e) => e);
    $("lc-model").value = choices.models.some((m) => m.id === "llama-3.1-70b") ? "llama-3.1-70b" : choices.models[0].id;
    $("lc-accelerator").value = choices.accelerators.some((a) => a.id === "h100") ? "h100" : choices.accelerators[0].id;
    $("lc-kv").value = "bf16";
    $("lc-engine").value = "law";
    $("lc-context-text").value = "32K";
    $("lc-batch-text").value = "8";
    readAddress();
    $("lc-context").addEventListener("input", () => {
      $("lc-context-text").value = tokens(contexts(Math.min(maxContext(), 1 << 24))[Number($("lc-context").value)]);
      update();
    });
    $("lc-batch").addEventListener("input", () => { $("lc-batch-text").value = String(BATCHES[Number($("lc-batch").value)]); update(); });
    $("lc-model").addEventListener("change", () => {
      if (parseTokens($("lc-context-text").value) > model().max_context) $("lc-context-text").value = tokens(model().max_context);
      update();
    });
    for (const id of ["lc-accelerator", "lc-weights", "lc-kv", "lc-engine"]) $(id).addEventListener("change", update);
    for (const id of ["lc-context-text", "lc-batch-text", "lc-config"]) $(id).addEventListener("input", update);
    $("lc-file").addEventListener("change", (e) => readFiles(e.target.files));
    $("lc-config").addEventListener("dragover", (e) => e.preventDefault());
    $("lc-config").addEventListener("drop", (e) => { e.preventDefault(); readFiles(e.dataTransfer.files); });
    $("lc-clear").addEventListener("click", () => { $("lc-config").value = ""; update(); });
    status.hidden = true;
    $("lc-form").hidden = false;
    await update();
    performance.mark("lc-first-plan");
    const root = $("live-calculator");
    root.dataset.loadedBytes = String(loadedBytes);                       // read by the load benchmark
    root.dataset.usableMs = String(Math.round(performance.now() - t0));
    root.dataset.ready = "true";
  }

  main();
})();
