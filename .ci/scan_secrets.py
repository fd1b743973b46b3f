#!/usr/bin/env python3
"""Fails when a server log holds a secret (docs/security.md, "Secrets never in logs").

Usage: scan_secrets.py LOG [LOG ...]

Run by .ci/run on the server logs of the conformance runs, which exercise every endpoint with
real credentials at LOG_LEVEL=INFO. It looks for:
  - the fixed secrets of the conformance profile (admin key, signing key, webhook secret,
    super admin password, OpenID client secret), given as literals below;
  - any raw Steward API key (`stw_` + 64 hex), any JWT (three base64url parts, the first two
    JSON objects), and any password the suite generated (its `Pw-conformance-` prefix);
  - bearer credentials echoed from headers (`Authorization: Bearer …`, `X-API-Key: …`).
A hit prints the file, the line number and the kind of secret (never the secret itself).
"""

import re
import sys

FIXED = {
    "admin key": "conformance-admin-key",
    "signing key": "conformance-secret-key-0123456789abcdef",
    "webhook secret": "conformance-webhook-secret",
    "super admin password": "Conformance-Super-1",
    "OpenID client secret": "conformance-idp-secret",
}
PATTERNS = {
    "API key": re.compile(r"stw_[0-9a-f]{64}"),
    "JWT": re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    "generated password": re.compile(r"Pw-conformance-[0-9a-f]{12}"),
    "credential header": re.compile(r"(?i)(authorization|x-api-key|x-admin-key)\s*[:=]\s*\"?(bearer\s+)?[A-Za-z0-9_.-]{16,}"),
}


def scan(path):
    hits, lines = [], 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            lines = number
            for kind, literal in FIXED.items():
                if literal in line:
                    hits.append((number, kind))
            for kind, pattern in PATTERNS.items():
                if pattern.search(line):
                    hits.append((number, kind))
    return lines, hits


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    failed = False
    for path in sys.argv[1:]:
        lines, hits = scan(path)
        if lines == 0:
            print(f"{path}: empty log, nothing was scanned")
            failed = True
        for number, kind in hits[:50]:
            print(f"{path}:{number}: {kind} in the log")
        if hits:
            failed = True
        print(f"{path}: {lines} lines scanned, {len(hits)} secrets found")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
