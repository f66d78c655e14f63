// A real OpenID provider for tollgate's JWKS tests: oauth2-mock-server's issuer and service
// (discovery, JWKS, tokens) on 127.0.0.1, driven line by line on stdin:
//   gen            -> a new RS256 signing key; answers its kid
//   token KID SUB  -> a token signed by KID with sub SUB and aud "api"; answers the token
//   remove KID     -> KID is no longer published in the JWKS; answers "ok"
//   hits           -> how many JWKS requests were served; answers the number
//   jwk KID        -> the public JWK of KID as JSON
// It prints "ready <port>" once listening.
import http from "node:http";
import readline from "node:readline";
import { OAuth2Issuer, OAuth2Service } from "oauth2-mock-server";

const issuer = new OAuth2Issuer();
const service = new OAuth2Service(issuer);
const removed = new Set();
let hits = 0;

const server = http.createServer((req, res) => {
  if (req.url === "/jwks") {
    hits += 1;
    const keys = issuer.keys.toJSON().filter((k) => !removed.has(k.kid));
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ keys }));
    return;
  }
  service.requestHandler(req, res);
});

server.listen(0, "127.0.0.1", () => {
  const port = server.address().port;
  issuer.url = `http://127.0.0.1:${port}`;
  console.log(`ready ${port}`);
});

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", async (line) => {
  const [cmd, a, b] = line.trim().split(/\s+/);
  try {
    if (cmd === "gen") {
      const key = await issuer.keys.generate("RS256");
      console.log(key.kid);
    } else if (cmd === "token") {
      const token = await issuer.buildToken({
        kid: a,
        scopesOrTransform: (_header, payload) => {
          payload.sub = b;
          payload.aud = "api";
        },
      });
      console.log(token);
    } else if (cmd === "remove") {
      removed.add(a);
      console.log("ok");
    } else if (cmd === "hits") {
      console.log(String(hits));
    } else if (cmd === "jwk") {
      console.log(JSON.stringify(issuer.keys.toJSON().find((k) => k.kid === a)));
    } else {
      console.log(`error unknown command ${cmd}`);
    }
  } catch (e) {
    console.log(`error ${e.message}`);
  }
});
rl.on("close", () => process.exit(0));
