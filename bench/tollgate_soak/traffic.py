"""The soak's mixed load: HTTP/1.1 keep-alive workers, h2c streams, client aborts, WebSocket
sessions and gRPC calls (`sessions`), from 20 000+ client addresses (X-Forwarded-For, the gateways
trust 127.0.0.1) and 200 tenants.

Paced by tickets (`rate` per second); a ticket finding every worker busy is shed by the load
generator (counted, never sent). Every request sent gets an answer within `DEADLINE_S` or is
lost; a transport error (a killed gateway) is retried once on another gateway, as a load
balancer would. Results are tallied as they come (`Stats`); nothing per request is kept.
"""

import asyncio
import random

from . import account, plan, sessions
from .clients import H2Conn, TransportError, read_response, request_bytes

DEADLINE_S = 30.0
ADDRESSES = 24_000
H1_WORKERS = 12
MAX_H2_STREAMS = 24
MAX_ABORTS = 8
MAX_WS = 16
MAX_GRPC = 16
ABORT_AFTER_S = 0.1
SLOW_MS = 1500
# (kind, weight): valid key over HTTP/1.1, the same over h2c, an unknown key, anonymous,
# a client that gives up on a slow request, a WebSocket session, a unary gRPC call (both with a
# valid key).
MIX = (("key", 55), ("h2", 15), ("badkey", 10), ("anon", 8), ("abort", 5), ("ws", 3),
       ("grpc", 4))


def address(n):
    """The n-th client address of the pool (10.0.0.0/8, `ADDRESSES` of them)."""
    i = (n * 7919) % ADDRESSES
    return f"10.{i >> 16}.{(i >> 8) & 255}.{i & 255}"


class Stats:
    """Everything the load saw, tallied."""

    def __init__(self):
        self.tenants = {}  # tenant -> account.TenantTally
        self.anon = {}  # address -> account.TenantTally
        self.by_kind = {}  # kind -> {class: n}
        self.events = []  # (t, what, gateway index, detail): answers and errors to judge
        self.lost = []  # (t, kind, detail)
        self.sent = 0
        self.shed = 0
        self.retried = 0
        self.aborted = 0
        self.addresses = set()
        self.ws = {k: 0 for k in account.WS_COUNTERS}
        self.grpc = {}  # class (account.classify_grpc) -> calls
        self.grpc_unavailable_at = []  # times of the account.GRPC_UNAVAILABLE answers

    def count(self, kind, cls):
        d = self.by_kind.setdefault(kind, {})
        d[cls] = d.get(cls, 0) + 1


class Load:
    """The load against `gateways` (fleet.Gateway objects; `up` says which a balancer offers)."""

    def __init__(self, gateways, rate, clock, seed=1):
        self.gateways = gateways
        self.rate = rate
        self.clock = clock
        self.stats = Stats()
        self.rng = random.Random(seed)
        self.h1_queue = asyncio.Queue(maxsize=H1_WORKERS * 2)
        self.h2 = {}
        self.h2_sem = asyncio.Semaphore(MAX_H2_STREAMS)
        self.abort_sem = asyncio.Semaphore(MAX_ABORTS)
        self.ws_sem = asyncio.Semaphore(MAX_WS)
        self.grpc_sem = asyncio.Semaphore(MAX_GRPC)
        self.grpc = None  # grpcload.Channels, made in `run` (grpc.aio needs the running loop)
        self.generation = 0  # the config generation last reloaded (for the rotating keys)
        self._n = 0
        self._rr = 0
        self._tasks = set()
        self._stop = asyncio.Event()

    # ---- choosing ---------------------------------------------------------------------------

    def pick_gateway(self, avoid=None):
        up = [g for g in self.gateways if g.up and g is not avoid] or [
            g for g in self.gateways if g is not avoid
        ]
        self._rr += 1
        return up[self._rr % len(up)]

    def next_request(self):
        """(kind, path, key, tenant or None, xff) of the next ticket."""
        self._n += 1
        xff = address(self._n)
        self.stats.addresses.add(xff)
        total = sum(w for _, w in MIX)
        r = self.rng.uniform(0, total)
        for kind, w in MIX:
            r -= w
            if r <= 0:
                break
        i = self.rng.randrange(plan.TENANTS)
        tenant, key = plan.tenant_name(i), plan.api_key(i)
        if kind == "badkey":
            return kind, "/api/x", f"bad-{self._n}", None, xff
        if kind == "anon":
            return kind, "/open/x", None, None, xff
        if kind == "abort":
            return kind, f"/api/slow?delay_ms={SLOW_MS}", key, tenant, xff
        if kind == "ws":
            return kind, f"/ws/chat?n={self._n}", key, tenant, xff
        if kind == "grpc":
            return kind, sessions.GRPC_METHOD, key, tenant, xff
        return kind, f"/api/x?n={self._n}", key, tenant, xff

    # ---- recording --------------------------------------------------------------------------

    def tally(self, kind, tenant, xff, gw, sent, cls):
        """Counts an answer of class `cls` for its kind and its tenant (or anonymous address);
        returns the time it is recorded at."""
        done = self.clock()
        self.stats.count(kind, cls)
        if tenant is not None:
            self.stats.tenants.setdefault(tenant, account.TenantTally()).add(cls, sent, done)
            if cls == account.UNAUTHENTICATED:
                i = int(tenant[1:])
                if i not in plan.ROTATING:
                    self.stats.events.append((done, "401 for a configured key", gw.index, tenant))
        elif kind == "anon":
            self.stats.anon.setdefault(xff, account.TenantTally()).add(cls, sent, done)
        return done

    def record(self, kind, tenant, xff, gw, sent, answer):
        status, headers, body = answer
        cls = account.classify(status, headers, body)
        done = self.tally(kind, tenant, xff, gw, sent, cls)
        if kind == "badkey" and cls != account.UNAUTHENTICATED:
            self.stats.events.append((done, f"bad key answered {status}", gw.index, body[:200]))
        if cls == account.UNDECLARED_5XX:
            self.stats.events.append((done, f"{status}", gw.index, body[:200]))
        elif cls == account.OTHER:
            self.stats.events.append((done, f"unexpected {status}", gw.index, body[:200]))

    # ---- sending ----------------------------------------------------------------------------

    async def h1_worker(self):
        conn = None  # (gateway, reader, writer)
        served = 0
        while True:
            item = await self.h1_queue.get()
            if item is None:
                break
            kind, path, key, tenant, xff = item
            gw = conn[0] if conn else self.pick_gateway()
            if conn and (not gw.up or served >= 200 or conn[3] is not gw.current):
                conn[2].close()
                conn, served = None, 0
                gw = self.pick_gateway()
            sent = self.clock()
            life = conn[3] if conn else gw.current
            try:
                if conn is None:
                    r, w = await asyncio.wait_for(
                        asyncio.open_connection("127.0.0.1", gw.port), 5)
                    conn = (gw, r, w, life)
                conn[2].write(request_bytes(path, key, xff))
                answer = await asyncio.wait_for(read_response(conn[1]), DEADLINE_S)
                served += 1
                if answer[1].get("connection", "").lower() == "close":
                    conn[2].close()
                    conn, served = None, 0
            except asyncio.TimeoutError:
                self.stats.lost.append((self.clock(), kind, f"no answer in {DEADLINE_S}s "
                                        f"from gateway {gw.index}"))
                if conn:
                    conn[2].close()
                conn, served = None, 0
                continue
            except (OSError, TransportError, asyncio.IncompleteReadError, ValueError) as e:
                if conn:
                    conn[2].close()
                conn, served = None, 0
                answer = await self.retry(kind, path, key, xff, gw, life, e)
                if answer is None:
                    continue
                gw, answer = answer
            self.record(kind, tenant, xff, gw, sent, answer)

    def transport_error(self, failed_gw, life, err):
        """Records a transport error (excused when the gateway process it went to was SIGKILLed,
        `life.killed_at`) and its retry; returns the gateway to retry on."""
        what = "transport error"
        if life is not None and life.killed_at is not None:
            what = "transport error (gateway killed)"
        self.stats.events.append((self.clock(), what, failed_gw.index,
                                  f"{type(err).__name__}: {err}"))
        self.stats.retried += 1
        return self.pick_gateway(avoid=failed_gw)

    async def retry(self, kind, path, key, xff, failed_gw, life, err):
        """One retry on another gateway over a fresh connection; None when lost (see
        `transport_error`)."""
        gw = self.transport_error(failed_gw, life, err)
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", gw.port), 5)
            try:
                w.write(request_bytes(path, key, xff, close=True))
                answer = await asyncio.wait_for(read_response(r), DEADLINE_S)
            finally:
                w.close()
            return gw, answer
        except (OSError, TransportError, asyncio.IncompleteReadError, ValueError,
                asyncio.TimeoutError) as e:
            self.stats.lost.append((self.clock(), kind, f"retry on gateway {gw.index}: "
                                    f"{type(e).__name__}: {e}"))
            return None

    async def h2_request(self, path, key, tenant, xff):
        try:
            gw = self.pick_gateway()
            sent = self.clock()
            c = self.h2.get(gw.index)
            try:
                if c is None or c.dead or c.retired or c.used >= 500 or c.life is not gw.current:
                    if c is not None and c.life is gw.current:
                        c.retire()  # worn out: its streams in flight are still answered
                    elif c is not None:
                        c.close()
                    c = H2Conn(gw.port, gw.current)
                    self.h2[gw.index] = c
                    await asyncio.wait_for(c.open(), 5)
                answer = await asyncio.wait_for(c.get(path, key, xff), DEADLINE_S)
            except asyncio.TimeoutError:
                self.stats.lost.append((self.clock(), "h2", f"no answer in {DEADLINE_S}s "
                                        f"from gateway {gw.index}"))
                return
            except (OSError, TransportError, Exception) as e:  # noqa: BLE001 - h2 protocol errors
                c.dead = True
                answer = await self.retry("h2", path, key, xff, gw, c.life, e)
                if answer is None:
                    return
                gw, answer = answer
            self.record("h2", tenant, xff, gw, sent, answer)
        finally:
            self.h2_sem.release()

    async def abort_request(self, path, key, tenant, xff):
        """Sends a slow request and closes the connection after `ABORT_AFTER_S`; an answer that
        comes before (a 429, a 401) is recorded like any other."""
        try:
            gw = self.pick_gateway()
            sent = self.clock()
            try:
                r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", gw.port), 5)
            except (OSError, asyncio.TimeoutError):
                return
            try:
                w.write(request_bytes(path, key, xff))
                answer = await asyncio.wait_for(read_response(r), ABORT_AFTER_S)
                self.record("abort", tenant, xff, gw, sent, answer)
            except asyncio.TimeoutError:
                self.stats.aborted += 1
            except (OSError, TransportError, asyncio.IncompleteReadError, ValueError):
                pass
            finally:
                w.close()
        finally:
            self.abort_sem.release()

    def _spawn(self, coro):
        t = asyncio.create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def run(self, until):
        """Sends tickets at `rate` per second until the clock reaches `until`, then waits for
        every request in flight."""
        workers = [asyncio.create_task(self.h1_worker()) for _ in range(H1_WORKERS)]
        self.grpc = sessions.channels(DEADLINE_S)
        tick = 0.02
        credit = 0.0
        next_at = self.clock()
        while self.clock() < until:
            credit += self.rate * tick
            while credit >= 1:
                credit -= 1
                kind, path, key, tenant, xff = self.next_request()
                self.stats.sent += 1
                if kind == "h2":
                    if self.h2_sem.locked():
                        self.stats.shed += 1
                        continue
                    await self.h2_sem.acquire()
                    self._spawn(self.h2_request(path, key, tenant, xff))
                elif kind == "abort":
                    if self.abort_sem.locked():
                        self.stats.shed += 1
                        continue
                    await self.abort_sem.acquire()
                    self._spawn(self.abort_request(path, key, tenant, xff))
                elif kind == "ws":
                    if self.ws_sem.locked():
                        self.stats.shed += 1
                        continue
                    await self.ws_sem.acquire()
                    self._spawn(sessions.websocket(self, path, key, tenant, xff,
                                                   sessions.ws_script(self.rng), DEADLINE_S))
                elif kind == "grpc":
                    if self.grpc_sem.locked():
                        self.stats.shed += 1
                        continue
                    await self.grpc_sem.acquire()
                    self._spawn(sessions.grpc_call(self, key, tenant, xff, DEADLINE_S))
                else:
                    try:
                        self.h1_queue.put_nowait((kind, path, key, tenant, xff))
                    except asyncio.QueueFull:
                        self.stats.shed += 1
            next_at += tick
            await asyncio.sleep(max(0.0, next_at - self.clock()))
        for _ in workers:
            await self.h1_queue.put(None)
        await asyncio.gather(*workers)
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        for c in self.h2.values():
            c.close()
        await self.grpc.close()
        self.stats.sent -= self.stats.shed
