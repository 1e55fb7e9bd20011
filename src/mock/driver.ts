/**
 * Drives one pure `Engine` in real time. Model time = real time since start × timeScale, in ms. One timer
 * per engine step; when the process falls behind (short steps at a high time scale), several steps run
 * back to back in one timer callback, and the caller is told once per callback, so that every response's
 * output of that callback is written once, corked.
 */
import type { Engine, EngineEvent } from '../engine/index.js';

/** Most steps run back to back in one callback; beyond that the clock is resynchronised. */
const MAX_CATCHUP_STEPS = 2000;

export class RealTimeDriver {
  private readonly t0 = performance.now();
  private timer: NodeJS.Timeout | null = null;
  /** model time at which the step in flight ends */
  private stepEndV = 0;
  private stopped = false;

  /**
   * `onStepEvents` gets each finished step's events; `afterSteps` is called once after the steps of one
   * timer callback.
   */
  constructor(
    private readonly engine: Engine,
    private readonly scale: number,
    private readonly onStepEvents: (events: EngineEvent[]) => void,
    private readonly afterSteps: () => void,
  ) {
    if (!(scale > 0)) throw new Error('mock: timeScale must be > 0');
  }

  /** Model time now, ms. */
  now(): number {
    return (performance.now() - this.t0) * this.scale;
  }

  /** Starts a step now unless one is in flight (call after the engine was given work). */
  kick(): void {
    if (this.stopped || this.timer !== null || this.engine.stepInFlight) return;
    const at = this.now();
    const d = this.engine.startStep(at);
    if (d === null) return;
    this.stepEndV = at + d;
    this.timer = setTimeout(this.onTick, Math.max(0, (this.stepEndV - this.now()) / this.scale));
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private readonly onTick = (): void => {
    this.timer = null;
    if (this.stopped) return;
    let loops = 0;
    for (;;) {
      const end = this.stepEndV;
      this.onStepEvents(this.engine.finishStep(end));
      const now = this.now();
      // back to back while the real clock is ahead; resync when hopelessly behind
      const start = ++loops >= MAX_CATCHUP_STEPS ? Math.max(end, now) : end;
      const d = this.engine.startStep(start);
      if (d === null) break;
      this.stepEndV = start + d;
      if (this.stepEndV > now || loops >= MAX_CATCHUP_STEPS) {
        this.timer = setTimeout(this.onTick, Math.max(0, (this.stepEndV - now) / this.scale));
        break;
      }
    }
    this.afterSteps();
  };
}
