"""Parses metrics text from stdin with the Prometheus Python client's parsers
(prometheus_client), the reference parsers of both formats, and prints every
sample as a JSON line: {"family", "type", "name", "labels", "value"}.

Usage: parse_metrics.py prometheus|openmetrics
A parse error exits non-zero with the parser's message on stderr.
"""

import json
import sys

from prometheus_client.openmetrics import parser as openmetrics
from prometheus_client import parser as prometheus


def main() -> int:
    fmt = sys.argv[1]
    text = sys.stdin.read()
    parse = (
        openmetrics.text_string_to_metric_families
        if fmt == "openmetrics"
        else prometheus.text_string_to_metric_families
    )
    try:
        families = list(parse(text))
    except Exception as e:  # the parsers raise ValueError and others
        print(f"parse error: {e}", file=sys.stderr)
        return 1
    for family in families:
        for s in family.samples:
            print(
                json.dumps(
                    {
                        "family": family.name,
                        "type": family.type,
                        "name": s.name,
                        "labels": s.labels,
                        "value": s.value,
                    }
                )
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
