#!/usr/bin/env python3
"""A real SMTP server for vigie's mail tests: aiosmtpd on a loopback port.

One process serves one mode:

  plain     clear text (vigie's tls = "none")
  starttls  clear text that offers STARTTLS; AUTH only after it
  tls       TLS from the first byte (vigie's tls = "tls")

Every accepted message is written to SPOOL/NNNNNN.json, atomically (a temp
file renamed into place), as {"seq", "mail_from", "rcpt_tos", "tls",
"auth_user", "data"}; the test reads that directory. A sequence number
continues from the files already there, so a restarted server on the same
spool appends.

Scripted answers, by recipient local part (RCPT TO):

  reject...@          550 5.1.1 (permanent)
  tempfail@           451 4.3.0, always
  tempfailN-...@      451 4.3.0 for the first N RCPTs of that address, then OK

--delay S sleeps S seconds in DATA before recording and answering (a slow
server, so a test can kill a client mid-delivery).

Prints "READY <port>" on stdout once listening. Exits on SIGTERM/SIGINT,
or when stdin reaches EOF if --exit-on-eof is given.
"""

import argparse
import asyncio
import json
import os
import re
import signal
import ssl
import sys
import threading

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword

TEMPFAIL_N = re.compile(r"^tempfail(\d+)-")


class Recorder:
    def __init__(self, spool, delay):
        self.spool = spool
        self.delay = delay
        self.rcpt_counts = {}
        existing = [f for f in os.listdir(spool) if f.endswith(".json")]
        self.seq = max((int(f[:-5]) for f in existing), default=0)

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        local = address.split("@", 1)[0].lower()
        if local.startswith("reject"):
            return f"550 5.1.1 <{address}>: recipient rejected (test server)"
        if local == "tempfail":
            return f"451 4.3.0 <{address}>: try again later (test server)"
        m = TEMPFAIL_N.match(local)
        if m:
            seen = self.rcpt_counts.get(address, 0) + 1
            self.rcpt_counts[address] = seen
            if seen <= int(m.group(1)):
                return f"451 4.3.0 <{address}>: try again later ({seen}) (test server)"
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server, session, envelope):
        if self.delay:
            await asyncio.sleep(self.delay)
        self.seq += 1
        seq = self.seq
        transport = server.transport
        tls = transport is not None and transport.get_extra_info("ssl_object") is not None
        auth = session.auth_data
        record = {
            "seq": seq,
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "tls": bool(tls),
            "auth_user": auth.login.decode() if isinstance(auth, LoginPassword) else None,
            "data": envelope.content.decode("utf-8", "replace"),
        }
        name = os.path.join(self.spool, f"{seq:06d}.json")
        tmp = name + ".tmp"
        with open(tmp, "w") as f:
            json.dump(record, f)
        os.rename(tmp, name)
        return f"250 2.0.0 OK queued as {seq:06d}"


def authenticator(user, password):
    def check(server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login.decode() == user
            and auth_data.password.decode() == password
        )
        if ok:
            return AuthResult(success=True, auth_data=auth_data)
        # handled=False: aiosmtpd itself answers 535 (with the default
        # handled=True it would answer nothing and the client would hang).
        return AuthResult(success=False, handled=False)

    return check


def tls_context(cert, key):
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    return ctx


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["plain", "starttls", "tls"], required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--spool", required=True)
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--user")
    p.add_argument("--password")
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--exit-on-eof", action="store_true")
    args = p.parse_args()

    os.makedirs(args.spool, exist_ok=True)
    recorder = Recorder(args.spool, args.delay)
    ctx = tls_context(args.cert, args.key) if args.mode != "plain" else None
    auth = authenticator(args.user, args.password) if args.user else None

    def factory():
        kwargs = dict(
            hostname="smtp.vigie.test",
            authenticator=auth,
            auth_required=auth is not None,
            # Implicit TLS is invisible to aiosmtpd's own check; STARTTLS
            # mode must not offer AUTH before TLS.
            auth_require_tls=args.mode == "starttls",
        )
        if args.mode == "starttls":
            kwargs.update(tls_context=ctx, require_starttls=True)
        return SMTP(recorder, **kwargs)

    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        factory,
        host="127.0.0.1",
        port=args.port,
        ssl=ctx if args.mode == "tls" else None,
        reuse_address=True,
    )
    port = server.sockets[0].getsockname()[1]
    print(f"READY {port}", flush=True)

    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if args.exit_on_eof:
        def watch_stdin():
            sys.stdin.read()
            loop.call_soon_threadsafe(stop.set)

        threading.Thread(target=watch_stdin, daemon=True).start()
    await stop.wait()
    server.close()


if __name__ == "__main__":
    asyncio.run(main())
