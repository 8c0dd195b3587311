// MathJax 3 configuration for pymdownx.arithmatex (generic mode), and MathJax itself (1.2 MB) loaded only on a
// page that has math: the calculator page, among others, has none and starts faster without it.
window.MathJax = {
  tex: { inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]], processEscapes: true, processEnvironments: true },
  options: { ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex" },
  chtml: { fontURL: new URL("../mathjax/output/chtml/fonts/woff-v2", document.currentScript.src).href }
};
if (document.querySelector(".arithmatex")) {
  const s = document.createElement("script");
  s.src = new URL("../mathjax/tex-mml-chtml.js", document.currentScript.src).href;
  s.async = true;
  document.head.appendChild(s);
}
