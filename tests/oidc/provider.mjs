// An OpenID Provider on loopback for sluice's user-token tests: panva's oidc-provider (an
// OpenID Certified implementation), its signing keys kept in a directory so that a restart
// with another list is a key rotation. Tokens are JWT access tokens of the client credentials
// grant (RFC 9068): `sub` is the client, `aud` the resource asked for.
//
//   node provider.mjs PORT KEYS_DIR KEY_IDS CLIENTS
//
// KEY_IDS: comma-separated, the first signs; each id's prefix names its type (rsa-…: RS256,
// ec-…: ES256, ed-…: EdDSA), and a key is made the first time its id is named. CLIENTS:
// comma-separated client ids (secret: "secret-<id>"); the client "shortlived" gets tokens
// that live 1 s.
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Provider from 'oidc-provider';

const [port, dir, ids, clients] = process.argv.slice(2);
mkdirSync(dir, { recursive: true });

const ALGS = { rsa: 'RS256', ec: 'ES256', ed: 'EdDSA' };
function key(kid) {
  const file = join(dir, `${kid}.json`);
  if (!existsSync(file)) {
    const type = kid.split('-')[0];
    const pair = type === 'rsa' ? generateKeyPairSync('rsa', { modulusLength: 2048 })
      : type === 'ec' ? generateKeyPairSync('ec', { namedCurve: 'P-256' })
        : generateKeyPairSync('ed25519');
    writeFileSync(file, JSON.stringify({ ...pair.privateKey.export({ format: 'jwk' }), kid, alg: ALGS[type], use: 'sig' }));
  }
  return JSON.parse(readFileSync(file));
}
const keys = ids.split(',').map(key);
const signing = keys[0].alg;

const provider = new Provider(`http://127.0.0.1:${port}`, {
  jwks: { keys },
  clients: clients.split(',').map((id) => ({
    client_id: id, client_secret: `secret-${id}`, grant_types: ['client_credentials'],
    redirect_uris: [], response_types: [], id_token_signed_response_alg: signing,
  })),
  features: {
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => 'https://sluice.test',
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource, client) => ({
        audience: resource,
        scope: '',
        accessTokenFormat: 'jwt',
        accessTokenTTL: client.clientId === 'shortlived' ? 1 : 600,
        jwt: { sign: { alg: signing } },
      }),
    },
  },
  enabledJWA: { requestObjectSigningAlgValues: ['RS256'], idTokenSigningAlgValues: [signing] },
});
provider.listen(Number(port), '127.0.0.1');
console.log(`oidc-provider on http://127.0.0.1:${port}, signing with ${keys[0].kid} (${signing})`);
