#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""GET one URL for tide's C tests and print what came back as one JSON object.

    http_get.py raw|metrics URL [--token TOKEN] [--cafile PEM]

raw:     {"status": 200, "content_type": "...", "body": "..."}
metrics: the same, and when the status is 200 the body parsed by
         prometheus_client's text parser: "families": [[name, type, help]],
         "samples": [[name, {labels}, value]]. A body the parser refuses
         makes this script fail (exit 1, the parser's error on stderr).

Errors other than HTTP statuses (no connection, TLS) exit 2.
"""
import json
import ssl
import sys
import urllib.error
import urllib.request


def main(argv):
    if len(argv) < 3 or argv[1] not in ("raw", "metrics"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, url = argv[1], argv[2]
    token = cafile = None
    rest = argv[3:]
    while rest:
        if rest[0] == "--token" and len(rest) > 1:
            token = rest[1]
        elif rest[0] == "--cafile" and len(rest) > 1:
            cafile = rest[1]
        else:
            print("http_get.py: unknown argument %r" % rest[0], file=sys.stderr)
            return 2
        rest = rest[2:]
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", "Bearer " + token)
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    try:
        with urllib.request.urlopen(request, timeout=60, context=context) as r:
            status, headers, body = r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        status, headers, body = e.code, e.headers, e.read()
    except (urllib.error.URLError, OSError) as e:
        print("http_get.py: %s: %s" % (url, e), file=sys.stderr)
        return 2
    out = {
        "status": status,
        "content_type": headers.get("Content-Type", ""),
        "body": body.decode("utf-8"),
    }
    if mode == "metrics" and status == 200:
        from prometheus_client.parser import text_string_to_metric_families

        families, samples = [], []
        try:
            for family in text_string_to_metric_families(out["body"]):
                families.append([family.name, family.type, family.documentation])
                for s in family.samples:
                    samples.append([s.name, s.labels, s.value])
        except Exception as e:  # the parser raises ValueError and others
            print("http_get.py: prometheus_client refused the exposition: %r" % e,
                  file=sys.stderr)
            return 1
        out["families"] = families
        out["samples"] = samples
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
