/** `infergate token`: mints a development JWT that a gateway with the matching config accepts. */
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { parseDuration } from '../common/units.js';
import { loadConfigOrReport } from '../config/load.js';
import { PRIORITIES } from './claims.js';
import { ensureDevKey, mintToken, readSigningKey, DEV_KEY_DIR } from './dev-keys.js';

const DEMO_CONFIG = fileURLToPath(new URL('../../config/demo.yaml', import.meta.url));

export const TOKEN_HELP = `Usage: infergate token --sub S [--tenant T] [--models a,b|'*'] [--ttl 1h] [--priority P]
                       [--config FILE] [--key FILE]

Prints a development JWT (ES256) for a gateway whose auth.jwt trusts the dev key: config/demo.yaml does
(its jwks_file is config/dev-keys/jwks.json). The dev key pair is made in ${DEV_KEY_DIR}
on first use (git-ignored; anyone who can read it can mint tokens: for local use only).
  --sub S          the token's subject (required)
  --tenant T       the tenant, under the config's tenant_claim (default: the subject)
  --models LIST    models the token may use: names or patterns with * (llama-*), comma-separated, or '*'
                   (default '*')
  --ttl D          lifetime: 30s, 15m, 1h… (default 1h)
  --priority P     critical | standard | sheddable, under the config's priority_claim
  --config FILE    take issuer, audience and claim names from this config (default config/demo.yaml)
  --key FILE       sign with this private JWK instead of the dev key
`;

export async function tokenMain(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      sub: { type: 'string' },
      tenant: { type: 'string' },
      models: { type: 'string' },
      ttl: { type: 'string' },
      priority: { type: 'string' },
      config: { type: 'string', short: 'c' },
      key: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(TOKEN_HELP);
    return 0;
  }
  const usage = (msg: string): number => {
    process.stderr.write(`infergate token: ${msg}\n\n${TOKEN_HELP}`);
    return 2;
  };
  if (!values.sub) return usage('--sub is required');
  const ttlMs = parseDuration(values.ttl ?? '1h');
  if (ttlMs === null || ttlMs < 1000) return usage(`--ttl must be a duration of a second or more (e.g. 15m, 1h), not "${values.ttl}"`);
  if (values.priority !== undefined && !(PRIORITIES as readonly string[]).includes(values.priority)) {
    return usage(`--priority must be one of ${PRIORITIES.join(', ')}`);
  }
  const file = values.config ?? DEMO_CONFIG;
  // the dev key pair first: a config that names its key set (config/demo.yaml) is checked for that file
  await ensureDevKey();
  const config = loadConfigOrReport(file);
  if (!config) return 1;
  const jwt = config.auth.jwt;
  if (config.auth.mode !== 'jwt' || !jwt) {
    process.stderr.write(`infergate token: ${file} has auth.mode "${config.auth.mode}": its gateway takes no tokens\n`);
    return 1;
  }
  const tenant = values.tenant ?? values.sub;
  if (jwt.tenant_claim === 'sub' && tenant !== values.sub) {
    return usage(`this config reads the tenant from "sub": --tenant must equal --sub (or be left out)`);
  }
  const models = (values.models ?? '*').split(',').map((m) => m.trim()).filter((m) => m.length > 0);
  const extra: Record<string, unknown> = { [jwt.models_claim]: models };
  if (jwt.tenant_claim !== 'sub') extra[jwt.tenant_claim] = tenant;
  if (values.priority !== undefined) extra[jwt.priority_claim] = values.priority;
  const key = values.key !== undefined ? readSigningKey(values.key) : await ensureDevKey();
  if (!jwt.algorithms.includes(key.alg as never)) {
    process.stderr.write(`infergate token: the key is for ${key.alg}, which ${file}'s auth.jwt.algorithms does not list\n`);
    return 1;
  }
  const token = await mintToken(key, { sub: values.sub, issuer: jwt.issuer, audience: jwt.audience, ttl: Math.floor(ttlMs / 1000), extra });
  process.stdout.write(`${token}\n`);
  return 0;
}
