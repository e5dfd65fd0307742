// node-oidc-provider (a certified OpenID Connect provider) for the dashboard's single
// sign-on tests: one confidential client that must use PKCE (S256), and a few users
// whose `groups` claim the tests map to Parley's roles. Its own sign-in page takes a
// user's name and password; it prints `issuer <url>` once it listens.
//
// Settings come from the environment: OIDC_CLIENT_ID, OIDC_CLIENT_SECRET and
// OIDC_REDIRECT_URI (Parley's /admin/sso/callback).
import http from 'node:http';
import crypto from 'node:crypto';

import Provider from 'oidc-provider';

const USERS = {
  ada: { password: 'ada-password', groups: ['parley-admins'], email: 'ada@example.test' },
  otto: { password: 'otto-password', groups: ['parley-ops', 'staff'], email: 'otto@example.test' },
  vic: { password: 'vic-password', groups: ['parley-viewers'], email: 'vic@example.test' },
  eve: { password: 'eve-password', groups: ['marketing'], email: 'eve@example.test' },
};

function account(id) {
  const user = USERS[id];
  if (!user) return undefined;
  return {
    accountId: id,
    async claims() {
      return { sub: id, preferred_username: id, email: user.email, groups: user.groups };
    },
  };
}

const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const signing = { ...privateKey.export({ format: 'jwk' }), kid: 'test-key-1', use: 'sig', alg: 'RS256' };

const server = http.createServer();
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  // Another site than Parley's 127.0.0.1, so the browser treats the provider's answer
  // as a navigation from another site, as it does in production.
  const issuer = `http://localhost:${port}`;
  const provider = new Provider(issuer, {
    clients: [{
      client_id: process.env.OIDC_CLIENT_ID,
      client_secret: process.env.OIDC_CLIENT_SECRET,
      redirect_uris: [process.env.OIDC_REDIRECT_URI],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    }],
    pkce: { required: () => true },
    jwks: { keys: [signing] },
    cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
    claims: {
      openid: ['sub'],
      profile: ['preferred_username'],
      email: ['email'],
      groups: ['groups'],
    },
    conformIdTokenClaims: false,
    findAccount: (ctx, id) => account(id),
  });
  // The development sign-in page takes any password; this one checks it.
  provider.use(async (ctx, next) => {
    if (ctx.method === 'POST' && /^\/interaction\/[^/]+$/.test(ctx.path)) {
      const body = await new Promise((resolve) => {
        let data = '';
        ctx.req.on('data', (chunk) => { data += chunk; });
        ctx.req.on('end', () => resolve(new URLSearchParams(data)));
      });
      if (body.get('prompt') === 'login') {
        const user = USERS[body.get('login')];
        if (!user || user.password !== body.get('password')) {
          ctx.status = 401;
          ctx.type = 'html';
          ctx.body = '<p>Wrong name or password.</p>';
          return;
        }
      }
      ctx.req.body = Object.fromEntries(body);  // read once; the submit action takes it
    }
    await next();
  });
  server.on('request', provider.callback());
  console.log(`issuer ${issuer}`);
});
