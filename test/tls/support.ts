/** Certificates made for a test (openssl, as the other TLS tests), and what a TLS client sees. */
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from 'node:tls';

export interface Pair {
  cert: string;
  key: string;
  /** the certificate's PEM text (a client's `ca` for this self-signed certificate) */
  pem: string;
  fingerprint: string;
}

/** A self-signed certificate for `cn`, valid for 127.0.0.1 and localhost, written as NAME.crt / NAME.key in `dir`. */
export function makePair(dir: string, name: string, cn: string, extra: string[] = []): Pair {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${cn}`,
    '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost', '-keyout', key, '-out', cert, '-days', '1', ...extra,
  ], { stdio: 'ignore' });
  const pem = readFileSync(cert, 'latin1');
  return { cert, key, pem, fingerprint: new X509Certificate(pem).fingerprint256 };
}

/** A self-signed certificate that expired in 2020 (openssl req cannot date one in the past; openssl ca can). */
export function makeExpiredPair(dir: string, name: string): { cert: string; key: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  const cnf = join(dir, `${name}.ca.cnf`);
  writeFileSync(join(dir, `${name}.index`), '');
  writeFileSync(join(dir, `${name}.serial`), '01\n');
  writeFileSync(cnf, `[ca]\ndefault_ca=d\n[d]\ndatabase=${name}.index\nnew_certs_dir=.\nserial=${name}.serial\ndefault_md=sha256\npolicy=p\n[p]\ncommonName=supplied\n`);
  execFileSync('openssl', ['req', '-new', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=expired.test', '-keyout', key, '-out', csr], { stdio: 'ignore' });
  execFileSync('openssl', ['ca', '-batch', '-notext', '-config', cnf, '-selfsign', '-keyfile', key, '-in', csr, '-out', cert, '-startdate', '20200101000000Z', '-enddate', '20200102000000Z'], { stdio: 'ignore', cwd: dir });
  return { cert, key };
}

/** Puts `from`'s files in place of `to`'s as a deployment tool does: written aside, then renamed over. */
export function replacePair(from: { cert: string; key: string }, to: { cert: string; key: string }): void {
  writeFileSync(`${to.key}.new`, readFileSync(from.key));
  writeFileSync(`${to.cert}.new`, readFileSync(from.cert));
  renameSync(`${to.key}.new`, to.key);
  renameSync(`${to.cert}.new`, to.cert);
}

/** The fingerprint of the certificate a new connection to `url` (https://HOST:PORT) is served. */
export function servedFingerprint(url: string): Promise<string> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const s = connect({ host: u.hostname, port: Number(u.port), rejectUnauthorized: false }, () => {
      const fp = s.getPeerCertificate().fingerprint256;
      s.end();
      resolve(fp);
    });
    s.setTimeout(5_000, () => s.destroy(new Error('TLS handshake timed out')));
    s.on('error', reject);
  });
}
