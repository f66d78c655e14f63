"""One chat completion through tollgate with OpenAI's own Python client (pinned in
requirements.txt), printing one JSON line: what the client saw and how it retried.

    python chat.py BASE_URL API_KEY USAGE [--stream]

BASE_URL is tollgate's (e.g. http://127.0.0.1:8080/v1), API_KEY the tenant's tollgate key (sent
as X-API-Key), USAGE the usage the echo backend states (x-echo-usage). The client's built-in
retry (max_retries=3) handles 429s; every wait it chose is reported in "waits_s" (from its own
log line "Retrying request in N seconds").
"""

import json
import logging
import re
import sys

import openai


class Waits(logging.Handler):
    """Collects the client's retry waits from its log records."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.waits = []

    def emit(self, record):
        m = re.search(r"Retrying request (?:to \S+ )?in ([0-9.]+) seconds", record.getMessage())
        if m:
            self.waits.append(float(m.group(1)))


def main():
    base_url, api_key, usage = sys.argv[1:4]
    stream = "--stream" in sys.argv[4:]
    waits = Waits()
    log = logging.getLogger("openai")
    log.setLevel(logging.DEBUG)
    log.addHandler(waits)
    client = openai.OpenAI(
        base_url=base_url,
        api_key="unused",
        default_headers={"X-API-Key": api_key},
        max_retries=3,
    )
    out = {"ok": False}
    try:
        raw = client.chat.completions.with_raw_response.create(
            model="echo",
            messages=[{"role": "user", "content": "hi"}],
            stream=stream,
            stream_options={"include_usage": True} if stream else openai.NOT_GIVEN,
            extra_headers={"x-echo-usage": usage},
        )
        out["retries_taken"] = raw.retries_taken
        out["headers"] = {k.lower(): v for k, v in raw.headers.items() if "ratelimit" in k.lower()}
        parsed = raw.parse()
        if stream:
            total = None
            for chunk in parsed:
                if chunk.usage is not None:
                    total = chunk.usage.total_tokens
        else:
            total = parsed.usage.total_tokens
        out.update(ok=True, total_tokens=total)
    except openai.APIStatusError as e:
        out.update(status=e.status_code, error=str(e))
    out["waits_s"] = waits.waits
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
