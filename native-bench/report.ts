/**
 * The `policies` report: the live runs (client-measured, in engine time) in src/report/'s page, with the
 * simulator's figures beside them as the live/simulated agreement table.
 */
import type { RunFigures } from '../src/sim/types.js';
import { renderReport, type Agreement } from '../src/report/report.js';

export interface ReportRun extends RunFigures {
  lag?: { p99_ms: number; valid: boolean };
  per_endpoint?: Array<{ endpoint: string; requests: number; mean_running: number; max_running: number; mean_kv_cache: number; busy_fraction: number }>;
  timeseries?: Record<string, Array<[number, number, number, number]>>;
  /** per offered request, TTFT in engine ms (Infinity when shed or failed) */
  ttft_offered_values_ms?: number[];
}

export interface ReportInput {
  settings: Record<string, unknown>;
  live: ReportRun[];
  sim: RunFigures[];
  comparison: Agreement[];
  valid: boolean;
  invalidReason?: string;
  timeScale: number;
}

export function renderPoliciesReport(inp: ReportInput): string {
  const X = inp.timeScale;
  return renderReport({
    title: 'infergate: routing policies, live (and simulated)',
    about:
      `Live figures are measured at the client through the real gateway and mock servers. The mocks run ${X}× faster ` +
      `than real time, so durations are in engine time (measured × ${X}) and rates in engine time (measured ÷ ${X}), ` +
      `the simulator's units. The same workload also ran through the simulator${inp.sim.length ? '' : ' (not this time)'}; ` +
      'its agreement with the live run is shown apart from the comparison of policies.',
    policies: inp.live.map((l) => ({ run: l, lag: l.lag, perEndpoint: l.per_endpoint, timeseries: l.timeseries, ttftOfferedMs: l.ttft_offered_values_ms })),
    valid: inp.valid,
    invalidReason: inp.invalidReason,
    agreement: inp.comparison,
    timeScale: X,
    settings: inp.settings,
  });
}
