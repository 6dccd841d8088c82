import { createServer } from 'node:http';
import { listenLoopback, type Loopback } from './loopback.js';

/** One span as an OTLP/HTTP JSON export carries it, with its attributes flattened to plain values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  attributes: Record<string, string | number | boolean>;
  /** Span ids (with trace ids) this span links to. */
  links: Array<{ traceId: string; spanId: string }>;
  /** 2: error (OTLP's STATUS_CODE_ERROR). */
  status: number;
  startNs: bigint;
  endNs: bigint;
  /** The resource's service.name. */
  service: string;
}

/** A local OTLP/HTTP trace receiver: what a collector would get from gated. */
export interface OtlpReceiver extends Loopback {
  /** The base URL to put in OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends /v1/traces). */
  url: string;
  spans: ReceivedSpan[];
  /** Request bodies as received (to check that no message text was exported). */
  bodies: string[];
  /** Requests that were not a JSON trace export on /v1/traces. */
  refused: string[];
}

interface AnyValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}

interface JsonSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes?: Array<{ key: string; value: AnyValue }>;
  links?: Array<{ traceId: string; spanId: string }>;
  status?: { code?: number };
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
}

interface JsonExport {
  resourceSpans?: Array<{
    resource?: { attributes?: Array<{ key: string; value: AnyValue }> };
    scopeSpans?: Array<{ spans?: JsonSpan[] }>;
  }>;
}

function plain(v: AnyValue): string | number | boolean {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  return v.boolValue ?? '';
}

function attrs(list: Array<{ key: string; value: AnyValue }> | undefined) {
  return Object.fromEntries((list ?? []).map((a) => [a.key, plain(a.value)]));
}

/** Decodes one OTLP/HTTP JSON trace export (ids in hex, as the JSON encoding has them). */
export function decodeExport(body: string): ReceivedSpan[] {
  const req = JSON.parse(body) as JsonExport;
  const out: ReceivedSpan[] = [];
  for (const rs of req.resourceSpans ?? []) {
    const service = String(attrs(rs.resource?.attributes)['service.name'] ?? '');
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? '',
          name: s.name,
          attributes: attrs(s.attributes),
          links: (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
          status: s.status?.code ?? 0,
          startNs: BigInt(s.startTimeUnixNano),
          endNs: BigInt(s.endTimeUnixNano),
          service,
        });
      }
    }
  }
  return out;
}

/** Starts a receiver on 127.0.0.1 that accepts JSON exports on POST /v1/traces and keeps their spans. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  const refused: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const type = req.headers['content-type'] ?? '';
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !type.startsWith('application/json')) {
        refused.push(`${req.method} ${req.url} ${type}`);
        res.writeHead(404).end();
        return;
      }
      const body = Buffer.concat(chunks).toString('utf8');
      try {
        spans.push(...decodeExport(body));
        bodies.push(body);
      } catch (err) {
        refused.push(`bad body: ${(err as Error).message}`);
        res.writeHead(400).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  const lb = await listenLoopback(server);
  return { ...lb, url: `http://127.0.0.1:${lb.port}`, spans, bodies, refused };
}
