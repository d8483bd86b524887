// A real OpenID Connect provider on loopback for the sign-in tests (the `oidc-provider` package):
// its people with their groups, the console's client, other clients, and CI jobs that get their own
// signed tokens with client_credentials. Started once per test session by tests/oidc_provider.py.
//
//   node provider.mjs PORT OTHER_PORT
//
// PORT serves the provider the service trusts; OTHER_PORT an unrelated one (a wrong issuer).
// Two test-only routes stand in for what an identity provider's administrators do:
//   POST /test/rotate           signs from now on with a new key (the old one is still published)
//   PUT  /test/accounts/:id     changes a person's email, groups or token_ttl (JSON body)
//   POST /test/redirect-uris    lets the clients redirect to one more address (JSON {"uri": ...})
import http from 'node:http';
import { generateKeyPair, exportJWK } from 'jose';
import Provider from 'oidc-provider';

const [port, otherPort] = process.argv.slice(2).map(Number);

const accounts = {
  dana: { email: 'dana@acme.test', email_verified: true, name: 'Dana Admin', groups: ['orgdeck-admins'] },
  lee: { email: 'lee@acme.test', email_verified: true, name: 'Lee Operator', groups: ['orgdeck-operators'] },
  sam: { email: 'sam@acme.test', email_verified: true, name: 'Sam Viewer', groups: [] },
  newcomer: { email: 'newcomer@acme.test', email_verified: true, name: 'New Comer', groups: [] },
  outsider: { email: 'outsider@elsewhere.test', email_verified: true, name: 'Out Sider', groups: [] },
  unverified: { email: 'unverified@acme.test', email_verified: false, name: 'Un Verified', groups: [] },
};

// What a CI platform puts in its jobs' tokens, per job (client).
const jobClaims = {
  'ci-main': { repository: 'acme/agents', ref: 'refs/heads/main' },
  'ci-fork': { repository: 'mallory/agents', ref: 'refs/heads/main' },
};

const redirectUris = (process.env.OIDC_REDIRECT_URIS || 'http://127.0.0.1/callback').split(',');

const clients = [
  {
    client_id: 'orgdeck-console',
    client_secret: 'console-secret',
    redirect_uris: redirectUris,
    grant_types: ['authorization_code'],
    response_types: ['code'],
  },
  {
    client_id: 'other-app',
    client_secret: 'other-secret',
    redirect_uris: redirectUris,
    grant_types: ['authorization_code'],
    response_types: ['code'],
  },
  ...Object.keys(jobClaims).map((id) => ({
    client_id: id,
    client_secret: `${id}-secret`,
    redirect_uris: [],
    grant_types: ['client_credentials'],
    response_types: [],
  })),
];

async function signingKey() {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = await exportJWK(privateKey);
  return { ...jwk, kid: `k-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`, alg: 'RS256', use: 'sig' };
}

function configuration(keys) {
  return {
    clients,
    jwks: { keys },
    findAccount: async (ctx, id) => {
      const account = accounts[id];
      if (!account) return undefined;
      const { token_ttl: _ttl, ...claims } = account;
      return { accountId: id, claims: async () => ({ sub: id, ...claims }) };
    },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'] },
    scopes: ['openid', 'email', 'profile', 'groups'],
    // Every claim in the ID token itself, as the service reads it from there.
    conformIdTokenClaims: false,
    ttl: {
      // A person's `token_ttl` (set with PUT /test/accounts/:id): an expired token without waiting long.
      IdToken: (ctx) => accounts[ctx.oidc.account?.accountId]?.token_ttl || 3600,
      AccessToken: 600,
    },
    features: {
      devInteractions: { enabled: true },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // Only the CI jobs ask for an access token; people sign in for an ID token.
        defaultResource: (ctx) => (ctx.oidc.client.grantTypes.includes('client_credentials') ? 'urn:orgdeck:ci' : undefined),
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resource) => ({
          audience: resource,
          accessTokenFormat: 'jwt',
          accessTokenTTL: 600,
          scope: 'deploy',
        }),
      },
    },
    extraTokenClaims: (ctx, token) => jobClaims[token.clientId] || undefined,
    // Consent is implied: these are the organization's own applications.
    loadExistingGrant: async (ctx) => {
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
      grant.addOIDCScope('openid email profile groups');
      await grant.save();
      return grant;
    },
  };
}

async function serve(listenPort, withTestRoutes) {
  const issuer = `http://127.0.0.1:${listenPort}`;
  const keys = [await signingKey()];
  let provider = new Provider(issuer, configuration(keys));
  const server = http.createServer(async (req, res) => {
    if (withTestRoutes && req.method === 'POST' && req.url === '/test/rotate') {
      keys.unshift(await signingKey());
      provider = new Provider(issuer, configuration(keys));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kid: keys[0].kid }));
      return;
    }
    if (withTestRoutes && req.method === 'POST' && req.url === '/test/redirect-uris') {
      let body = '';
      for await (const chunk of req) body += chunk;
      redirectUris.push(JSON.parse(body).uri);
      provider = new Provider(issuer, configuration(keys));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ redirect_uris: redirectUris }));
      return;
    }
    const account = withTestRoutes && req.method === 'PUT' && req.url.match(/^\/test\/accounts\/(\w+)$/);
    if (account) {
      let body = '';
      for await (const chunk of req) body += chunk;
      Object.assign(accounts[account[1]], JSON.parse(body));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(accounts[account[1]]));
      return;
    }
    provider.callback()(req, res);
  });
  await new Promise((resolve) => server.listen(listenPort, '127.0.0.1', resolve));
}

await serve(port, true);
await serve(otherPort, false);
console.log('ready');
