/**
 * Injected faults of one mock server: which completion requests fail and how (refuse, 500, cut), and
 * whether `/metrics` answers (ok, hang, error). Set from the command line, then changeable at run time
 * through `POST /mock/faults`. The draws come from the shared seeded PRNG, so a seed and a port give the
 * same sequence of failures on every run.
 */
import { mulberry32 } from '../common/random.js';
import type { FailMode, MetricsFault, MockOptions } from './options.js';

/** What happens to one completion request. */
export type RequestFault = 'none' | 'refuse' | '500' | 'cut';

/** A refused `POST /mock/faults` body: the message and the field at fault. */
export interface FaultsProblem {
  message: string;
  param: string | null;
}

const FAIL_MODES: readonly string[] = ['refuse', '500', 'cut', 'mixed'];

export class Faults {
  metrics: MetricsFault = 'ok';
  failRate: number;
  failMode: FailMode;
  private readonly random: () => number;
  private hangTimer: NodeJS.Timeout | null = null;

  constructor(opts: Pick<MockOptions, 'failRate' | 'failMode' | 'metricsHangAfterS'>, seed: number, port: number) {
    this.failRate = opts.failRate ?? 0;
    this.failMode = opts.failMode ?? 'mixed';
    // servers of one process share the seed: the port sets each one's own stream
    this.random = mulberry32((seed * 2654435761) ^ port ^ 0x5bd1e995);
    if (opts.metricsHangAfterS !== undefined && opts.metricsHangAfterS >= 0) {
      this.hangTimer = setTimeout(() => {
        this.metrics = 'hang';
      }, opts.metricsHangAfterS * 1000);
      this.hangTimer.unref();
    }
  }

  /** Draws the fate of the next completion request. */
  pick(): RequestFault {
    if (this.failRate <= 0 || this.random() >= this.failRate) return 'none';
    if (this.failMode !== 'mixed') return this.failMode;
    const r = this.random();
    return r < 1 / 3 ? 'refuse' : r < 2 / 3 ? '500' : 'cut';
  }

  /** The state as `GET /mock/faults` shows it. */
  json(): { metrics: MetricsFault; fail_rate: number; fail_mode: FailMode } {
    return { metrics: this.metrics, fail_rate: this.failRate, fail_mode: this.failMode };
  }

  /**
   * Applies a `POST /mock/faults` body field by field, in the order metrics, fail_rate, fail_mode; the
   * first bad field stops it (the fields before it stay applied). Returns that field's problem, or null.
   */
  apply(body: Record<string, unknown>): FaultsProblem | null {
    if (body.metrics !== undefined) {
      if (body.metrics !== 'ok' && body.metrics !== 'hang' && body.metrics !== 'error') {
        return { message: 'metrics must be ok, hang or error', param: 'metrics' };
      }
      this.metrics = body.metrics;
    }
    if (body.fail_rate !== undefined) {
      if (typeof body.fail_rate !== 'number' || !(body.fail_rate >= 0 && body.fail_rate <= 1)) {
        return { message: 'fail_rate must be a number in [0, 1]', param: 'fail_rate' };
      }
      this.failRate = body.fail_rate;
    }
    if (body.fail_mode !== undefined) {
      if (!FAIL_MODES.includes(body.fail_mode as string)) {
        return { message: 'fail_mode must be refuse, 500, cut or mixed', param: 'fail_mode' };
      }
      this.failMode = body.fail_mode as FailMode;
    }
    return null;
  }

  /** Cancels the pending `--metrics-hang-after` switch. */
  stop(): void {
    if (this.hangTimer) clearTimeout(this.hangTimer);
    this.hangTimer = null;
  }
}
