/**
 * The TLS certificate and key files checked with node:crypto before uWS gets them. uWS 20.30 says only
 * "App construction failed" whatever is wrong (a missing file, a key that is not the certificate's, a
 * passphrase-protected key…), so each problem is named here with its file.
 */
import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';

/** Throws an Error whose message names the file and what is wrong with it; returns when both are usable. */
export function checkTlsFiles(certFile: string, keyFile: string): void {
  const certText = readPem('listen.tls.cert', 'certificate', certFile);
  const keyText = readPem('listen.tls.key', 'key', keyFile);
  if (!/-----BEGIN CERTIFICATE-----/.test(certText)) {
    throw new Error(`listen.tls.cert: ${certFile} is not a PEM certificate (no "-----BEGIN CERTIFICATE-----" line)`);
  }
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(certText);
  } catch (err) {
    throw new Error(`listen.tls.cert: ${certFile} holds no readable certificate (${reason(err)})`);
  }
  if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(keyText)) {
    throw new Error(`listen.tls.key: ${keyFile} is not a PEM private key (no "-----BEGIN … PRIVATE KEY-----" line)`);
  }
  if (/-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: *4, *ENCRYPTED/.test(keyText)) {
    throw new Error(`listen.tls.key: ${keyFile} is encrypted with a passphrase; infergate needs an unencrypted key (e.g. openssl pkey -in KEY -out PLAIN)`);
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(keyText);
  } catch (err) {
    throw new Error(`listen.tls.key: ${keyFile} holds no readable private key (${reason(err)})`);
  }
  if (!cert.checkPrivateKey(key)) {
    throw new Error(`listen.tls: the key in ${keyFile} does not belong to the certificate in ${certFile}`);
  }
}

function readPem(key: string, what: string, file: string): string {
  try {
    if (statSync(file).isDirectory()) throw Object.assign(new Error('is a directory'), { code: 'EISDIR' });
    return readFileSync(file, 'latin1');
  } catch (err) {
    const code = (err as { code?: string }).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'a directory, not a file' : reason(err);
    throw new Error(`${key}: cannot read the ${what} file ${file}: ${why}`);
  }
}

function reason(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** When the certificate in `certFile` stops being valid, or undefined when it cannot be read. */
export function certificateNotAfter(certFile: string): Date | undefined {
  try {
    return new Date(new X509Certificate(readFileSync(certFile)).validTo);
  } catch {
    return undefined;
  }
}
