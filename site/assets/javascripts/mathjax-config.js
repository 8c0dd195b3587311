// MathJax 3 configuration for pymdownx.arithmatex (generic mode). Loaded before tex-mml-chtml.js.
window.MathJax = {
  tex: { inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]], processEscapes: true, processEnvironments: true },
  options: { ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex" },
  chtml: { fontURL: new URL("../mathjax/output/chtml/fonts/woff-v2", document.currentScript.src).href }
};
