/**
 * The configuration file's schema: one zod definition gives the types, the validation (with the key path
 * of each problem) and the JSON Schema that `infergate schema` prints. Keys follow
 * shared/spec/gateway.example.yaml; unknown keys are errors, so a typo never silently means a default.
 */
import { z } from 'zod';
import { parseDuration, parseSize } from '../common/units.js';
import { POLICY_NAMES, SCORERS, type ScorerName } from '../routing/index.js';
import { parseCidr } from '../common/ip.js';

/** The pattern a duration matches (also in the JSON Schema, so that editors flag a bare number). */
export const DURATION_PATTERN = '^\\d+(\\.\\d+)?\\s*(ms|s|m|h)$';

/**
 * Milliseconds for a duration as the file wrote it; a number without a unit is refused (is `600` seconds or
 * milliseconds?) with the fix spelled out, and anything else unreadable names the accepted forms.
 */
function durationMs(v: unknown, ctx: z.RefinementCtx): number {
  const problem = durationProblem(v);
  if (problem) {
    ctx.addIssue({ code: 'custom', message: problem });
    return z.NEVER;
  }
  return parseDuration(v as string)!;
}

function durationProblem(v: unknown): string | null {
  if (typeof v === 'number' || (typeof v === 'string' && /^\s*\d+(\.\d+)?\s*$/.test(v))) {
    const n = String(v).trim();
    return `a duration needs a unit: write "${n}s" for seconds or "${n}ms" for milliseconds`;
  }
  if (typeof v !== 'string' || parseDuration(v) === null) return `not a duration: ${JSON.stringify(v)} (use e.g. "250ms", "2s", "1m", "1h")`;
  return null;
}

/** A string only (a bare YAML number is refused with the fix spelled out), matching DURATION_PATTERN. */
const durationString = z
  .string({ error: (iss) => durationProblem(iss.input) ?? undefined })
  .regex(new RegExp(DURATION_PATTERN), { error: (iss) => durationProblem(iss.input) ?? undefined });

const duration = (def: string) =>
  durationString
    .default(def)
    .transform((v, ctx) => durationMs(v, ctx))
    .describe('a duration with its unit: "250ms", "2s", "1m", "1h"');

const size = (def: string) =>
  z
    .union([z.string(), z.number()])
    .default(def)
    .transform((v, ctx) => {
      const bytes = parseSize(v);
      if (bytes === null) {
        ctx.addIssue({ code: 'custom', message: `not a size: ${JSON.stringify(v)} (use e.g. "4mb", "512kb" or a number of bytes)` });
        return z.NEVER;
      }
      return bytes;
    })
    .describe('a size: "4mb", "512kb" or a number of bytes');

const port = z.number().int().min(0).max(65535);

const tls = z.strictObject({ cert: z.string().min(1), key: z.string().min(1) });

const listen = z.strictObject({
  host: z.string().default('0.0.0.0'),
  port: port.default(8080),
  tls: tls.optional(),
});

const admin = z.strictObject({
  host: z.string().default('127.0.0.1'),
  port: port.default(9090),
  /** /readyz: ready when every configured model (all) or at least one (any) has an endpoint to serve it. */
  ready_when: z.enum(['all', 'any']).default('all'),
  /** How many routing decisions /debug/decisions and the status page keep (a ring); 0 keeps none. */
  decisions: z.number().int().min(0).max(100_000).default(200),
});

/** The signature algorithms `auth.jwt.algorithms` may name ("none" is never one of them). */
export const JWT_ALGORITHMS = [
  'RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519',
  'HS256', 'HS384', 'HS512',
] as const;

const jwt = z.strictObject({
  // where the verification keys come from: exactly one of these (keys are never written in this file)
  /** a JSON Web Key Set file (relative paths: from the config file's directory) */
  jwks_file: z.string().min(1).optional(),
  /** a JSON Web Key Set served over HTTP(S): fetched at start, cached, refreshed (see jwks_*) */
  jwks_url: z.string().url().optional(),
  /** a PEM public key (SPKI) or certificate file */
  public_key_file: z.string().min(1).optional(),
  /** an environment variable holding a PEM public key */
  public_key_env: z.string().min(1).optional(),
  /** a file holding the shared secret of HS256/384/512 (at least 32 bytes) */
  secret_file: z.string().min(1).optional(),
  /** an environment variable holding the shared secret */
  secret_env: z.string().min(1).optional(),
  /** jwks_url: a key set older than this is refreshed in the background (the old one serves meanwhile) */
  jwks_refresh: duration('5m'),
  /** jwks_url: the least time between two fetches (an unknown kid fetches at most this often) */
  jwks_cooldown: duration('30s'),
  /** jwks_url: a fetch slower than this fails (the request waiting for it gets 401) */
  jwks_timeout: duration('2s'),
  issuer: z.string({ message: 'auth.jwt.issuer is required (the iss every token must carry)' }).min(1),
  audience: z.string({ message: 'auth.jwt.audience is required (the aud every token must carry)' }).min(1),
  algorithms: z
    .array(z.enum(JWT_ALGORITHMS, { message: `an algorithm is one of ${JWT_ALGORITHMS.join(', ')}` }), {
      message: 'list the algorithms tokens may be signed with (there is no default)',
    })
    .min(1, 'list the algorithms tokens may be signed with (there is no default)'),
  clock_skew: duration('30s'),
  tenant_claim: z.string().min(1).default('sub'),
  models_claim: z.string().min(1).default('models'),
  priority_claim: z.string().min(1).default('priority'),
  /** verified tokens remembered (by digest) until their exp; 0 verifies every request */
  cache_entries: z.number().int().min(0).default(10_000),
  /** never accepted: a key written in the config file */
  secret: z.unknown().optional(),
  public_key: z.unknown().optional(),
});

/** A request header naming the request's priority class, believed only as far as `trust` says. */
const priorityHeader = z
  .strictObject({
    name: z
      .string()
      .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, 'a header name (letters, digits, "-")')
      .default('x-infergate-priority')
      .describe('The request header that names a priority class (critical, standard or sheddable).'),
    trust: z
      .enum(['never', 'trusted_proxies', 'always'])
      .default('never')
      .describe('Whose header is believed: nobody (never), peers in trusted_proxies, or every client (always).'),
  })
  .describe('A request header that sets the priority class when no token claim or tenant override does.');

const auth = z.strictObject({
  mode: z.enum(['jwt', 'none'], { message: 'auth.mode must be "jwt" or "none" (there is no default)' }),
  allow_unauthenticated: z.boolean().default(false),
  jwt: jwt.optional(),
  priority_header: priorityHeader.prefault({}),
});

/** A CIDR ("10.0.0.0/8", "fd00::/8") or a single address. */
const cidr = z.string().refine((v) => parseCidr(v) !== null, { message: 'not an IP address or CIDR (e.g. "10.0.0.0/8", "::1/128")' });

const limits = z
  .strictObject({
    max_body_bytes: size('4mb'),
    /** Request bodies being received, all connections together: past it a request is answered 503. */
    max_buffered_body_bytes: size('256mb'),
    max_header_bytes: size('16kb'),
    /** Objects and arrays nested deeper than this in a request body are refused (400 json_too_deep). */
    max_json_depth: z.number().int().min(1).max(10_000).default(64),
    request_timeout: duration('10m'),
    first_byte_timeout: duration('60s'),
    /** Tries on another endpoint when one fails before its first response byte. */
    retries: z.number().int().min(0).max(5).default(1),
    /** On SIGTERM, how long in-flight requests may run before the process exits anyway. */
    drain_timeout: duration('8s'),
    /**
     * Client-port requests in progress (each holds a connection, and an upstream one) past which a new
     * request is answered 503 too_many_connections and its connection closed. Default: from the process's
     * open-file limit (see the gateway README).
     */
    max_connections: z.number().int().min(1).optional(),
    /** The same bound per client address (a proxy in front is one address). Default: none. */
    max_connections_per_client: z.number().int().min(1).optional(),
    /** How long a streamed answer may stay backed up (the client not taking it) before the gateway ends it. */
    client_stall_timeout: duration('30s'),
  })
  .prefault({});

/** A tenant's limits (src/quota/): a key left out of an override takes tenants.default's; absent there, no limit. */
const tenantLimits = z.strictObject({
  requests_per_minute: z.number().positive().optional(),
  /** prompt + completion tokens: the prompt estimated at admission, corrected by the answer's usage */
  tokens_per_minute: z.number().positive().optional(),
  /** requests of the tenant in flight at once (all gateways together with quota.backend: redis) */
  max_concurrent: z.number().int().positive().optional(),
  priority: z.enum(['critical', 'standard', 'sheddable']).optional(),
});

const tenants = z
  .strictObject({
    default: tenantLimits.prefault({}),
    overrides: z.record(z.string(), tenantLimits).default({}),
  })
  .prefault({});

/** Where tenant quotas are counted (src/quota/README.md). */
const quota = z
  .strictObject({
    /** memory: each gateway process counts alone; redis: every gateway sharing the Redis shares the quota */
    backend: z.enum(['memory', 'redis']).default('memory'),
    redis: z
      .strictObject({
        url: z
          .string()
          .regex(/^rediss?:\/\/\S+$/, 'a Redis URL: redis://HOST:PORT[/DB] or rediss://… (TLS)')
          .optional(),
        key_prefix: z.string().default('infergate:quota:'),
        /** the longest a request waits for Redis; past it quota.on_backend_error decides */
        timeout: duration('50ms'),
        /** a concurrency lease of a gateway that died expires after this long (live ones are renewed) */
        lease_ttl: duration('30s'),
      })
      .prefault({}),
    /** when Redis cannot answer in time: allow (no limit), local (this process's own counts), deny (503) */
    on_backend_error: z.enum(['allow', 'local', 'deny']).default('local'),
  })
  .prefault({});

const target = z.strictObject({ model: z.string().min(1), weight: z.number().min(0) });

const modelRoute = z.strictObject({
  name: z.string().min(1),
  pool: z.string().min(1).optional(),
  targets: z.array(target).min(1).optional(),
  sticky: z.strictObject({ header: z.string().min(1) }).optional(),
});

/** One weight per scorer of the routing core's registry, with the scorer's default. */
function scoringWeights(): Record<ScorerName, z.ZodDefault<z.ZodNumber>> {
  const shape = {} as Record<ScorerName, z.ZodDefault<z.ZodNumber>>;
  for (const s of SCORERS) shape[s.name] = z.number().min(0).default(s.defaultWeight);
  return shape;
}

const scoring = z.strictObject(scoringWeights()).prefault({});

/** How often each endpoint's metrics are scraped when the config leaves it (the simulator's too). */
export const DEFAULT_METRICS_INTERVAL = '100ms';

const endpoint = z
  .string()
  .regex(/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'an endpoint is HOST:PORT, e.g. 127.0.0.1:8001');

const pool = z.strictObject({
  engine: z.enum(['vllm', 'sglang']).default('vllm'),
  endpoints: z.array(endpoint).default([]),
  discovery: z
    .strictObject({ dns: z.string().min(1), port, interval: duration('5s') })
    .optional(),
  /** A file holding the key sent upstream as `Authorization: Bearer …` (relative: from the config file). */
  api_key_file: z.string().min(1).optional(),
  /** An environment variable holding that key. */
  api_key_env: z.string().min(1).optional(),
  /** never accepted: a key written in the config file (see api_key_file, api_key_env) */
  api_key: z.unknown().optional(),
  /** Pass the client's own Authorization header on to this pool's servers (off: it is never forwarded). */
  forward_client_auth: z.boolean().default(false),
  metrics: z
    .strictObject({
      path: z.string().startsWith('/').default('/metrics'),
      interval: duration(DEFAULT_METRICS_INTERVAL),
      stale_after: duration('1s'),
    })
    .prefault({}),
  /** The engines' batch size (vLLM --max-num-seqs), when known: the picker then counts the wait for a
   *  decode slot on a full endpoint, and saturation counts requests beyond the free seats as waiting.
   *  Engines do not export it in their metrics. */
  max_num_seqs: z.number().int().min(1).optional(),
  policy: z.enum(POLICY_NAMES).default('scored'),
  shadow_policy: z.enum(POLICY_NAMES).optional(),
  scoring,
  prefix: z
    .strictObject({
      block_chars: z.number().int().min(8).max(65536).default(64),
      max_blocks: z.number().int().min(1).max(65536).default(2048),
      capacity_blocks_per_endpoint: z.number().int().min(1).default(31250),
    })
    .prefault({}),
  queue: z
    .strictObject({
      max_length: z
        .number()
        .int()
        .min(0)
        .max(1_000_000)
        .default(0)
        .describe('Requests (critical and standard) that may wait in the gateway while the pool is saturated; 0 turns the queue off (429 at once).'),
      max_wait: duration('10s').describe('The longest a request waits in the queue before it is answered 429, as a duration ("10s").'),
    })
    .prefault({})
    .describe('The per-pool wait queue of flow control: on saturation sheddable requests are refused, the others wait here, highest class first, tenants taking turns.'),
  saturation: z
    .strictObject({
      /** Waiting requests at which an endpoint counts as saturated; 0 turns this test off. Waiting is the
       *  scraped queue plus, of the requests sent since, those beyond max_num_seqs' free seats (256 when
       *  unset: vLLM's default) or late for their first byte (routing/saturation.ts), never the mere count
       *  in flight. */
      queue_depth: z.number().min(0).default(5),
      /** KV-cache use (0..1) at which an endpoint counts as saturated; 0 turns this test off. */
      kv_cache: z.number().min(0).max(1).default(0.8),
      retry_after: z
        .union([z.literal('auto'), z.string(), z.number()])
        .default('auto')
        .transform((v, ctx): 'auto' | number => (v === 'auto' ? 'auto' : durationMs(v, ctx)))
        .describe('"auto" (from the pool\'s recent answer times) or a duration with its unit, e.g. "2s"'),
    })
    .prefault({}),
});

const logging = z
  .strictObject({
    level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    /** One structured line per request (model, pool, endpoint, status, timings). */
    access_log: z.boolean().default(true),
  })
  .prefault({});

export const configSchema = z
  .strictObject({
    listen: listen.prefault({}),
    logging,
    debug_headers: z.boolean().default(false),
    /** Peers (CIDRs) whose X-Forwarded-For / X-Forwarded-Proto are kept and appended to; others' are replaced. */
    trusted_proxies: z.array(cidr).default([]),
    admin: admin.prefault({}),
    auth,
    limits,
    tenants,
    quota,
    models: z.array(modelRoute).min(1, 'at least one model must be listed'),
    pools: z.record(z.string().min(1), pool),
  })
  // Cross-key checks run even when some keys are invalid (when: always), so one run reports every problem;
  // the value may then hold unparsed parts, hence the defensive reads.
  .superRefine(crossChecks, { when: () => true });

type RawPool = { endpoints?: unknown; discovery?: unknown; api_key?: unknown; api_key_file?: unknown; api_key_env?: unknown; forward_client_auth?: unknown };
type RawModel = { name?: unknown; pool?: unknown; targets?: unknown; sticky?: unknown };

function crossChecks(cfg: unknown, ctx: z.RefinementCtx): void {
  const c = (cfg ?? {}) as {
    auth?: { mode?: unknown; allow_unauthenticated?: unknown; jwt?: unknown };
    quota?: { backend?: unknown; redis?: { url?: unknown; timeout?: unknown; lease_ttl?: unknown } };
    models?: unknown;
    pools?: unknown;
  };
  if (c.quota?.backend === 'redis' && c.quota.redis?.url === undefined) {
    ctx.addIssue({ code: 'custom', path: ['quota', 'redis', 'url'], message: 'quota.backend "redis" needs quota.redis.url (e.g. redis://127.0.0.1:6379)' });
  }
  const leaseTtl = c.quota?.redis?.lease_ttl;
  if (typeof leaseTtl === 'number' && leaseTtl < 3000) {
    ctx.addIssue({ code: 'custom', path: ['quota', 'redis', 'lease_ttl'], message: 'quota.redis.lease_ttl must be at least 3s (leases are renewed every third of it)' });
  }
  const timeout = c.quota?.redis?.timeout;
  if (typeof timeout === 'number' && (timeout < 1 || timeout > 10_000)) {
    ctx.addIssue({ code: 'custom', path: ['quota', 'redis', 'timeout'], message: 'quota.redis.timeout must be between 1ms and 10s' });
  }
  if (c.auth?.mode === 'none' && c.auth.allow_unauthenticated !== true) {
    ctx.addIssue({
      code: 'custom',
      path: ['auth', 'allow_unauthenticated'],
      message: 'auth.mode "none" needs allow_unauthenticated: true (anyone who reaches the port can use every model)',
    });
  }
  if (c.auth?.mode === 'jwt') jwtChecks(c.auth.jwt, ctx);
  const pools = c.pools !== null && typeof c.pools === 'object' ? (c.pools as Record<string, RawPool>) : {};
  const models: RawModel[] = Array.isArray(c.models) ? (c.models as RawModel[]) : [];
  const names = new Map<string, number>();
  models.forEach((m, i) => {
    if (typeof m?.name !== 'string') return;
    if (names.has(m.name)) ctx.addIssue({ code: 'custom', path: ['models', i, 'name'], message: `model "${m.name}" is listed twice` });
    names.set(m.name, i);
  });
  models.forEach((m, i) => {
    if (m === null || typeof m !== 'object') return;
    if ((m.pool === undefined) === (m.targets === undefined)) {
      ctx.addIssue({ code: 'custom', path: ['models', i], message: `model "${String(m.name)}" needs exactly one of "pool" or "targets"` });
    }
    if (typeof m.pool === 'string' && !(m.pool in pools)) {
      ctx.addIssue({ code: 'custom', path: ['models', i, 'pool'], message: `pool "${m.pool}" is not defined under pools` });
    }
    if (m.sticky !== undefined && m.targets === undefined) {
      ctx.addIssue({ code: 'custom', path: ['models', i, 'sticky'], message: 'sticky applies only to a model with targets' });
    }
    if (!Array.isArray(m.targets)) return;
    const targets = m.targets as Array<{ model?: unknown; weight?: unknown }>;
    targets.forEach((t, j) => {
      if (typeof t?.model !== 'string') return;
      const idx = names.get(t.model);
      if (idx === undefined) {
        ctx.addIssue({ code: 'custom', path: ['models', i, 'targets', j, 'model'], message: `target "${t.model}" is not a model listed under models` });
      } else if (models[idx].pool === undefined) {
        ctx.addIssue({ code: 'custom', path: ['models', i, 'targets', j, 'model'], message: `target "${t.model}" must be a model with a pool, not another alias` });
      }
    });
    if (targets.length > 0 && targets.every((t) => t?.weight === 0)) {
      ctx.addIssue({ code: 'custom', path: ['models', i, 'targets'], message: 'at least one target needs a weight above 0' });
    }
  });
  for (const [name, p] of Object.entries(pools)) {
    const eps = p?.endpoints;
    if ((eps === undefined || (Array.isArray(eps) && eps.length === 0)) && !p?.discovery) {
      ctx.addIssue({ code: 'custom', path: ['pools', name, 'endpoints'], message: `pool "${name}" needs endpoints or discovery` });
    }
    if (p?.api_key !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['pools', name, 'api_key'],
        message: 'a key is not written in the config file: put it in a file (api_key_file) or an environment variable (api_key_env)',
      });
    }
    if (p?.api_key_file !== undefined && p?.api_key_env !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['pools', name, 'api_key_env'], message: 'give api_key_file or api_key_env, not both' });
    }
    if (p?.forward_client_auth === true && (p.api_key_file !== undefined || p.api_key_env !== undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['pools', name, 'forward_client_auth'],
        message: 'forward_client_auth sends the client\'s Authorization upstream; it cannot be combined with the pool\'s own key',
      });
    }
  }
}

const KEY_SOURCES = ['jwks_file', 'jwks_url', 'public_key_file', 'public_key_env', 'secret_file', 'secret_env'] as const;

/** mode: jwt: one key source; HMAC algorithms only with a secret and the others only without one. */
function jwtChecks(raw: unknown, ctx: z.RefinementCtx): void {
  if (raw === null || typeof raw !== 'object') {
    ctx.addIssue({ code: 'custom', path: ['auth', 'jwt'], message: 'auth.mode "jwt" needs an auth.jwt section (keys, issuer, audience, algorithms)' });
    return;
  }
  const j = raw as Record<string, unknown>;
  for (const inline of ['secret', 'public_key'] as const) {
    if (j[inline] !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['auth', 'jwt', inline],
        message: `a key is not written in the config file: use ${inline}_file or ${inline}_env`,
      });
    }
  }
  const given = KEY_SOURCES.filter((k) => j[k] !== undefined);
  if (given.length !== 1) {
    ctx.addIssue({
      code: 'custom',
      path: ['auth', 'jwt'],
      message: `give exactly one key source of ${KEY_SOURCES.join(', ')}${given.length ? ` (got ${given.join(', ')})` : ''}`,
    });
  }
  const algs = Array.isArray(j.algorithms) ? (j.algorithms as unknown[]).filter((a): a is string => typeof a === 'string') : [];
  const hmac = algs.filter((a) => a.startsWith('HS'));
  const secret = given.length === 1 && given[0].startsWith('secret_');
  if (secret && hmac.length !== algs.length) {
    ctx.addIssue({ code: 'custom', path: ['auth', 'jwt', 'algorithms'], message: 'a shared secret verifies HS256/HS384/HS512 only' });
  } else if (!secret && given.length === 1 && hmac.length > 0) {
    // a public key used as an HMAC secret is the classic key-confusion attack: never allowed
    ctx.addIssue({ code: 'custom', path: ['auth', 'jwt', 'algorithms'], message: `${hmac.join(', ')} need secret_file or secret_env; public keys verify the others` });
  }
}

export type Config = z.output<typeof configSchema>;
export type PoolConfig = Config['pools'][string];

/** The JSON Schema of the file as a user writes it (defaults shown, units as strings). */
export function configJsonSchema(): unknown {
  return z.toJSONSchema(configSchema, { io: 'input', unrepresentable: 'any' });
}
export type TenantsConfig = Config['tenants'];
export type QuotaConfig = Config['quota'];
