// A real OpenID Provider for the sign-in tests: oidc-provider (a certified implementation) on
// 127.0.0.1, with one confidential client for the registry and its development login and
// consent pages, where any login name signs in as that person.
//
//   node provider.mjs REDIRECT_URI [CLIENT_ID] [CLIENT_SECRET]
//
// Prints `ready http://127.0.0.1:PORT` (the issuer) once it listens; stops on SIGTERM.
import http from "node:http";
import Provider from "oidc-provider";

const [redirectUri, clientId = "registry", clientSecret = "registry-secret"] = process.argv.slice(2);
if (!redirectUri) {
  console.error("usage: node provider.mjs REDIRECT_URI [CLIENT_ID] [CLIENT_SECRET]");
  process.exit(2);
}

const server = http.createServer();
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: clientId,
    client_secret: clientSecret,
    redirect_uris: redirectUri.split(","),
    grant_types: ["authorization_code"],
    response_types: ["code"],
  }],
  // Any login name is a person: its subject, username and address derive from it.
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        return { sub: id, preferred_username: id, name: `Person ${id}`, email: `${id}@corp.example`, email_verified: true };
      },
    };
  },
  claims: { openid: ["sub"], profile: ["preferred_username", "name"], email: ["email", "email_verified"] },
  // Scope claims in the ID token itself, which is all the registry reads.
  conformIdTokenClaims: false,
  cookies: { keys: ["test-cookie-key"] },
  features: { devInteractions: { enabled: true } },
  pkce: { required: () => true },
});
provider.proxy = false;
server.on("request", provider.callback());
console.log(`ready ${issuer}`);
process.on("SIGTERM", () => server.close(() => process.exit(0)));
