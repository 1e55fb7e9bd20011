/**
 * One span per client request: its ids go into the traceparent sent upstream and the access line; with
 * `tracing.otlp_endpoint` set the span is also exported over OTLP/HTTP (otlp.ts, loaded only then), with
 * the routing decision as attributes. Without it a span is two random ids and nothing else.
 */
import type { Config } from '../config/schema.js';
import type { Logger } from './logger.js';
import { newSpanId, newTraceId, type TraceParent } from './trace.js';

/** Attribute values of a request span (undefined ones are left out). */
export type SpanAttributes = Record<string, string | number | boolean | undefined>;

export interface RequestSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** whether the span is recorded (the traceparent's sampled flag sent upstream) */
  readonly sampled: boolean;
  /** the request is over: attributes set, the span queued for export (when recorded). Never throws. */
  end(attributes: SpanAttributes, failed: boolean): void;
}

export interface Tracing {
  /** whether spans are exported (their attributes are worth building) */
  readonly exporting: boolean;
  /** a span for a request that began now, child of the client's span when it sent a valid traceparent */
  start(parent: TraceParent | null): RequestSpan;
  /** exports what is queued (bounded by the export timeout) and stops */
  shutdown(): Promise<void>;
}

class LocalSpan implements RequestSpan {
  readonly traceId: string;
  readonly spanId = newSpanId();
  readonly sampled: boolean;

  constructor(parent: TraceParent | null) {
    this.traceId = parent?.traceId ?? newTraceId();
    this.sampled = parent !== null && (parent.flags & 1) === 1; // the caller's decision is passed on
  }

  end(): void {}
}

/** Ids only: no export. */
export const LOCAL_TRACING: Tracing = {
  exporting: false,
  start: (parent) => new LocalSpan(parent),
  shutdown: () => Promise.resolve(),
};

/** The tracing the config asks for: LOCAL_TRACING, or OTLP export (the OpenTelemetry SDK loaded now). */
export async function createTracing(config: Config['tracing'], logger: Logger, version: string): Promise<Tracing> {
  if (config.otlp_endpoint === undefined) return LOCAL_TRACING;
  const { otlpTracing } = await import('./otlp.js');
  return otlpTracing({ ...config, otlp_endpoint: config.otlp_endpoint }, logger, version);
}
