# Why: a generic OpenAPI consumer for Manifold's REST view (`[rest]`), built on openapi-core (pinned in
# requirements.txt) rather than on anything of Manifold's: it reads the document, checks it against the
# OpenAPI 3.1 specification, finds an operation by its operationId, calls it where the document says, and
# validates the request and the answer against the document, as a client generated from it would rely on.
#
# usage: rest_client.py [--send-invalid] DOCUMENT_URL OPERATION_ID ARGUMENTS_JSON [BEARER]
# --send-invalid: send arguments the document says are invalid (the answer is still validated).
# Prints {"status": N, "body": ...} on stdout; exits 1 with the validator's words on any mismatch.

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.parse
import urllib.request

from openapi_core import OpenAPI
from openapi_core.testing import MockRequest, MockResponse


def fetch(url: str, bearer: str | None, data: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=data, method="GET" if data is None else "POST")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if bearer:
        request.add_header("Authorization", f"Bearer {bearer}")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--send-invalid", action="store_true")
    parser.add_argument("document_url")
    parser.add_argument("operation_id")
    parser.add_argument("arguments")
    parser.add_argument("bearer", nargs="?")
    args = parser.parse_args()
    document_url, operation_id, arguments, bearer = (
        args.document_url,
        args.operation_id,
        args.arguments,
        args.bearer,
    )
    status, raw = fetch(document_url, bearer)
    if status != 200:
        print(f"the document answered {status}: {raw.decode(errors='replace')}", file=sys.stderr)
        return 1
    spec = json.loads(raw)
    openapi = OpenAPI.from_dict(spec)  # refuses a document that breaks the specification
    paths = [
        path
        for path, item in spec["paths"].items()
        if item.get("post", {}).get("operationId") == operation_id
    ]
    if len(paths) != 1:
        print(f"{len(paths)} operations are named {operation_id}", file=sys.stderr)
        return 1
    base = urllib.parse.urlsplit(urllib.parse.urljoin(document_url, spec["servers"][0]["url"]))
    host_url = f"{base.scheme}://{base.netloc}"
    path = base.path.rstrip("/") + paths[0]
    body = arguments.encode()
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else None
    request = MockRequest(host_url, "post", path, data=body, headers=headers)
    if args.send_invalid:
        if not list(openapi.iter_request_errors(request)):
            print("--send-invalid: the document accepts these arguments", file=sys.stderr)
            return 1
    else:
        openapi.validate_request(request)
    status, answer = fetch(host_url + path, bearer, body)
    openapi.validate_response(request, MockResponse(answer, status_code=status))
    print(json.dumps({"status": status, "body": json.loads(answer)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
