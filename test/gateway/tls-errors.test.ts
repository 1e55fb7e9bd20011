// Bad TLS files stop `infergate serve` (exit 1, nothing listening) with a message that names the file and
// what is wrong with it; uWS alone says only "App construction failed" for all of these. Files that cannot
// be read are found with the rest of the config's checks (with the YAML line); their contents by the front.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { gatewayConfig, runCli, tempDir } from '../helpers/process.js';

const dir = tempDir();
const cert = join(dir, 'tls.crt');
const key = join(dir, 'tls.key');
const otherCert = join(dir, 'other.crt');
const otherKey = join(dir, 'other.key');
const encryptedKey = join(dir, 'encrypted.key');
const notPem = join(dir, 'notes.txt');
const aDirectory = join(dir, 'certs.d');
const openssl = (args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', key, '-out', cert, '-days', '1']);
openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=other', '-keyout', otherKey, '-out', otherCert, '-days', '1']);
openssl(['pkey', '-in', key, '-out', encryptedKey, '-aes256', '-passout', 'pass:secret']);
writeFileSync(notPem, 'this is not a certificate\n');
mkdirSync(aDirectory);

const cases: Array<[string, { cert: string; key: string }, RegExp]> = [
  ['a missing certificate file', { cert: join(dir, 'missing.crt'), key }, /:\d+: listen\.tls\.cert: \S*missing\.crt: does not exist/],
  ['a missing key file', { cert, key: join(dir, 'missing.key') }, /:\d+: listen\.tls\.key: \S*missing\.key: does not exist/],
  ['an unreadable certificate path (a directory)', { cert: aDirectory, key }, /:\d+: listen\.tls\.cert: \S*certs\.d: is a directory, not a file/],
  ['a certificate file that is not PEM', { cert: notPem, key }, /listen\.tls\.cert: \S*notes\.txt is not a PEM certificate/],
  ['a key file that is not PEM', { cert, key: notPem }, /listen\.tls\.key: \S*notes\.txt is not a PEM private key/],
  ['a key that is not the certificate\'s', { cert, key: otherKey }, /listen\.tls: the key in \S*other\.key does not belong to the certificate in \S*tls\.crt/],
  ['a passphrase-protected key', { cert, key: encryptedKey }, /listen\.tls\.key: \S*encrypted\.key is encrypted with a passphrase/],
];

for (const [name, tls, message] of cases) {
  t.test(name, async (t) => {
    const file = join(dir, `${name.replace(/\W+/g, '-')}.yaml`);
    writeFileSync(file, stringify(gatewayConfig(['127.0.0.1:1'], { over: { listen: { host: '127.0.0.1', port: 0, tls } } })));
    const p = runCli(['serve', '--config', file]);
    t.equal(await p.exited(), 1, 'exit status 1');
    t.match(p.stderr(), message);
    t.notMatch(p.stderr(), /App construction failed/);
    t.notMatch(p.stdout(), /listening/, 'nothing listens');
  });
}
