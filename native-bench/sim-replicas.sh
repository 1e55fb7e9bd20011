#!/usr/bin/env bash
# The replicas table of src/sim/README.md: `infergate simulate --replicas N --share none|events` for N = 1, 2,
# 4, 8 and share delays of 1, 10 and 100 ms, scored policy, on three workloads; prints a markdown table.
# Usage: bash native-bench/sim-replicas.sh [OUTDIR]   (needs `npm run build`; TRACE=FILE for the trace row)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/sim-replicas}
mkdir -p "$out"
trace=${TRACE:-../shared/traces/mooncake_synthetic_trace.jsonl}
workloads=("--generate multi-turn" "--generate shared-prefix")
[ -f "$trace" ] && workloads=("--trace $trace" "${workloads[@]}")
for w in "${workloads[@]}"; do
  name=$(basename "${w##* }" .jsonl)
  for n in 1 2 4 8; do
    shares=("none")
    [ "$n" -gt 1 ] && shares=("none" "events:1" "events:10" "events:100")
    for s in "${shares[@]}"; do
      mode=${s%%:*}; delay=${s#*:}; [ "$mode" = none ] && delay=0
      f="$out/$name-n$n-$mode-$delay.json"
      # shellcheck disable=SC2086
      node dist/cli.js simulate $w --policies scored --replicas "$n" --share "$mode" --share-delay-ms "$delay" --json "$f" >/dev/null
    done
  done
done
node -e '
const fs = require("fs"); const dir = process.argv[1];
const rows = fs.readdirSync(dir).filter((f) => f.endsWith(".json")).map((f) => {
  const j = JSON.parse(fs.readFileSync(`${dir}/${f}`, "utf8")); const r = j.runs[0]; const w = j.workload;
  return { name: f.replace(/-n\d+-.*$/, ""), n: w.replicas ?? 1, share: w.share === "events" ? `events ${w.share_delay_ms} ms` : "none",
    d: w.share_delay_ms ?? 0, hit: (r.prefix_cache_hit_rate * 100).toFixed(1), p50: r.ttft_ms.p50.toFixed(0), p99: r.ttft_ms.p99.toFixed(0),
    good: r.slo[0].goodput_rps.toFixed(2), att: (r.slo[0].attainment * 100).toFixed(1), shed: (r.shed_share * 100).toFixed(1) };
}).sort((a, b) => a.name.localeCompare(b.name) || a.n - b.n || (a.share === "none" ? -1 : b.share === "none" ? 1 : a.d - b.d));
console.log("| workload | replicas | sharing | hit % | TTFT p50 ms | TTFT p99 ms | SLO % (2 s, 100 ms) | goodput req/s | shed % |");
console.log("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
for (const x of rows) console.log(`| ${x.name} | ${x.n} | ${x.share} | ${x.hit} | ${x.p50} | ${x.p99} | ${x.att} | ${x.good} | ${x.shed} |`);
' "$out"
