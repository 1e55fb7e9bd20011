#!/usr/bin/env bash
# The search behind the shipped scorer weights (src/sim/README.md, "Tuning"): `infergate simulate --tune` on
# the synthetic Mooncake trace and every generator, at three loads, leave-one-out, then on all inputs, with
# the constraints the shipped weights must keep (issue #16's priority figure, issue #17's affinity under
# overload: weight sets that break one are never chosen). Writes OUTDIR/tune-defaults.json (the tune report)
# and OUTDIR/tune-defaults.md (the tables, the table of weights to ship, and the verdict: SHIP or KEEP),
# progress on stderr; the verdict is the last line on stdout. Deterministic (same tree and arguments → the
# same JSON); the time it took is in src/sim/README.md.
# Usage: bash native-bench/tune-defaults.sh [OUTDIR]   (needs `npm run build`)
#   TRACE=FILE      the trace input (default ../shared/traces/mooncake_synthetic_trace.jsonl, or the shipped
#                   first 400 requests when that is absent)
#   REQUESTS=N      requests per input and evaluation (default 500)
#   SCALES=a,b,c    rate scales (default 1,2,3)   BUDGET=N   weight sets per search (default 30)   SEED=N (default 1)
#   JOBS=N          worker threads for the runs (default 2; the result does not depend on it)
#   CONSTRAINTS=a,b the --tune-constraints (default priority,affinity; none: no constraint)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/tune-defaults}
mkdir -p "$out"
trace=${TRACE:-../shared/traces/mooncake_synthetic_trace.jsonl}
[ -f "$trace" ] || trace=trace
gens=$(node -e 'import("./dist/sim/generators.js").then((m) => console.log(m.GENERATORS.join(",")))')
node dist/cli.js simulate --tune --tune-inputs "$trace,$gens" --requests "${REQUESTS:-500}" \
  --tune-scales "${SCALES:-1,2,3}" --tune-budget "${BUDGET:-30}" --seed "${SEED:-1}" --tune-jobs "${JOBS:-2}" --holdout all \
  --tune-constraints "${CONSTRAINTS:-priority,affinity}" --json "$out/tune-defaults.json" > "$out/tune-defaults.txt"
node -e '
const fs = require("fs");
const r = JSON.parse(fs.readFileSync(process.argv[1], "utf8")).tune;
const names = Object.keys(r.defaults);
const g = (x) => x.toFixed(3), p = (x) => (x * 100).toFixed(1), s = (x) => (x >= 0 ? "+" : "") + (x * 100).toFixed(1);
const w = (x) => names.map((k) => x[k]).join(" / ");
const o = [];
o.push(`Objective: goodput at TTFT ≤ ${r.objective.slo_ttft_ms / 1000} s and mean ITL ≤ ${r.objective.slo_itl_ms} ms over offered requests (shed = miss), mean over rate scales ×${r.objective.rate_scales.join(", ×")}; ${r.inputs[0].requests} requests per input (${r.inputs.map((i) => i.name).join(", ")}); weights ${names.join(" / ")}.`, "");
o.push("Out of sample (leave-one-out: weights tuned on the other inputs, run on the held-out one):", "");
o.push("| held out | defaults good/s | tuned good/s | best found good/s | change | defaults regret | tuned regret | weights tuned without it |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
for (const h of r.holdout) o.push(`| ${h.input} | ${g(h.defaults_goodput)} | ${g(h.tuned_goodput)} | ${g(h.best_goodput)} | ${s(h.change)}% | ${p(h.defaults_regret)}% | ${p(h.tuned_regret)}% | ${w(h.weights)} |`);
const v = r.out_of_sample;
o.push("", `Leave-one-out: worst held-out regret ${p(v.worst_regret.tuned)}% (defaults ${p(v.worst_regret.defaults)}%), goodput change mean ${s(v.mean_change)}%, worst ${s(v.worst_change)}% → ${v.beats_defaults ? "tuning beats the defaults out of sample" : "tuning does not beat the defaults out of sample: keep them"} (rule: ${v.rule}).`, "");
o.push(`Tuned on every input (${r.candidates} weight sets, ${r.runs} runs in all): defaults ${w(r.defaults)} → tuned ${w(r.tuned)}; worst regret ${p(r.worst_regret.defaults)}% → ${p(r.worst_regret.tuned)}%.`, "");
o.push("| input | defaults good/s | tuned good/s | best found good/s | defaults regret | tuned regret |", "| --- | ---: | ---: | ---: | ---: | ---: |");
for (const x of r.per_input) o.push(`| ${x.input} | ${g(x.defaults_goodput)} | ${g(x.tuned_goodput)} | ${g(x.best_goodput)} | ${p(x.defaults_regret)}% | ${p(x.tuned_regret)}% |`);
const c = r.constraints;
if (c) {
  const checks = (xs) => xs.map((x) => `${x.constraint} ${x.ok ? "kept" : "**broken**"} (${x.detail})`).join("; ");
  o.push("", `Constraints ${c.names.join(", ")}: ${c.checked} weight sets checked, ${c.rejected.length} not admissible. Defaults: ${checks(c.defaults)}. Tuned: ${checks(c.tuned)}.`);
  if (c.rejected.length > 0) {
    o.push("", `| rejected (${names.join(" / ")}) | why |`, "| --- | --- |");
    for (const x of c.rejected) o.push(`| ${w(x.weights)} | ${x.failed.map((f) => `${f.constraint}: ${f.detail}`).join("; ")} |`);
  }
}
// the table for README.md: the weights to ship, what each does, how the leave-one-out folds chose it
const does = {
  prefix: "prefers the endpoint whose cache holds the longest part of the prompt",
  queue: "prefers less scraped prefill queued ahead (prompt tokens)",
  running: "prefers fewer running requests (scraped)",
  kv_cache: "prefers lower KV-cache use (scraped)",
  lora: "prefers an endpoint that has the adapter of the request loaded (LoRA requests only)",
  load: "prefers less of the work the gateway itself has in flight",
};
const ship = r.ship ? r.ship.ship : false;
const shipped = ship ? r.tuned : r.defaults;
const folds = r.holdout.length;
o.push("", `Weights to ship (${ship ? "the tuned ones" : "the defaults, kept"}); "folds" = how many of the ${folds} leave-one-out searches, each blind to one input, chose the same value:`, "");
o.push("| weight | value | was | what it does | folds |", "| --- | ---: | ---: | --- | ---: |");
for (const k of names) o.push(`| ${k} | ${shipped[k]} | ${r.defaults[k]} | ${does[k] || ""} | ${r.holdout.filter((h) => h.weights[k] === shipped[k]).length} / ${folds} |`);
if (v) o.push("", `Out of sample: worst held-out regret ${p(v.worst_regret.tuned)}% (defaults ${p(v.worst_regret.defaults)}%), mean goodput change ${s(v.mean_change)}%, worst ${s(v.worst_change)}%.`);
o.push("", r.ship ? `${r.ship.ship ? "SHIP" : "KEEP THE DEFAULTS"}: ${r.ship.reason}.` : "No verdict (needs --holdout all).");
fs.writeFileSync(process.argv[2], o.join("\n") + "\n");
console.log(o.join("\n"));
' "$out/tune-defaults.json" "$out/tune-defaults.md"
