// A real OpenID provider for tollgate's JWKS tests: oauth2-mock-server's issuer and service
// (discovery, JWKS, tokens) on 127.0.0.1, driven line by line on stdin:
//   gen            -> a new RS256 signing key; answers its kid
//   token KID SUB  -> a token signed by KID with sub SUB and aud "api"; answers the token
//   remove KID     -> KID is no longer published in the JWKS; answers "ok"
//   hits           -> how many JWKS requests were served; answers the number
//   jwk KID        -> the public JWK of KID as JSON
//   serve MODE     -> the JWKS answer from now on: `keys` (default), `garbage` (not JSON),
//                     `big` (2 MiB of JSON), `redirect` (302 to /jwks2 under the other name of
//                     this server, `localhost` or `127.0.0.1`: another host) or `redirect-same`
//                     (302 to /jwks2, same host)
//   hits2          -> how many requests /jwks2 (the redirect target, serving the keys) served
// With TLS_CERT and TLS_KEY (PEM files) it serves HTTPS as https://localhost:<port>.
// It prints "ready <port>" once listening.
import fs from "node:fs";
import http from "node:http";
import https from "node:https";
import readline from "node:readline";
import { OAuth2Issuer, OAuth2Service } from "oauth2-mock-server";

const issuer = new OAuth2Issuer();
const service = new OAuth2Service(issuer);
const removed = new Set();
let hits = 0;
let hits2 = 0;
let mode = "keys";
const tls = process.env.TLS_CERT && process.env.TLS_KEY;

const handler = (req, res) => {
  if (req.url === "/jwks") {
    hits += 1;
    if (mode === "garbage") {
      res.writeHead(200, { "Content-Type": "text/html" });
      res.end("<html>maintenance</html>");
      return;
    }
    if (mode === "big") {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ keys: [], pad: "x".repeat(2 * 1024 * 1024) }));
      return;
    }
    if (mode === "redirect" || mode === "redirect-same") {
      const port = server.address().port;
      // Another host name for the same server: localhost <-> 127.0.0.1.
      const other = tls ? `https://127.0.0.1:${port}` : `http://localhost:${port}`;
      const to = mode === "redirect" ? `${other}/jwks2` : "/jwks2";
      res.writeHead(302, { Location: to });
      res.end();
      return;
    }
  }
  if (req.url === "/jwks" || req.url === "/jwks2") {
    if (req.url === "/jwks2") hits2 += 1;
    const keys = issuer.keys.toJSON().filter((k) => !removed.has(k.kid));
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ keys }));
    return;
  }
  service.requestHandler(req, res);
};
const server = tls
  ? https.createServer(
      { cert: fs.readFileSync(process.env.TLS_CERT), key: fs.readFileSync(process.env.TLS_KEY) },
      handler,
    )
  : http.createServer(handler);

server.listen(0, "127.0.0.1", () => {
  const port = server.address().port;
  issuer.url = tls ? `https://localhost:${port}` : `http://127.0.0.1:${port}`;
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
    } else if (cmd === "serve") {
      mode = a;
      console.log("ok");
    } else if (cmd === "hits2") {
      console.log(String(hits2));
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
