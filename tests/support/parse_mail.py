#!/usr/bin/env python3
"""Reads messages the way a mail client would, for vigie's mail tests.

  parse_mail.py --stdin          stdin: a JSON list of raw messages
  parse_mail.py --maildir DIR    every message of the Maildir DIR (via
                                 mailbox.Maildir, which refuses a malformed
                                 one), sorted by file name

Prints a JSON list: subject (decoded), from, to, date, message_id,
in_reply_to, references, auto_submitted, content_type, parts (leaf
[content type, decoded text] pairs), file (Maildir file name or null).
"""

import argparse
import email
import email.policy
import json
import mailbox
import sys


def describe(msg, file=None):
    parts = []
    for part in msg.walk():
        if part.is_multipart():
            continue
        parts.append([part.get_content_type(), part.get_content()])

    def header(name):
        value = msg.get(name)
        return None if value is None else str(value)

    return {
        "subject": str(msg.get("Subject", "")),
        "from": str(msg.get("From", "")),
        "to": [str(a) for a in msg.get("To").addresses] if msg.get("To") else [],
        "date": header("Date"),
        "message_id": header("Message-ID"),
        "in_reply_to": header("In-Reply-To"),
        "references": header("References"),
        "auto_submitted": header("Auto-Submitted"),
        "content_type": msg.get_content_type(),
        "parts": parts,
        "file": file,
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--stdin", action="store_true")
    p.add_argument("--maildir")
    args = p.parse_args()
    out = []
    if args.stdin:
        for raw in json.load(sys.stdin):
            msg = email.message_from_bytes(raw.encode(), policy=email.policy.default)
            out.append(describe(msg))
    else:
        box = mailbox.Maildir(args.maildir, factory=None, create=False)
        for key in sorted(box.keys()):
            raw = box.get_bytes(key)
            msg = email.message_from_bytes(raw, policy=email.policy.default)
            out.append(describe(msg, file=key))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
