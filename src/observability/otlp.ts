/**
 * OTLP/HTTP export of request spans with the OpenTelemetry SDK (loaded by tracing.ts only when
 * `tracing.otlp_endpoint` is set). Spans are sampled parent-based (a client's sampled flag is followed; a
 * new trace is kept with `sample_ratio`), queued in a bounded batch processor (a full queue drops spans,
 * never delays a request) and sent as JSON. An exporter failure is logged at most once a minute and never
 * reaches a request.
 */
import { diag, DiagLogLevel, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api';
import { BasicTracerProvider, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import type { Config } from '../config/schema.js';
import type { Logger } from './logger.js';
import type { TraceParent } from './trace.js';
import type { RequestSpan, SpanAttributes, Tracing } from './tracing.js';

type OtlpConfig = Config['tracing'] & { otlp_endpoint: string };

const WARN_EVERY_MS = 60_000;
const SHUTDOWN_WAIT_MS = 1_000;

class ExportedSpan implements RequestSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly sampled: boolean;

  constructor(private readonly span: Span) {
    const sc = span.spanContext();
    this.traceId = sc.traceId;
    this.spanId = sc.spanId;
    this.sampled = (sc.traceFlags & 1) === 1;
  }

  end(attributes: SpanAttributes, failed: boolean): void {
    try {
      if (!this.span.isRecording()) return;
      for (const k in attributes) {
        const v = attributes[k];
        if (v !== undefined) this.span.setAttribute(k, v);
      }
      if (failed) this.span.setStatus({ code: SpanStatusCode.ERROR });
      this.span.end();
    } catch {
      // a span that cannot be ended is lost; the request is not
    }
  }
}

export function otlpTracing(cfg: OtlpConfig, logger: Logger, version: string): Tracing {
  // the SDK reports export failures through its diagnostic logger: one warning a minute at most
  let lastWarn = -Infinity;
  diag.setLogger(
    {
      error: (message: string, ...args: unknown[]) => {
        const now = Date.now();
        if (now - lastWarn < WARN_EVERY_MS) return;
        lastWarn = now;
        logger.warn({ otlp_endpoint: cfg.otlp_endpoint, err: args.length > 0 ? String(args[0] instanceof Error ? args[0].message : args[0]) : undefined }, `span export failed: ${message}`);
      },
      warn: () => undefined,
      info: () => undefined,
      debug: () => undefined,
      verbose: () => undefined,
    },
    { logLevel: DiagLogLevel.ERROR, suppressOverrideMessage: true },
  );
  const exporter = new OTLPTraceExporter({ url: cfg.otlp_endpoint, timeoutMillis: cfg.export_timeout });
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': cfg.service_name, 'service.version': version }),
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(cfg.sample_ratio) }),
    spanProcessors: [
      new BatchSpanProcessor(exporter, {
        maxQueueSize: cfg.max_queue_size,
        maxExportBatchSize: Math.min(512, cfg.max_queue_size),
        scheduledDelayMillis: cfg.export_interval,
        exportTimeoutMillis: cfg.export_timeout,
      }),
    ],
  });
  const tracer: Tracer = provider.getTracer('infergate', version);
  logger.info({ otlp_endpoint: cfg.otlp_endpoint, sample_ratio: cfg.sample_ratio }, 'exporting request spans (OTLP/HTTP)');
  return {
    exporting: true,
    start(parent: TraceParent | null): RequestSpan {
      const ctx =
        parent === null
          ? ROOT_CONTEXT
          : trace.setSpanContext(ROOT_CONTEXT, { traceId: parent.traceId, spanId: parent.parentId, traceFlags: parent.flags & 1, isRemote: true });
      return new ExportedSpan(tracer.startSpan('infergate.request', { kind: SpanKind.SERVER }, ctx));
    },
    async shutdown(): Promise<void> {
      // what is queued is sent, but the exit waits for it SHUTDOWN_WAIT_MS at most (a drain already took
      // most of a container's stop grace); a collector that is down loses those spans
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, SHUTDOWN_WAIT_MS);
        timer.unref();
      });
      await Promise.race([provider.shutdown().catch(() => undefined), waited]);
      clearTimeout(timer);
    },
  };
}
