"""Exports every raw sample a Prometheus holds for a time range as OpenMetrics text with timestamps,
gzip-compressed, ready for `promtool tsdb create-blocks-from openmetrics`.

Usage: python export.py --prometheus URL --start RFC3339 --end RFC3339 --out FILE.om.gz

Only the standard library: it runs with any python3. Families kept: vllm:*, vllm_router_* (vLLM's router), http_*, process_*
and up (the Python runtime's own python_* series are dropped). Each family is asked for with one
range-vector selector at the end time, which Prometheus answers with the raw samples.
"""
import argparse
import datetime as dt
import gzip
import json
import re
import sys
import urllib.parse
import urllib.request

KEEP = re.compile(r"^(vllm:.*|vllm_router_.*|http_.*|process_.*|up)$")


def get(base, path, params):
    url = f"{base}{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=120) as r:
        body = json.load(r)
    if body.get("status") != "success":
        sys.exit(f"export: {url}: {body}")
    return body["data"]


def esc(v):
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def parse_time(s):
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prometheus", required=True)
    ap.add_argument("--start", required=True)
    ap.add_argument("--end", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    start, end = parse_time(args.start), parse_time(args.end)
    rng = int(end - start) + 1
    names = [n for n in get(args.prometheus, "/api/v1/label/__name__/values", {"start": start, "end": end}) if KEEP.match(n)]
    samples = series = 0
    with gzip.open(args.out, "wt", encoding="utf-8", compresslevel=9) as out:
        for name in sorted(names):
            data = get(args.prometheus, "/api/v1/query", {"query": f'{{__name__="{name}"}}[{rng}s]', "time": end})
            for s in sorted(data["result"], key=lambda s: sorted(s["metric"].items())):
                labels = {k: v for k, v in s["metric"].items() if k != "__name__"}
                text = ",".join(f'{k}="{esc(v)}"' for k, v in sorted(labels.items()))
                prefix = f"{name}{{{text}}} " if text else f"{name} "
                for t, v in s["values"]:
                    if float(t) < start:
                        continue
                    out.write(f"{prefix}{v} {t}\n")
                    samples += 1
                series += 1
        out.write("# EOF\n")
    print(f"export: {samples} samples of {series} series ({len(names)} families) to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
