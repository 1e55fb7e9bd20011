#!/usr/bin/env bash
# The replicas tables of src/sim/README.md, scored policy, printed as markdown.
#   bash native-bench/sim-replicas.sh [OUTDIR]
#     `simulate --replicas N --share none|events` for N = 1, 2, 4, 8 and share delays of 1, 10 and 100 ms,
#     on the trace, multi-turn and shared-prefix.
#   bash native-bench/sim-replicas.sh --inflight [OUTDIR]
#     in-flight sharing: `--share events` against `--share events+inflight` (and, with PERIOD=P, in-flight
#     counts sent every P ms) for N = 1, 2, 4, 8 and delays of 5 and 50 ms, at rate scales 1 and 2, on burst,
#     shared-prefix, the trace and multi-turn.
# Needs `npm run build`; TRACE=FILE for the trace rows; JOBS=J runs J simulations at once (default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
inflight=0
if [ "${1:-}" = --inflight ]; then inflight=1; shift; fi
out=${1:-bench-out/sim-replicas$([ $inflight = 1 ] && echo -inflight)}
mkdir -p "$out"
trace=${TRACE:-../shared/traces/mooncake_synthetic_trace.jsonl}
if [ $inflight = 1 ]; then
  workloads=("--generate burst" "--generate shared-prefix" "--generate multi-turn")
  scales=1,2
  delays=(5 50)
  modes=("events" "events+inflight")
  [ -n "${PERIOD:-}" ] && modes+=("events+inflight@$PERIOD")
else
  workloads=("--generate multi-turn" "--generate shared-prefix")
  scales=1
  delays=(1 10 100)
  modes=("events")
fi
[ -f "$trace" ] && workloads=("--trace $trace" "${workloads[@]}")
jobs=()
for w in "${workloads[@]}"; do
  name=$(basename "${w##* }" .jsonl)
  for n in 1 2 4 8; do
    shares=("none:0")
    if [ "$n" -gt 1 ]; then for m in "${modes[@]}"; do for d in "${delays[@]}"; do shares+=("$m:$d"); done; done; fi
    for s in "${shares[@]}"; do
      mode=${s%%:*}; delay=${s#*:}; period=0
      case $mode in *@*) period=${mode#*@}; mode=${mode%@*} ;; esac
      f="$out/$name-n$n-${mode/+/-}-$delay-p$period.json"
      jobs+=("node dist/cli.js simulate $w --policies scored --rate-scale $scales --replicas $n --share $mode --share-delay-ms $delay --share-inflight-period-ms $period --json $f >/dev/null")
    done
  done
done
printf '%s\n' "${jobs[@]}" | xargs -P "${JOBS:-1}" -I{} bash -c '{}'
node -e '
const fs = require("fs"); const dir = process.argv[1];
const rows = [];
for (const f of fs.readdirSync(dir).filter((f) => f.endsWith(".json"))) {
  const j = JSON.parse(fs.readFileSync(`${dir}/${f}`, "utf8"));
  for (const res of j.sweep ?? [j]) {
    const r = res.runs[0]; const w = res.workload;
    const share = w.share === undefined || w.share === "none" ? "none" : `${w.share} ${w.share_delay_ms} ms${w.inflight_period_ms ? `, every ${w.inflight_period_ms} ms` : ""}`;
    rows.push({ name: f.replace(/-n\d+-.*$/, ""), n: w.replicas ?? 1, scale: w.rate_scale, share, mode: w.share ?? "none", d: w.share_delay_ms ?? 0, p: w.inflight_period_ms ?? 0,
      hit: (r.prefix_cache_hit_rate * 100).toFixed(1), p50: r.ttft_ms.p50.toFixed(0), p99: r.ttft_ms.p99.toFixed(0),
      good: r.slo[0].goodput_rps.toFixed(2), att: (r.slo[0].attainment * 100).toFixed(1), shed: (r.shed_share * 100).toFixed(1) });
  }
}
const order = (m) => ["none", "events", "events+inflight"].indexOf(m);
rows.sort((a, b) => a.name.localeCompare(b.name) || a.scale - b.scale || a.n - b.n || a.d - b.d || order(a.mode) - order(b.mode) || a.p - b.p);
const many = new Set(rows.map((x) => x.scale)).size > 1;
console.log(`| workload |${many ? " rate × |" : ""} replicas | sharing | hit % | TTFT p50 ms | TTFT p99 ms | SLO % (2 s, 100 ms) | goodput req/s | shed % |`);
console.log(`| --- |${many ? " ---: |" : ""} ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |`);
for (const x of rows) console.log(`| ${x.name} |${many ? ` ${x.scale} |` : ""} ${x.n} | ${x.share} | ${x.hit} | ${x.p50} | ${x.p99} | ${x.att} | ${x.good} | ${x.shed} |`);
' "$out"
