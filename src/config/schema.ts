/**
 * The configuration file's schema: one zod definition gives the types, the validation (with the key path
 * of each problem) and the JSON Schema that `infergate schema` prints. Keys follow
 * shared/spec/gateway.example.yaml; unknown keys are errors, so a typo never silently means a default.
 */
import { z } from 'zod';
import { parseDuration, parseSize } from '../common/units.js';
import { POLICY_NAMES, SCORERS, type ScorerName } from '../routing/index.js';
import { parseCidr } from '../common/ip.js';
import { MEDIA_PART_TOKENS } from '../openai/prompt.js';

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

/** Milliseconds; each key says in its own `.describe()` what the duration bounds (the JSON Schema shows the pattern). */
const duration = (def: string) => durationString.default(def).transform((v, ctx) => durationMs(v, ctx));

/** The pattern a size written as a string matches: a number and an optional unit (b, kb, mb, gb; kib, mib, gib the same). */
export const SIZE_PATTERN = '^\\d+(\\.\\d+)?\\s*([bB]|[kKmMgG][iI]?[bB])?$';

const sizeError = { error: (iss: { input?: unknown }) => `not a size: ${JSON.stringify(iss.input)} (use e.g. "4mb", "512kb" or a whole number of bytes)` };

/**
 * Bytes: a string with a unit (SIZE_PATTERN) or a whole number of bytes. Both forms are in the JSON Schema
 * (as anyOf, which Ajv's strict mode takes where it refuses a type list); each key describes itself.
 */
const size = (def: string) =>
  z
    .union(
      [
        z.string(sizeError).regex(new RegExp(SIZE_PATTERN), sizeError).describe('A size with its unit: "4mb", "512kb"; b, kb, mb, gb count in 1024s, as kib, mib, gib do.'),
        z.number(sizeError).int(sizeError).min(0, sizeError).describe('A whole number of bytes.'),
      ],
      sizeError,
    )
    .default(def)
    .transform((v, ctx) => {
      const bytes = parseSize(v);
      if (bytes === null) {
        ctx.addIssue({ code: 'custom', message: sizeError.error({ input: v }) });
        return z.NEVER;
      }
      return bytes;
    });

/** A key that is never accepted (a secret written in the file): the JSON Schema refuses any value, as the cross-checks do. */
const refused = (description: string) => z.unknown().optional().meta({ description, not: {} });

const port = z.number().int().min(0).max(65535);

const tls = z.strictObject({
  cert: z.string().min(1).describe('The PEM certificate file (with its chain) served on the listen port; reloaded on SIGHUP and when it changes.'),
  key: z.string().min(1).describe('The PEM private key file of that certificate, unencrypted; reloaded with it.'),
  watch: z.boolean().default(true).describe('Watch the certificate and key files and reload them when their contents change (SIGHUP reloads either way).'),
});

const listen = z.strictObject({
  host: z.string().default('0.0.0.0').describe('The address the client listener binds (0.0.0.0: every IPv4 interface).'),
  port: port.default(8080).describe('The TCP port of the client listener (0: any free port, printed at start).'),
  tls: tls.optional().describe('Serve HTTPS only on this port, with this certificate and key (absent: plain HTTP).'),
});

const admin = z.strictObject({
  host: z.string().default('127.0.0.1').describe('The address the admin listener binds; keep it off the public network.'),
  port: port.default(9090).describe('The TCP port of the admin listener (0: any free port, printed at start).'),
  /** /readyz: ready when every configured model (all) or at least one (any) has an endpoint to serve it. */
  ready_when: z.enum(['all', 'any']).default('all').describe('When /readyz answers 200: every configured model (all) or at least one (any) has an endpoint to serve it.'),
  /** How many routing decisions /debug/decisions and the status page keep (a ring); 0 keeps none. */
  decisions: z.number().int().min(0).max(100_000).default(200).describe('How many recent routing decisions /debug/decisions and the status page keep (a count; 0 keeps none).'),
  watch_config: z
    .boolean()
    .default(true)
    .describe('Reload the config when its file changes (the directory is watched, changes settle for 500 ms); SIGHUP reloads either way.'),
});

/** The signature algorithms `auth.jwt.algorithms` may name ("none" is never one of them). */
export const JWT_ALGORITHMS = [
  'RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519',
  'HS256', 'HS384', 'HS512',
] as const;

const jwt = z.strictObject({
  // where the verification keys come from: exactly one of these (keys are never written in this file)
  /** a JSON Web Key Set file (relative paths: from the config file's directory) */
  jwks_file: z.string().min(1).optional().describe("A JSON Web Key Set file holding the verification keys (a path; relative: from the config file's directory)."),
  /** a JSON Web Key Set served over HTTP(S): fetched at start, cached, refreshed (see jwks_*) */
  jwks_url: z.string().url().optional().describe('A JSON Web Key Set served over HTTP(S): fetched at start, cached and refreshed in the background.'),
  /** a PEM public key (SPKI) or certificate file */
  public_key_file: z.string().min(1).optional().describe("A PEM public key (SPKI) or certificate file that verifies tokens (relative: from the config file's directory)."),
  /** an environment variable holding a PEM public key */
  public_key_env: z.string().min(1).optional().describe('The name of an environment variable holding a PEM public key that verifies tokens.'),
  /** a file holding the shared secret of HS256/384/512 (at least 32 bytes) */
  secret_file: z.string().min(1).optional().describe("A file holding the shared secret of HS256/HS384/HS512, at least 32 bytes (relative: from the config file's directory)."),
  /** an environment variable holding the shared secret */
  secret_env: z.string().min(1).optional().describe('The name of an environment variable holding the shared secret of HS256/HS384/HS512.'),
  /** jwks_url: a key set older than this is refreshed in the background (the old one serves meanwhile) */
  jwks_refresh: duration('5m').describe('With jwks_url: a key set older than this is refreshed in the background while it keeps serving (a duration, e.g. "5m").'),
  /** jwks_url: the least time between two fetches (an unknown kid fetches at most this often) */
  jwks_cooldown: duration('30s').describe('With jwks_url: the least time between two fetches, so an unknown kid fetches at most this often (a duration).'),
  /** jwks_url: a fetch slower than this fails (the request waiting for it gets 401) */
  jwks_timeout: duration('2s').describe('With jwks_url: a fetch slower than this fails, and a request waiting for it gets 401 (a duration).'),
  issuer: z.string({ message: 'auth.jwt.issuer is required (the iss every token must carry)' }).min(1).describe('The iss claim every token must carry (required).'),
  audience: z.string({ message: 'auth.jwt.audience is required (the aud every token must carry)' }).min(1).describe('The aud claim every token must carry (required).'),
  algorithms: z
    .array(z.enum(JWT_ALGORITHMS, { message: `an algorithm is one of ${JWT_ALGORITHMS.join(', ')}` }).describe('A JWS signature algorithm.'), {
      message: 'list the algorithms tokens may be signed with (there is no default)',
    })
    .min(1, 'list the algorithms tokens may be signed with (there is no default)')
    .describe('The signature algorithms tokens may be signed with (required; HS256/384/512 only with secret_file or secret_env).'),
  clock_skew: duration('30s').describe('Tolerance on the exp, nbf and iat claims (a duration).'),
  tenant_claim: z.string().min(1).default('sub').describe('The claim that names the tenant (quotas, logs).'),
  models_claim: z.string().min(1).default('models').describe('The claim listing the model names or patterns (llama-*) the token may use; "*" allows every model.'),
  priority_claim: z.string().min(1).default('priority').describe("The claim holding the request's priority class: critical, standard or sheddable."),
  /** verified tokens remembered (by digest) until their exp; 0 verifies every request */
  cache_entries: z.number().int().min(0).default(10_000).describe('How many verified tokens are remembered, by digest, until their exp (a count; 0 verifies every request).'),
  /** never accepted: a key written in the config file */
  secret: refused('Never accepted: a key is not written in the config file (use secret_file or secret_env).'),
  public_key: refused('Never accepted: a key is not written in the config file (use public_key_file or public_key_env).'),
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
  mode: z.enum(['jwt', 'none'], { message: 'auth.mode must be "jwt" or "none" (there is no default)' }).describe('Whether every request must carry a verified JWT (jwt) or none is asked for (none); required.'),
  allow_unauthenticated: z.boolean().default(false).describe('Must be true with mode: none, to say on purpose that anyone who reaches the port may use every model.'),
  jwt: jwt.optional().describe('How tokens are verified with mode: jwt: exactly one key source, the issuer, audience and algorithms.'),
  priority_header: priorityHeader.prefault({}),
});

/**
 * A CIDR ("10.0.0.0/8", "fd00::/8") or a single address. The JSON Schema's pattern, for editors, is looser
 * than parseCidr (every address it takes matches it), which has the last word.
 */
const cidr = z
  .string()
  .refine((v) => parseCidr(v) !== null, { message: 'not an IP address or CIDR (e.g. "10.0.0.0/8", "::1/128")' })
  .meta({ description: 'A CIDR ("10.0.0.0/8", "fd00::/8") or a single address.', pattern: '^[0-9A-Fa-f.:]+(%[^/\\s]+)?(/\\d{1,3})?$' });

const limits = z
  .strictObject({
    max_body_bytes: size('4mb').describe('The largest request body accepted; a larger one is answered 413 (a size: "4mb", "512kb" or bytes).'),
    max_audio_body_bytes: size('25mb').describe(
      'The largest body accepted on the audio APIs (/v1/audio/transcriptions and /translations: a form with the audio file; OpenAI takes files up to 25 MB), in place of max_body_bytes there (a size).',
    ),
    /** Request bodies being received or held by requests in flight, all connections together: past it a request is answered 503. */
    max_buffered_body_bytes: size('256mb').describe('Request bodies being received or held by requests in flight (until their answers end), all connections together, past which a new request is answered 503 (a size).'),
    max_header_bytes: size('16kb').describe("The largest request head (request line and headers) accepted, on both listeners (a size)."),
    /** Objects and arrays nested deeper than this in a request body are refused (400 json_too_deep). */
    max_json_depth: z.number().int().min(1).max(10_000).default(64).describe('Objects and arrays nested deeper than this in a request body are refused with 400 json_too_deep (a count of levels).'),
    request_timeout: duration('10m').describe('The longest a whole request may take, streaming included (a duration, e.g. "10m").'),
    first_byte_timeout: duration('60s').describe(
      'A streamed request: the longest the model server may send nothing, before its first token or between two chunks (a duration: "60s"); past it the request is cancelled and answered 504.',
    ),
    response_timeout: duration('5m').describe(
      'A non-streamed request: the longest the whole answer may take from the moment it is sent (a duration: "5m"; a 4,000-token answer at 20 ms/token takes 80s); past it the request is cancelled and answered 504, never retried.',
    ),
    /** Tries on another endpoint when one fails before its first response byte. */
    retries: z
      .number()
      .int()
      .min(0)
      .max(5)
      .default(1)
      .describe(
        'Tries on another endpoint (a count) when one fails in a way that proves it did not take the request: refused connection, reset before any answer byte, or a 502/503 status; within the pool\'s retry_budget.',
      ),
    /** On SIGTERM, how long in-flight requests may run before the process exits anyway. */
    drain_timeout: duration('8s').describe('On SIGTERM, how long in-flight requests may run before the process exits anyway (a duration).'),
    /**
     * Client-port requests in progress (each holds a connection, and an upstream one) past which a new
     * request is answered 503 too_many_connections and its connection closed. Default: from the process's
     * open-file limit (see the gateway README).
     */
    max_connections: z.number().int().min(1).optional().describe('Client requests in progress past which a new one is answered 503 too_many_connections and its connection closed (a count; default: from the open-file limit).'),
    /** The same bound per client address (a proxy in front is one address). Default: none. */
    max_connections_per_client: z.number().int().min(1).optional().describe('The same bound per client address, a proxy in front counting as one (a count; default: none).'),
    /** How long a streamed answer may stay backed up (the client not taking it) before the gateway ends it. */
    client_stall_timeout: duration('30s').describe('How long a streamed answer may stay backed up, the client not reading it, before the gateway ends it (a duration).'),
  })
  .prefault({})
  .describe('Bounds on request size, time and connections.');

/** A tenant's limits (src/quota/): a key left out of an override takes tenants.default's; absent there, no limit. */
const tenantLimits = z.strictObject({
  requests_per_minute: z.number().positive().optional().describe('Requests the tenant may start per minute (a rate).'),
  /** prompt + completion tokens: the prompt estimated at admission, corrected by the answer's usage */
  tokens_per_minute: z.number().positive().optional().describe("Prompt plus completion tokens per minute, the prompt estimated at admission and corrected by the answer's usage (a rate)."),
  /** requests of the tenant in flight at once (all gateways together with quota.backend: redis) */
  max_concurrent: z.number().int().positive().optional().describe('Requests of the tenant in flight at once, all gateways together with quota.backend: redis (a count).'),
  priority: z.enum(['critical', 'standard', 'sheddable']).optional().describe("The tenant's priority class."),
});

const tenants = z
  .strictObject({
    default: tenantLimits.prefault({}).describe('The limits of every tenant without an override; a key left out means no such limit.'),
    overrides: z.record(z.string(), tenantLimits.describe("One tenant's limits, by tenant name.")).default({}).describe("Limits per tenant name; a key left out takes tenants.default's."),
  })
  .prefault({})
  .describe('Limits per tenant (the tenant comes from the verified token).');

/** Where tenant quotas are counted (src/quota/README.md). */
const quota = z
  .strictObject({
    /** memory: each gateway process counts alone; redis: every gateway sharing the Redis shares the quota */
    backend: z.enum(['memory', 'redis']).default('memory').describe('Where quotas are counted: memory (each gateway process alone) or redis (shared by every gateway on one Redis).'),
    redis: z
      .strictObject({
        url: z
          .string()
          .regex(/^rediss?:\/\/\S+$/, 'a Redis URL: redis://HOST:PORT[/DB] or rediss://… (TLS)')
          .optional()
          .describe('The Redis to count in, redis://HOST:PORT[/DB] or rediss:// for TLS (required with backend: redis).'),
        key_prefix: z.string().default('infergate:quota:').describe('The prefix of every Redis key the quotas use.'),
        /** the longest a request waits for Redis; past it quota.on_backend_error decides */
        timeout: duration('50ms').describe('The longest a request waits for Redis, between 1ms and 10s; past it on_backend_error decides (a duration).'),
        /** a concurrency lease of a gateway that died expires after this long (live ones are renewed) */
        lease_ttl: duration('30s').describe("How long a dead gateway's concurrency leases last, at least 3s; live ones are renewed (a duration)."),
      })
      .prefault({})
      .describe('The Redis of quota.backend: redis.'),
    /** when Redis cannot answer in time: allow (no limit), local (this process's own counts), deny (503) */
    on_backend_error: z.enum(['allow', 'local', 'deny']).default('local').describe("When Redis cannot answer in time: allow (no limit), local (this process's own counts) or deny (503)."),
  })
  .prefault({})
  .describe('Where tenant quotas are counted.');

/** Routing knowledge shared between gateway replicas (src/cluster/README.md). */
const cluster = z
  .strictObject({
    /** none: each gateway learns alone; redis: every gateway on the same Redis channel shares what it learned */
    backend: z.enum(['none', 'redis']).default('none').describe("How replicas share what they learned about prefixes: none (each gateway alone) or redis (pub/sub on one Redis)."),
    url: z
      .string()
      .regex(/^rediss?:\/\/\S+$/, 'a Redis URL: redis://HOST:PORT[/DB] or rediss://… (TLS)')
      .optional()
      .describe('The Redis the replicas share through, redis://HOST:PORT[/DB] or rediss:// for TLS (required with backend: redis).'),
    channel: z.string().min(1).default('infergate:routing').describe('The Redis pub/sub channel the replicas of one deployment share (a channel name).'),
  })
  .prefault({})
  .describe('Gateway replicas that route as one: each publishes the picks it learned and applies the others\'.');

const target = z
  .strictObject({
    model: z.string().min(1).describe('A model listed under models that has a pool.'),
    weight: z.number().min(0).describe("This target's share of the alias's traffic, relative to the other targets' (0 sends it none)."),
  })
  .describe('One target of an alias.');

const modelRoute = z.strictObject({
  name: z.string().min(1).describe('The name clients send in the "model" field.'),
  pool: z.string().min(1).optional().describe('The pool that serves this model (exactly one of pool or targets).'),
  targets: z.array(target).min(1).optional().describe('Models this alias splits its traffic between, by weight (exactly one of pool or targets).'),
  sticky: z
    .strictObject({ header: z.string().min(1).describe('The request header whose value names the session.') })
    .optional()
    .describe('Keep each session on one target of the alias.'),
}).describe('One model clients may ask for, and what serves it.');

/** What each scorer of the routing core's registry favours (a scorer added there without a line here does not compile). */
const SCORER_DESCRIPTIONS: Record<ScorerName, string> = {
  prefix: "the endpoint likely holding the most of the prompt's prefix in its KV cache",
  queue: 'the endpoint with the least queued prefill work, counted in prompt tokens',
  running: 'the endpoint running the fewest sequences',
  kv_cache: 'the endpoint with the most free KV cache',
  lora: "the endpoint that has a request's adapter loaded or a free adapter slot (adapter requests only)",
  load: "the endpoint with the least in flight by the gateway's own count",
};

/** One weight per scorer of the routing core's registry, with the scorer's default. */
function scoringWeights(): Record<ScorerName, z.ZodDefault<z.ZodNumber>> {
  const shape = {} as Record<ScorerName, z.ZodDefault<z.ZodNumber>>;
  for (const s of SCORERS) {
    shape[s.name] = z.number().min(0).default(s.defaultWeight).describe(`The weight of the ${s.name} scorer, which favours ${SCORER_DESCRIPTIONS[s.name]} (0 turns it off).`);
  }
  return shape;
}

const scoring = z.strictObject(scoringWeights()).prefault({}).describe("The weights of the scored policy's scorers; 0 turns one off.");

/** How often each endpoint's metrics are scraped when the config leaves it (the simulator's too). */
export const DEFAULT_METRICS_INTERVAL = '100ms';

const endpoint = z
  .string()
  .regex(/^(https?:\/\/)?(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'an endpoint is HOST:PORT or https://HOST:PORT, e.g. 127.0.0.1:8001')
  .describe('One model server as HOST:PORT (plain HTTP, unless its pool sets tls_ca_file) or https://HOST:PORT, e.g. 127.0.0.1:8001.');

const pool = z.strictObject({
  engine: z.enum(['vllm', 'sglang']).default('vllm').describe("The model server the endpoints run, which says whose metric names are read: vllm or sglang."),
  endpoints: z.array(endpoint).default([]).describe('The model servers of the pool, each HOST:PORT (or use discovery).'),
  discovery: z
    .strictObject({
      dns: z.string().min(1).describe('The DNS name whose addresses are the endpoints, e.g. a Kubernetes headless service.'),
      port: port.describe('The TCP port the discovered model servers listen on.'),
      interval: duration('5s').describe('How often the name is resolved again (a duration).'),
    })
    .optional()
    .describe('Find the endpoints by resolving a DNS name again and again, instead of listing them.'),
  /** A file holding the key sent upstream as `Authorization: Bearer …` (relative: from the config file). */
  api_key_file: z.string().min(1).optional().describe("A file holding the key sent upstream as Authorization: Bearer (relative: from the config file's directory)."),
  /** An environment variable holding that key. */
  api_key_env: z.string().min(1).optional().describe('The name of an environment variable holding the key sent upstream as Authorization: Bearer.'),
  /** never accepted: a key written in the config file (see api_key_file, api_key_env) */
  api_key: refused('Never accepted: a key is not written in the config file (use api_key_file or api_key_env).'),
  tls_ca_file: z
    .string()
    .min(1)
    .optional()
    .describe('A PEM file of the CA certificates that sign this pool\'s model servers\' TLS certificates (relative: from the config file); setting it makes the pool speak HTTPS, as do endpoints written https://HOST:PORT.'),
  /** Pass the client's own Authorization header on to this pool's servers (off: it is never forwarded). */
  forward_client_auth: z.boolean().default(false).describe("Pass the client's own Authorization header on to this pool's servers (off: it is never forwarded)."),
  metrics: z
    .strictObject({
      path: z.string().regex(/^\//, 'a path starts with "/"').default('/metrics').describe("The path of each endpoint's Prometheus metrics page."),
      interval: duration(DEFAULT_METRICS_INTERVAL).describe("How often each endpoint's metrics are scraped (a duration)."),
      stale_after: duration('1s').describe('Metrics older than this are not scored on (a duration).'),
    })
    .prefault({})
    .describe("How the endpoints' load signals are scraped."),
  /** The engines' batch size (vLLM --max-num-seqs), when known: the picker then counts the wait for a
   *  decode slot on a full endpoint, and saturation counts requests beyond the free seats as waiting.
   *  Engines do not export it in their metrics. */
  max_num_seqs: z.number().int().min(1).optional().describe('The engines\' batch size (vLLM --max-num-seqs) when known, so the picker counts the wait for a decode slot (a count of sequences; unset: 256 for saturation).'),
  media_tokens: z
    .number()
    .int()
    .min(0)
    .max(1_000_000)
    .default(MEDIA_PART_TOKENS)
    .describe(
      "What one image, audio clip, video or file in a request's messages weighs on the pick and on tokens_per_minute (tokens): the model's own count, e.g. 576 for a LLaVA-1.5 image, 256 for Gemma 3, about 1,200 for a 1280×720 image on Qwen2-VL.",
    ),
  policy: z.enum(POLICY_NAMES).default('scored').describe('How an endpoint is picked: scored (prefix affinity and load), round_robin, least_request or random.'),
  shadow_policy: z.enum(POLICY_NAMES).optional().describe('A second policy that picks silently beside the serving one, for comparison before a rollout.'),
  scoring,
  prefix: z
    .strictObject({
      block_chars: z.number().int().min(8).max(65536).default(64).describe('Prompt characters per prefix block hashed for affinity (characters).'),
      max_blocks: z.number().int().min(1).max(65536).default(2048).describe('The most blocks of a prompt the prefix index looks at (a count of blocks).'),
      capacity_blocks_per_endpoint: z.number().int().min(1).default(31250).describe("Blocks the index remembers per endpoint, an estimate of its KV cache's size (a count of blocks)."),
      embeddings: z
        .boolean()
        .default(false)
        .describe('Whether /v1/embeddings requests are routed on prefix affinity too (off: only on load, since an embedding pass reuses little cache).'),
    })
    .prefault({})
    .describe('The prefix-affinity index of the scored policy.'),
  max_ejection_percent: z
    .number()
    .min(0)
    .max(100)
    .default(50)
    .describe(
      'The most of the pool\'s endpoints, in percent, ejected at once after consecutive upstream errors (rounded down, but at least one); 0 turns ejection off.',
    ),
  retry_budget: z
    .strictObject({
      budget_percent: z
        .number()
        .min(0)
        .max(100)
        .default(20)
        .describe('Retries in progress at once, in percent of the pool\'s requests in progress (as Envoy\'s retry budget).'),
      min_retry_concurrency: z
        .number()
        .int()
        .min(0)
        .default(3)
        .describe('Retries in progress at once that are always allowed, however few requests are in progress (a count).'),
    })
    .prefault({})
    .describe('How many retries a pool may have in progress at once, so that retries cannot multiply the load on a failing pool.'),
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
       *  in flight. Where max_prefill_backlog can judge an endpoint, only requests beyond its seats or late
       *  beyond their expected prefill count: the backlog weighs a prefill queue. */
      queue_depth: z.number().min(0).default(5).describe('Waiting requests at which an endpoint counts as saturated (a count; 0 turns this test off).'),
      /** KV-cache use (0..1) at which an endpoint counts as saturated; 0 turns this test off. */
      kv_cache: z.number().min(0).max(1).default(0.8).describe('KV-cache use, from 0 to 1, at which an endpoint counts as saturated, except for a request whose prompt it holds at least half of in its cache while its free KV has room for the rest (0 turns this test off).'),
      retry_after: z
        .union(
          [
            z.literal('auto').describe("From the pool's recent answer times."),
            durationString.describe('A duration with its unit, e.g. "2s".'),
          ],
          { error: (iss) => durationProblem(iss.input) ?? undefined },
        )
        .default('auto')
        .transform((v, ctx): 'auto' | number => (v === 'auto' ? 'auto' : durationMs(v, ctx)))
        .describe('The Retry-After of the 429 sent while every endpoint is saturated: "auto" or a duration.'),
      /** Engines with many seats admit nearly everything into their batch, so their queue stays short
       *  while the time to a first token grows: this bounds the prefill work ahead (routing/saturation.ts). */
      max_prefill_backlog: duration('1500ms').describe(
        "The estimated prefill work queued ahead of a new request on an endpoint, in time at that endpoint's observed prefill speed, at which it counts as saturated; the request's own prefill counts on top, up to half of this, so a long prompt is refused sooner than a short one (a duration; 0s turns this test off).",
      ),
    })
    .prefault({})
    .describe('When every endpoint of the pool is saturated, new requests are answered 429 with Retry-After.'),
});

/** An origin as a browser sends it: scheme://host[:port], nothing after. */
const origin = z
  .string()
  .regex(/^https?:\/\/[^/\s?#]+$/, 'an origin is scheme://host[:port], e.g. https://app.example.com (no path, no trailing slash)')
  .describe('A browser origin, scheme://host[:port], e.g. https://app.example.com (no path, no trailing slash).');

/** A header name (an HTTP token). */
const headerName = z
  .string()
  .regex(/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/, 'not a header name')
  .describe('A request header name (an HTTP token), e.g. authorization.');

/** Cross-origin requests from browsers (src/gateway/cors.ts); absent: no CORS headers at all. */
const cors = z
  .strictObject({
    origins: z
      .union([
        z.literal('*').describe('Any origin.'),
        z.array(origin).min(1).describe('These origins only.'),
      ])
      .describe('The browser origins allowed to call the client port (e.g. ["https://app.example.com"]), or "*" for any.'),
    allow_headers: z
      .array(headerName)
      .optional()
      .describe('The request headers a preflight allows; when absent, the headers the browser asks for are allowed.'),
    max_age: duration('10m').describe('How long a browser may cache a preflight answer (Access-Control-Max-Age), a duration such as "10m".'),
  })
  .optional()
  .describe('Cross-origin (CORS) access from browsers: off when absent.');

const logging = z
  .strictObject({
    level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info').describe('The least severe level logged (silent: nothing).'),
    /** One structured line per request (model, pool, endpoint, status, timings). */
    access_log: z.boolean().default(true).describe('Write one structured line per request (model, pool, endpoint, status, timings).'),
    format: z
      .enum(['auto', 'json', 'pretty'])
      .default('auto')
      .describe('How log lines are written: auto (pretty on a terminal when pino-pretty is installed, JSON otherwise), json, or pretty (JSON when pino-pretty is not installed).'),
  })
  .prefault({})
  .describe('What the gateway logs, on stdout.');

/** An http(s) URL (the OTLP collector's traces endpoint). */
const httpUrl = z.string().refine((v) => {
  try {
    const u = new URL(v);
    return u.protocol === 'http:' || u.protocol === 'https:';
  } catch {
    return false;
  }
}, 'not an http:// or https:// URL');

const tracing = z
  .strictObject({
    otlp_endpoint: httpUrl
      .optional()
      .describe('The OTLP/HTTP traces URL (e.g. http://otel-collector:4318/v1/traces) that gets one span per request, as JSON; absent: no export (the default).'),
    sample_ratio: z
      .number()
      .min(0)
      .max(1)
      .default(1)
      .describe('The fraction (0 to 1) of new traces exported; a request that carries a traceparent follows its sampled flag.'),
    service_name: z.string().min(1).default('infergate').describe('The service.name resource attribute of the exported spans.'),
    export_interval: duration('5s').describe('How often the queued spans are sent to the collector, a duration with its unit.'),
    export_timeout: duration('10s').describe('How long one export may take before it is abandoned (its spans are dropped), a duration with its unit.'),
    max_queue_size: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .default(2048)
      .describe('The most spans (a count) held for export; past it new spans are dropped, never waited for.'),
  })
  .prefault({})
  .describe('OpenTelemetry export of one span per request (OTLP/HTTP), off unless otlp_endpoint is set.');

const responseAffinity = z
  .strictObject({
    max_entries: z
      .number()
      .int()
      .min(0)
      .default(65_536)
      .describe('How many Responses API answer ids the gateway remembers with the endpoint that served them, the least recently used forgotten first (a count; 0 turns the pinning off).'),
    ttl: duration('1h').describe('How long a remembered answer id pins its follow-ups to its endpoint, from the answer (a duration, e.g. "1h"; "0s": no expiry, only max_entries bounds the map).'),
  })
  .prefault({})
  .describe("Responses API conversations: a request whose previous_response_id names an answer this gateway relayed goes to the endpoint that stored it (vLLM keeps stored answers in that server's memory).");

export const configSchema = z
  .strictObject({
    listen: listen.prefault({}).describe('The client listener, where OpenAI-style requests arrive.'),
    logging,
    tracing,
    debug_headers: z.boolean().default(false).describe('Answers carry x-infergate-endpoint, naming the endpoint that served them.'),
    /** Peers (CIDRs) whose X-Forwarded-For / X-Forwarded-Proto are kept and appended to; others' are replaced. */
    trusted_proxies: z.array(cidr).default([]).describe("Peers whose X-Forwarded-For and X-Forwarded-Proto are kept and appended to; others' are replaced."),
    cors,
    admin: admin.prefault({}).describe('The admin listener: status page, /metrics, /healthz, /readyz and /debug/*.'),
    auth: auth.describe('Client authentication (required).'),
    limits,
    tenants,
    quota,
    cluster,
    response_affinity: responseAffinity,
    models: z.array(modelRoute).min(1, 'at least one model must be listed').describe('The model names clients may ask for and what serves each (at least one).'),
    pools: z.record(z.string().min(1), pool.describe('One pool of interchangeable model servers, by name.')).describe('The pools of model servers, by name.'),
  })
  // Cross-key checks run even when some keys are invalid (when: always), so one run reports every problem;
  // the value may then hold unparsed parts, hence the defensive reads.
  .superRefine(crossChecks, { when: () => true });

type RawPool = { endpoints?: unknown; discovery?: unknown; tls_ca_file?: unknown; api_key?: unknown; api_key_file?: unknown; api_key_env?: unknown; forward_client_auth?: unknown };
type RawModel = { name?: unknown; pool?: unknown; targets?: unknown; sticky?: unknown };

function crossChecks(cfg: unknown, ctx: z.RefinementCtx): void {
  const c = (cfg ?? {}) as {
    auth?: { mode?: unknown; allow_unauthenticated?: unknown; jwt?: unknown };
    quota?: { backend?: unknown; redis?: { url?: unknown; timeout?: unknown; lease_ttl?: unknown } };
    cluster?: { backend?: unknown; url?: unknown };
    models?: unknown;
    pools?: unknown;
  };
  if (c.quota?.backend === 'redis' && c.quota.redis?.url === undefined) {
    ctx.addIssue({ code: 'custom', path: ['quota', 'redis', 'url'], message: 'quota.backend "redis" needs quota.redis.url (e.g. redis://127.0.0.1:6379)' });
  }
  if (c.cluster?.backend === 'redis' && c.cluster.url === undefined) {
    ctx.addIssue({ code: 'custom', path: ['cluster', 'url'], message: 'cluster.backend "redis" needs cluster.url (e.g. redis://127.0.0.1:6379)' });
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
    if (Array.isArray(eps)) {
      const https = eps.some((e) => typeof e === 'string' && e.startsWith('https://')) || p?.tls_ca_file !== undefined;
      eps.forEach((e, i) => {
        if (https && typeof e === 'string' && e.startsWith('http://')) {
          ctx.addIssue({ code: 'custom', path: ['pools', name, 'endpoints', i], message: 'this pool speaks HTTPS (an endpoint written https:// or tls_ca_file): write its endpoints HOST:PORT or https://HOST:PORT' });
        }
      });
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

/**
 * The JSON Schema (draft 2020-12) of the file as a user writes it: what `infergate schema` prints and
 * config/gateway.schema.json holds, for editors (yaml-language-server) and CI linting. Every key carries its
 * description, to which the default, when it is a plain value, is added here (so the two never disagree);
 * it compiles under Ajv's strict mode (test/config/schema.test.ts).
 */
export function configJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(configSchema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  withDefaultsDescribed(schema);
  const { $schema, ...rest } = schema;
  return {
    $schema,
    title: 'infergate configuration',
    description: 'The YAML file `infergate serve --config` reads; `infergate check-config FILE` validates one with the same rules and more.',
    ...rest,
  };
}

/** Appends "Default: …" to each description of a node whose default is not an object (objects' defaults are their keys'). */
function withDefaultsDescribed(node: unknown): void {
  if (node === null || typeof node !== 'object') return;
  const n = node as Record<string, unknown>;
  const d = n.default;
  if (typeof n.description === 'string' && d !== undefined && (typeof d !== 'object' || Array.isArray(d))) {
    n.description = `${n.description} Default: ${JSON.stringify(d)}.`;
  }
  for (const sub of subschemas(n)) withDefaultsDescribed(sub);
}

/** The schemas a JSON Schema node holds (of the keywords zod emits), one level down. */
function subschemas(n: Record<string, unknown>): unknown[] {
  const out: unknown[] = [];
  for (const k of ['properties', 'patternProperties', '$defs']) if (n[k] && typeof n[k] === 'object') out.push(...Object.values(n[k] as object));
  for (const k of ['additionalProperties', 'items', 'propertyNames', 'not', 'contains']) if (n[k] && typeof n[k] === 'object') out.push(n[k]);
  for (const k of ['anyOf', 'oneOf', 'allOf', 'prefixItems']) if (Array.isArray(n[k])) out.push(...(n[k] as unknown[]));
  return out;
}
export type TenantsConfig = Config['tenants'];
export type QuotaConfig = Config['quota'];
export type ClusterConfig = Config['cluster'];
