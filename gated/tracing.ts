import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import { setTracing } from '../core/trace.js';

/** Longest wait for the collector to take one batch of spans. */
const EXPORT_TIMEOUT_MS = 5000;

/** The exporter gated started; `shutdown` sends the spans still buffered and turns tracing off. */
export interface Tracing {
  shutdown(): Promise<void>;
}

/**
 * Registers the OpenTelemetry SDK when traces are configured (Config.traces): spans go in batches to the
 * OTLP/HTTP endpoint as JSON; core/trace.ts makes them (one trace per inbound message). Undefined when off.
 * The exporter also reads OTEL_EXPORTER_OTLP_HEADERS (an API key of a hosted collector) by itself. The SDK
 * is imported only then: loading it costs about 150 ms of every start, and tracing is off by default.
 */
export async function startTracing(
  config: Pick<Config, 'traces'>,
  log: Logger,
): Promise<Tracing | undefined> {
  const t = config.traces;
  if (!t) return undefined;
  const [api, { OTLPTraceExporter }, { resourceFromAttributes }, semconv, sdk] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/semantic-conventions'),
    import('@opentelemetry/sdk-trace-node'),
  ]);
  const { BatchSpanProcessor, NodeTracerProvider } = sdk;
  const ATTR_SERVICE_NAME = semconv.ATTR_SERVICE_NAME;
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: t.serviceName }),
    // A collector that does not answer costs at most EXPORT_TIMEOUT_MS per batch, and at the stop.
    spanProcessors: [
      new BatchSpanProcessor(new OTLPTraceExporter({ url: t.url, timeoutMillis: EXPORT_TIMEOUT_MS }), {
        scheduledDelayMillis: 1000,
        exportTimeoutMillis: EXPORT_TIMEOUT_MS,
      }),
    ],
  });
  // The provider, and the context manager (AsyncLocalStorage) that keeps a message's or a run's span
  // active across its awaits, timers and streams: what puts trace ids on their log lines (core/log.ts).
  provider.register({ propagator: null });
  setTracing(api);
  // The URL only: a collector's credentials travel in headers, never in a log line.
  log.info({ url: redactUrl(t.url) }, 'traces exported over OTLP/HTTP');
  let done: Promise<void> | undefined;
  return {
    shutdown: () =>
      (done ??= (async () => {
        setTracing(null);
        try {
          await provider.shutdown();
        } finally {
          // A later start in the same process (tests) may register its own provider and context manager.
          api.trace.disable();
          api.context.disable();
        }
      })()),
  };
}

/** The URL without user and password. */
function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.toString();
  } catch {
    return '[unparsable]';
  }
}
